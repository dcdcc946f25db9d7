"""One PageRank iteration as one pass over the in-edges: numba on the CPU.

The graph is handed over as its in-edge lists (the adjacency's CSC: ``indptr`` over target
vertices, ``indices`` = source vertices, ``weights`` = edge weights, or an empty array
when every edge weighs 1). With ``y[i] = x[i] / out(i)`` (0 for a dangling source), one
call computes, for every target ``j``::

    out[j] = d * sum over in-edges (i -> j) of w_ij * y[i] + a * u[j] + b * p[j]

(``a`` = d times the dangling mass, ``b`` = (1 - d) times the total mass; ``u`` the
dangling and ``p`` the teleport distribution): the mat-vec, the dangling term and the
teleport in one pass, parallel over targets. Each target's sum is accumulated in float64
and written by one thread, so the result does not depend on the thread count. The serial
pass that forms ``y`` also measures the last iteration's L1 change, so an iteration reads
the scores once outside the mat-vec.
"""

from __future__ import annotations

import numba
from numba import prange

from bidlab.kern.adaptive import adaptive_kernel

__all__ = ["pull_step", "source_weights"]


@numba.njit(cache=True, nogil=True)
def source_weights(x, inv, y, prev):  # pragma: no cover - compiled
    """``y = x * inv`` (``inv``: 1 / out-weight, 0 for a dangling vertex) and ``prev = x``;
    returns the mass of ``x`` on dangling vertices, its total and the L1 change
    ``sum |x - prev|`` from the ``prev`` given, each summed in float64 in index order."""
    dangling = 0.0
    total = 0.0
    change = 0.0
    for i in range(x.shape[0]):
        xi = x[i]
        total += xi
        change += abs(xi - prev[i])
        prev[i] = xi
        if inv[i] == 0.0:
            dangling += xi
        y[i] = xi * inv[i]
    return dangling, total, change


@adaptive_kernel(cache=True, nogil=True)
def pull_step(indptr, indices, weights, y, d, a, b, u, p, out):  # pragma: no cover - compiled
    """``out[j] = d * (W^T y)[j] + a * u[j] + b * p[j]`` over in-edge lists (module doc);
    every vector 1-D."""
    n = out.shape[0]
    weighted = weights.shape[0] > 0
    for j in prange(n):
        s = 0.0
        lo, hi = indptr[j], indptr[j + 1]
        if weighted:
            for q in range(lo, hi):
                s += weights[q] * y[indices[q]]
        else:
            for q in range(lo, hi):
                s += y[indices[q]]
        out[j] = d * s + a * u[j] + b * p[j]
    return out
