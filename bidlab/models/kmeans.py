"""``KMeans``: k-means by GEMM, full-batch (Lloyd, with exact pruning) or minibatch.

The dense, GEMM-bound counterpart of the sparse GLM: each Lloyd iteration is one
``X @ C.T`` per chunk of rows through the matrix core plus a fused nearest-centre /
cluster-sum pass, and Hamerly's bounds skip the distances that cannot change an
assignment (results are those of plain Lloyd). Dense and sparse (CSR) inputs, numpy or
CuPy::

    from bidlab.models import KMeans
    km = KMeans(256, random_state=0).fit(X)
    km.cluster_centers_, km.labels_, km.inertia_, km.predict(X_new), km.transform(X_new)

Scikit-learn conventions (``clone``, ``Pipeline``, ``GridSearchCV`` work); ``k`` is the
number of clusters (scikit-learn's ``n_clusters``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin

from bidlab import backend
from bidlab.models import _glm_params as P
from bidlab.models._glm_data import as_features, check_n_features, device_xp
from bidlab.models._kmeans_core import (
    Distances,
    KMeansResult,
    init_centers,
    lloyd,
    minibatch,
    row_norms_sq,
)

__all__ = ["KMeans"]


def _init_rule() -> P.Rule:
    def check(x: Any) -> bool:
        if isinstance(x, str):
            return x in ("k-means++", "random")
        return hasattr(x, "shape") and len(x.shape) == 2

    return (check, "one of ['k-means++', 'random'] or a k x d array of centres")


_PARAMS: dict[str, P.Rule] = {
    "k": P.int_at_least(1),
    "init": _init_rule(),
    "n_init": P.int_at_least(1),
    "max_iter": P.int_at_least(1),
    "tol": P.real_at_least(0.0),
    "algorithm": P.one_of(["lloyd", "minibatch"]),
    "batch_size": P.int_at_least(1),
    "bounds": P.one_of([True, False]),
    "random_state": P.seed(),
    "dtype": (
        lambda x: _dtype_type(x) in (np.float32, np.float64),
        "float32 or float64",
    ),
    "device": P.one_of(["cpu", "gpu"]),
}


def _dtype_type(x: Any) -> Any:
    try:
        return np.dtype(x).type
    except TypeError:
        return None


class KMeans(ClusterMixin, TransformerMixin, BaseEstimator):
    """k-means clustering with distances by GEMM.

    Args:
        k: number of clusters.
        init: ``"k-means++"`` (default), ``"random"`` (k distinct rows) or a k x d array.
        n_init: runs from different seeds; the lowest inertia wins.
        max_iter: Lloyd iterations (``"lloyd"``) or passes over the data (``"minibatch"``).
        tol: stop when the centres' total squared shift is at most ``tol`` times the mean
            feature variance (scikit-learn's rule), or when no label changes.
        algorithm: ``"lloyd"`` (full batch) or ``"minibatch"`` (Sculley's update).
        batch_size: rows per minibatch (``"minibatch"`` only).
        bounds: prune Lloyd's distance computations with Hamerly's bounds (same result).
        random_state: seed for initialisation, re-seeding and minibatches.
        dtype: float32 (default) or float64.
        device: ``"cpu"`` or ``"gpu"`` (CuPy; needs ``bidlab[gpu]``).

    Learned: ``cluster_centers_`` (k x d), ``labels_``, ``inertia_`` (sum of squared
    distances to the nearest centre), ``n_iter_``, ``n_features_in_``.
    """

    def __init__(
        self,
        k: int = 8,
        *,
        init: Any = "k-means++",
        n_init: int = 1,
        max_iter: int = 100,
        tol: float = 1e-4,
        algorithm: str = "lloyd",
        batch_size: int = 4096,
        bounds: bool = True,
        random_state: Any = None,
        dtype: Any = np.float32,
        device: str = "cpu",
    ) -> None:
        self.k = k
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.algorithm = algorithm
        self.batch_size = batch_size
        self.bounds = bounds
        self.random_state = random_state
        self.dtype = dtype
        self.device = device

    def _features(self, X: Any) -> Any:
        return as_features(
            X, owner="KMeans", dtype=np.dtype(self.dtype), xp=device_xp(self.device), sparse=None
        )

    def fit(self, X: Any, y: Any = None) -> KMeans:
        """Cluster the rows of ``X`` (n x d, dense or sparse); ``y`` is ignored."""
        P.validate("KMeans", _PARAMS, self.get_params(deep=False))
        X = self._features(X)
        n, d = X.shape
        if self.k > n:
            raise ValueError(
                f"k={self.k} is larger than the number of samples ({n}): use k <= {n} or "
                "give more data"
            )
        if not isinstance(self.init, str) and tuple(self.init.shape) != (self.k, d):
            raise ValueError(
                f"init has shape {tuple(self.init.shape)} but k={self.k} centres of {d} "
                f"features need shape ({self.k}, {d})"
            )
        rng = (
            self.random_state
            if isinstance(self.random_state, np.random.Generator)
            else np.random.default_rng(self.random_state)
        )
        best: KMeansResult | None = None
        runs = 1 if not isinstance(self.init, str) else self.n_init
        xx = row_norms_sq(X)
        for _ in range(runs):
            C = init_centers(X, xx, self.k, self.init, rng)
            if self.algorithm == "minibatch":
                res = minibatch(
                    X, C, max_iter=self.max_iter, batch_size=self.batch_size, rng=rng
                )
            else:
                res = lloyd(
                    X, C, max_iter=self.max_iter, tol=self.tol, bounds=self.bounds, rng=rng
                )
            if best is None or res.inertia < best.inertia:
                best = res
        assert best is not None
        self.centers_device_ = best.centers
        self.cluster_centers_ = np.asarray(backend.to_host(best.centers))
        self.labels_ = np.asarray(backend.to_host(best.labels))
        self.inertia_ = float(best.inertia)
        self.n_iter_ = int(best.n_iter)
        self.distance_evaluations_ = int(best.distance_evaluations)
        self.n_features_in_ = int(d)
        return self

    def learner(self, X: Any, **options: Any) -> Any:
        """A live :class:`bidlab.learn.Learner` running minibatch k-means on ``X``.

        Centres start from ``init`` (k-means++ or random rows, seeded by ``random_state``);
        ``batch_size`` rows per minibatch; ``options`` are learner options (``n_passes``,
        ``lrate`` to damp the steps, ...). See :mod:`bidlab.models._kmeans_learn`.
        """
        from bidlab.learn import Grad, Learner, MemorySource
        from bidlab.models._kmeans_learn import KMeansLearnModel

        P.validate("KMeans", _PARAMS, self.get_params(deep=False))
        X = self._features(X)
        rng = np.random.default_rng(
            self.random_state if isinstance(self.random_state, int) else None)
        head = X[: min(X.shape[0], 20 * self.k + 1000)]
        C = init_centers(head, row_norms_sq(head), self.k, self.init, rng)
        model = KMeansLearnModel(np.asarray(backend.to_host(C)))
        source = MemorySource(X, batch_size=min(self.batch_size, X.shape[0]), shuffle=True,
                              seed=int(rng.integers(1 << 31)))
        options.setdefault("n_passes", self.max_iter)
        return Learner(model, source, Grad(lrate=options.pop("lrate", 1.0)),
                       name=options.pop("name", "kmeans"), **options).init()

    def _nearest(self, X: Any) -> tuple[Any, Any, Any]:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "cluster_centers_")
        X = self._features(X)
        check_n_features("KMeans", X, self.n_features_in_)
        xp = device_xp(self.device)
        n = X.shape[0]
        labels = backend.empty((n,), np.int64, xp)
        d1 = backend.empty((n,), X.dtype, xp)
        d2 = backend.empty((n,), X.dtype, xp)
        dist = Distances(X, row_norms_sq(X), self.k)
        dist.set_centers(self.centers_device_)
        dist.nearest(labels, d1, d2)
        return X, labels, d1

    def predict(self, X: Any) -> np.ndarray:
        """The nearest centre of each row of ``X``."""
        return np.asarray(backend.to_host(self._nearest(X)[1]))

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        return self.fit(X).labels_

    def transform(self, X: Any) -> np.ndarray:
        """Euclidean distance from each row of ``X`` to each centre (n x k)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "cluster_centers_")
        from bidlab.models._kmeans_core import _sq_dist_to

        X = self._features(X)
        check_n_features("KMeans", X, self.n_features_in_)
        D = _sq_dist_to(X, row_norms_sq(X), self.centers_device_)
        return np.sqrt(np.asarray(backend.to_host(D)))

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the sum of squared distances of ``X``'s rows to their nearest centre."""
        _, _, d1 = self._nearest(X)
        return -float(np.asarray(backend.to_host(d1), dtype=np.float64).sum())
