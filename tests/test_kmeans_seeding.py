"""Greedy k-means++ on dense CPU rows (bidlab.kern.kmeans_seed, models/kmeans/plusplus.py)
against the generic greedy_seeds path, and the first assignment it hands to Lloyd.

Every test runs twice: with each step's trials skipping the pairs the triangle inequality
rules out, and computing every distance (the seeding picks by the last step's share of
ruled-out pairs; these small data sets would otherwise only take the second way)."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.datasets import blobs
from bidlab.kern import kmeans_seed
from bidlab.models import KMeans
from bidlab.models.kmeans import seeding
from bidlab.models.kmeans.seeding import init_seeding


@pytest.fixture(autouse=True, params=["prune", "every distance"])
def trials_mode(request, monkeypatch):
    monkeypatch.setattr(kmeans_seed, "PRUNE_DIMS", 0.0 if request.param == "prune" else np.inf)
    return request.param


def test_should_prune_follows_the_ruled_out_share(trials_mode):
    calls = []
    real = kmeans_seed._trials

    class Spy:
        def __call__(self, work, *args):
            calls.append(args[10])  # prune
            return real(work, *args)

    mp = pytest.MonkeyPatch()
    mp.setattr(kmeans_seed, "_trials", Spy())
    try:
        init_seeding(blobs(3000, 4, 6, seed=1).X, 6, "k-means++", np.random.default_rng(0))
    finally:
        mp.undo()
    assert calls[0] is False  # nothing to rule out on the first step
    assert all(c is (trials_mode == "prune") for c in calls[1:])
    assert len(calls) == 6


def _generic(X, k, rng, w=None):
    """The seeds of the generic path (full distance columns, numpy cumsum draws)."""
    sparse_like = np.asfortranarray(X)  # not C-ordered: the generic path takes it
    return seeding.init_centers(sparse_like, k, "k-means++", rng, w)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
def test_same_seeds_as_the_generic_greedy_seeding(dtype, weighted):
    X = blobs(3000, 5, 12, seed=3, center_scale=3.0, dtype=dtype).X
    w = np.random.default_rng(1).integers(0, 3, len(X)).astype(float) if weighted else None
    fast = init_seeding(X, 12, "k-means++", np.random.default_rng(5), w)
    assert fast.labels is not None
    np.testing.assert_array_equal(fast.centers, _generic(X, 12, np.random.default_rng(5), w))


def test_first_assignment_and_bounds_match_brute_force():
    X = blobs(2500, 7, 20, seed=4, center_scale=2.0, dtype=np.float64).X
    s = init_seeding(X, 20, "k-means++", np.random.default_rng(0))
    D = np.sqrt(((X[:, None, :] - s.centers[None]) ** 2).sum(-1))
    np.testing.assert_array_equal(s.labels, D.argmin(axis=1))
    np.testing.assert_allclose(s.upper, D.min(axis=1), rtol=1e-12, atol=1e-12)
    second = np.sort(D, axis=1)[:, 1]
    assert (s.lower <= second + 1e-9).all()
    assert (s.lower > 0.5 * second).mean() > 0.5  # the bounds are not vacuous


def test_more_clusters_than_distinct_rows():
    X = np.repeat(np.eye(3, 4), 50, axis=0)
    s = init_seeding(X, 5, "k-means++", np.random.default_rng(0))
    assert {tuple(r) for r in s.centers} == {tuple(r) for r in np.eye(3, 4)}
    assert (s.upper == 0).all()


def test_lloyd_from_the_seeding_equals_lloyd_from_the_same_centres():
    X = blobs(6000, 6, 10, seed=7, center_scale=2.0, dtype=np.float64).X
    seeded = KMeans(10, random_state=3).fit(X)
    start = init_seeding(X, 10, "k-means++",
                         np.random.default_rng(int(seeded._rng().integers(2**31 - 1))))
    plain = KMeans(10, init=start.centers).fit(X)
    np.testing.assert_allclose(seeded.cluster_centers_, plain.cluster_centers_, rtol=1e-12)
    np.testing.assert_array_equal(seeded.labels_, plain.labels_)
    assert seeded.n_iter_ == plain.n_iter_
    assert seeded.inertia_ == pytest.approx(plain.inertia_, rel=1e-12)
    # the seeding's assignment spares the first pass its distances
    assert seeded.distance_evaluations_ < plain.distance_evaluations_


def test_kmeans_parallel_init_finds_separated_blobs_dense_and_sparse():
    import scipy.sparse as sp

    data = blobs(4000, 4, 6, seed=12, center_scale=50.0, dtype=np.float64)
    km = KMeans(6, init="k-means||", random_state=0).fit(data.X)
    truth = KMeans(6, init=data.centers).fit(data.X)
    assert km.inertia_ == pytest.approx(truth.inertia_, rel=1e-9)
    sparse = KMeans(6, init="k-means||", random_state=0).fit(sp.csr_matrix(data.X))
    assert sparse.inertia_ == pytest.approx(truth.inertia_, rel=1e-9)
    with pytest.raises(ValueError, match="k-means\\|\\|"):
        KMeans(6, init="kmeans||").fit(data.X)


def test_the_seeding_does_not_depend_on_the_thread_count():
    from bidlab.kern.adaptive import policy

    X = blobs(9000, 3, 9, seed=2, center_scale=2.0).X  # float32, several row blocks
    runs = []
    for mode in ("serial", "parallel"):
        with policy(mode):
            runs.append(init_seeding(X, 9, "k-means++", np.random.default_rng(4)))
    a, b = runs
    for name in ("centers", "labels", "upper", "lower"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_one_cluster_and_fewer_rows_than_a_block():
    X = blobs(50, 2, 1, seed=0).X
    s = init_seeding(X, 1, "k-means++", np.random.default_rng(0))
    assert s.centers.shape == (1, 2) and (s.labels == 0).all()
    assert np.isinf(s.lower).all()


@pytest.mark.parametrize("weighted", [False, True])
def test_stand_ins_pick_the_same_seeds_and_bounds(weighted):
    """The numpy forms run before the seeding kernels are compiled give the same seeds,
    first assignment and bounds (to float rounding) as the kernels."""
    from bidlab.kern import standin
    from bidlab.models.kmeans.plusplus import kmeanspp

    X = blobs(6000, 5, 12, seed=3).X
    w = np.random.default_rng(1).random(6000) if weighted else None
    order = np.random.default_rng(2).permutation(6000)
    with standin.enabled(False):
        compiled = kmeanspp(X, 12, np.random.default_rng(0), order, w)
    runs = standin.runs()
    with standin.forced():
        arrays = kmeanspp(X, 12, np.random.default_rng(0), order, w)
    assert standin.runs() > runs
    np.testing.assert_array_equal(arrays.centers, compiled.centers)
    np.testing.assert_array_equal(arrays.labels, compiled.labels)
    np.testing.assert_allclose(arrays.upper, compiled.upper, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(arrays.lower, compiled.lower, rtol=1e-5, atol=1e-4)
