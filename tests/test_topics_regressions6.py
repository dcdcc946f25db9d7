"""Topic steering and topic-quality regressions: temperatures queued beside topic edits,
checkpoints from before the edits, an estimator whose learner loads an edited checkpoint,
coherence of words no reference document holds, and pyLDAvis's lambda_step."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda import coherence as coh
from bidlab.models.lda import export

BLOCK = 6  # words per planted topic
V = 4 * BLOCK


@pytest.fixture(scope="module")
def corpus():
    return block_diagonal_corpus(k=4, words_per_topic=BLOCK, n_docs=200, doc_len=30, seed=1)


def _paused(est, corpus):
    """A learner of ``est`` (endless passes), started, a few minibatches in, paused."""
    lr = est.learner(corpus, n_passes=10_000, batch_size=50)
    lr.start()
    while lr.step < 3:
        time.sleep(0.005)
    lr.pause(wait=True)
    return lr


# -- temperatures and topic edits ------------------------------------------------------------
def test_a_temperature_queued_before_a_topic_edit_is_written_before_it(corpus):
    est = LDAGibbs(n_components=4, random_state=0)
    lr = _paused(est, corpus)
    lr.set_temperature(2.0, topic=3)  # waits for the next minibatch, for topic 3 of 4
    delete = lr.delete_topic(3)
    lr.stop()
    lr.join()
    assert delete.wait(5)["k_after"] == 3
    temp = est.temperature  # was an IndexError: topic 3 written after it was gone
    assert temp.shape == (3, V) and (temp == 1.0).all()  # its row went with the topic
    assert [(e["topic"], e["value"]) for e in est.temperature_log_] == [(3, 2.0)]
    est.set_params(warm_start=True, n_passes=1)
    est.fit(corpus)  # trains on: nothing left queued for a topic that is gone
    assert est.components_.shape == (3, V)


def test_a_temperature_is_checked_against_k_after_an_edit_landing_now(corpus):
    est = LDAGibbs(n_components=4, n_passes=1, random_state=0).fit(corpus)
    model = est.model_
    landing = threading.Event()

    def edit():  # what the training thread does when it applies a queued deletion
        with model._edit_lock:
            landing.set()
            time.sleep(0.3)
            model._do("delete", {"topic": 3}, 4)

    th = threading.Thread(target=edit)
    th.start()
    landing.wait(5)
    try:  # was checked against k = 4 while the deletion landed (a learner then crashed)
        with pytest.raises(IndexError, match="outside the k x vocabulary = 3 x"):
            est.set_temperature(2.0, topic=3)
    finally:
        th.join()
    assert est.temperature.shape == (3, V)


# -- checkpoints and the edits ---------------------------------------------------------------
@pytest.mark.parametrize("cls", [LDAGibbs, LDA])
def test_a_checkpoint_from_before_the_edits_rolls_them_back(cls, corpus, tmp_path):
    est = cls(n_components=4, random_state=0)
    lr = est.learner(corpus, n_passes=1, batch_size=50)
    lr.fit(progress=None)
    path = lr.save(str(tmp_path / "before.ckpt"))
    lr.add_topic([0, 1], weight=5.0).wait()  # priors on topic 4
    lr.must_link([2, 3]).wait()
    assert est.n_components == 5
    lr.load(path)
    model = lr.model
    assert model.opts.n_components == 4 and est.n_components == 4
    assert model.word_priors == {} and model.must_links == [] and lr.topic_edit_log == []
    lr.set(n_passes=2)
    lr.fit(progress=None)  # was an IndexError: the priors of topic 4 of 4 topics
    assert est.components_.shape == (4, V)


def _edited_checkpoint(cls, corpus, tmp_path):
    """A learner of ``cls`` trained a pass, two topics merged and a word prior set, and the
    checkpoint it then wrote."""
    lr = cls(n_components=4, random_state=0).learner(corpus, n_passes=1, batch_size=50)
    lr.fit(progress=None)
    lr.merge_topics([0, 2]).wait()
    lr.set_word_prior(3, 1, 4.0).wait()
    return lr, lr.save(str(tmp_path / "edited.ckpt"))


@pytest.mark.parametrize("cls", [LDAGibbs, LDA])
def test_an_estimator_follows_k_of_an_edited_checkpoint_its_learner_loads(cls, corpus,
                                                                          tmp_path):
    lr, path = _edited_checkpoint(cls, corpus, tmp_path)
    other = cls(n_components=4, random_state=0)
    lr2 = other.learner(corpus, n_passes=1, batch_size=50)
    lr2.load(path)
    assert other.n_components == 3 and other.components_.shape == (3, V)
    assert lr2.model.word_priors == {(3, 1): 4.0}
    assert [e["kind"] for e in lr2.topic_edit_log] == ["merge", "prior"]
    back = cls.load(other.save(tmp_path / "other.bidlab"))  # was: the file contradicts itself
    assert back.n_components == 3 and back.transform(corpus.X).shape == (200, 3)
    other.set_params(warm_start=True, n_passes=1)
    other.fit(corpus)  # was refused: n_components changed since the model was fitted
    assert other.components_.shape == (3, V)


def test_a_checkpoint_holding_the_edits_keeps_them_when_loaded_again(corpus, tmp_path):
    lr, path = _edited_checkpoint(LDAGibbs, corpus, tmp_path)
    lr.load(path)  # the same edits: kept
    assert len(lr.topic_edit_log) == 2 and lr.model.word_priors == {(3, 1): 4.0}
    lr.set_word_prior(3, 1, 5.0).wait()  # a document of the same length, other values
    lr.load(path)
    assert len(lr.topic_edit_log) == 2 and lr.model.word_priors == {(3, 1): 4.0}


# -- coherence of words the reference documents lack -------------------------------------
def _reference():
    """Five documents over six words; word 5 is in none of them."""
    X = np.array([[1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0],
                  [0, 0, 1, 0, 1, 0], [1, 0, 0, 0, 1, 0]])
    return sp.csr_matrix(X)


def test_a_pair_with_a_word_no_document_holds_has_pmi_zero():
    X = _reference()
    absent = np.array([[0.5, 0.0, 0.0, 0.0, 0.0, 0.4]])  # top words 0 and 5
    for measure in ("c_uci", "c_npmi"):  # were -log p(word 0) > 0 and a share of it
        assert coh.coherence(absent, X, measure, top_n=2) == 0.0
    assert coh.coherence(absent, X, "c_v", top_n=2) == pytest.approx(0.5)
    assert coh.coherence(absent, X, "u_mass", top_n=2) == pytest.approx(np.log(1e-12 / 0.6))
    # an always co-occurring pair (0 and 1 in 2 of 5 documents, 0 in 3) scores above it
    together = np.array([[0.5, 0.4, 0.0, 0.0, 0.0, 0.0]])
    pmi = np.log((2 / 5 + 1e-12) / (3 / 5 * 2 / 5))
    assert coh.coherence(together, X, "c_uci", top_n=2) == pytest.approx(pmi)
    assert coh.coherence(together, X, "c_uci", top_n=2) > coh.coherence(absent, X, "c_uci",
                                                                        top_n=2)


def test_coherence_of_present_words_is_unchanged_and_equals_gensim():
    gensim = pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    X = _reference()
    texts = [[str(w) for w in X.indices[X.indptr[d]:X.indptr[d + 1]]] for d in range(5)]
    dictionary = Dictionary(texts)
    topics = np.array([[0.5, 0.0, 0.3, 0.0, 0.2, 0.0], [0.0, 0.4, 0.0, 0.3, 0.2, 0.0]])
    words = [[str(w) for w in row] for row in coh.top_words(topics, 3)]
    for measure in coh.MEASURES:
        model = CoherenceModel(topics=words, texts=texts, dictionary=dictionary,
                               coherence=measure, topn=3, window_size=100,
                               corpus=[dictionary.doc2bow(t) for t in texts])
        want = np.array(model.get_coherence_per_topic())
        got = coh.coherence(topics, X, measure, top_n=3, per_topic=True)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert gensim.__version__


# -- pyLDAvis data ---------------------------------------------------------------------------
@pytest.mark.parametrize("step", [0.0, -0.1, float("nan"), 2.0])
def test_pyldavis_refuses_a_lambda_step_outside_0_1(step):
    X = sp.csr_matrix(np.array([[3, 1, 0], [0, 1, 4]]))
    topics = np.array([[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
    theta = np.array([[0.9, 0.1], [0.1, 0.9]])
    with pytest.raises(ValueError, match=r"lambda_step must be in \(0, 1\]"):
        export.prepared_data(topics, theta, X, ["a", "b", "c"], lambda_step=step)
    data = export.prepared_data(topics, theta, X, ["a", "b", "c"], lambda_step=1.0)
    assert {"Topic1", "Topic2"} <= set(data["tinfo"]["Category"])


def test_to_pyldavis_of_an_estimator_refuses_a_zero_lambda_step(corpus):
    est = LDA(n_components=2, n_passes=1, random_state=0).fit(corpus)
    with pytest.raises(ValueError, match="lambda_step"):  # was a ZeroDivisionError
        est.to_pyldavis(corpus, lambda_step=0)


# -- argument checks of the links and seeds ----------------------------------------------
def test_contradicting_pairs_are_found_through_shared_words():
    from bidlab.models.lda.word_constraints import contradicting_pair

    assert contradicting_pair([[1, 2], [2, 3]], [[3, 1]]) == (3, 1)
    assert contradicting_pair([[1, 2]], [[1, 4]]) is None


def test_links_contradicting_each_other_are_refused(corpus):
    est = LDA(n_components=3, random_state=0, n_passes=2).fit(corpus)
    model = est.model_
    model.must_link([0, 1]).wait(5)
    model.must_link([1, 2]).wait(5)
    with pytest.raises(ValueError, match="words 0 and 2 would be both must-linked and "
                       "cannot-linked"):
        model.cannot_link(0, 2)
    assert model.cannot_links == []
    model.cannot_link(0, 3).wait(5)
    with pytest.raises(ValueError, match="must-linked and cannot-linked"):
        model.must_link([3, 2])


@pytest.mark.parametrize("bad", [True, "5", "abc"])
def test_add_topic_refuses_a_weight_that_is_not_a_number(bad, corpus):
    est = LDA(n_components=3, random_state=0, n_passes=2).fit(corpus)
    with pytest.raises((ValueError, TypeError), match="weight"):
        est.model_.add_topic([0, 1], weight=bad)
    assert est.model_.opts.n_components == 3


def test_quality_tools_check_their_counts_and_take_nested_lists():
    topics = np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])
    rows = [[1, 1, 0], [0, 1, 1], [1, 0, 1]]
    assert coh.coherence(topics, rows, "u_mass", top_n=2) == coh.coherence(
        topics, sp.csr_matrix(np.array(rows)), "u_mass", top_n=2)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="top_n must be a whole number"):
            coh.topic_diversity(topics, top_n=bad)
        with pytest.raises(ValueError, match="R .* must be a whole number"):
            export.prepared_data(topics, np.full((3, 2), 0.5), sp.csr_matrix(np.array(rows)),
                                 R=bad)
