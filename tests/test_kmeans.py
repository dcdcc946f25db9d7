"""KMeans: blobs found, pruning changes nothing, matches scikit-learn, kernels and bad
input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from bidlab import backend
from bidlab.datasets import blobs, sparse_blobs
from bidlab.kern import kmeans as kkm
from bidlab.kern.kmeans import (
    CenterWork,
    assign,
    assigned_sq_dist,
    center_sums,
    hamerly,
)
from bidlab.kern.kmeans_lloyd import lloyd_block, rows_first
from bidlab.learn import OptionError
from bidlab.models.kmeans import KMeans


def test_assign_and_center_sums_match_their_numpy_oracles(xp):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 7)).astype(np.float32)
    C = rng.standard_normal((5, 7)).astype(np.float32)
    D = X @ C.T
    cc, xx = (C * C).sum(1), (X * X).sum(1)
    full = ((X[:, None, :] - C[None]) ** 2).sum(2)
    want_lab = full.argmin(1)
    srt = np.sort(full, axis=1)
    for D_in in (D, np.asfortranarray(D)):  # C-ordered: numba kernel; F-ordered: generic
        lab = xp.empty(300, np.int64)
        d1, d2 = xp.empty(300, np.float32), xp.empty(300, np.float32)
        assign(xp.asarray(D_in), xp.asarray(cc), xp.asarray(xx), lab, d1, d2)
        np.testing.assert_array_equal(backend.to_host(lab), want_lab)
        np.testing.assert_allclose(backend.to_host(d1), srt[:, 0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(backend.to_host(d2), srt[:, 1], rtol=1e-4, atol=1e-4)
    w = rng.random(300)
    for Xin in (X, sp.csr_matrix(X)):
        for wi in (None, w):
            sums, counts = np.zeros((5, 7)), np.zeros(5)
            center_sums(Xin, want_lab, sums, counts, wi)
            ww = np.ones(300) if wi is None else wi
            for j in range(5):
                sel = want_lab == j
                np.testing.assert_allclose(sums[j], (ww[sel, None] * X[sel]).sum(0),
                                           rtol=1e-5, atol=1e-5)
                assert counts[j] == pytest.approx(ww[sel].sum())
        dist = np.empty(300, np.float32)
        assigned_sq_dist(Xin, want_lab, C, dist)
        np.testing.assert_allclose(dist, full[np.arange(300), want_lab], rtol=1e-4, atol=1e-4)


def test_center_work_accumulates_blocks_like_one_numpy_sum():
    rng = np.random.default_rng(2)
    n, d, k = 1000, 9, 6
    X = rng.standard_normal((n, d))
    labels = rng.integers(0, k, n)
    w = rng.random(n)
    cuts = [0, 1, 250, 251, 700, n]  # a one-row block and blocks of uneven size
    for Xin in (X, sp.csr_matrix(X)):
        for wi in (None, w):
            ww = np.ones(n) if wi is None else wi
            want = np.stack([(ww[labels == j, None] * X[labels == j]).sum(0) for j in range(k)])
            want_n = np.bincount(labels, ww, k)
            work = CenterWork(k, d)
            work.part += 1.0  # stale partials: reset clears them
            work.reset()
            for a, b in zip(cuts[:-1], cuts[1:], strict=True):
                work.add(Xin[a:b], labels[a:b], None if wi is None else wi[a:b])
                if b == 251:  # a resumed accumulation starts from the sums so far
                    sums, counts = np.zeros((k, d)), np.zeros(k)
                    work.total(sums, counts)
                    work.seed(sums, counts)
            sums, counts = np.ones((k, d)), np.ones(k)
            work.total(sums, counts)  # adds to what is there
            np.testing.assert_allclose(sums - 1, want, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(counts - 1, want_n, rtol=1e-12)


def test_hamerly_bound_test_matches_its_numpy_oracle():
    rng = np.random.default_rng(1)
    n, k = 500, 6
    labels = rng.integers(0, k, n)
    u, lo = rng.random(n).astype(np.float32), rng.random(n).astype(np.float32) + 0.5
    drift, s = (rng.random(k) * 0.1).astype(np.float32), rng.random(k).astype(np.float32)
    top, m1, m2 = int(np.argmax(drift)), float(drift.max()), float(np.sort(drift)[-2])
    want_u = u + drift[labels]
    want_lo = lo - np.where(labels == top, m2, m1).astype(np.float32)
    want = np.flatnonzero(want_u + 1e-3 * (want_u + 1e-12) > np.maximum(s[labels], want_lo))
    need = np.empty(n, np.int64)
    cnt = hamerly(labels, u, lo, drift, s, top, m1, m2, need)
    np.testing.assert_array_equal(need[:cnt], want)
    np.testing.assert_allclose(u, want_u, rtol=1e-6)
    np.testing.assert_allclose(lo, want_lo, rtol=1e-6)
    assert 0 < cnt < n


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d, k", [(7, 5), (12, 3)])  # centres first / rows first
def test_lloyd_block_matches_the_separate_kernels(monkeypatch, dtype, d, k):
    monkeypatch.setattr(kkm, "_CHUNK_BYTES", 1)  # 32-row chunks: many per thread
    assert rows_first(k, d) == (d == 12)
    rng = np.random.default_rng(3)
    n = 1000
    X = rng.standard_normal((n, d)).astype(dtype)
    C = rng.standard_normal((k, d)).astype(dtype)
    cc, w = (C * C).sum(1), rng.random(n)
    full = ((X[:, None, :].astype(np.float64) - C[None]) ** 2).sum(2)
    srt = np.sort(full, axis=1)
    tol = 1e-3 if dtype == np.float32 else 1e-9
    for wi in (None, w):  # every row computed: the plain GEMM path
        ww = np.ones(n) if wi is None else wi
        work = CenterWork(k, d)
        work.reset()
        old = rng.integers(0, k, n)
        lab, u, lo, xx = old.copy(), np.empty(n, dtype), np.empty(n, dtype), np.empty(n, dtype)
        changed, computed = lloyd_block(X, C, cc, xx, lab, u, lo, work, wi, xx_ready=False)
        np.testing.assert_array_equal(lab, full.argmin(1))
        assert (changed, computed) == (int((lab != old).sum()), n)
        np.testing.assert_allclose(xx, (X.astype(np.float64) ** 2).sum(1), rtol=tol)
        np.testing.assert_allclose(u, np.sqrt(srt[:, 0]), rtol=tol, atol=tol)
        np.testing.assert_allclose(lo, np.sqrt(srt[:, 1]), rtol=tol, atol=tol)
        sums, counts = np.zeros((k, d)), np.zeros(k)
        work.total(sums, counts)
        want, want_n = np.zeros((k, d)), np.zeros(k)
        center_sums(X, lab, want, want_n, wi)
        np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(counts, np.bincount(lab, ww, k), rtol=1e-12)
        lloyd_block(X, C, cc, xx, lab, u, lo, work, root=False, sums=False)
        np.testing.assert_allclose(u, srt[:, 0], rtol=tol, atol=tol)
        sums2, counts2 = np.zeros((k, d)), np.zeros(k)
        work.total(sums2, counts2)  # sums=False added nothing
        np.testing.assert_array_equal(sums2, sums)
    # Hamerly: rows 0-63 cannot be cleared (two whole chunks, multiplied in place), rows
    # 64-127 all can (chunks with nothing to compute), the rest at random (gathered)
    lab0 = rng.integers(0, k, n)
    u0 = rng.random(n).astype(dtype)
    lo0 = (rng.random(n) + 0.5).astype(dtype)
    u0[:64], u0[64:128], lo0[64:128] = 50, 0, 50
    drift, s = (rng.random(k) * 0.1).astype(dtype), (rng.random(k) * 0.5).astype(dtype)
    top, m1, m2 = int(np.argmax(drift)), float(drift.max()), float(np.sort(drift)[-2])
    want_lab, want_u, want_lo = lab0.copy(), u0.copy(), lo0.copy()
    need = np.empty(n, np.int64)
    cnt = hamerly(want_lab, want_u, want_lo, drift, s, top, m1, m2, need)
    idx = need[:cnt]
    assert 64 <= cnt < n - 64 and idx[63] == 63 and idx[64] >= 128
    want_lab[idx] = full[idx].argmin(1)
    want_u[idx], want_lo[idx] = np.sqrt(srt[idx, 0]), np.sqrt(srt[idx, 1])
    work = CenterWork(k, d)
    work.reset()
    lab, u, lo = lab0.copy(), u0.copy(), lo0.copy()
    bounds = {"drift": drift, "s": s, "top": top, "m1": m1, "m2": m2}
    changed, computed = lloyd_block(X, C, cc, (X * X).sum(1), lab, u, lo, work, w,
                                    bounds=bounds)
    np.testing.assert_array_equal(lab, want_lab)
    assert (changed, computed) == (int((lab != lab0).sum()), cnt)
    np.testing.assert_allclose(u, want_u, rtol=tol, atol=tol)
    np.testing.assert_allclose(lo, want_lo, rtol=tol, atol=tol)
    sums, counts = np.zeros((k, d)), np.zeros(k)
    work.total(sums, counts)
    want, want_n = np.zeros((k, d)), np.zeros(k)
    center_sums(X, lab, want, want_n, w)
    np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(counts, want_n, rtol=1e-12)
    # one centre: no second nearest; fewer rows than threads
    work = CenterWork(1, d)
    work.reset()
    lab, u, lo = np.zeros(1, np.int64), np.empty(1, dtype), np.empty(1, dtype)
    lloyd_block(X[:1], C[:1], cc[:1], (X[:1] * X[:1]).sum(1), lab, u, lo, work)
    assert lab[0] == 0 and np.isinf(lo[0]) and u[0] == pytest.approx(np.sqrt(full[0, 0]),
                                                                     rel=tol)


def test_well_separated_blobs_are_found_exactly():
    X, labels, centers = blobs(4000, 8, 6, spread=0.5, seed=0)
    km = KMeans(6, n_init=2, random_state=0).fit(X)
    assert adjusted_rand_score(labels, km.labels_) == 1.0
    # every true centre has a found centre next to it
    gap = np.sqrt(((km.cluster_centers_[:, None] - centers[None]) ** 2).sum(2)).min(0)
    assert gap.max() < 0.1
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    direct = ((X - km.cluster_centers_[km.labels_]) ** 2).sum()
    assert km.inertia_ == pytest.approx(direct, rel=1e-5)
    assert km.score(X) == pytest.approx(-direct, rel=1e-4)
    T = km.transform(X[:20])
    want = np.sqrt(((X[:20, None] - km.cluster_centers_[None]) ** 2).sum(2))
    np.testing.assert_allclose(T, want, rtol=1e-3, atol=1e-3)


def test_sparse_blobs_and_all_zero_rows():
    X, labels, _ = sparse_blobs(3000, 500, 5, seed=0)
    km = KMeans(5, n_init=3, random_state=1).fit(X)
    assert adjusted_rand_score(labels, km.labels_) == 1.0
    dense = KMeans(5, init=km.cluster_centers_, max_iter=5).fit(X.toarray())
    np.testing.assert_array_equal(dense.labels_, KMeans(5, init=km.cluster_centers_,
                                                        max_iter=5).fit(X).labels_)
    Z = sp.vstack([X, sp.csr_matrix((10, 500), dtype=np.float32)]).tocsr()
    kz = KMeans(6, random_state=0, n_init=2).fit(Z)
    assert np.isfinite(kz.cluster_centers_).all() and np.isfinite(kz.inertia_)


def test_pruning_with_bounds_gives_plain_lloyds_result_with_fewer_distances():
    """Exactly equal in float64. In float32 the overlapping blobs hold near-ties (distance
    gaps ~4e-7 relative) below SGEMM rounding, which differs between the full-size and the
    pruned subset products, so a few tied points may go either way: the runs must still
    agree on >= 99.5% of the labels and on the inertia to 1e-4."""
    X, _, _ = blobs(20000, 16, 20, spread=3.0, seed=1)
    init = X[np.random.default_rng(0).choice(len(X), 20, replace=False)]
    for dtype in (np.float64, np.float32):
        plain = KMeans(20, init=init, max_iter=15, tol=0, bounds=False, dtype=dtype).fit(X)
        pruned = KMeans(20, init=init, max_iter=15, tol=0, bounds=True, dtype=dtype).fit(X)
        assert plain.n_iter_ == pruned.n_iter_
        assert pruned.distance_evaluations_ < 0.6 * plain.distance_evaluations_
        if dtype == np.float64:
            np.testing.assert_array_equal(plain.labels_, pruned.labels_)
            np.testing.assert_allclose(plain.cluster_centers_, pruned.cluster_centers_,
                                       rtol=1e-12)
            assert pruned.inertia_ == pytest.approx(plain.inertia_, rel=1e-12)
        else:
            assert np.mean(plain.labels_ == pruned.labels_) >= 0.995
            assert pruned.inertia_ == pytest.approx(plain.inertia_, rel=1e-4)


def test_same_inertia_as_scikit_learn_after_the_same_iterations():
    from sklearn.cluster import KMeans as SKKMeans

    X, _, _ = blobs(10000, 32, 30, spread=4.0, seed=2)
    init = X[np.random.default_rng(1).choice(len(X), 30, replace=False)]
    for iters in (1, 4):
        ours = KMeans(30, init=init, max_iter=iters, tol=0).fit(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = SKKMeans(30, init=init, n_init=1, max_iter=iters, tol=0).fit(X)
        assert ours.n_iter_ == ref.n_iter_ == iters
        assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-4)
        assert np.mean(ours.labels_ == ref.labels_) > 0.999


def test_minibatch_finds_blobs_and_random_init_is_seeded():
    X, labels, _ = blobs(8000, 4, 5, spread=0.3, seed=3)
    mb = KMeans(5, algorithm="minibatch", batch_size=512, max_iter=2, n_init=2,
                random_state=0).fit(X)
    assert adjusted_rand_score(labels, mb.labels_) == 1.0
    a = KMeans(5, init="random", random_state=7, max_iter=3).fit(X)
    b = KMeans(5, init="random", random_state=7, max_iter=3).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)


def test_empty_clusters_are_reseeded():
    X, _, _ = blobs(2000, 3, 4, spread=0.5, seed=4)
    init = np.vstack([X[:3], np.full((1, 3), 1e4, np.float32)])  # a centre nobody is near
    km = KMeans(4, init=init, max_iter=10).fit(X)
    assert np.isfinite(km.cluster_centers_).all()
    assert np.bincount(km.labels_, minlength=4).min() > 0
    assert np.abs(km.cluster_centers_).max() < 1e3


def test_float32_and_float64_agree():
    X, _, _ = blobs(3000, 6, 5, spread=1.0, seed=5)
    init = X[:5]
    f32 = KMeans(5, init=init, max_iter=10, dtype=np.float32).fit(X)
    f64 = KMeans(5, init=init, max_iter=10, dtype=np.float64).fit(X)
    assert f32.cluster_centers_.dtype == np.float32 and f64.cluster_centers_.dtype == np.float64
    np.testing.assert_array_equal(f32.labels_, f64.labels_)
    np.testing.assert_allclose(f32.cluster_centers_, f64.cluster_centers_, rtol=1e-4, atol=1e-4)


def test_gpu_and_cpu_agree(xp):
    if xp is np:
        pytest.skip("compares a CuPy run with the numpy one; needs a GPU")
    X, _, _ = blobs(3000, 6, 5, spread=1.0, seed=6)
    runs = [KMeans(5, init=X[:5], max_iter=10, device=d).fit(X) for d in ("cpu", "gpu")]
    # cuBLAS and the host BLAS round float32 distances differently: a point almost exactly
    # between two centres may go either way, so a few in a thousand may differ
    differ = int((runs[0].labels_ != runs[1].labels_).sum())
    assert differ <= 3, f"{differ} of 3000 labels differ between the CPU and the GPU"
    np.testing.assert_allclose(runs[0].inertia_, runs[1].inertia_, rtol=1e-4)


def test_clone_and_grid_search():
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    X, _, _ = blobs(600, 3, 4, spread=0.5, seed=7)
    est = KMeans(3, random_state=0)
    assert clone(est).get_params() == est.get_params()
    grid = GridSearchCV(est, {"n_clusters": [2, 4]}, cv=3).fit(X)
    assert grid.best_params_ == {"n_clusters": 4}  # score is -inertia: more clusters, lower inertia


def test_bad_input_messages():
    X = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    with pytest.raises(ValueError,
                       match=r"needs at least n_clusters=10 samples but got n_samples=5"):
        KMeans(10).fit(X)
    with pytest.raises(ValueError,
                       match=r"The 'n_clusters' parameter of KMeans must be an int >= 1. "
                             r"Got 0 instead"):
        KMeans(0).fit(X)
    with pytest.raises(ValueError, match=r"The 'algorithm' parameter of KMeans must be one of"):
        KMeans(2, algorithm="elkan").fit(X)
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity \(first at row 3, column 2\)"):
        KMeans(2).fit(bad)
    km = KMeans(2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 2 features, but KMeans is expecting 3"):
        km.predict(X[:, :2])
    with pytest.raises(ValueError, match=r"init has shape \(2, 3\) but n_clusters=3 centres"):
        KMeans(3, init=X[:2]).fit(X)


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_starting_centres_that_are_not_finite_are_refused(algorithm, bad):
    X = np.random.default_rng(0).normal(size=(200, 3))
    init = X[:4].copy()
    init[2, 1] = bad
    with pytest.raises(ValueError, match=r"init holds NaN or infinity \(first at centre 2, "
                       "feature 1\\)"):
        KMeans(4, init=init, algorithm=algorithm, n_init=1).fit(X)


def test_integer_parameters_given_as_floats_are_refused_naming_the_int():
    X = np.random.default_rng(0).normal(size=(50, 3))
    for kw, name in (({"n_clusters": 3.0}, "n_clusters"), ({"n_init": 2.0}, "n_init")):
        with pytest.raises(OptionError, match=f"'{name}' parameter of KMeans must be an int.*"
                           "Got the float .*: pass"):
            KMeans(**{"n_clusters": 3, **kw}).fit(X)


def test_fewer_distinct_rows_than_clusters_warns():
    """As scikit-learn's KMeans: coinciding centres are reported, not hidden."""
    from sklearn.exceptions import ConvergenceWarning

    X = np.repeat(np.eye(3), 10, axis=0)
    with pytest.warns(ConvergenceWarning, match="3 distinct clusters, fewer than n_clusters=5"):
        KMeans(5, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        KMeans(3, random_state=0).fit(X)
