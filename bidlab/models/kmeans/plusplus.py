"""Greedy k-means++ on dense CPU rows, with the first assignment as a by-product; and k-means||.

:func:`kmeanspp` runs the seeding of :func:`~bidlab.models.kmeans.seeding.greedy_seeds`
(:func:`local_trials` candidates a step, the one that lowers the potential most kept) on the
kernels of :mod:`bidlab.kern.kmeans_seed`: one pass over the rows a step, parallel over
fixed blocks, rows of clusters already seeded skipped by the triangle inequality (once
the last step showed that pays: :func:`~bidlab.kern.kmeans_seed.should_prune`), and the
draw of the next candidates read from per-block sums instead of a running sum over every
row. The first step copies the rows in the sampling order as it reads them, so the later
steps read memory front to back. The same draws from ``rng`` give the same seeds as
``greedy_seeds``.

What the seeding learns on the way is handed on (:class:`Seeding`): each row's nearest
seed and its distance, and a lower bound on the distance to the second-nearest. Lloyd's
first pass starts from them as Hamerly's bounds, so it computes almost no distances.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from bidlab.kern.kmeans_seed import accept, blocks, draw, seed_distances, should_prune, trials

__all__ = ["COPY_LIMIT", "Seeding", "kmeans_parallel", "kmeanspp", "local_trials"]

#: largest data (bytes) that :func:`kmeanspp` copies in its sampling order (the copy costs
#: as much memory again); larger data is gathered along the order at every step instead
COPY_LIMIT = 1 << 30


def local_trials(k: int) -> int:
    """Candidates greedy k-means++ draws a step: ``2 + int(2 ln k)`` (scikit-learn draws
    ``2 + int(ln k)``). The extra candidates cost a share of the seeding's passes and make
    a start that leaves a cluster unseeded rarer: on 100,000 x 32 blobs with k = 8, 0 of
    20 seeds ended more than 1 % above scikit-learn's inertia (4 of 20 with ``ln k``).

    Examples
    --------
    >>> [local_trials(k) for k in (2, 8, 64, 256)]
    [3, 6, 10, 13]
    """
    return 2 + int(2.0 * math.log(k))


@dataclasses.dataclass
class Seeding:
    """Initial centres and, when the seeding measured them, the rows' first assignment.

    Attributes
    ----------
    centers
        k x d initial centres.
    labels
        (n,) each row's nearest centre (None: not known).
    upper
        (n,) the distance to it (exact).
    lower
        (n,) a lower bound on the distance to the second-nearest centre.
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
    t = local_trials(k)
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
    # the first step reads the rows along the order and keeps them so (when the copy fits
    # the budget): the later steps read them front to back instead of gathering them
    Xo = np.empty_like(X) if X.nbytes <= COPY_LIMIT else None
    trials(X, order, wo, closest, label, Ct, np.zeros((1, 1)), D, gains, copy_to=Xo,
           prune=False)  # nothing to rule out yet
    rows, along = (X, order) if Xo is None else (Xo, order[:0])
    accept(0, 0, D, np.zeros((1, 1)), wo, closest, second, label, mass)
    S[0] = Ct[0]
    sc2 = np.empty((t, k))
    ruled_out = 0.0
    for s in range(1, k):
        total = float(mass.sum())
        if total > 0:
            draw(rng.random(t) * total, mass, closest, wo, cand)
        else:  # every row is a seed's copy: any row will do
            cand[:] = _by_weight(wo, n, t, rng)
        Ct = np.ascontiguousarray(X[order[cand]])
        seed_distances(Ct, S[:s], sc2[:, :s])
        ruled_out = trials(rows, along, wo, closest, label, Ct, sc2[:, :s], D, gains,
                           prune=should_prune(ruled_out, d))
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


def kmeans_parallel(X: Any, k: int, rng: np.random.Generator, order: Any, w: Any = None,
                    rounds: int = 5, oversample: float = 2.0) -> np.ndarray:
    """k-means|| (Bahmani et al., 2012): ``rounds`` passes that each add every row with
    probability ``min(1, oversample k w d^2 / potential)`` to a candidate set, then greedy
    k-means++ (:func:`kmeanspp`) on the candidates, each weighted by the rows nearest to it.

    ``X`` dense or CSR, numpy or CuPy; rows are drawn along ``order``. Returns the k x d
    centres on the host.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.datasets import blobs
    >>> X = blobs(3000, 2, 5, seed=0).X
    >>> kmeans_parallel(X, 5, np.random.default_rng(0), np.arange(3000)).shape
    (5, 2)
    """
    from bidlab import backend
    from bidlab.models.kmeans.distances import dense_rows, nearest, xp_of

    xp = xp_of(X)
    n = X.shape[0]
    weights = xp.ones(n, np.float64) if w is None else xp.asarray(w, np.float64).reshape(-1)
    order = xp.asarray(order)
    first = _by_weight(np.asarray(backend.to_host(weights[order])), n, 1, rng)
    picked = [order[xp.asarray(first)]]
    cand = xp.ascontiguousarray(dense_rows(X, picked[0]))
    owner, closest = nearest(X, cand)
    closest = closest.astype(np.float64)
    count = 1
    for _ in range(rounds):
        mass = weights * closest
        phi = float(mass.sum())
        if phi <= 0:
            break
        p = xp.minimum(1.0, oversample * k * mass / phi)
        u = xp.asarray(rng.random(n))
        new = order[xp.nonzero(u < p[order])[0]]
        if int(new.shape[0]) == 0:
            continue
        C = xp.ascontiguousarray(dense_rows(X, new)).astype(X.dtype)
        lab, dist = nearest(X, C)
        better = dist < closest
        closest = xp.where(better, dist, closest)
        owner = xp.where(better, lab + count, owner)
        picked.append(new)
        cand = xp.concatenate([cand, C])
        count += int(new.shape[0])
    cw = xp.bincount(owner, weights=weights, minlength=count)
    cand_h = np.ascontiguousarray(backend.to_host(cand), dtype=X.dtype)
    cw_h = np.asarray(backend.to_host(cw), np.float64)
    if int(np.count_nonzero(cw_h)) < k:  # fewer distinct places than clusters
        cw_h = np.maximum(cw_h, 1e-12)
    return kmeanspp(cand_h, k, rng, np.arange(count), cw_h).centers
