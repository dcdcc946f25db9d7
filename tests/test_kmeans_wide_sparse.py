"""k-means on wide sparse rows (TF-IDF-like: many columns, few nonzeros a row): the cluster
sums split by columns, the centres' drift, Lloyd blocks sized by nonzeros, the farthest
rows kept as sparse rows and the distinct-centre count."""

from __future__ import annotations

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets import sparse_blobs
from bidlab.kern import arrays
from bidlab.kern.kmeans import (
    CenterWork,
    center_sums,
    centre_drift,
    centre_means,
    csr_center_sums,
)
from bidlab.models.kmeans import KMeans
from bidlab.models.kmeans.bounds import pass_bounds
from bidlab.models.kmeans.distances import distinct_rows


def _wide(n: int = 600, d: int = 5000, per_row: int = 12, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), per_row)
    cols = rng.integers(0, d, n * per_row)
    X = sp.csr_matrix((rng.random(n * per_row).astype(np.float32), (rows, cols)),
                      shape=(n, d))
    X.sum_duplicates()
    return X


def _oracle(X: sp.csr_matrix, labels: np.ndarray, w: np.ndarray | None, k: int):
    ww = np.ones(X.shape[0]) if w is None else w
    dense = X.toarray().astype(np.float64)
    sums = np.stack([(ww[labels == j, None] * dense[labels == j]).sum(0) for j in range(k)])
    return sums, np.bincount(labels, ww, k)


@pytest.mark.parametrize("weighted", [False, True])
def test_csr_sums_by_column_shares_match_numpy_whatever_the_threads(weighted):
    X = _wide()
    rng = np.random.default_rng(1)
    k = 7
    labels = rng.integers(0, k, X.shape[0])
    w = rng.random(X.shape[0]) if weighted else None
    want, want_n = _oracle(X, labels, w, k)
    got = []
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        before = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            sums, counts = np.full((k, X.shape[1]), 0.5), np.full(k, 0.5)  # adds to them
            csr_center_sums(X, labels, sums, counts, w)
        finally:
            numba.set_num_threads(before)
        np.testing.assert_allclose(sums - 0.5, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(counts - 0.5, want_n, rtol=1e-12)
        got.append(sums)
    np.testing.assert_array_equal(got[0], got[1])  # each entry adds its rows in row order
    sums, counts = np.zeros((k, X.shape[1])), np.zeros(k)  # the stand-in while it compiles
    arrays.sums_csr(X.indptr, X.indices, X.data, labels,
                    np.empty(0) if w is None else w, sums, counts)
    np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-12)
    ref = np.zeros((k, X.shape[1]))
    csr_center_sums(X, labels, ref, np.zeros(k), w)
    sums, counts = np.zeros((k, X.shape[1])), np.zeros(k)  # center_sums takes the same path
    center_sums(X, labels, sums, counts, w)
    np.testing.assert_array_equal(sums, ref)


def test_csr_sums_with_unsorted_column_indices():
    X = _wide(n=50, d=300, per_row=6, seed=3)
    Y = X.copy()
    for i in range(Y.shape[0]):  # reverse each row's stored order
        a, b = Y.indptr[i], Y.indptr[i + 1]
        Y.indices[a:b] = Y.indices[a:b][::-1].copy()
        Y.data[a:b] = Y.data[a:b][::-1].copy()
    Y.has_sorted_indices = False
    labels = np.arange(50) % 4
    want, _ = _oracle(X, labels, None, 4)
    sums, counts = np.zeros((4, 300)), np.zeros(4)
    csr_center_sums(Y, labels, sums, counts)
    np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-12)


def test_center_work_on_csr_blocks_keeps_one_partial_and_resumes():
    X = _wide(n=400, d=2000, per_row=8, seed=5)
    rng = np.random.default_rng(6)
    k = 5
    labels = rng.integers(0, k, 400)
    want, want_n = _oracle(X, labels, None, k)
    work = CenterWork(k, 2000)
    work.part += 1.0  # stale partials: reset clears them
    work.reset()
    for a, b in ((0, 1), (1, 170), (170, 400)):
        work.add(X[a:b], labels[a:b])
        if b == 170:  # a resumed accumulation starts from the sums so far
            sums, counts = np.zeros((k, 2000)), np.zeros(k)
            work.total(sums, counts)
            work.seed(sums, counts)
    assert work.dirty == 1  # the other threads' partials were never written
    sums, counts = np.zeros((k, 2000)), np.zeros(k)
    work.total(sums, counts)
    np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(counts, want_n)
    dense = X[:100].toarray().astype(np.float64)  # dense rows after: every partial counts
    work.reset()
    work.add(dense, labels[:100])
    sums, counts = np.zeros((k, 2000)), np.zeros(k)
    work.total(sums, counts)
    np.testing.assert_allclose(sums, _oracle(X[:100], labels[:100], None, k)[0],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_centre_drift_matches_numpy_in_float64(dtype):
    rng = np.random.default_rng(2)
    S = rng.standard_normal((9, 3000)).astype(dtype)
    prev = (S + 1e-3 * rng.standard_normal(S.shape)).astype(dtype)
    diff = S.astype(np.float64) - prev.astype(np.float64)
    want = np.sqrt((diff * diff).sum(axis=1))
    np.testing.assert_allclose(centre_drift(S, prev), want, rtol=1e-12)
    out = np.empty(9)
    arrays.centre_drift(S, prev, out)
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_lloyd_blocks_of_wide_sparse_rows_follow_their_nonzeros():
    X = sparse_blobs(3000, 200_000, 6, nnz_per_row=20, spread=0.3, seed=7).X
    km = KMeans(6, random_state=0)
    # 3,000 rows of 20 nonzeros are far below a block's entries: one block a pass (by the
    # 200,000 columns, blocks of 256 rows, 12 a pass); dense rows still go by columns
    assert km._block_rows(X) >= 3000
    assert km._block_rows(np.zeros((10, 200_000), np.float32)) == 256
    km.fit(X)
    dense = KMeans(6, random_state=0).fit(X.toarray())
    assert km.n_iter_ == dense.n_iter_ >= 2
    np.testing.assert_array_equal(km.labels_, dense.labels_)
    np.testing.assert_allclose(km.cluster_centers_, dense.cluster_centers_, rtol=1e-4,
                               atol=1e-6)


def test_empty_cluster_of_sparse_rows_reseeded_like_dense_rows():
    X = _wide(n=800, d=3000, per_row=10, seed=8)
    far = np.zeros((1, 3000), np.float32)
    far[0, :50] = 1e3  # a centre no row is near: it empties on the first pass
    init = np.vstack([X[:4].toarray(), far])
    fits = [KMeans(5, init=init, max_iter=10).fit(Xin) for Xin in (X, X.toarray())]
    for km in fits:
        assert np.bincount(km.labels_, minlength=5).min() > 0  # every cluster re-filled
        assert np.abs(km.cluster_centers_).max() < 10
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    np.testing.assert_allclose(fits[0].cluster_centers_, fits[1].cluster_centers_,
                               rtol=1e-4, atol=1e-6)


def test_distinct_rows_ignores_last_bits_and_signed_zeros():
    C = np.array([[1.0, 0.0, 2.0], [1.0 + 1e-13, -0.0, 2.0], [1.0, 0.0, 2.5]])
    assert distinct_rows(C) == 2
    assert distinct_rows(np.zeros((3, 4))) == 1
    rng = np.random.default_rng(0)
    assert distinct_rows(rng.standard_normal((64, 50_000)).astype(np.float32)) == 64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_centre_means_divide_keep_empty_centres_and_measure_the_drift(dtype):
    rng = np.random.default_rng(4)
    prev = rng.standard_normal((6, 700)).astype(dtype)
    N = np.array([3.0, 0.0, 1.5, 7.0, 0.0, 2.0])
    S = (prev * N[:, None] + 0.1 * rng.standard_normal(prev.shape)).astype(dtype)
    want = np.where(N[:, None] > 0, S / np.where(N > 0, N, 1)[:, None], prev).astype(dtype)
    diff = want.astype(np.float64) - prev
    got = S.copy()
    drift = centre_means(got, N, prev)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(got[[1, 4]], prev[[1, 4]])
    np.testing.assert_allclose(drift, np.sqrt((diff * diff).sum(1)), rtol=1e-6)
    assert drift[1] == drift[4] == 0
    got2, out = S.copy(), np.empty(6)  # the stand-in while it compiles
    arrays.centre_means(got2, N, prev, out)
    np.testing.assert_allclose(got2, want, rtol=1e-6)
    np.testing.assert_allclose(out, drift, rtol=1e-6)


def test_total_into_writes_what_total_adds():
    X = _wide(n=300, d=900, per_row=7, seed=9)
    labels = np.arange(300) % 4
    for rows in (X, X.toarray()):  # one partial written, and every thread's
        work = CenterWork(4, 900)
        work.reset()
        work.add(rows, labels)
        want, want_n = np.zeros((4, 900)), np.zeros(4)
        work.total(want, want_n)
        got, got_n = np.full((4, 900), 7.0, np.float32), np.full(4, 7.0)
        work.total_into(got, got_n)
        np.testing.assert_array_equal(got, want.astype(np.float32))
        np.testing.assert_array_equal(got_n, want_n)


def test_pass_bounds_carried_over_stay_below_the_measured_distances():
    rng = np.random.default_rng(10)
    C0 = rng.standard_normal((12, 40))
    first = pass_bounds(C0, np.zeros(12), np)
    C1 = C0 + 0.05 * rng.standard_normal(C0.shape)
    drift = np.sqrt(((C1 - C0) ** 2).sum(1))
    exact = pass_bounds(C1, drift, np, first, pass_work=1e12)  # cheap: measured again
    dist = np.sqrt(((C1[:, None] - C1[None]) ** 2).sum(-1))
    np.fill_diagonal(dist, np.inf)
    np.testing.assert_allclose(exact["s"], 0.5 * dist.min(1), rtol=1e-6)
    carried = pass_bounds(C1, drift, np, first, pass_work=10.0)  # dear: carried over
    assert (carried["lb"] <= dist + 1e-9).all()
    assert (carried["s"] <= exact["s"] + 1e-9).all() and (carried["s"] < exact["s"]).any()
    assert (carried["top"], carried["m1"]) == (exact["top"], exact["m1"])


def test_farthest_rows_of_csr_input_come_back_dense_with_repeats_added():
    from bidlab.models.kmeans import farthest

    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32),
                       np.array([3, 3, 0, 7, 1]), np.array([0, 2, 4, 5])), shape=(3, 9))
    assert not X.has_canonical_format  # row 0 stores column 3 twice
    dist = np.array([9.0, 4.0, 1.0], np.float32)
    res = farthest.keep_farthest(None, X, np.zeros(3, np.int64), dist, None,
                                 np.arange(3), 2, np)
    got = {int(r): farthest._dense(x, 9, np) for r, x in zip(res["row"], res["x"],
                                                               strict=True)}
    assert sorted(got) == [0, 1]  # the two farthest
    for r, x in got.items():
        np.testing.assert_array_equal(x, X[r].toarray()[0])
