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

from typing import Any

import numba
import numpy as np
import scipy.sparse as sp
from numba import prange

from bidlab.kern import arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.standin import stand_in

__all__ = ["in_edges", "pull_step", "source_weights"]


@numba.njit(cache=True, nogil=True)
def _in_edges(indptr, indices, data, in_ptr, in_src, in_w, out_w):  # pragma: no cover
    """The in-edge lists of the n x n CSR adjacency (``indptr``, ``indices``, ``data``) by
    a counting sort: ``in_ptr`` (n + 1) over targets, ``in_src`` the sources (increasing
    within a target, as scipy's ``tocsc`` lists them), ``in_w`` their weights; ``out_w``
    each vertex's out-weight, summed in float64 in index order. Returns whether every
    weight is 1."""
    n = out_w.shape[0]
    in_ptr[:] = 0
    for p in range(indptr[n]):
        in_ptr[indices[p] + 1] += 1
    for j in range(n):
        in_ptr[j + 1] += in_ptr[j]
    nxt = in_ptr[:n].copy()
    unit = True
    for i in range(n):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            q = nxt[j]
            nxt[j] = q + 1
            in_src[q] = i
            w = data[p]
            in_w[q] = w
            s += w
            if w != 1.0:
                unit = False
        out_w[i] = s
    return unit


@stand_in(_in_edges)
def _in_edges_arrays(indptr: Any, indices: Any, data: Any, in_ptr: Any, in_src: Any,
                     in_w: Any, out_w: Any) -> bool:
    """:func:`_in_edges` by scipy (run while it compiles)."""
    n = out_w.shape[0]
    nnz = int(indptr[n])
    A = sp.csr_matrix((data[:nnz], indices[:nnz], indptr), shape=(n, n), copy=False)
    C = A.tocsc()
    in_ptr[:], in_src[:], in_w[:] = C.indptr, C.indices, C.data
    out_w[:] = np.asarray(A.sum(axis=1, dtype=np.float64)).reshape(-1)
    return not bool((data[:nnz] != 1).any())


def in_edges(indptr: Any, indices: Any, data: Any, n: int) -> tuple[Any, Any, Any, Any]:
    """The in-edge lists of an n x n CSR adjacency (host arrays, canonical: no duplicate
    entries) and its out-weights.

    Returns ``(in_ptr, in_src, in_w, out_w)``: the adjacency's CSC (``in_ptr`` over
    target vertices, ``in_src`` the source vertices of each target's in-edges, in
    increasing order; ``in_w`` their weights, an empty array when every weight is 1) and
    ``out_w`` (n,) float64, the sum of each vertex's out-edge weights. One counting sort,
    O(n + nnz), in place of ``tocsc`` and a row sum.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.kern.pagerank import in_edges
    >>> indptr, indices = np.array([0, 2, 3, 3]), np.array([1, 2, 2])  # 0->1, 0->2, 1->2
    >>> in_ptr, in_src, in_w, out_w = in_edges(indptr, indices, np.ones(3), 3)
    >>> in_ptr.tolist(), in_src.tolist(), in_w.size, out_w.tolist()
    ([0, 0, 1, 3], [0, 0, 1], 0, [2.0, 1.0, 0.0])
    """
    nnz = int(indptr[n])
    in_ptr = np.empty(n + 1, dtype=indptr.dtype)
    in_src = np.empty(nnz, dtype=indices.dtype)
    in_w = np.empty(nnz, dtype=data.dtype)
    out_w = np.empty(n, dtype=np.float64)
    unit = _in_edges(indptr, indices, data, in_ptr, in_src, in_w, out_w)
    return in_ptr, in_src, (in_w[:0] if unit else in_w), out_w


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


@numba.njit(cache=True, nogil=True, inline="always")
def in_sum(indptr, indices, weights, y, j, weighted):  # pragma: no cover - compiled
    """``(W^T y)[j]``: vertex ``j``'s in-edge list summed in order (weights when
    ``weighted``, else 1 an edge); inlined into the iteration kernels."""
    s = 0.0
    lo, hi = indptr[j], indptr[j + 1]
    if weighted:
        for q in range(lo, hi):
            s += weights[q] * y[indices[q]]
    else:
        for q in range(lo, hi):
            s += y[indices[q]]
    return s


@adaptive_kernel(cache=True, nogil=True)
def pull_step(indptr, indices, weights, y, d, a, b, u, p, out):  # pragma: no cover - compiled
    """``out[j] = d * (W^T y)[j] + a * u[j] + b * p[j]`` over in-edge lists (module doc);
    every vector 1-D."""
    n = out.shape[0]
    weighted = weights.shape[0] > 0
    for j in prange(n):
        out[j] = d * in_sum(indptr, indices, weights, y, j, weighted) + a * u[j] + b * p[j]
    return out


stand_in(pull_step)(arrays.pull_step)  # run while it compiles (bidlab.kern.standin)
