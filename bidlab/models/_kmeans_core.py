"""k-means training: initialisation, full-batch Lloyd (with exact pruning) and minibatch.

Distances are ``||x||^2 - 2 x.c + ||c||^2`` with the cross term from one GEMM per chunk
of rows through the matrix core (``bidlab.matmul`` for dense data, ``sparse_dense`` for
CSR), so an iteration runs at the machine's GEMM speed.

**Pruning (``bounds=True``).** Hamerly's bounds make later iterations nearly free without
changing assignments (beyond float32 ties, below): each point keeps an upper bound ``u``
on the distance to its centre and a lower bound ``l`` on the distance to any other; when
centres move by
``p_j``, ``u += p_a`` and ``l -= max_j p_j``. A point whose ``u`` is at most
``max(l, s_a)`` (``s_a``: half the distance from its centre to the nearest other centre)
provably keeps its centre, so only the rest -- gathered into one block -- go through the
GEMM. In float64 results equal plain Lloyd's exactly (the tests check it); in float32 a
point tied to within SGEMM rounding may go to the other centre, since the pruned subset's
product rounds differently from the full one. The bounds only skip work.

Every backend-specific step is in :mod:`._kmeans_kernels`; the code here is written once
for numpy and CuPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.models._kmeans_kernels import assign, center_sums

CHUNK_ENTRIES = 1 << 22  # rows per GEMM chunk = this / k (16 MiB of float32 distances)


@dataclass
class KMeansResult:
    centers: Any
    labels: Any
    inertia: float
    n_iter: int
    distance_evaluations: int  # point-centre distances computed by GEMM (pruning skips some)


def row_norms_sq(X: Any) -> Any:
    """Squared L2 norm of every row (dense or CSR)."""
    xp = backend.namespace(X.data if backend.is_sparse(X) else X)
    if backend.is_sparse(X):
        sq = X.copy()
        sq.data = sq.data * sq.data
        return xp.asarray(sq.sum(axis=1)).reshape(-1).astype(X.dtype)
    return xp.einsum("ij,ij->i", X, X)


class Distances:
    """Nearest / second-nearest centre for any set of rows, by chunked GEMM."""

    def __init__(self, X: Any, xx: Any, k: int) -> None:
        self.X, self.xx, self.k = X, xx, k
        self.sparse = backend.is_sparse(X)
        self.xp = backend.namespace(X.data if self.sparse else X)
        self.chunk = max(1, CHUNK_ENTRIES // max(k, 1))
        rows = min(self.chunk, X.shape[0])
        self.D = backend.empty((rows, k), X.dtype, self.xp)
        self.CT: bl.Mat | None = None
        self.cc: Any = None
        self.evaluations = 0

    def set_centers(self, C: Any) -> None:
        xp = self.xp
        if self.CT is None:
            self.CT = bl.Mat(backend.empty((C.shape[1], C.shape[0]), C.dtype, xp))
        self.CT.data[...] = C.T
        self.cc = xp.einsum("ij,ij->i", C, C)

    def nearest(self, labels: Any, d1: Any, d2: Any, idx: Any | None = None) -> None:
        """Fill labels / d1 / d2 for all rows (``idx`` None) or the rows ``idx``."""
        n = self.X.shape[0] if idx is None else int(idx.shape[0])
        for a in range(0, n, self.chunk):
            b = min(n, a + self.chunk)
            m = b - a
            if idx is None:
                Xc, xx, sel = self.X[a:b], self.xx[a:b], slice(a, b)
            else:
                sel = idx[a:b]
                Xc, xx = self.X[sel], self.xx[sel]
            D = bl.Mat(self.D[:m])
            if self.sparse:
                bl.sparse_dense(bl.SMat(Xc), self.CT, out=D)
            else:
                bl.matmul(bl.Mat(Xc), self.CT, out=D)
            if idx is None:
                assign(D.data, self.cc, xx, labels[sel], d1[sel], d2[sel])
            else:
                lab, e1, e2 = labels[sel], d1[sel], d2[sel]
                assign(D.data, self.cc, xx, lab, e1, e2)
                labels[sel], d1[sel], d2[sel] = lab, e1, e2
            self.evaluations += m * self.k


def _tolerance(X: Any, tol: float) -> float:
    """scikit-learn's absolute tolerance: tol times the mean per-feature variance."""
    if tol == 0:
        return 0.0
    if backend.is_sparse(X):
        xp = backend.namespace(X.data)
        mean = xp.asarray(X.mean(axis=0)).reshape(-1)
        sq = X.copy()
        sq.data = sq.data * sq.data
        var = xp.asarray(sq.mean(axis=0)).reshape(-1) - mean * mean
        return float(var.mean()) * tol
    return float(X.var(axis=0).mean()) * tol


def _dense_rows(X: Any, idx: Any) -> Any:
    rows = X[idx]
    return rows.toarray() if backend.is_sparse(rows) else rows


def init_centers(X: Any, xx: Any, k: int, method: Any, rng: np.random.Generator) -> Any:
    """k initial centres: ``"k-means++"`` (greedy, 2 + log k trials), ``"random"`` rows,
    or an explicit k x d array."""
    sparse = backend.is_sparse(X)
    xp = backend.namespace(X.data if sparse else X)
    n = X.shape[0]
    if not isinstance(method, str):
        return xp.array(method, dtype=X.dtype, copy=True)
    if method == "random":
        return xp.ascontiguousarray(_dense_rows(X, xp.asarray(rng.choice(n, k, replace=False))))
    trials = 2 + int(math.log(k))
    C = backend.empty((k, X.shape[1]), X.dtype, xp)
    first = int(rng.integers(n))
    C[0] = _dense_rows(X, slice(first, first + 1))[0]
    closest = _sq_dist_to(X, xx, C[0:1])[:, 0]
    pot = float(closest.sum())
    for c in range(1, k):
        if pot <= 0:  # every point sits on a centre already: any row will do
            cand = xp.asarray(rng.integers(0, n, size=trials))
        else:
            r = xp.asarray(rng.random(trials) * pot)
            cand = xp.minimum(xp.searchsorted(xp.cumsum(closest), r), n - 1)
        Cc = _dense_rows(X, cand)
        Dc = xp.minimum(_sq_dist_to(X, xx, Cc), closest[:, None])
        pots = Dc.sum(axis=0)
        best = int(xp.argmin(pots))
        closest = xp.ascontiguousarray(Dc[:, best])
        pot = float(pots[best])
        C[c] = Cc[best]
    return C


def _sq_dist_to(X: Any, xx: Any, C: Any) -> Any:
    """n x m squared distances from every row of X to the rows of dense C."""
    xp = backend.namespace(C)
    CT = bl.Mat(xp.ascontiguousarray(C.T))
    cross = bl.sparse_dense(bl.SMat(X), CT) if backend.is_sparse(X) else bl.matmul(bl.Mat(X), CT)
    D = cross.data
    D *= -2.0
    D += xx[:, None]
    D += xp.einsum("ij,ij->i", C, C)[None, :]
    xp.maximum(D, 0.0, out=D)
    return D


def _update_centers(
    X: Any, labels: Any, C: Any, far: Any, rng: np.random.Generator
) -> tuple[Any, int]:
    """New centres = cluster means; an empty cluster takes the farthest point (re-seeded).

    ``far`` (n,) are distances used to rank points for re-seeding; returns (C, n_empty).
    """
    xp = backend.namespace(C)
    k, d = C.shape
    sums = backend.zeros((k, d), np.float64, xp)
    counts = backend.zeros((k,), np.int64, xp)
    center_sums(X, labels, sums, counts)
    empty = xp.flatnonzero(counts == 0)
    n_empty = int(empty.shape[0])
    if n_empty:
        order = xp.argsort(-far)
        taken = 0
        for j in backend.to_host(empty).tolist():
            # the farthest point whose cluster can spare it
            while taken < order.shape[0]:
                i = int(order[taken])
                taken += 1
                old = int(labels[i])
                if counts[old] > 1:
                    break
            row = _dense_rows(X, slice(i, i + 1))[0].astype(np.float64)
            sums[old] -= row
            counts[old] -= 1
            sums[j] = row
            counts[j] = 1
            labels[i] = j
    C[...] = (sums / xp.maximum(counts, 1)[:, None]).astype(C.dtype)
    return C, n_empty


def lloyd(
    X: Any,
    C: Any,
    *,
    max_iter: int,
    tol: float,
    bounds: bool,
    rng: np.random.Generator,
) -> KMeansResult:
    """Full-batch Lloyd iterations from centres ``C`` (k x d, updated in place)."""
    sparse = backend.is_sparse(X)
    xp = backend.namespace(X.data if sparse else X)
    n, k = X.shape[0], C.shape[0]
    xx = row_norms_sq(X)
    tol_abs = _tolerance(X, tol)
    dist = Distances(X, xx, k)
    labels = backend.empty((n,), np.int64, xp)
    prev = backend.empty((n,), np.int64, xp)
    d1 = backend.empty((n,), X.dtype, xp)
    d2 = backend.empty((n,), X.dtype, xp)
    dist.set_centers(C)
    dist.nearest(labels, d1, d2)
    u = xp.sqrt(d1) if bounds else None
    lo = xp.sqrt(d2) if bounds else None
    n_iter = 0
    while n_iter < max_iter:
        far = u if bounds else d1
        old = C.copy()
        C, _ = _update_centers(X, labels, C, far, rng)
        n_iter += 1
        drift = xp.sqrt(((C.astype(np.float64) - old) ** 2).sum(axis=1))
        shift = float((drift**2).sum())
        dist.set_centers(C)
        prev[...] = labels
        if bounds:
            _prune_step(dist, C, drift, labels, u, lo, d1, d2)
        else:
            dist.nearest(labels, d1, d2)
        if bool((labels == prev).all()) or shift <= tol_abs:
            break  # the labels already belong to the final centres
    inertia = _inertia(X, xx, C, labels)
    return KMeansResult(C, labels, inertia, n_iter, dist.evaluations)


def _prune_step(
    dist: Distances, C: Any, drift: Any, labels: Any, u: Any, lo: Any, d1: Any, d2: Any
) -> None:
    """Hamerly's bound update and the exact re-assignment of the points it cannot clear."""
    xp = dist.xp
    k = C.shape[0]
    drift = drift.astype(u.dtype)
    u += drift[labels]
    if k > 1:
        top = xp.argsort(-drift)[:2]
        m1, m2 = drift[top[0]], drift[top[1]]
        lo -= xp.where(labels == top[0], m2, m1)
    # s_j: half the distance from centre j to its nearest other centre
    cd = _sq_dist_to(C, dist.cc, C)
    cd[xp.arange(k), xp.arange(k)] = xp.inf
    s = 0.5 * xp.sqrt(cd.min(axis=1)) if k > 1 else xp.full((1,), xp.inf, dtype=u.dtype)
    # float32 distances from the GEMM formula carry rounding error: keep a small margin
    slack = 1e-3 * (u + 1e-12)
    need = xp.flatnonzero(u + slack > xp.maximum(s[labels], lo))
    if need.shape[0]:
        dist.nearest(labels, d1, d2, need)
        u[need] = xp.sqrt(d1[need])
        lo[need] = xp.sqrt(d2[need])


def _inertia(X: Any, xx: Any, C: Any, labels: Any) -> float:
    """Sum of squared distances from each point to its centre, computed directly."""
    xp = backend.namespace(C)
    if backend.is_sparse(X):
        cc = xp.einsum("ij,ij->i", C, C)
        CT = bl.Mat(xp.ascontiguousarray(C.T))
        total = 0.0
        step = max(1, CHUNK_ENTRIES // C.shape[0])
        for a in range(0, X.shape[0], step):
            D = bl.sparse_dense(bl.SMat(X[a : a + step]), CT).data
            lab = labels[a : a + step]
            cross = xp.take_along_axis(D, lab[:, None], axis=1)[:, 0]
            total += float(xp.maximum(xx[a : a + step] - 2 * cross + cc[lab], 0).sum())
        return total
    total = 0.0
    step = max(1, CHUNK_ENTRIES // X.shape[1])
    for a in range(0, X.shape[0], step):
        diff = X[a : a + step] - C[labels[a : a + step]]
        total += float(xp.einsum("ij,ij->", diff, diff, dtype=np.float64))
    return total


REASSIGN_EVERY = 10  # minibatch steps between re-seedings of starved centres
REASSIGN_RATIO = 0.01  # a centre is starved below this fraction of the busiest one's count


def _reassign(C: Any, seen: Any, Xb: Any, d1: Any, rng: np.random.Generator) -> None:
    """Move starved centres (few points ever) to batch points drawn with probability
    proportional to their squared distance (k-means++ style), as scikit-learn's
    MiniBatchKMeans does; without this, two centres started in one blob stay there."""
    xp = backend.namespace(C)
    starved = xp.flatnonzero(seen < REASSIGN_RATIO * seen.max())
    m = int(starved.shape[0])
    if m == 0 or m > Xb.shape[0] // 2:
        return
    p = np.asarray(backend.to_host(d1), dtype=np.float64)
    if p.sum() <= 0:
        return
    pick = rng.choice(Xb.shape[0], m, replace=False, p=p / p.sum())
    C[starved] = _dense_rows(Xb, xp.asarray(pick))
    rest = seen[seen >= REASSIGN_RATIO * seen.max()]
    seen[starved] = rest.min() if rest.shape[0] else 1


def minibatch(
    X: Any,
    C: Any,
    *,
    max_iter: int,
    batch_size: int,
    rng: np.random.Generator,
) -> KMeansResult:
    """Minibatch k-means (Sculley 2010): per-centre step 1 / (points seen so far)."""
    sparse = backend.is_sparse(X)
    xp = backend.namespace(X.data if sparse else X)
    n, k = X.shape[0], C.shape[0]
    xx = row_norms_sq(X)
    b = min(batch_size, n)
    seen = backend.zeros((k,), np.int64, xp)
    labels = backend.empty((b,), np.int64, xp)
    d1 = backend.empty((b,), X.dtype, xp)
    d2 = backend.empty((b,), X.dtype, xp)
    steps = max_iter * -(-n // b)
    evals = 0
    for it in range(steps):
        idx = xp.asarray(np.sort(rng.choice(n, b, replace=False)))
        Xb = X[idx]
        dist = Distances(Xb, xx[idx], k)
        dist.set_centers(C)
        dist.nearest(labels, d1, d2)
        evals += dist.evaluations
        sums = backend.zeros((k, X.shape[1]), np.float64, xp)
        counts = backend.zeros((k,), np.int64, xp)
        center_sums(Xb, labels, sums, counts)
        seen += counts
        hit = counts > 0
        step = xp.where(hit, counts / xp.maximum(seen, 1), 0.0)[:, None]
        mean = sums / xp.maximum(counts, 1)[:, None]
        C += (step * (mean - C)).astype(C.dtype)
        if (it + 1) % REASSIGN_EVERY == 0 and it + 1 < steps:
            _reassign(C, seen, Xb, d1, rng)
    full = backend.empty((n,), np.int64, xp)
    e1 = backend.empty((n,), X.dtype, xp)
    e2 = backend.empty((n,), X.dtype, xp)
    dist = Distances(X, xx, k)
    dist.set_centers(C)
    dist.nearest(full, e1, e2)
    return KMeansResult(C, full, _inertia(X, xx, C, full), steps, evals + dist.evaluations)
