"""LDA three ways (online VB, batch VB, SAME Gibbs): recovery, agreement, the sklearn surface."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.stats import f as f_dist

import bidlab as bl
from bidlab import backend
from bidlab.datasets import block_diagonal_corpus, synthetic_lda_corpus
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda.common import as_counts, heldout_loglik
from bidlab.models.lda.gibbs import anneal_nsamps

MAKERS = {
    "online": lambda k, **kw: LDA(k, "online", **{"n_passes": 5, "batch_size": 100, **kw}),
    "batch": lambda k, **kw: LDA(k, "batch", **{"n_passes": 20, "batch_size": 250, **kw}),
    "gibbs": lambda k, **kw: LDAGibbs(k, 20, **{"n_passes": 4, "batch_size": 100, **kw}),
}


@pytest.fixture(scope="module")
def planted():
    return synthetic_lda_corpus(n_docs=1000, n_words=300, k=5, doc_len=(80, 160), alpha=0.1,
                                seed=0)


def _matched_cosines(truth: np.ndarray, found: np.ndarray) -> np.ndarray:
    """Cosine similarity of each planted topic with its Hungarian-matched found topic."""
    a = truth / np.linalg.norm(truth, axis=1, keepdims=True)
    b = found / np.linalg.norm(found, axis=1, keepdims=True)
    sim = a @ b.T
    rows, cols = linear_sum_assignment(-sim)
    return sim[rows, cols]


@pytest.mark.parametrize("method", list(MAKERS))
def test_planted_topics_are_recovered(planted, method):
    model = MAKERS[method](5).fit(planted.X)
    cos = _matched_cosines(planted.topics, model.components_)
    assert cos.min() >= 0.9, f"{method}: matched cosines {np.round(cos, 3)}"


@pytest.mark.parametrize("method", list(MAKERS))
def test_block_diagonal_corpus_gives_its_blocks_as_top_words(method):
    corpus = block_diagonal_corpus(k=4, words_per_topic=5, n_docs=200, doc_len=40)
    model = MAKERS[method](4, batch_size=50).fit(corpus)
    blocks = sorted(tuple(sorted({w.split("_")[0] for w in topic}))
                    for topic in model.top_words(5))
    assert blocks == [("t0",), ("t1",), ("t2",), ("t3",)]


@pytest.mark.parametrize("method", list(MAKERS))
def test_float32_and_float64_agree(planted, method):
    X = planted.X[:600]
    m32 = MAKERS[method](5, dtype=np.float32).fit(X)
    m64 = MAKERS[method](5, dtype=np.float64).fit(X)
    cos = _matched_cosines(m64.components_, m32.components_)
    assert cos.min() > 0.995, np.round(cos, 4)
    assert abs(m32.score(planted.X[600:]) - m64.score(planted.X[600:])) < 0.01


@pytest.mark.gpu
@pytest.mark.parametrize("method", list(MAKERS))
def test_cpu_and_gpu_agree(planted, method, xp):
    if xp is np:
        pytest.skip("compares the GPU run with the CPU run")
    cpu = MAKERS[method](5).fit(planted.X)
    gpu = MAKERS[method](5).fit(backend.to_device(planted.X))
    cos = _matched_cosines(cpu.components_, gpu.components_)
    assert cos.min() > 0.99, np.round(cos, 4)
    theta = gpu.transform(backend.to_device(planted.X[:50]))
    assert backend.is_cupy_array(theta), "transform of CuPy data returns CuPy"
    np.testing.assert_allclose(backend.to_host(theta), cpu.transform(planted.X[:50]), atol=0.05)


def test_all_three_beat_a_uniform_model_on_kos(shared_data):
    from bidlab.datasets import load_kos

    X = load_kos(shared_data).X
    rng = np.random.default_rng(0)
    test = np.sort(rng.choice(X.shape[0], 300, replace=False))
    train = np.setdiff1d(np.arange(X.shape[0]), test)
    uniform = heldout_loglik(np.ones((1, X.shape[1])), X[test], 0.1)
    np.testing.assert_allclose(uniform, -np.log(X.shape[1]), rtol=1e-12)
    for model in (LDA(32, n_passes=1, batch_size=512), LDA(32, "batch", n_passes=3),
                  LDAGibbs(32, 50, anneal="constant", n_passes=1, batch_size=256)):
        ll = model.fit(X[train]).score(X[test])
        assert ll > uniform + 0.8, f"{model!r}: {ll:.3f} vs uniform {uniform:.3f}"


@pytest.mark.parametrize("method", ["online", "gibbs"])
def test_partial_fit_on_shards_equals_fit_in_memory(planted, method):
    X = planted.X
    whole = MAKERS[method](5, n_passes=1, total_docs=X.shape[0]).fit(X)
    shards = MAKERS[method](5, n_passes=1, total_docs=X.shape[0])
    for lo, hi in ((0, 300), (300, 500), (500, 1000)):  # multiples of batch_size
        shards.partial_fit(X[lo:hi])
    np.testing.assert_array_equal(shards.components_, whole.components_)
    assert shards.n_batches_ == whole.n_batches_ == 10


@pytest.mark.parametrize("method", list(MAKERS))
def test_no_allocation_per_minibatch_after_the_first_pass(planted, method):
    bl.clear_cache()
    model = MAKERS[method](5, n_passes=3, batch_size=128)  # 1000 docs: a short last batch
    passes = model.fit_passes(planted.X)
    next(passes)
    count, entries = backend.allocations.snapshot()[0], bl.cache_stats()["entries"]
    for _ in passes:  # (the run's learner is alive at each pass: its entries are there)
        assert bl.cache_stats()["entries"] == entries, "the cache grew after warm-up"
    assert backend.allocations.snapshot()[0] == count, "a minibatch allocated after warm-up"


def test_sklearn_surface(planted):
    X = planted.X
    model = LDA(5, n_passes=3, batch_size=100).fit(planted)  # a Corpus: its vocab is kept
    comp = model.components_
    assert comp.shape == (5, 300) and np.allclose(comp.sum(axis=1), 1.0)
    theta = model.transform(X[:20])
    assert theta.shape == (20, 5) and np.allclose(theta.sum(axis=1), 1.0, atol=1e-5)
    dense = model.transform(X[:20].toarray())
    np.testing.assert_allclose(dense, theta, rtol=1e-5, atol=1e-6)
    score = model.score(X[800:])
    assert np.isfinite(score) and score > -np.log(300) + 0.3
    np.testing.assert_allclose(model.perplexity(X[800:]), np.exp(-score), rtol=1e-12)
    words = model.top_words(3)
    assert len(words) == 5 and all(w in planted.vocab for t in words for w in t)
    assert model.top_words(2, vocab=[f"v{i}" for i in range(300)])[0][0].startswith("v")


def test_transform_recovers_planted_proportions(planted):
    model = LDA(5, n_passes=5, batch_size=100).fit(planted.X)
    cos = _matched_cosines(planted.topics, model.components_)
    assert cos.min() > 0.9
    a = planted.topics / np.linalg.norm(planted.topics, axis=1, keepdims=True)
    b = model.components_ / np.linalg.norm(model.components_, axis=1, keepdims=True)
    _, perm = linear_sum_assignment(-(a @ b.T))
    theta = model.transform(planted.X[:200])[:, perm]
    agree = (theta.argmax(1) == planted.theta[:200].argmax(1)).mean()
    assert agree > 0.9, agree


def test_empty_documents_are_skipped_counted_and_never_nan(planted):
    X = sp.vstack([sp.csr_matrix((3, 300), dtype=np.float32), planted.X[:400]]).tocsr()
    for model in (LDA(5, n_passes=2, batch_size=100), LDAGibbs(5, 10, n_passes=2,
                                                              batch_size=100)):
        model.fit(X)
        assert model.n_empty_docs_ == 3  # counted once per fit, not per pass
        assert np.isfinite(model.components_).all()
        theta = model.transform(X[:5])
        assert np.isfinite(theta).all()
        np.testing.assert_allclose(theta[:3], 0.2, rtol=1e-6)  # the prior mean


# ----------------------------------------------------------------------------- Gibbs


def test_anneal_schedules_run_from_m0_to_m():
    for name in ("linear", "log", "inverse_linear"):
        ms = [anneal_nsamps(name, t, 1.0, 100.0) for t in np.linspace(0, 1, 11)]
        assert ms[0] == pytest.approx(1.0) and ms[-1] == pytest.approx(100.0)
        assert all(b >= a for a, b in zip(ms, ms[1:], strict=False))
    assert anneal_nsamps("log", 0.1, 1, 100) > anneal_nsamps("linear", 0.1, 1, 100)
    assert anneal_nsamps("inverse_linear", 0.5, 1, 100) < anneal_nsamps("linear", 0.5, 1, 100)
    assert anneal_nsamps("constant", 0.0, 1, 100) == 100
    assert anneal_nsamps("linear", 7.0, 1, 100) == 100
    model = LDAGibbs(3, 50, anneal="linear", n_passes=4, batch_size=50)
    model.fit(block_diagonal_corpus(k=3, n_docs=100).X)
    assert 40 < model.nsamps_ <= 50


def _repeat_sweeps(model, sb, n, reps, m):
    out = np.empty((reps,) + model.phi_hat.shape)
    for r in range(reps):
        model.sample(sb, m, n)
        out[r] = backend.to_host(model.phi_hat.data)
    return out


def test_heating_one_parameter_raises_its_variance_only(planted):
    """Repeated minibatch samples with the topics frozen: an F-test on the variances."""
    est = LDAGibbs(5, 10, anneal="constant", n_passes=2, batch_size=200, warm_docs=False,
                   random_state=3).fit(planted.X)
    model = est.model_
    X = as_counts(planted.X, owner="test", dtype=np.float32)
    with bl.caching():
        sb = model.load_rows(X, 0, 200)
        base = _repeat_sweeps(model, sb, 200, 150, 10.0)
        mean = base.mean(0)
        w0 = int(np.asarray(X[:200].sum(0)).ravel().argmax())
        k0 = int(mean[w0].argmax())
        est.set_temperature(4.0, topic=k0, word=w0)
        hot = _repeat_sweeps(model, sb, 200, 150, 10.0)
    assert est.temperature[k0, w0] == 4.0 and est.temperature.sum() == 5 * 300 + 3.0
    v_base, v_hot = base[:, w0, k0].var(ddof=1), hot[:, w0, k0].var(ddof=1)
    ratio = v_hot / v_base
    p = f_dist.sf(ratio, 149, 149)
    assert 2.0 < ratio < 8.0 and p < 1e-6, (ratio, p)
    assert abs(hot[:, w0, k0].mean() - mean[w0, k0]) < 4 * np.sqrt(v_hot / 150), "mean kept"
    # untouched parameters: the other topics of that word, and well-used entries elsewhere
    others = [(w0, j) for j in range(5) if j != k0 and mean[w0, j] > 1.0]
    w_rest = np.argsort(-mean.max(1))[:40]
    others += [(int(w), int(mean[w].argmax())) for w in w_rest if w != w0][:20]
    ratios = np.array([hot[:, w, j].var(ddof=1) / base[:, w, j].var(ddof=1) for w, j in others])
    assert 0.85 < np.exp(np.log(ratios).mean()) < 1.15, np.round(ratios, 2)
    pvals = 2 * np.minimum(f_dist.sf(ratios, 149, 149), f_dist.cdf(ratios, 149, 149))
    assert (pvals < 0.01).mean() <= 0.1, np.round(pvals, 4)


def test_temperature_changes_allocate_nothing_and_are_logged(planted):
    model = LDAGibbs(5, 10, n_passes=3, batch_size=100)
    passes = model.fit_passes(planted.X)
    next(passes)
    count, entries = backend.allocations.snapshot()[0], bl.cache_stats()["entries"]
    model.set_temperature(2.0, topic=1)  # queued while fit_passes is suspended: idle, so now
    model.set_temperature(3.0, word=7)
    model.set_temperature(5.0, topic=2, word=9)
    next(passes)
    model.reset_temperature()
    next(passes)
    assert backend.allocations.snapshot()[0] == count
    # no new cached container; entries may go (their operands collected, or an array-level
    # form's results once a freshly compiled kernel takes over on a cold machine)
    assert bl.cache_stats()["entries"] <= entries
    log = model.temperature_log_
    assert [(e["topic"], e["word"], e["value"]) for e in log] == [
        (1, None, 2.0), (None, 7, 3.0), (2, 9, 5.0), (None, None, 1.0)]
    assert log[0]["batch"] == 10 and log[-1]["batch"] == 20
    np.testing.assert_array_equal(model.temperature, 1.0)
