"""Topic steering of the LDA models: merge, split, delete and add topics, word priors and
word links, on a fitted estimator and on a learner training in the background."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import bidlab as bl
from bidlab import backend
from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda import LDAGibbsModel
from bidlab.models.lda.learner import LDALearner

BLOCK = 6  # words per planted topic


@pytest.fixture(scope="module")
def corpus():
    return block_diagonal_corpus(k=4, words_per_topic=BLOCK, n_docs=400, doc_len=30, seed=1)


def _blocks(est, n=BLOCK):
    """Each topic's top-n words as the set of planted blocks they come from."""
    comp = est.components_
    top = np.argsort(-comp, axis=1)[:, :n]
    return [set((top[t] // BLOCK).tolist()) for t in range(comp.shape[0])]


def _fitted(cls, corpus, passes=4):
    est = cls(n_components=4, n_passes=passes, random_state=0).fit(corpus)
    blocks = _blocks(est)
    assert sorted(min(b) for b in blocks) == [0, 1, 2, 3] and all(len(b) == 1 for b in blocks)
    return est


@pytest.mark.parametrize("cls", [LDAGibbs, LDA])
def test_merge_then_split_recovers_the_planted_blocks(cls, corpus):
    est = _fitted(cls, corpus)
    blocks = [min(b) for b in _blocks(est)]
    a, b = blocks.index(1), blocks.index(3)
    entry = est.merge_topics([b, a]).wait()
    low = min(a, b)
    assert entry["k_before"] == 4 and entry["k_after"] == 3 and entry["topic"] == low
    assert est.n_components == 3 and est.components_.shape == (3, 4 * BLOCK)
    model = est.model_
    assert model.NT.shape[1] == 3 if cls is LDAGibbs else model.lamT.shape[1] == 3
    assert model._store is not None and model._store.values.shape[1] == 3
    assert _blocks(est, 2 * BLOCK)[low] == {1, 3}  # the merged topic holds both blocks
    entry = est.split_topic(low, X=corpus.X).wait()
    assert entry["topics"] == [low, 3] and est.n_components == 4
    halves = _blocks(est)
    assert {min(halves[low]), min(halves[3])} == {1, 3}
    assert all(len(h) == 1 for h in halves)
    est.set_params(warm_start=True, n_passes=1)
    est.fit(corpus)  # trains on with the new topics
    assert sorted(min(b) for b in _blocks(est)) == [0, 1, 2, 3]
    assert [e["kind"] for e in est.topic_edit_log] == ["merge", "split"]


def test_delete_and_add_topic_with_seed_words(corpus):
    est = _fitted(LDAGibbs, corpus)
    blocks = [min(b) for b in _blocks(est)]
    est.delete_topic(blocks.index(2)).wait()
    assert est.n_components == 3 and 2 not in [min(b) for b in _blocks(est)]
    seeds = [f"t2_w{j}" for j in range(3)]
    entry = est.add_topic(seed_words=seeds, weight=5.0).wait()
    assert entry["topic"] == 3 and est.n_components == 4
    assert set(est.top_words(3, corpus.vocab)[3]) == set(seeds)
    assert len(est.model_.word_priors) == 3
    est.set_params(warm_start=True, n_passes=2)
    est.fit(corpus)
    assert _blocks(est)[3] == {2}  # the seeded topic took the deleted block's words


def test_bad_edits_raise_and_change_nothing(corpus):
    est = LDAGibbs(n_components=2, n_passes=1, random_state=0).fit(corpus)
    before = est.components_.copy()
    with pytest.raises(ValueError, match="two or more different topics"):
        est.merge_topics([1, 1])
    with pytest.raises(IndexError, match="out of range.*numbered 0..1"):
        est.merge_topics([0, 2])
    with pytest.raises(IndexError, match="out of range"):
        est.split_topic(-1)
    with pytest.raises(ValueError, match="not in the model's vocabulary"):
        est.add_topic(seed_words=["t0_w0", "no-such-word"])
    with pytest.raises(ValueError, match="weight must be finite and >= 0"):
        est.set_word_prior("t0_w0", 0, -1.0)
    np.testing.assert_array_equal(est.components_, before)
    assert est.n_components == 2 and est.topic_edit_log == []
    est.add_topic(seed_words=["t3_w0"]).wait()  # a topic of one word
    with pytest.raises(ValueError, match="nothing to split"):
        est.split_topic(2, X=corpus.X)
    est.delete_topic(2).wait()
    est.delete_topic(1).wait()
    with pytest.raises(ValueError, match="last topic"):
        est.delete_topic(0)
    assert est.components_.shape == (1, 4 * BLOCK)


def _steps(lr, n):
    """Wait until the running learner ``lr`` has taken ``n`` more minibatches."""
    at = lr.step
    while lr.step < at + n:
        time.sleep(0.005)


def _running(est, corpus, steps):
    """A live learner of ``est`` on ``corpus`` (endless passes), started and ``steps``
    minibatches in."""
    lr = est.learner(corpus, n_passes=10_000, batch_size=50)
    lr.start()
    _steps(lr, steps)
    return lr


def test_edits_from_threads_while_training(corpus):
    est = LDAGibbs(n_components=4, random_state=0)
    lr = _running(est, corpus, 20)
    try:
        tickets, errors = [], []

        def ask(fn):
            try:
                tickets.append(fn())
            except BaseException as exc:  # noqa: BLE001 - checked below
                errors.append(exc)

        jobs = [lambda: lr.merge_topics([0, 1]), lambda: lr.add_topic([0, 1, 2]),
                lambda: lr.set_word_prior(5, 0, 2.0), lambda: lr.must_link([6, 7])]
        threads = [threading.Thread(target=ask, args=(fn,)) for fn in jobs]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors
        entries = [t.wait(30) for t in tickets]
        assert all(e["step"] is not None for e in entries)  # applied by the training thread
        _steps(lr, 20)
        assert lr.state == "running"
        assert lr.model.opts.n_components == 4 and est.n_components == 4
        assert lr.model.modelmats[0].shape == (4, 4 * BLOCK)
        log = lr.topic_edit_log  # in the order applied
        for step in {e["step"] for e in log}:  # the record has k of every minibatch
            at = [e for e in log if e["step"] == step]
            assert lr.option_used("n_components", step) == at[-1]["k_after"]
            assert lr.option_used("n_components", step - 1) == at[0]["k_before"]
        assert lr.option_used("n_components", lr.step - 1) == 4
    finally:
        lr.stop()
    lr.join()
    assert len(lr.topic_edit_log) == 4


def test_checkpoint_round_trip_after_an_edit(corpus, tmp_path):
    est = LDAGibbs(n_components=4, random_state=0)
    lr = est.learner(corpus, n_passes=2, batch_size=50)
    lr.fit(progress=None)
    lr.merge_topics([0, 2]).wait()
    lr.set_word_prior(3, 1, 4.0).wait()
    path = lr.save(str(tmp_path / "edited.ckpt"))
    fresh = LDALearner(LDAGibbsModel(n_components=4), corpus.X, batch_size=50, n_passes=2)
    fresh.load(path)
    assert fresh.model.opts.n_components == 3
    np.testing.assert_allclose(fresh.model.components(), lr.model.components(), rtol=1e-5)
    assert fresh.model.topic_edit_log == lr.model.topic_edit_log
    assert fresh.model.word_priors == {(3, 1): 4.0}
    fresh.set(n_passes=3)
    fresh.fit(progress=None)  # trains on with 3 topics
    assert fresh.model.modelmats[0].shape == (3, 4 * BLOCK)
    saved = est.save(tmp_path / "est.bidlab")
    back = LDAGibbs.load(saved)
    assert back.n_components == 3 and back.topic_edit_log == est.topic_edit_log


def test_a_minibatch_after_an_edit_rewarms_to_no_allocation(corpus):
    est = LDA(n_components=4, random_state=0)
    lr = _running(est, corpus, 30)
    try:
        lr.split_topic(0).wait(30)
        _steps(lr, 20)  # the new containers are made, then reused
        lr.pause(wait=True)
        allocs, misses = backend.allocations.snapshot()[0], bl.cache_stats()["misses"]
        lr.resume()
        _steps(lr, 15)
        lr.pause(wait=True)
        assert backend.allocations.snapshot()[0] == allocs, "a minibatch allocated"
        assert bl.cache_stats()["misses"] == misses
        assert lr.model.modelmats[0].shape[0] == 5
    finally:
        lr.stop()
    lr.join()


def test_links_and_priors_shape_the_counts(corpus):
    est = _fitted(LDAGibbs, corpus, passes=2)
    est.must_link(["t0_w0", "t1_w0"]).wait()
    C = est.model_.topic_edit_counts()
    p0, p1 = C[:, 0] / C[:, 0].sum(), C[:, BLOCK] / C[:, BLOCK].sum()
    np.testing.assert_allclose(p0, p1, atol=1e-5)  # one distribution over topics
    est.cannot_link("t0_w1", "t0_w2").wait()
    C = est.model_.topic_edit_counts()
    both = (C[:, 1] > 1e-6) & (C[:, 2] > 1e-6)
    assert not both.any()
    t = int(np.argmax(C[:, 3 * BLOCK]))  # block 3's topic
    est.set_word_prior("t0_w3", t, 50.0).wait()
    est.set_params(warm_start=True, n_passes=1)
    est.fit(corpus)
    counts = est.model_.topic_edit_counts()
    assert counts[t, 3] >= 40.0  # the prior is kept while the counts decay


def test_cli_train_reports_coherence_per_pass(corpus, tmp_path, capsys):
    import gzip

    import scipy.sparse as sp

    from bidlab.cli import main

    X = sp.coo_matrix(corpus.X)
    lines = [f"{X.shape[0]}", f"{X.shape[1]}", f"{X.nnz}"]
    lines += [f"{i + 1} {j + 1} {int(v)}" for i, j, v in zip(X.row, X.col, X.data, strict=True)]
    doc = tmp_path / "docword.blocks.txt.gz"
    doc.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    (tmp_path / "vocab.blocks.txt").write_text("\n".join(corpus.vocab) + "\n")
    code = main(["train", "ldagibbs", "--data", str(doc), "--n_components", "4", "--holdout", "0",
                 "--n_passes", "2", "--coherence", "c_npmi", "--progress", "none",
                 "--save", str(tmp_path / "model")])
    out = capsys.readouterr()
    assert code == 0, out.err
    values = [float(line.rsplit(" ", 1)[1]) for line in out.err.splitlines()
              if line.startswith("pass ") and "coherence c_npmi" in line]
    assert len(values) == 2 and all(-1.0 <= v <= 1.0 for v in values)
    # each pass of all of them (one run a pass used to print them as 1/1, 2/2)
    assert [line.split(":")[0] for line in out.err.splitlines()
            if "coherence c_npmi" in line] == ["pass 1/2", "pass 2/2"], out.err
    assert out.out.startswith("done: ")
    from bidlab.models.base import load

    est = load(tmp_path / "model")
    assert est.coherence(corpus.X, "c_npmi") == pytest.approx(values[-1], rel=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", [LDAGibbs, LDA])
def test_edits_on_the_gpu(cls, corpus):
    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: GPU variant skipped (install bidlab[gpu] on a GPU)")
    cupy = backend.cupy()
    import cupyx.scipy.sparse as csp

    X = csp.csr_matrix(corpus.X)  # the model lives where the data does
    est = cls(n_components=4, n_passes=4, random_state=0).fit(X)
    blocks = [min(b) for b in _blocks(est)]
    a, b = blocks.index(0), blocks.index(2)
    est.merge_topics([a, b]).wait()
    assert _blocks(est, 2 * BLOCK)[min(a, b)] == {0, 2}
    est.split_topic(min(a, b), X=corpus.X).wait()
    assert sorted(min(h) for h in _blocks(est)) == [0, 1, 2, 3]
    est.set_word_prior(1, 0, 3.0).wait()
    est.must_link([2, 3]).wait()
    est.set_params(warm_start=True, n_passes=1)
    est.fit(X)
    assert est.components_.shape == (4, 4 * BLOCK)
    assert est.model_.modelmats[0].xp is cupy


def test_batch_vb_keeps_priors_and_merges_its_pass_sums(corpus):
    est = LDA(n_components=4, method="batch", n_passes=5, random_state=0).fit(corpus)
    blocks = [min(b) for b in _blocks(est)]
    lr = est.learner(corpus, n_passes=est.n_passes_done_ + 2)
    lr.set(max_steps=lr.step + 3)  # stop inside a pass: the Batch sums hold part of it
    lr.fit(progress=None)
    sums = lr.updater.sums[0].copy()
    a, b = blocks.index(0), blocks.index(3)
    lr.merge_topics([a, b]).wait()
    merged = lr.updater.sums[0]
    low = min(a, b)
    np.testing.assert_allclose(merged[low], sums[a] + sums[b], rtol=1e-6)
    lr.set_word_prior("t1_w0", blocks.index(2) - (blocks.index(2) > max(a, b)), 30.0).wait()
    lr.set(max_steps=None)
    lr.fit(progress=None)
    counts = lr.model.topic_edit_counts()
    t2 = blocks.index(2) - (blocks.index(2) > max(a, b))
    assert counts[t2, BLOCK] == pytest.approx(30.0, rel=0.05)  # kept through pass ends
    assert _blocks(est, 2 * BLOCK)[low] == {0, 3}


def test_transform_texts_counts_raw_documents_over_the_vocabulary(corpus):
    est = _fitted(LDAGibbs, corpus, passes=2)
    blocks = [min(b) for b in _blocks(est)]
    texts = ["T2_W0 t2_w1 t2_w3 unknown words", "t0_w0 t0_w2 t0_w2 t0_w5 and more"]
    theta = est.transform_texts(texts)
    assert theta.shape == (2, 4)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-5)
    assert int(theta[0].argmax()) == blocks.index(2)
    assert int(theta[1].argmax()) == blocks.index(0)
    with pytest.raises(TypeError, match="list of documents"):
        est.transform_texts("t0_w0 t0_w1")


def test_coherence_is_a_live_learner_metric(corpus):
    from bidlab.models.lda.coherence_kpi import CoherenceKPI

    est = LDAGibbs(n_components=4, random_state=0)
    lr = est.learner(corpus, n_passes=3, batch_size=50,
                     mixins=[CoherenceKPI("c_npmi", top_n=BLOCK, every=0.0)])
    lr.fit(progress=None)
    lr._update_metrics(time.perf_counter())
    value = lr.metrics["kpi_coherence_c_npmi"]
    assert value == pytest.approx(est.coherence(corpus.X, "c_npmi", top_n=BLOCK), rel=1e-6)
    assert value > 0.5  # the planted blocks' words always co-occur
    with pytest.raises(ValueError, match="unknown measure"):
        CoherenceKPI("c_w2v")
