"""KMeans: blobs found, pruning changes nothing, matches scikit-learn, kernels, bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from bidlab import backend
from bidlab.datasets import blobs, sparse_blobs
from bidlab.models._kmeans_kernels import assign, center_sums
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
    for Xin in (X, sp.csr_matrix(X)):
        sums, counts = np.zeros((5, 7)), np.zeros(5, np.int64)
        center_sums(Xin, want_lab, sums, counts)
        for j in range(5):
            np.testing.assert_allclose(sums[j], X[want_lab == j].sum(0), rtol=1e-5, atol=1e-5)
            assert counts[j] == (want_lab == j).sum()


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
    np.testing.assert_array_equal(runs[0].labels_, runs[1].labels_)
    np.testing.assert_allclose(runs[0].inertia_, runs[1].inertia_, rtol=1e-4)


def test_clone_and_grid_search():
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    X, _, _ = blobs(600, 3, 4, spread=0.5, seed=7)
    est = KMeans(3, random_state=0)
    assert clone(est).get_params() == est.get_params()
    grid = GridSearchCV(est, {"k": [2, 4]}, cv=3).fit(X)
    assert grid.best_params_ == {"k": 4}  # score is -inertia: more clusters, lower inertia


def test_bad_input_messages():
    X = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    with pytest.raises(ValueError, match=r"k=10 is larger than the number of samples \(5\)"):
        KMeans(10).fit(X)
    with pytest.raises(ValueError, match="The 'k' parameter of KMeans must be an int >= 1; got 0"):
        KMeans(0).fit(X)
    with pytest.raises(ValueError, match=r"The 'algorithm' parameter of KMeans must be one of"):
        KMeans(2, algorithm="elkan").fit(X)
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity \(first at row 3, column 2\)"):
        KMeans(2).fit(bad)
    km = KMeans(2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 2 features but KMeans was fitted with 3"):
        km.predict(X[:, :2])
    with pytest.raises(ValueError, match=r"init has shape \(2, 3\) but k=3 centres"):
        KMeans(3, init=X[:2]).fit(X)
