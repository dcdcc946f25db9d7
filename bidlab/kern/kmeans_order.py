"""The canonical order of dense CPU rows for k-means seeding, in two numba kernels.

The seeding draws along an order of the rows that depends only on their values: each
row's projection on a fixed direction, sorted (ties kept in row order). Two kernels make
it without a float64 copy of the rows or a comparison sort:

* :func:`project`: each row's dot product with the direction, accumulated in float64 in
  feature order (the same bits on any thread count and any BLAS);
* :func:`stable_argsort`: a stable least-significant-digit radix sort of the float64
  projections (8-bit digits of their order-preserving integer form; a digit every
  value shares is skipped), equal to ``np.argsort(p, kind="stable")``.

Oracles: ``X.astype(np.float64) @ r`` and ``np.argsort(p, kind="stable")`` (the
stand-ins in :mod:`bidlab.kern.kmeans_seed_arrays`).
"""

from __future__ import annotations

import numba
import numpy as np

from bidlab.kern import kmeans_seed_arrays as arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.standin import stand_in

__all__ = ["project", "stable_argsort"]

#: bits per radix pass: 256 buckets, few enough that a pass's scattered writes stay in the
#: cache and the TLB
_DIGIT = 8
_PASSES = 8  # 8 x 8 = 64


@adaptive_kernel(cache=True, nogil=True)
def _project(X, r, out):  # pragma: no cover - compiled
    n, d = X.shape
    for i in numba.prange(n):
        x = X[i]
        acc = 0.0
        for q in range(d):
            acc += np.float64(x[q]) * r[q]
        out[i] = acc


@numba.njit(cache=True, nogil=True)
def _stable_argsort(p, out):  # pragma: no cover - compiled
    n = p.shape[0]
    nb = 1 << _DIGIT
    mask = np.uint64(nb - 1)
    sign = np.uint64(1) << np.uint64(63)
    keys = np.empty(n, np.uint64)
    bits = (p + 0.0).view(np.uint64)  # -0.0 sorts with 0.0
    for i in range(n):
        b = bits[i]
        keys[i] = ~b if (b & sign) != 0 else b | sign  # order-preserving unsigned form
    counts = np.zeros((_PASSES, nb), np.int64)
    for i in range(n):
        k = keys[i]
        for s in range(_PASSES):
            counts[s, (k >> np.uint64(s * _DIGIT)) & mask] += 1
    idx = np.arange(n)
    keys2 = np.empty(n, np.uint64)
    idx2 = np.empty(n, np.int64)
    for s in range(_PASSES):
        c = counts[s]
        shared = False
        for j in range(nb):
            if c[j] == n:
                shared = True
                break
        if shared:  # every value has this digit: the pass would not move anything
            continue
        start = np.empty(nb, np.int64)
        acc = 0
        for j in range(nb):
            start[j] = acc
            acc += c[j]
        shift = np.uint64(s * _DIGIT)
        for i in range(n):
            k = keys[i]
            j = (k >> shift) & mask
            pos = start[j]
            start[j] = pos + 1
            keys2[pos] = k
            idx2[pos] = idx[i]
        keys, keys2 = keys2, keys
        idx, idx2 = idx2, idx
    out[:] = idx


stand_in(_project)(arrays.project)
stand_in(_stable_argsort)(arrays.stable_argsort)


def project(X: np.ndarray, r: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Each row of the dense C-ordered ``X`` (n x d) dotted with ``r`` (d,), float64 (n,).

    Examples
    --------
    >>> import numpy as np
    >>> project(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), np.array([1.0, -1.0]))
    array([-1., -1.])
    """
    out = np.empty(X.shape[0], np.float64) if out is None else out
    _project(float(X.shape[0]) * X.shape[1], X, np.ascontiguousarray(r, np.float64), out)
    return out


def stable_argsort(p: np.ndarray) -> np.ndarray:
    """``np.argsort(p, kind="stable")`` of a float64 vector without NaNs, by radix sort.

    Examples
    --------
    >>> import numpy as np
    >>> stable_argsort(np.array([0.5, -2.0, 0.5, -0.0, 0.0])).tolist()
    [1, 3, 4, 0, 2]
    """
    out = np.empty(p.shape[0], np.int64)
    _stable_argsort(np.ascontiguousarray(p, np.float64), out)
    return out
