"""Topic steering of the LDA models on bad or unusual input: the edit refuses it at once
with an error naming the fix, and the model is unchanged; queued edits at a learner's end."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDA, LDAGibbs

BLOCK = 6  # words per planted topic


@pytest.fixture(scope="module")
def corpus():
    return block_diagonal_corpus(k=4, words_per_topic=BLOCK, n_docs=400, doc_len=30, seed=1)


@pytest.mark.parametrize("cls", [LDAGibbs, LDA])
@pytest.mark.parametrize("weight", [float("inf"), float("nan"), 0.0, -1.0])
def test_add_topic_refuses_a_weight_that_is_not_finite_and_positive(cls, weight, corpus):
    est = cls(n_components=2, n_passes=1, random_state=0).fit(corpus)
    before = est.components_.copy()
    with pytest.raises(ValueError, match="weight must be finite and > 0"):
        est.add_topic(seed_words=["t0_w0"], weight=weight)
    np.testing.assert_array_equal(est.components_, before)
    assert est.n_components == 2 and est.topic_edit_log == []
    assert est.model_.word_priors == {}


def _paused(est, corpus):
    """A learner of ``est`` on ``corpus`` (endless passes), started, a few minibatches in,
    then paused."""
    lr = est.learner(corpus, n_passes=10_000, batch_size=50)
    lr.start()
    while lr.step < 5:
        time.sleep(0.005)
    lr.pause(wait=True)
    assert lr.state == "paused"
    return lr


@pytest.mark.parametrize("cls", [LDAGibbs, LDA])
def test_edits_queued_while_paused_are_applied_when_the_learner_stops(cls, corpus):
    est = cls(n_components=4, random_state=0)
    lr = _paused(est, corpus)
    merge, delete = lr.merge_topics([0, 1]), lr.delete_topic(2)
    assert not merge.done and not delete.done
    lr.stop()
    lr.join()
    assert lr.state == "stopped"
    assert merge.wait(5)["k_after"] == 3 and delete.wait(5)["k_after"] == 2
    assert est.n_components == 2 and est.components_.shape == (2, 4 * BLOCK)
    assert [e["kind"] for e in lr.topic_edit_log] == ["merge", "delete"]
    lr.add_topic([0, 1]).wait(5)  # a later edit applies only itself
    assert [e["kind"] for e in lr.topic_edit_log] == ["merge", "delete", "add"]
    assert est.n_components == 3


def test_edits_queued_while_paused_fail_when_the_learner_fails(corpus):
    est = LDAGibbs(n_components=4, random_state=0)
    lr = _paused(est, corpus)
    before = est.components_.copy()
    merge = lr.merge_topics([0, 1])

    def broken(batch):
        raise RuntimeError("a broken minibatch")

    lr.model.update = broken
    lr.resume()
    with pytest.raises(RuntimeError, match="a broken minibatch"):
        lr.join()
    assert lr.state == "failed"
    with pytest.raises(RuntimeError, match="merge edit was not applied: the learner failed"):
        merge.wait(5)
    np.testing.assert_array_equal(est.components_, before)
    assert est.n_components == 4 and lr.topic_edit_log == []
    del lr.model.update
    lr.delete_topic(3).wait(5)  # a later edit applies only itself
    assert [e["kind"] for e in lr.topic_edit_log] == ["delete"] and est.n_components == 3


def test_split_topic_checks_X_when_asked_and_takes_a_corpus(corpus):
    est = LDAGibbs(n_components=4, n_passes=3, random_state=0).fit(corpus)
    before = est.components_.copy()
    with pytest.raises(ValueError, match="X has 10 words .* vocabulary has 24"):
        est.split_topic(0, X=corpus.X[:, :10])
    for view in (est.intertopic_map, est.to_pyldavis):
        with pytest.raises(ValueError, match="X has 10 words .* vocabulary has 24"):
            view(corpus.X[:, :10])
    np.testing.assert_array_equal(est.components_, before)
    assert est.topic_edit_log == []
    entry = est.split_topic(0, X=corpus).wait(5)  # a Corpus, as fit takes
    assert entry["topics"] == [0, 4] and est.n_components == 5


def test_split_topic_of_a_fitted_estimator_asks_for_the_documents(corpus):
    est = LDA(n_components=4, n_passes=2, random_state=0).fit(corpus)
    before = est.components_.copy()
    with pytest.raises(ValueError, match="pass X=..."):
        est.split_topic(0)  # it keeps no training documents, not its last minibatch's
    np.testing.assert_array_equal(est.components_, before)
    assert est.topic_edit_log == []


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_views_read_one_k_while_edits_land(cls, corpus):
    """intertopic_map, to_pyldavis and top_words on a running learner while merges and
    splits land: each view reads its topics and the documents' weights for one k (a read
    between two of an edit's matrices mixed two values of k)."""
    import threading

    est = cls(n_components=6, random_state=0)
    lrn = est.learner(corpus, n_passes=10**6)
    lrn.start()
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            for view in (lrn.intertopic_map, lrn.to_pyldavis, lambda: est.top_words(5)):
                try:
                    view()
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

    try:
        while lrn.metrics["pass"] < 1:
            time.sleep(0.02)
        reader = threading.Thread(target=read)
        reader.start()
        end = time.monotonic() + 4
        while time.monotonic() < end:
            lrn.merge_topics([0, 1]).wait(30)
            lrn.split_topic(0).wait(30)
        done.set()
        reader.join(30)
    finally:
        done.set()
        lrn.stop()
        lrn.join()
    assert not errors, errors[:3]
