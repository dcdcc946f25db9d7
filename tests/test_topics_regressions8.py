"""Topic steering and topic-quality regressions: a topic added before a batch pass, the
coherence KPI's reference documents, topic edits made through a fitted or loaded
estimator's model, and the order of pyLDAvis's default term list."""

from __future__ import annotations

import copy
import gc
import math

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda import export
from bidlab.models.lda.coherence_kpi import CoherenceKPI
from bidlab.models.lda.reshape import topic_counts

BLOCK = 6  # words per planted topic
V = 4 * BLOCK


@pytest.fixture(scope="module")
def corpus():
    return block_diagonal_corpus(k=4, words_per_topic=BLOCK, n_docs=200, doc_len=30, seed=1)


# -- a topic added to a batch model ----------------------------------------------------------
def test_a_topic_added_before_a_batch_pass_holds_only_that_passs_counts(corpus):
    tokens = float(corpus.X.sum())
    est = LDA(n_components=3, method="batch", n_passes=3, batch_size=50,
              random_state=0).fit(corpus)
    assert topic_counts(est.model_).sum() == pytest.approx(tokens, rel=1e-5)
    est.add_topic([0, 1, 2]).wait()  # seeded with an average topic's counts
    est.set_params(warm_start=True, n_passes=1)
    est.fit(corpus)
    # the pass's sums replace the counts: the tokens' share of each topic and no more
    # (was 8000 of 6000: the seed stayed in the new topic's sums on top of its counts)
    assert topic_counts(est.model_).sum() == pytest.approx(tokens, rel=1e-5)


# -- the coherence KPI -------------------------------------------------------------------
@pytest.mark.parametrize("reference", ["corpus", "nested lists"])
def test_coherence_kpi_scores_a_corpus_or_nested_lists(reference, corpus):
    X = corpus if reference == "corpus" else corpus.X.toarray().tolist()
    values = []
    for docs in (X, corpus.X):
        lr = LDAGibbs(n_components=4, random_state=0).learner(
            corpus, n_passes=2, batch_size=50,
            mixins=[CoherenceKPI("c_npmi", X=docs, every=0.0)])
        lr.fit(progress=None)
        values.append(lr.metrics["kpi_coherence_c_npmi"])
    assert math.isfinite(values[0])  # was NaN: a Corpus has no shape
    assert values[0] == pytest.approx(values[1])


def test_coherence_kpi_refuses_arguments_it_could_never_score_with():
    for bad in (1, 0, 2.5, True):  # were NaN at every score
        with pytest.raises(ValueError, match="top_n must be an int >= 2"):
            CoherenceKPI("c_v", top_n=bad)
    with pytest.raises(ValueError, match="max_docs must be a whole number >= 1"):
        CoherenceKPI("c_v", max_docs=0)
    with pytest.raises(ValueError, match="hold no word"):
        CoherenceKPI("u_mass", X=sp.csr_matrix((3, 5)))
    with pytest.raises(ValueError, match="negative, NaN or infinite count"):
        CoherenceKPI("u_mass", X=-np.ones((2, 3)))


# -- edits through the model of a fitted or loaded estimator ---------------------------------
@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_edits_through_the_model_of_a_fitted_estimator_reach_n_components(cls, corpus,
                                                                          tmp_path):
    est = cls(n_components=4, n_passes=2, random_state=0).fit(corpus)
    gc.collect()  # fit's learner is gone
    est.model_.merge_topics([0, 1]).wait()
    assert est.n_components == 3  # was 4
    back = cls.load(est.save(tmp_path / "merged.bidlab"))  # was "contradicts itself"
    assert back.n_components == 3 and back.transform(corpus.X).shape == (200, 3)
    back.model_.delete_topic(2).wait()  # a loaded estimator's model follows it too
    assert back.n_components == 2
    back.set_params(warm_start=True, n_passes=1)
    back.fit(corpus)  # was refused: n_components changed since the model was fitted
    assert back.components_.shape == (2, V)
    twin = copy.deepcopy(back)
    twin.model_.add_topic([0, 1]).wait()
    assert (twin.n_components, back.n_components) == (3, 2)
    assert cls.load(twin.save(tmp_path / "twin.bidlab")).n_components == 3


# -- pyLDAvis ----------------------------------------------------------------------------------
def _saliency(P, topic_freq, term_freq):
    """Chuang et al.'s saliency, word by word."""
    P = P / P.sum(axis=1, keepdims=True)
    pt = topic_freq / topic_freq.sum()
    out = []
    for w in range(P.shape[1]):
        given = P[:, w] / P[:, w].sum()
        d = sum(g * math.log(g / p) for g, p in zip(given, pt, strict=True) if g > 0)
        out.append(term_freq[w] / term_freq.sum() * d)
    return np.array(out)


def test_pyldavis_default_terms_are_the_most_salient_not_the_most_frequent():
    # word 0, the most frequent, is as likely in both topics: it tells them apart least
    topics = np.array([[0.4, 0.3, 0.05, 0.2, 0.05], [0.4, 0.05, 0.3, 0.05, 0.2]])
    X = sp.csr_matrix(np.array([[9, 3, 0, 2, 0], [8, 0, 3, 0, 2], [7, 2, 1, 1, 1]]))
    theta = np.array([[0.9, 0.1], [0.1, 0.9], [0.5, 0.5]])
    data = export.prepared_data(topics, theta, X, list("abcde"), R=3)
    lengths = np.asarray(X.sum(axis=1)).ravel()
    term_freq = np.asarray(X.sum(axis=0)).ravel().astype(float)
    want = np.argsort(-_saliency(topics, (theta * lengths[:, None]).sum(axis=0), term_freq),
                      kind="stable")[:3]
    tinfo = data["tinfo"]
    default = [t for t, c in zip(tinfo["Term"], tinfo["Category"], strict=True)
               if c == "Default"]
    assert default == ["abcde"[j] for j in want]
    assert "a" not in default  # was first: the list was ordered by frequency


# -- cannot-links ------------------------------------------------------------------------------
def test_a_cannot_link_holds_for_words_with_all_their_counts_in_one_topic(corpus):
    from bidlab.models.lda.word_constraints import _cannot

    R = np.array([[0.0, 5.0, 0.0, 0.0], [2.0, 3.0, 0.0, 0.0]])
    np.testing.assert_allclose(_cannot(R), [[0, 5, 0, 0], [5, 0, 0, 0]])  # in proportion
    R = np.array([[0.0, 5.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]])
    # neither word has a count elsewhere: word 1's goes evenly to the others (was kept)
    np.testing.assert_allclose(_cannot(R), [[0, 5, 0, 0], [1, 0, 1, 1]])
    assert _cannot(np.array([[2.0], [3.0]])).tolist() == [[2.0], [3.0]]  # one topic
    # a batch fit puts two words of one planted topic wholly in one topic
    est = LDA(n_components=4, method="batch", n_passes=3, batch_size=50,
              random_state=0).fit(corpus)
    C = topic_counts(est.model_)
    shared = (C[1] > 1e-3) & (C[2] > 1e-3)
    assert shared.any()
    est.cannot_link(1, 2).wait()
    for _ in range(2):
        C = topic_counts(est.model_)
        assert not ((C[1] > 1e-3) & (C[2] > 1e-3)).any()  # was: both in one topic still
        est.set_params(warm_start=True, n_passes=1)
        est.fit(corpus)
