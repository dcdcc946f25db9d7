"""KMeans on dense rows far from the origin: GEMM distances keep their digits (fit, predict,
transform), compared with scikit-learn's KMeans from the same start."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.cluster import KMeans as SKKMeans
from sklearn.exceptions import ConvergenceWarning

from bidlab.models import KMeans


def _far_blobs(offset: float, dtype: type, seed: int = 0) -> np.ndarray:
    """Three blobs of 300 rows, 8 features, spread 0.5, centred 3 apart, around
    ``offset``."""
    rng = np.random.default_rng(seed)
    X = np.concatenate([rng.normal(c, 0.5, (300, 8)) for c in (0.0, 3.0, 6.0)])
    return (X + offset).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [1e4, 1e5])
def test_rows_far_from_the_origin_cluster_as_scikit_learn(dtype: type, offset: float) -> None:
    # float32 rows around 10,000 that spread by 0.5 lost their distances to the GEMM's
    # cancellation: 282 of 900 rows went to the wrong blob, 10x scikit-learn's inertia
    X = _far_blobs(offset if dtype == np.float32 else offset * 1e4, dtype)
    init = X[[0, 300, 600]].copy()
    sk = SKKMeans(3, init=init, n_init=1).fit(X)
    km = KMeans(3, init=init).fit(X)
    np.testing.assert_array_equal(km.labels_, sk.labels_)
    assert km.inertia_ == pytest.approx(sk.inertia_, rel=1e-4)
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    assert km.score(X) == -km.inertia_
    km_pp = KMeans(3, random_state=0).fit(X)
    assert km_pp.inertia_ == pytest.approx(sk.inertia_, rel=1e-4)


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_transform_of_rows_far_from_the_origin_matches_cdist(algorithm: str) -> None:
    # the distances of float32 rows around 10,000 were off by 15 (the blobs are 8 apart)
    X = _far_blobs(1e4, np.float32)
    km = KMeans(3, random_state=0, algorithm=algorithm, batch_size=128).fit(X)
    T = km.transform(X)
    exact = cdist(X.astype(np.float64), km.cluster_centers_.astype(np.float64))
    np.testing.assert_allclose(T, exact, rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(T.argmin(axis=1), km.labels_)


def test_predict_far_rows_by_given_centres_matches_exact_nearest() -> None:
    # predict's own distances (not only fit's): centres given, rows 100,000 from the origin
    rng = np.random.default_rng(3)
    C = (1e5 + rng.normal(0.0, 1.0, (6, 4))).astype(np.float32)
    km = KMeans(6, init=C, max_iter=1).fit(C)
    np.testing.assert_array_equal(km.cluster_centers_, C)
    Xn = (1e5 + rng.normal(0.0, 1.0, (3000, 4))).astype(np.float32)
    exact = cdist(Xn.astype(np.float64), C.astype(np.float64), "sqeuclidean")
    D = np.sort(exact, axis=1)
    clear = D[:, 1] - D[:, 0] > 1e-2  # rows not tied within float32's rounding
    np.testing.assert_array_equal(km.predict(Xn)[clear], exact.argmin(axis=1)[clear])


def test_equal_rows_far_from_the_origin_come_back_to_the_bit() -> None:
    # a cluster of equal rows is that row exactly, its rows at distance 0 from it
    P = (1e4 + np.random.default_rng(1).integers(0, 10, (3, 5))).astype(np.float32)
    X = np.repeat(P, 7, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        km = KMeans(3, init=P[::-1].copy()).fit(X)
    np.testing.assert_array_equal(km.cluster_centers_, P[::-1])
    assert km.inertia_ == 0.0
    T = km.transform(X)
    np.testing.assert_array_equal(T[np.arange(len(X)), km.labels_], 0.0)
