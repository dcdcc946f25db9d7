"""The fused Lloyd step of k-means over a block of dense CPU rows (:func:`lloyd_block`).

Why one kernel: each thread takes a fixed share of the rows and, chunk by chunk (sized to
stay in the L2 cache), runs Hamerly's test, gathers the rows it cannot clear, multiplies
them by the centres (single-threaded SGEMM / DGEMM, distances transposed so that the search
for the nearest two vectorises), picks the two nearest centres and adds the rows to its own
cluster sums, so the distance block never leaves the cache. The unfused pieces, their
numpy oracles and the per-thread buffers (:class:`~bidlab.kern.kmeans.CenterWork`) are in
:mod:`bidlab.kern.kmeans`.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab.kern import arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.kmeans import _NO_WEIGHTS, CenterWork, _add_to_sums, _bounds_fail
from bidlab.kern.standin import stand_in
from bidlab.kern.threads import one_blas_thread

__all__ = ["farthest", "lloyd_block", "rows_first"]

@numba.njit(fastmath={"reassoc", "contract", "arcp", "nsz"}, cache=True, nogil=True,
            inline="always")
def _two_smallest_cols(DT, cc, m, b1, b2, j1):  # pragma: no cover - compiled
    # Per column r of the k x m block DT (X_chunk @ C.T, transposed): the index j1[r] and
    # value b1[r] of the smallest cc[j] - 2 DT[j, r] and the second smallest b2[r]. The
    # inner loop runs along a row of DT with min / max and one select, no branches, so it
    # vectorises (b1 <= b2 throughout: min(b2, max(b1, v)) is the new second smallest).
    inf = np.float32(np.inf)
    for r in range(m):
        b1[r] = inf
        b2[r] = inf
        j1[r] = 0
    for j in range(DT.shape[0]):
        row = DT[j]
        c = cc[j]
        for r in range(m):
            v = c - (row[r] + row[r])
            a1 = b1[r]
            b2[r] = min(b2[r], max(a1, v))
            j1[r] = j if v < a1 else j1[r]
            b1[r] = min(a1, v)


@numba.njit(inline="always")
def _distances(C, rows, DT, Et, rows_first):  # pragma: no cover - compiled
    """``DT = C @ rows.T`` (k x m), by that product or, with ``rows_first``, as
    ``rows @ C.T`` into the scratch ``Et`` and transposed (:func:`rows_first`)."""
    if rows_first:
        k, m = DT.shape
        E = Et[: m * k].reshape((m, k))
        np.dot(rows, C.T, E)
        for j in range(k):
            for r in range(m):
                DT[j, r] = E[r, j]
    else:
        np.dot(C, rows.T, DT)


@adaptive_kernel(fastmath={"reassoc", "contract", "arcp", "nsz"}, cache=True, nogil=True)
def _lloyd_cpu(X, C, cc, xx, xx_ready, labels, u, lo, w, part, pc, nparts, D, E, G, idx,
               B1, B2, J1, pruned, drift, s, top, m1, m2, sums, root, rows_first,
               stats):  # pragma: no cover - compiled
    n, d = X.shape
    k = C.shape[0]
    chunk = G.shape[1]
    weighted = w.shape[0] > 0
    step = (n + nparts - 1) // nparts
    for t in numba.prange(nparts):
        Dt = D[t]
        Et = E[t]
        Gt = G[t]
        it = idx[t]
        b1 = B1[t]
        b2 = B2[t]
        j1 = J1[t]
        P = part[t]
        changed = 0
        computed = 0
        end = min(n, (t + 1) * step)
        for a in range(t * step, end, chunk):
            b = min(a + chunk, end)
            m = b - a
            if not xx_ready:
                for i in range(a, b):
                    x = X[i]
                    acc = 0.0
                    for q in range(d):
                        acc += np.float64(x[q]) * x[q]
                    xx[i] = acc
            cnt = 0
            if pruned:  # Hamerly: move the bounds, list the rows they cannot clear
                for i in range(a, b):
                    if _bounds_fail(i, labels, u, lo, drift, s, top, m1, m2):
                        it[cnt] = i
                        cnt += 1
            else:
                cnt = m
            if cnt == 0:
                pass
            elif cnt == m:  # every row: multiply them in place, no gather
                for r in range(m):
                    it[r] = a + r
                DT = Dt[: k * m].reshape((k, m))
                _distances(C, X[a:b], DT, Et, rows_first)
            else:
                for r in range(cnt):
                    Gt[r, :] = X[it[r]]
                DT = Dt[: k * cnt].reshape((k, cnt))
                _distances(C, Gt[:cnt], DT, Et, rows_first)
            if cnt > 0:
                _two_smallest_cols(DT, cc, cnt, b1, b2, j1)
            for r in range(cnt):
                i = it[r]
                if labels[i] != j1[r]:
                    changed += 1
                labels[i] = j1[r]
                v1 = max(xx[i] + b1[r], 0.0)
                v2 = max(xx[i] + b2[r], 0.0)
                if root:
                    u[i] = np.sqrt(v1)
                    lo[i] = np.sqrt(v2)
                else:
                    u[i] = v1
                    lo[i] = v2
            computed += cnt
            if sums:
                for i in range(a, b):
                    _add_to_sums(P, pc, t, X, i, labels[i], w, weighted)
        stats[t, 0] = changed
        stats[t, 1] = computed


stand_in(_lloyd_cpu)(arrays.lloyd)  # run while it compiles (bidlab.kern.standin)


@numba.njit(cache=True, nogil=True)
def _farthest(dist, w, floor, out):  # pragma: no cover - compiled
    # The R = out.shape[0] largest dist[i] > floor (w[i] > 0 where weighted), ties to the
    # lower i: a kept set, its smallest entry replaced when a larger value comes.
    R = out.shape[0]
    weighted = w.shape[0] > 0
    cnt = 0
    low = 0  # slot of the smallest kept value (the later row among equals)
    thr = floor  # what a row must exceed: the floor, then the smallest kept value
    for i in range(dist.shape[0]):
        v = dist[i]
        if not v > thr or (weighted and not w[i] > 0):
            continue
        if cnt < R:
            out[cnt] = i
            cnt += 1
            if cnt < R:
                continue
        else:
            out[low] = i
        low = 0
        for r in range(1, R):
            a, b = dist[out[r]], dist[out[low]]
            if a < b or (a == b and out[r] > out[low]):
                low = r
        thr = dist[out[low]]
    return cnt


stand_in(_farthest)(arrays.farthest)


def farthest(dist: np.ndarray, w: Any, floor: float, R: int) -> np.ndarray:
    """Positions of the ``R`` largest values of ``dist`` (m,) above ``floor`` (fewer when
    fewer are), ties to the lower position; rows of weight ``w <= 0`` left out (``w``
    None: all count). One pass, no temporaries of the rows' size.

    Examples
    --------
    >>> import numpy as np
    >>> sorted(farthest(np.array([3.0, 1.0, 5.0, 3.0, 0.5]), None, 0.7, 2).tolist())
    [0, 2]
    """
    out = np.empty(max(int(R), 0), np.int64)
    ww = _NO_WEIGHTS if w is None else np.asarray(w, np.float64).reshape(-1)
    cnt = _farthest(dist, ww, float(floor), out)
    return out[: int(cnt)]


def rows_first(k: int, d: int) -> bool:
    """Whether a chunk's distances are multiplied as ``rows @ C.T`` (then transposed)
    rather than ``C @ rows.T``: for at most 16 centres and ``2 k <= d``. SciPy's OpenBLAS
    runs a product with few output rows (k) slowly; with the rows first and d long enough
    to pay for the transpose it is faster. One thread, 65,536 rows in
    :func:`lloyd_block`'s chunks, time rows-first / centres-first: d = 123: 0.57 (k = 8),
    0.70 (16), 0.78 (32), 1.12 (64); d = 256: 0.63 (8), 0.73 (16), 0.91 (64); d = 16:
    0.61 (8), 1.21 (16); d = 2: 2.0-8.0. In the fitted Lloyd pass (two threads, Hamerly's
    gathers, alternated): a9a k = 8 0.83, k = 32 0.92; 25,000 x 256 blobs k = 8 0.91 but
    k = 64 1.01-1.36, hence the bound on k.

    Examples
    --------
    >>> rows_first(8, 123), rows_first(32, 123), rows_first(8, 2)
    (True, False, False)
    """
    return k <= 16 and 2 * k <= d




def lloyd_block(X: np.ndarray, C: np.ndarray, cc: np.ndarray, xx: np.ndarray,
                labels: np.ndarray, u: np.ndarray, lo: np.ndarray, work: CenterWork,
                w: Any = None, *, xx_ready: bool = True, bounds: dict[str, Any] | None = None,
                sums: bool = True, root: bool = True) -> tuple[int, int]:
    """One Lloyd step over a block of dense CPU rows, fused: the nearest two centres of
    each row and (``sums``) its addition to ``work``'s per-thread cluster sums.

    ``X`` m x d C-ordered, ``C`` k x d centres (X's dtype), ``cc`` (k,) their squared
    norms; ``xx`` (m,) squared row norms, computed here unless ``xx_ready``. Writes
    ``labels`` and the distances to the nearest and second-nearest centres into ``u`` and
    ``lo`` (squared ones unless ``root``). With ``bounds`` (the keys of :func:`hamerly`'s
    arguments: ``drift``, ``s``, ``top``, ``m1``, ``m2``), ``u`` / ``lo`` hold Hamerly's
    bounds: they are moved first and only the rows they cannot clear are computed; a chunk
    whose every row needs it is multiplied in place, without the gather. ``w`` (m,) sample
    weights (None: all 1). Returns (labels changed, rows computed).

    Each chunk's distances come transposed (``C @ X_chunk.T``, k x chunk, or its
    transpose, :func:`rows_first`), so the search for the two smallest runs along
    contiguous rows and vectorises. The rows are split
    between ``work.nparts`` fixed shares whatever the threads, so the sums do not depend on
    how many threads ran. BLAS runs single-threaded inside (each thread multiplies its own
    chunks).
    """
    D, E, G, idx, B1, B2, J1, stats = work.blocks(X.dtype)
    ww = _NO_WEIGHTS if w is None else np.asarray(w, np.float64).reshape(-1)
    pruned = bounds is not None
    b = bounds or {"drift": cc, "s": cc, "top": 0, "m1": 0.0, "m2": 0.0}
    k, d = C.shape
    args = (X, np.ascontiguousarray(C), cc, xx, bool(xx_ready),
            labels, u, lo, ww, work.part, work.pc, work.nparts, D, E, G, idx, B1, B2, J1,
            pruned, b["drift"], b["s"], int(b["top"]), float(b["m1"]), float(b["m2"]),
            bool(sums), bool(root), rows_first(k, d), stats)
    with one_blas_thread(float(min(X.shape[0], G.shape[1])) * k * d):  # a chunk's product
        _lloyd_cpu(X.shape[0] * C.shape[0] * C.shape[1], *args)
    if sums:
        work.written()
    changed, computed = stats.sum(axis=0).tolist()
    return int(changed), int(computed)
