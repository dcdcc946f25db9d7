"""The k initial centres of k-means: k-means++, random rows, or given ones.

Sampling runs along a canonical order of the rows (a fixed random projection, sorted), so
the same data picks the same centres whatever order its rows come in, and a row given
weight 2 is picked like two copies of it. Distances come from
:mod:`bidlab.models.kmeans.distances`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.kmeans import row_norms_sq
from bidlab.models.kmeans.distances import dense_rows, sq_distances, xp_of

__all__ = ["init_centers"]


def _canonical_order(X: Any) -> Any:
    """An order of the rows that depends only on their values (a fixed random projection,
    sorted): sampling along it picks the same rows whatever order the data comes in, and
    a row given weight 2 is picked like two copies of it."""
    xp = xp_of(X)
    r = np.random.default_rng(0x6B6D).standard_normal(X.shape[1])
    p = X @ xp.asarray(r.astype(np.float64))
    return xp.argsort(xp.asarray(p).reshape(-1), kind="stable")


def init_centers(X: Any, k: int, method: Any, rng: np.random.Generator, w: Any = None) -> Any:
    """k initial centres: ``"k-means++"`` (greedy, 2 + log k trials, weighted by ``w``),
    ``"random"`` rows (drawn by weight), or an explicit k x d array."""
    xp = xp_of(X)
    dtype = X.dtype
    n = X.shape[0]
    if not isinstance(method, str):
        return xp.array(backend.to_host(method) if xp is np else method, dtype=dtype, copy=True)
    weights = xp.ones(n, np.float64) if w is None else xp.asarray(w, np.float64).reshape(-1)
    order = _canonical_order(X)
    wo = weights[order]
    if method == "random":
        p = np.asarray(backend.to_host(wo), np.float64)
        if np.count_nonzero(p) < k:
            raise ValueError(f"init='random' needs at least n_clusters={k} samples with a "
                             f"positive weight; got {np.count_nonzero(p)}")
        pick = rng.choice(n, k, replace=False, p=p / p.sum())
        return xp.ascontiguousarray(dense_rows(X, order[xp.asarray(pick)])).astype(dtype)
    trials = 2 + int(math.log(k))
    C = backend.empty((k, X.shape[1]), dtype, xp)
    xx = row_norms_sq(X)

    def draw(mass: Any, size: int) -> Any:
        cum = xp.cumsum(mass)
        r = xp.asarray(rng.random(size) * float(cum[-1]))
        return order[xp.minimum(xp.searchsorted(cum, r, side="right"), n - 1)]

    first = int(draw(wo, 1)[0])
    C[0] = dense_rows(X, slice(first, first + 1))[0]
    closest = sq_distances(X, C[0:1], xx)[:, 0].astype(np.float64)
    pot = float((weights * closest).sum())
    for c in range(1, k):
        cand = draw(wo if pot <= 0 else (weights * closest)[order], trials)
        Cc = dense_rows(X, cand).astype(dtype)
        Dc = xp.minimum(sq_distances(X, Cc, xx), closest[:, None])
        pots = (weights[:, None] * Dc).sum(axis=0)
        best = int(xp.argmin(pots))
        closest = xp.ascontiguousarray(Dc[:, best]).astype(np.float64)
        pot = float(pots[best])
        C[c] = Cc[best]
    return C
