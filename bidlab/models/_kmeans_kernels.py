"""k-means primitives: nearest two centres from a distance GEMM, and per-cluster sums.

Squared distances come from one GEMM, ``||x||^2 - 2 x.c + ||c||^2``; the caller computes
``D = X @ C.T`` (BLAS / cuBLAS) and these helpers finish the job. Each has a fused numba
kernel for the CPU and a generic ``xp`` version (numpy or CuPy) that the tests compare it
with. Numpy oracles::

    vals = cc[None, :] - 2 * D                    # ||x||^2 is the same for every centre
    labels = vals.argmin(1); d1 = max(xx + vals.min(1), 0); d2 = the second smallest + xx
    sums[j] = X[labels == j].sum(0); counts[j] = (labels == j).sum()
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab import backend
from bidlab.kern.adaptive import adaptive_kernel


@adaptive_kernel(fastmath=True, cache=True, nogil=True)
def _assign_cpu(D, cc, xx, labels, d1, d2):  # pragma: no cover - compiled
    m, k = D.shape
    for i in numba.prange(m):
        b1 = np.inf
        b2 = np.inf
        j1 = 0
        for j in range(k):
            v = cc[j] - 2.0 * D[i, j]
            if v < b1:
                b2 = b1
                b1 = v
                j1 = j
            elif v < b2:
                b2 = v
        labels[i] = j1
        d1[i] = max(xx[i] + b1, 0.0)
        d2[i] = max(xx[i] + b2, 0.0)


def assign(D: Any, cc: Any, xx: Any, labels: Any, d1: Any, d2: Any) -> None:
    """Nearest centre, its squared distance and the second-nearest's, per row of ``D``.

    ``D`` m x k = X @ C.T, ``cc`` (k,) squared centre norms, ``xx`` (m,) squared row norms;
    writes ``labels`` (m,) int64, ``d1`` / ``d2`` (m,) floats.
    """
    if isinstance(D, np.ndarray) and D.flags.c_contiguous:
        _assign_cpu(D.size, D, cc, xx, labels, d1, d2)
        return
    xp = backend.namespace(D)
    vals = cc[None, :] - 2.0 * D
    labels[...] = xp.argmin(vals, axis=1)
    if vals.shape[1] > 1:
        two = xp.partition(vals, 1, axis=1)[:, :2]
    else:
        two = xp.concatenate([vals, xp.full_like(vals, xp.inf)], axis=1)
    xp.maximum(two[:, 0] + xx, 0.0, out=d1)
    xp.maximum(two[:, 1] + xx, 0.0, out=d2)


@numba.njit(parallel=True, fastmath={"reassoc", "contract"}, cache=True, nogil=True)
def _sums_dense_cpu(X, labels, sums, counts, nparts):  # pragma: no cover - compiled
    # Each part adds its rows into a private k x d float64 block through 1-D row views
    # (contiguous, so the inner loop vectorises: 4x faster than 3-D indexing, measured).
    n, d = X.shape
    k = sums.shape[0]
    part = np.zeros((nparts, k, d), dtype=np.float64)
    pc = np.zeros((nparts, k), dtype=np.int64)
    step = (n + nparts - 1) // nparts
    for t in numba.prange(nparts):
        P = part[t]
        for i in range(t * step, min(n, (t + 1) * step)):
            j = labels[i]
            pc[t, j] += 1
            row = P[j]
            x = X[i]
            for c in range(d):
                row[c] += x[c]
    for j in numba.prange(k):
        out = sums[j]
        for t in range(nparts):
            counts[j] += pc[t, j]
            row = part[t, j]
            for c in range(d):
                out[c] += row[c]


@numba.njit(parallel=True, cache=True, nogil=True)
def _sums_csr_cpu(indptr, indices, data, labels, sums, counts, nparts):  # pragma: no cover
    n = indptr.shape[0] - 1
    k, d = sums.shape
    part = np.zeros((nparts, k, d), dtype=np.float64)
    pc = np.zeros((nparts, k), dtype=np.int64)
    step = (n + nparts - 1) // nparts
    for t in numba.prange(nparts):
        for i in range(t * step, min(n, (t + 1) * step)):
            j = labels[i]
            pc[t, j] += 1
            for p in range(indptr[i], indptr[i + 1]):
                part[t, j, indices[p]] += data[p]
    for j in numba.prange(k):
        for t in range(nparts):
            counts[j] += pc[t, j]
            for c in range(d):
                sums[j, c] += part[t, j, c]


def center_sums(X: Any, labels: Any, sums: Any, counts: Any) -> None:
    """Add each cluster's row sum to ``sums`` (k x d, float64) and its size to ``counts``."""
    k = sums.shape[0]
    if isinstance(sums, np.ndarray) and not backend.is_cupy_array(X):
        nparts = max(1, min(numba.get_num_threads(), X.shape[0]))
        if backend.is_sparse(X):
            _sums_csr_cpu(X.indptr, X.indices, X.data, labels, sums, counts, nparts)
        else:
            _sums_dense_cpu(np.ascontiguousarray(X), labels, sums, counts, nparts)
        return
    xp = backend.namespace(sums)
    csp = backend.sparse_module(xp)
    n = X.shape[0]
    onehot = csp.csr_matrix(
        (xp.ones(n, dtype=sums.dtype), labels, xp.arange(n + 1)), shape=(n, k)
    )
    part = onehot.T @ X
    sums += part.toarray() if backend.is_sparse(part) else part
    counts += xp.bincount(labels, minlength=k)
