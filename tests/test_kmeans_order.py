"""The seeding's canonical row order (bidlab.kern.kmeans_order), its rows copied in that
order (kmeans_seed.trials' copy_to), and the Lloyd pass's farthest rows
(kmeans_lloyd.farthest): each against its numpy oracle."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.datasets import blobs
from bidlab.kern import kmeans_seed_arrays
from bidlab.kern.kmeans_lloyd import farthest
from bidlab.kern.kmeans_order import project, stable_argsort
from bidlab.models.kmeans import plusplus
from bidlab.models.kmeans.seeding import init_seeding


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_projection_matches_the_float64_product(dtype):
    X = blobs(3000, 7, 5, seed=1, dtype=dtype).X
    r = np.random.default_rng(3).standard_normal(7)
    np.testing.assert_allclose(project(X, r), X.astype(np.float64) @ r, rtol=1e-12,
                               atol=1e-12)


def test_radix_argsort_is_numpys_stable_argsort():
    rng = np.random.default_rng(0)
    cases = [rng.standard_normal(20_000) * 1e3,
             np.round(rng.standard_normal(20_000), 1),  # many ties: kept in row order
             np.array([0.0, -0.0, np.inf, -np.inf, 1e-300, -1e-300, 0.0, -0.0]),
             np.full(50, 2.5), np.empty(0)]
    for p in cases:
        assert np.array_equal(stable_argsort(p), np.argsort(p, kind="stable"))
        out = np.empty(p.shape[0], np.int64)
        kmeans_seed_arrays.stable_argsort(p, out)  # the stand-in run while it compiles
        assert np.array_equal(out, np.argsort(p, kind="stable"))


def test_seeding_from_the_copied_rows_equals_the_gathered_one(monkeypatch):
    X = blobs(9000, 4, 9, seed=5, center_scale=2.0).X
    w = np.random.default_rng(1).random(9000)
    copied = init_seeding(X, 9, "k-means++", np.random.default_rng(2), w)
    monkeypatch.setattr(plusplus, "COPY_LIMIT", 0)  # every step gathers along the order
    gathered = init_seeding(X, 9, "k-means++", np.random.default_rng(2), w)
    for name in ("centers", "labels", "upper", "lower"):
        np.testing.assert_array_equal(getattr(copied, name), getattr(gathered, name))


def test_the_order_does_not_depend_on_the_rows_order():
    X = blobs(5000, 3, 6, seed=8).X
    perm = np.random.default_rng(4).permutation(5000)
    a = init_seeding(X, 6, "k-means++", np.random.default_rng(0))
    b = init_seeding(np.ascontiguousarray(X[perm]), 6, "k-means++", np.random.default_rng(0))
    np.testing.assert_array_equal(a.centers, b.centers)
    np.testing.assert_array_equal(a.labels[perm], b.labels)


@pytest.mark.parametrize("weighted", [False, True])
def test_farthest_rows_match_the_sorted_oracle(weighted):
    rng = np.random.default_rng(6)
    for trial in range(40):
        n, R = int(rng.integers(0, 300)), int(rng.integers(1, 40))
        dist = (rng.integers(0, 8, n) if trial % 2 else rng.random(n)).astype(np.float32)
        w = rng.integers(0, 2, n).astype(np.float64) if weighted else None
        floor = float(rng.choice([-np.inf, 0.5, 3.0]))
        keep = dist > floor
        if w is not None:
            keep &= w > 0
        cand = np.flatnonzero(keep)
        want = cand[np.argsort(-dist[cand], kind="stable")[:R]]  # ties: lower row first
        assert sorted(farthest(dist, w, floor, R).tolist()) == sorted(want.tolist())
