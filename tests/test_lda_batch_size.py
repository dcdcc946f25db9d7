"""Batch variational Bayes LDA gives the same model whatever the batch size, and each
document's E-step start is a function of the document alone (bidlab.kern.row_random,
bidlab.models.lda.doc_start)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.datasets import synthetic_lda_corpus
from bidlab.kern import standin
from bidlab.kern.row_random import row_uniforms
from bidlab.models import LDA
from bidlab.models.lda.doc_start import START_SD, doc_start

#: Batch VB sums the same per-document statistics in every pass whatever the batch size;
#: only the grouping of those float sums changes (per minibatch, then over the pass), so
#: the topics differ by rounding: a few float64 ulps, and in float32 (24-bit mantissa,
#: errors carried through the passes' E-steps) well under 1e-5 of a probability.
TOL = {np.float64: 1e-12, np.float32: 1e-5}


@pytest.fixture(scope="module")
def corpus():
    return synthetic_lda_corpus(n_docs=400, n_words=300, k=5, doc_len=(20, 60), seed=3).X


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_batch_vb_topics_do_not_depend_on_the_batch_size(corpus, dtype):
    n = corpus.shape[0]
    got = {}
    for bs in (50, 200, n):  # 8 minibatches, 2 (the last one short), the whole corpus
        lda = LDA(5, method="batch", batch_size=bs, n_passes=3, random_state=0, dtype=dtype)
        got[bs] = lda.fit(corpus).components_
    for bs in (200, n):
        np.testing.assert_allclose(got[bs], got[50], rtol=0, atol=TOL[dtype])
    # the seed still matters: a different one gives different topics
    other = LDA(5, method="batch", batch_size=50, n_passes=3, random_state=1, dtype=dtype)
    assert np.abs(other.fit(corpus).components_ - got[50]).max() > 100 * TOL[dtype]


def test_a_documents_start_depends_on_the_document_only(corpus):
    X = sp.csr_matrix(corpus, dtype=np.float32)
    start = doc_start(X, seed=0, k=6)
    perm = np.random.default_rng(0).permutation(X.shape[0])
    np.testing.assert_array_equal(doc_start(X[perm], seed=0, k=6), start[perm])
    np.testing.assert_array_equal(doc_start(X[10:13], seed=0, k=6), start[10:13])
    # the order of a row's nonzeros does not matter (a CSR matrix that is not canonical)
    rev = X.copy()
    for r in range(rev.shape[0]):
        a, b = rev.indptr[r], rev.indptr[r + 1]
        rev.indices[a:b], rev.data[a:b] = rev.indices[a:b][::-1].copy(), rev.data[a:b][::-1].copy()
    np.testing.assert_array_equal(doc_start(rev, seed=0, k=6), start)
    assert not np.array_equal(doc_start(X, seed=1, k=6), start)
    # mean 1 and standard deviation START_SD, uncorrelated between topics
    assert abs(float(start.mean()) - 1.0) < 0.01
    assert abs(float(start.std()) - START_SD) < 0.01
    assert abs(np.corrcoef(start[:, 0], start[:, 1])[0, 1]) < 0.2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_and_its_array_form_draw_the_same_bits(corpus, dtype):
    X = sp.csr_matrix(corpus, dtype=dtype)
    compiled, arrays = np.empty((X.shape[0], 5), dtype), np.empty((X.shape[0], 5), dtype)
    row_uniforms(X, 2**63 + 5, 0.5, 2.0, compiled)
    runs = standin.runs()
    with standin.forced():
        row_uniforms(X, 2**63 + 5, 0.5, 2.0, arrays)
    assert standin.runs() > runs, "the array form did not run"
    np.testing.assert_array_equal(arrays, compiled)
    assert compiled.min() >= 0.5 and compiled.max() < 2.0
    with pytest.raises(ValueError, match="one output row per row"):
        row_uniforms(X, 0, 0.0, 1.0, compiled[:-1])


def test_the_draws_are_the_same_bits_on_every_device(corpus, xp):
    X = sp.csr_matrix(corpus, dtype=np.float32)
    want = row_uniforms(X, 99, 0.5, 2.0, np.empty((X.shape[0], 5), np.float32))
    if xp is np:
        Xd = X
    else:
        import cupyx.scipy.sparse as csp

        Xd = csp.csr_matrix(X)
    got = row_uniforms(Xd, 99, 0.5, 2.0, xp.empty((X.shape[0], 5), np.float32))
    np.testing.assert_array_equal(backend.to_host(got), want)
    if xp is not np:  # batch VB on the GPU: the same topics for any batch size
        fits = [LDA(5, method="batch", batch_size=bs, n_passes=3, random_state=0,
                    device="gpu").fit(Xd).components_ for bs in (50, X.shape[0])]
        np.testing.assert_allclose(fits[1], fits[0], rtol=0, atol=TOL[np.float32])
