"""LDA regressions: a refused fit, partial_fit or learner leaves the estimator as it was;
a refit on counts without words forgets an earlier Corpus's vocabulary, and a Corpus over
another vocabulary is refused; duplicate entries are summed before the count checks;
coherence, exclusivity and topic diversity check their inputs; an empty document's
proportions stay uniform under an alpha below float32's range."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets import Corpus
from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda import coherence as coh

BLOCK = 5
V = 3 * BLOCK
CLASSES = [LDA, LDAGibbs]


@pytest.fixture(scope="module")
def corpus():
    return block_diagonal_corpus(k=3, words_per_topic=BLOCK, n_docs=60, doc_len=20, seed=2)


def _est(cls, **kw):
    return cls(n_components=3, n_passes=2, random_state=0, **kw)


# -- a refused call changes nothing --------------------------------------------------------
@pytest.mark.parametrize("cls", CLASSES)
def test_a_refused_refit_keeps_the_fitted_model(cls, corpus):
    est = _est(cls).fit(corpus.X)
    before = est.components_.copy()
    with pytest.raises(ValueError, match="negative"):
        est.fit(-corpus.X.toarray())
    with pytest.raises(ValueError, match="every document of X is empty"):
        est.fit(np.zeros((4, V)))
    # was NotFittedError: the refit replaced the model before it looked at X
    np.testing.assert_array_equal(est.components_, before)
    assert est.transform(corpus.X).shape == (60, 3)


@pytest.mark.parametrize("cls", CLASSES)
def test_a_refused_first_partial_fit_leaves_nothing_behind(cls, corpus):
    est = _est(cls)
    with pytest.raises(ValueError, match="negative"):
        est.partial_fit(-corpus.X[:, :4].toarray())
    with pytest.raises(ValueError, match="every document of X is empty"):
        est.partial_fit(np.zeros((3, V)))
    assert not hasattr(est, "n_features_in_") and not hasattr(est, "model_")
    est.partial_fit(corpus.X)  # was "X has 15 features, but ... is expecting 4"
    assert est.n_features_in_ == V and est.n_empty_docs_ == 0  # was 3


@pytest.mark.parametrize("cls", CLASSES)
def test_a_refused_partial_fit_of_a_fitted_estimator_counts_no_empty_document(cls, corpus):
    est = _est(cls).fit(corpus.X)
    with pytest.raises(ValueError, match="every document of X is empty"):
        est.partial_fit(np.zeros((3, V)))
    with pytest.raises(ValueError, match="every document of X is empty"):
        est.learner(np.zeros((3, V)))
    assert est.n_empty_docs_ == 0  # was 6: documents of calls that trained on nothing


# -- vocabularies ----------------------------------------------------------------------------
def test_a_refit_on_counts_without_words_forgets_the_corpus_vocabulary(corpus):
    est = _est(LDA).fit(corpus)
    assert est.top_words(1)[0][0] in corpus.vocab
    est.fit(corpus.X[:, :10])  # top_words was a ValueError: the old 15 words named 10 columns
    assert all(w[0] in {str(j) for j in range(10)} for w in est.top_words(1))
    pd = pytest.importorskip("pandas")
    est.fit(pd.DataFrame(corpus.X.toarray(), columns=[f"x{j}" for j in range(V)]))
    assert all(w[0].startswith("x") for w in est.top_words(1))  # not the Corpus's words


@pytest.mark.parametrize("cls", CLASSES)
def test_a_corpus_over_another_vocabulary_is_refused(cls, corpus):
    est = _est(cls).fit(corpus)
    order = np.arange(V)[::-1]
    other = Corpus(X=sp.csr_matrix(corpus.X[:, order]), vocab=[corpus.vocab[j] for j in order])
    for call in (est.transform, est.score, est.partial_fit):
        with pytest.raises(ValueError, match="another vocabulary"):  # was read as training's
            call(other)
    np.testing.assert_allclose(est.transform(corpus), est.transform(corpus.X))


# -- input counts ----------------------------------------------------------------------------
def test_duplicate_entries_are_summed_before_the_count_checks(corpus):
    C = sp.csr_matrix(corpus.X, dtype=np.float64)
    # every count c stored twice, as c - 0.5 and 0.5: whole numbers once summed
    n = C.nnz
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    data = np.concatenate([C.data - 0.5, np.full(n, 0.5)])
    dup = sp.csr_matrix((data, (np.tile(rows, 2), np.tile(C.indices, 2))), shape=C.shape)
    dup = sp.csr_matrix((dup.data, dup.indices, dup.indptr), shape=C.shape)
    if dup.has_canonical_format:  # the coo constructor summed them: store them again
        order = np.argsort(np.tile(rows, 2), kind="stable")
        indptr = np.concatenate([[0], np.cumsum(2 * np.diff(C.indptr))])
        dup = sp.csr_matrix((data[order], np.tile(C.indices, 2)[order], indptr),
                            shape=C.shape)
    assert not dup.has_canonical_format
    a = _est(LDAGibbs).fit(C)
    b = _est(LDAGibbs).fit(dup)  # was "X holds a non-integer count 0.5"
    np.testing.assert_array_equal(a.components_, b.components_)


# -- topic quality tools ---------------------------------------------------------------------
def test_coherence_refuses_negative_or_one_dimensional_reference_counts(corpus):
    topics = np.random.default_rng(0).random((3, V))
    with pytest.raises(ValueError, match="negative, NaN or infinite count"):
        coh.coherence(topics, -corpus.X.toarray(), "c_npmi")  # was a value, as if held
    bad = corpus.X.copy().astype(np.float64)
    bad.data[3] = np.nan
    with pytest.raises(ValueError, match="negative, NaN or infinite count"):
        coh.coherence(topics, bad, "u_mass")
    with pytest.raises(ValueError, match="documents x vocabulary"):
        coh.coherence(topics, corpus.X.toarray()[0], "c_v")  # was a bare IndexError
    nan_topics = topics.copy()
    nan_topics[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite weights"):
        coh.coherence(nan_topics, corpus.X, "c_npmi")  # was a value from arbitrary words
    assert coh.coherence(topics, corpus, "c_npmi") == coh.coherence(topics, corpus.X,
                                                                     "c_npmi")


def test_exclusivity_and_diversity_check_top_n_and_the_topics_shape():
    topics = np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="top_n must be a whole number"):
            coh.exclusivity(topics, top_n=bad)  # was a value for 0 and -2
    with pytest.raises(ValueError, match="k x vocabulary"):
        coh.exclusivity(topics[0], top_n=1)  # was numpy's AxisError
    with pytest.raises(ValueError, match="k x vocabulary"):
        coh.topic_diversity(topics[0], top_n=1)  # was "not enough values to unpack"
    assert coh.exclusivity(topics, top_n=1) == pytest.approx(0.6 / 0.7)


# -- transform -------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", CLASSES)
def test_an_empty_document_is_uniform_under_an_alpha_below_float32s_range(cls, corpus):
    est = _est(cls, alpha=1e-60).fit(corpus.X)
    Z = np.vstack([corpus.X[:2].toarray(), np.zeros((1, V))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was a 0 / 0 warning and a row of NaN
        theta = est.transform(Z)
    np.testing.assert_allclose(theta[2], np.full(3, 1 / 3))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)


@pytest.mark.parametrize("X", [sp.csr_matrix((0, 10)), sp.csr_matrix(np.zeros((4, 10))),
                               np.zeros((3, 10))])
def test_coherence_refuses_reference_documents_without_a_word(X):
    P = np.random.default_rng(0).random((3, 10))
    for measure in ("u_mass", "c_npmi", "c_uci", "c_v"):
        with pytest.raises(ValueError, match="hold no word"):
            coh.coherence(P, X, measure, top_n=5)
