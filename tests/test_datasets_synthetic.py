"""bidlab.datasets' synthetic generators (LDA corpora, GLM targets, blobs, power-law rows)
against their planted structure."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_datasets import _canonical

import bidlab.datasets as ds
from bidlab.datasets.sampling import distinct_sorted_rows, powerlaw_sampler

# ---------------------------------------------------------------- synthetic corpora


def test_synthetic_lda_shape_lengths_and_topics():
    c = ds.synthetic_lda_corpus(n_docs=500, n_words=800, k=8, doc_len=(20, 60), seed=3)
    assert c.X.shape == (500, 800) and c.topics.shape == (8, 800) and c.theta.shape == (500, 8)
    _canonical(c.X)
    np.testing.assert_allclose(c.topics.sum(axis=1), 1.0)
    np.testing.assert_allclose(c.theta.sum(axis=1), 1.0)
    lengths = c.doc_lengths
    assert lengths.min() >= 20 and lengths.max() <= 60 and len(set(lengths)) > 10
    assert len(set(c.vocab)) == 800
    # each topic has its own top words, sharing the topic's stem
    tops = c.top_words(10)
    assert len({w for row in tops for w in row}) == 80
    assert all(len({w[:2] for w in row}) == 1 for row in tops)
    # Zipf-like: the topic's most probable word is ~2x its second (exponent 1)
    ordered = -np.sort(-c.topics, axis=1)
    np.testing.assert_allclose(ordered[:, 0] / ordered[:, 1], 2.0)


def test_synthetic_lda_matches_planted_model():
    c = ds.synthetic_lda_corpus(n_docs=3000, n_words=400, k=5, doc_len=100, alpha=0.02, seed=1)
    # documents drawn (almost) from one topic have that topic's word frequencies
    for t in range(5):
        docs = c.theta[:, t] > 0.99
        assert docs.sum() > 100
        freq = np.asarray(c.X[docs].sum(axis=0)).ravel()
        freq /= freq.sum()
        assert np.abs(freq - c.topics[t]).sum() < 0.12
        assert np.argmax(freq) == np.argmax(c.topics[t])
    # the whole corpus matches its expectation sum_d len_d * theta_d @ topics
    expected = (c.doc_lengths @ c.theta) @ c.topics
    observed = np.asarray(c.X.sum(axis=0)).ravel()
    assert np.abs(observed - expected).sum() / observed.sum() < 0.05
    assert np.abs(c.doc_lengths.mean() - 100) < 2  # Poisson(100) lengths


def test_sample_counts_single_topic_exact_lengths():
    rng = np.random.default_rng(0)
    topics = ds.planted_topics(50, 2, zipf=1.0, rng=rng)
    theta = np.tile([1.0, 0.0], (400, 1))
    lengths = rng.integers(1, 300, size=400)
    X = ds.sample_counts(topics, theta, lengths, rng)
    np.testing.assert_array_equal(np.asarray(X.sum(axis=1)).ravel(), lengths)
    freq = np.asarray(X.sum(axis=0)).ravel() / lengths.sum()
    np.testing.assert_allclose(freq, topics[0], atol=0.01)


def test_synthetic_lda_deterministic_and_options():
    a = ds.synthetic_lda_corpus(n_docs=200, n_words=300, k=4, seed=7)
    b = ds.synthetic_lda_corpus(n_docs=200, n_words=300, k=4, seed=7)
    other = ds.synthetic_lda_corpus(n_docs=200, n_words=300, k=4, seed=8)
    assert (a.X != b.X).nnz == 0 and np.array_equal(a.theta, b.theta)
    assert a.vocab == b.vocab == other.vocab
    assert (a.X != other.X).nnz > 0
    tagged = ds.synthetic_lda_corpus(n_docs=50, n_words=300, k=12, vocab_style="tagged")
    assert tagged.top_words(1)[3] == ["t03_w00"]
    noisy = ds.synthetic_lda_corpus(n_docs=50, n_words=300, k=4, beta=0.5, seed=7)
    np.testing.assert_allclose(noisy.topics.sum(axis=1), 1.0)
    assert not np.allclose(noisy.topics, a.topics)
    with pytest.raises(ValueError, match=r"doc_len=\(lo, hi\) needs 1 <= lo <= hi, got \(5, 2\)"):
        ds.synthetic_lda_corpus(doc_len=(5, 2))
    with pytest.raises(ValueError, match=r"1 <= k <= n_words, got .*k=30, n_words=10"):
        ds.synthetic_lda_corpus(n_words=10, k=30)
    with pytest.raises(ValueError, match=r"vocab_style must be 'words' or 'tagged'"):
        ds.synthetic_lda_corpus(n_docs=5, vocab_style="greek")


def test_block_diagonal_corpus():
    c = ds.block_diagonal_corpus(k=4, words_per_topic=5, n_docs=200, doc_len=40, seed=0)
    assert c.X.shape == (200, 20)
    np.testing.assert_array_equal(c.doc_lengths, 40)
    np.testing.assert_array_equal(np.bincount(c.labels), [50, 50, 50, 50])
    coo = c.X.tocoo()
    np.testing.assert_array_equal(coo.col // 5, c.labels[coo.row])  # one block per document
    assert c.top_words(5)[2] == [f"t2_w{j}" for j in range(5)]
    np.testing.assert_array_equal(c.theta.argmax(axis=1), c.labels)
    same = ds.block_diagonal_corpus(seed=0)
    assert (same.X != c.X).nnz == 0


def test_corpus_validation():
    with pytest.raises(ValueError, match=r"vocab has 2 words but X has 3 columns"):
        ds.Corpus(X=sp.csr_matrix((2, 3)), vocab=["a", "b"])
    with pytest.raises(ValueError, match=r"labels has 1 entries but X has 2 documents"):
        ds.Corpus(X=sp.csr_matrix((2, 3)), vocab=["a", "b", "c"], labels=np.zeros(1))
    X = ds.counts_csr(np.array([1, 0, 1]), np.array([2, 0, 2]), None, (2, 3))
    np.testing.assert_array_equal(X.toarray(), [[1, 0, 0], [0, 0, 2]])


# ---------------------------------------------------------------- synthetic GLM and blobs


def test_distinct_powerlaw_rows():
    rng = np.random.default_rng(0)
    cols = distinct_sorted_rows(2000, 30, 500, powerlaw_sampler(500, 1.0, rng))
    assert np.all(np.diff(cols, axis=1) > 0) and cols.min() >= 0 and cols.max() < 500
    freq = np.bincount(powerlaw_sampler(1000, 1.0, rng)(200_000), minlength=1000)
    # P(j) ~ 1/(j+1): feature 0 about 2x feature 1, ~10x feature 9
    assert 1.7 < freq[0] / freq[1] < 2.3 and 7 < freq[0] / freq[9] < 14
    with pytest.raises(ValueError, match=r"nnz_per_row=60, n_features=100"):
        distinct_sorted_rows(5, 60, 100, powerlaw_sampler(100, 1.0, rng))


@pytest.mark.parametrize("link", ["linear", "logistic"])
def test_synthetic_glm_binary_and_linear(link):
    X, Y, W = ds.synthetic_glm(20_000, 2_000, 20, n_targets=2, link=link, seed=1)
    assert X.shape == (20_000, 2_000) and X.dtype == np.float32 and W.shape == (2_000, 2)
    _canonical(X)
    np.testing.assert_array_equal(np.diff(X.indptr), 20)
    assert Y.shape == (20_000, 2) and Y.dtype == np.float32
    Z = X @ W
    np.testing.assert_allclose(Z.std(axis=0), 2.0, rtol=1e-3)
    counts = np.bincount(X.indices, minlength=2_000)
    assert counts[0] > counts[100] > counts[1500]  # power-law popularity
    if link == "linear":
        np.testing.assert_allclose((Y - Z).std(axis=0), 0.1, rtol=0.05)
    else:
        assert set(np.unique(Y)) == {0.0, 1.0}
        p = 1 / (1 + np.exp(-Z))
        for lo, hi in [(0.0, 0.2), (0.4, 0.6), (0.8, 1.0)]:  # calibrated: P(y=1 | p) = p
            sel = (p >= lo) & (p < hi)
            assert abs(Y[sel].mean() - p[sel].mean()) < 0.03


def test_synthetic_glm_softmax_deterministic_and_errors():
    g = ds.synthetic_glm(30_000, 1_000, 10, classes=5, powerlaw=False, values="lognormal", seed=2)
    assert g.Y.shape == (30_000,) and g.Y.dtype == np.int64 and g.W.shape == (1_000, 5)
    assert set(np.unique(g.Y)) == set(range(5))
    Z = g.X @ g.W
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.bincount(g.Y) / 30_000, P.mean(axis=0), atol=0.01)
    assert (g.Y == P.argmax(axis=1)).mean() > 0.5
    again = ds.synthetic_glm(
        30_000, 1_000, 10, classes=5, powerlaw=False, values="lognormal", seed=2
    )
    assert (again.X != g.X).nnz == 0 and np.array_equal(again.Y, g.Y)
    with pytest.raises(ValueError, match=r"classes=3 needs link='softmax', got link='linear'"):
        ds.synthetic_glm(10, 10, 2, classes=3, link="linear")
    with pytest.raises(ValueError, match=r"link='softmax' needs classes >= 2"):
        ds.synthetic_glm(10, 10, 2, link="softmax")
    with pytest.raises(ValueError, match=r"link must be one of"):
        ds.synthetic_glm(10, 10, 2, link="probit")


def test_blobs_dense_and_sparse():
    X, labels, centers = ds.blobs(6_000, 3, 4, spread=0.5, seed=0)
    assert X.shape == (6_000, 3) and X.dtype == np.float32 and centers.shape == (4, 3)
    np.testing.assert_array_equal(np.bincount(labels), 1_500)
    for c in range(4):
        np.testing.assert_allclose(X[labels == c].mean(axis=0), centers[c], atol=0.05)
    np.testing.assert_allclose((X - centers[labels]).std(), 0.5, rtol=0.05)
    assert np.array_equal(ds.blobs(6_000, 3, 4, spread=0.5, seed=0).X, X)

    S, slabels, scenters = ds.sparse_blobs(8_000, 500, 4, nnz_per_row=10, spread=0.1, seed=0)
    _canonical(S)
    np.testing.assert_array_equal(np.diff(S.indptr), 10)
    for c in range(4):
        mean = np.asarray(S[slabels == c].mean(axis=0)).ravel()
        np.testing.assert_allclose(mean, scenters[c], atol=0.1)
    with pytest.raises(ValueError, match=r"nnz_per_row <= support <= d"):
        ds.sparse_blobs(10, 20, 2, nnz_per_row=10)
