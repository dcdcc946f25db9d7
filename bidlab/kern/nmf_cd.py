"""NMF's coordinate-descent sweeps (scikit-learn's ``solver="cd"``), numba on the CPU.

A sweep moves each component ``t = 0, 1, ..., k-1`` of a factor in turn to its exact
nonnegative minimiser with the others fixed, each step seeing the components before it as
already moved. Written as whole-array steps (one per component) it is ``k``
matrix-vector products, each streaming the whole factor through memory: ``k`` passes over
a factor of tens of megabytes (20 Newsgroups' 56,000 words x 64 components, float64, is
29 MB). But the entries of different rows (of ``W``) or columns (of ``H``) never meet in
a step, so the same steps, in the same order of ``t`` for every row, can run one row (or
one block of columns) at a time while it sits in the core's cache: one pass over the
factor, and the rows split between the threads. Only the dot products' summation order
differs from the whole-array form (float rounding).

* :func:`cd_rows`: ``W`` (m x k), from ``G = H H^T`` (k x k, symmetric) and
  ``B = X H^T``: ``W[i, t] <- max(0, W[i, t] - (W[i] . G[t] + l2 W[i, t] - B[i, t] + l1)
  / (G[t, t] + l2))``;
* :func:`cd_cols`: ``H`` (k x n, components as rows), from ``gram = W^T W`` (penalties
  folded in) and ``num = W^T X``: ``H[t, j] <- max(0, H[t, j] - (gram[t] . H[:, j] -
  num[t, j]) / gram[t, t])``, a block of :data:`COLUMN_BLOCK` columns at a time.

Their array-level stand-ins (the whole-array steps) run while numba compiles them.

Examples
--------
>>> import numpy as np
>>> from bidlab.kern.nmf_cd import cd_rows
>>> W, G, B = np.ones((3, 2)), np.array([[2.0, 1.0], [1.0, 2.0]]), np.full((3, 2), 6.0)
>>> cd_rows(W, G, B)      # row by row: t = 0 gives 2.5, then t = 1 gives 1.75
>>> W[0].tolist()
[2.5, 1.75]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import prange

from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.cpu import _FM
from bidlab.kern.standin import stand_in

__all__ = ["COLUMN_BLOCK", "cd_rows", "cd_cols"]

#: columns of ``H`` a thread takes at a time: k rows of them (k = 64: 128 KB in float64)
#: stay in the core's L2 while every component steps
COLUMN_BLOCK = 256


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _rows(W, G, B, l1, l2, nparts):  # pragma: no cover - compiled
    m, k = W.shape
    for p in prange(nparts):
        lo, hi = m * p // nparts, m * (p + 1) // nparts
        for i in range(lo, hi):
            for t in range(k):
                h = G[t, t] + l2
                if not h > 0.0:
                    continue
                s = W[i, 0] * G[t, 0]
                for r in range(1, k):
                    s += W[i, r] * G[t, r]
                g = (s + l2 * W[i, t] - B[i, t] + l1) * (1.0 / h)
                v = W[i, t] - g
                W[i, t] = v if v > 0.0 else 0.0


def _rows_arrays(W, G, B, l1, l2, nparts):
    """The whole-array form: one matrix-vector product per component."""
    g = np.empty(W.shape[0], W.dtype)
    for t in range(W.shape[1]):
        h = G[t, t] + l2
        if not h > 0.0:
            continue
        np.matmul(W, G[t], out=g)
        g += l2 * W[:, t] - B[:, t] + l1
        g *= 1.0 / h
        c = W[:, t]
        c -= g
        np.maximum(c, 0.0, out=c)


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _cols(H, gram, num, acc, block):  # pragma: no cover - compiled
    # one-dimensional views of the block's rows: unit stride, so the loops over the
    # block's columns vectorise (indexing H[r, j] directly ran ~4x slower)
    k, n = H.shape
    for b in prange((n + block - 1) // block):
        j0 = b * block
        j1 = min(n, j0 + block)
        w = j1 - j0
        a = acc[j0:j1]
        for t in range(k):
            h = gram[t, t]
            if not h > 0.0:
                continue
            nt = num[t, j0:j1]
            for j in range(w):
                a[j] = -nt[j]
            for r in range(k):
                c = gram[t, r]
                hr = H[r, j0:j1]
                for j in range(w):
                    a[j] += c * hr[j]
            inv = 1.0 / h
            ht = H[t, j0:j1]
            for j in range(w):
                v = ht[j] - a[j] * inv
                ht[j] = v if v > 0.0 else 0.0


def _cols_arrays(H, gram, num, acc, block):
    """The whole-array form: one vector-matrix product per component."""
    for t in range(H.shape[0]):
        h = gram[t, t]
        if not h > 0.0:
            continue
        np.matmul(gram[t], H, out=acc)
        acc -= num[t]
        acc *= 1.0 / h
        row = H[t]
        row -= acc
        np.maximum(row, 0.0, out=row)


stand_in(_rows)(_rows_arrays)  # run while the kernels compile in the background
stand_in(_cols)(_cols_arrays)


def cd_rows(W: Any, G: Any, B: Any, l1: float = 0.0, l2: float = 0.0) -> None:
    """One sweep of ``W``'s components in place (numpy arrays; see the module doc):
    ``W`` m x k, ``G = H H^T`` k x k (symmetric), ``B = X H^T`` m x k."""
    m, k = W.shape
    _check_factor(W, G, B, k, "W", "B")
    dt = W.dtype.type
    _rows(float(m) * k * k, W, G, B, dt(l1), dt(l2), max(1, min(m, 64)))


def cd_cols(H: Any, gram: Any, num: Any, acc: Any) -> None:
    """One sweep of ``H``'s rows (its components) in place (numpy arrays; see the module
    doc): ``H`` k x n, ``gram`` k x k, ``num`` k x n; ``acc``: scratch of n numbers of
    ``H``'s dtype."""
    k, n = H.shape
    _check_factor(H, gram, num, k, "H", "num")
    if acc.shape != (n,) or acc.dtype != H.dtype:
        raise ValueError(f"cd_cols: acc must hold {n} numbers of {H.dtype}; got "
                         f"{acc.shape} {acc.dtype}")
    _cols(float(n) * k * k, H, gram, num, acc, COLUMN_BLOCK)


def _check_factor(F: Any, G: Any, other_mat: Any, k: int, name: str, other: str) -> None:
    if not (isinstance(F, np.ndarray) and F.flags.c_contiguous and G.shape == (k, k)
            and other_mat.shape == F.shape and G.dtype == F.dtype):
        raise ValueError(f"coordinate descent of {name} {F.shape} ({F.dtype}) needs a "
                         f"C-contiguous numpy {name}, a {k} x {k} Gram matrix and {other} "
                         f"of {name}'s shape, all of {name}'s dtype; got {G.shape} "
                         f"({G.dtype})")
