"""Greedy k-means++ on dense CPU rows, with the first assignment as a by-product.

:func:`kmeanspp` runs the seeding of :func:`~bidlab.models.kmeans.seeding.greedy_seeds`
(``2 + log k`` candidates a step, the one that lowers the potential most kept) on the
kernels of :mod:`bidlab.kern.kmeans_seed`: one pass over the rows a step, parallel over
fixed blocks, rows of clusters already seeded skipped by the triangle inequality, and the
draw of the next candidates read from per-block sums instead of a running sum over every
row. The same draws from ``rng`` give the same seeds as ``greedy_seeds``.

What the seeding learns on the way is handed on (:class:`Seeding`): each row's nearest
seed and its distance, and a lower bound on the distance to the second-nearest. Lloyd's
first pass starts from them as Hamerly's bounds, so it computes almost no distances.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from bidlab.kern.kmeans_seed import accept, blocks, draw, seed_distances, trials

__all__ = ["Seeding", "kmeanspp"]


@dataclasses.dataclass
class Seeding:
    """Initial centres and, when the seeding measured them, the rows' first assignment.

    Attributes:
        centers: k x d initial centres.
        labels: (n,) each row's nearest centre (None: not known).
        upper: (n,) the distance to it (exact).
        lower: (n,) a lower bound on the distance to the second-nearest centre.
    """

    centers: Any
    labels: Any = None
    upper: Any = None
    lower: Any = None


def kmeanspp(X: np.ndarray, k: int, rng: np.random.Generator, order: np.ndarray,
             w: np.ndarray | None = None) -> Seeding:
    """Greedy k-means++ seeds of the dense C-ordered rows ``X`` (n x d, float32 / float64),
    drawn along the positions ``order`` (a permutation of the rows) with weights ``w``.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.datasets import blobs
    >>> X = blobs(2000, 3, 4, seed=0).X
    >>> s = kmeanspp(X, 4, np.random.default_rng(0), np.arange(2000))
    >>> s.centers.shape, s.labels.shape
    ((4, 3), (2000,))
    """
    n, d = X.shape
    wo = np.empty(0, np.float64) if w is None else np.ascontiguousarray(
        np.asarray(w, np.float64).reshape(-1)[order])
    t = 2 + int(math.log(k))
    closest = np.full(n, np.inf)
    second = np.full(n, np.inf)
    label = np.zeros(n, np.int64)
    D = np.empty((t, n), X.dtype)
    gains = np.zeros((blocks(n), t))
    mass = np.zeros(blocks(n))
    S = np.empty((k, d), X.dtype)
    cand = np.zeros(t, np.int64)

    first = _by_weight(wo, n, 1, rng)
    Ct = X[order[first]]
    trials(X, order, wo, closest, label, Ct, np.zeros((1, 1)), D, gains)
    accept(0, 0, D, np.zeros((1, 1)), wo, closest, second, label, mass)
    S[0] = Ct[0]
    sc2 = np.empty((t, k))
    for s in range(1, k):
        total = float(mass.sum())
        if total > 0:
            draw(rng.random(t) * total, mass, closest, wo, cand)
        else:  # every row is a seed's copy: any row will do
            cand[:] = _by_weight(wo, n, t, rng)
        Ct = np.ascontiguousarray(X[order[cand]])
        seed_distances(Ct, S[:s], sc2[:, :s])
        trials(X, order, wo, closest, label, Ct, sc2[:, :s], D, gains)
        best = int(np.argmax(gains.sum(axis=0)))
        accept(best, s, D, sc2[:, :s], wo, closest, second, label, mass)
        S[s] = Ct[best]
    labels = np.empty(n, np.int64)
    labels[order] = label
    upper = np.empty(n, X.dtype)
    upper[order] = np.sqrt(closest)
    lower = np.empty(n, X.dtype)
    lower[order] = np.sqrt(second)
    return Seeding(S, labels, upper, lower)


def _by_weight(wo: np.ndarray, n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` positions drawn with probability proportional to the weights."""
    cum = np.cumsum(wo) if wo.shape[0] else np.arange(1, n + 1, dtype=np.float64)
    r = rng.random(size) * float(cum[-1])
    return np.minimum(np.searchsorted(cum, r, side="right"), n - 1)
