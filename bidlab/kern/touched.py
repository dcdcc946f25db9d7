"""Sparse-gradient steps of ADAGrad and plain gradient ascent, over the rows a minibatch touches.

Why: a model whose update is ``U = X.T @ A`` for a sparse minibatch ``X`` (n x d) and a
dense ``A`` (n x T) -- a GLM's gradient, with ``A`` the loss gradient per margin -- touches
few of its d rows per minibatch (20 Newsgroups, 500 documents: ~8,300 of 39,115). Forming
``U`` densely writes all d x T elements and the updater then reads them all again: with
T = 640 (a sweep of 32 configurations x 20 classes) ~1 GB per minibatch. These steps
instead

1. list the minibatch's nonzeros by column (:class:`~bidlab.kern.columns.ColumnListing`:
   the touched rows in increasing order, and for each the nonzeros that hold it),
2. run one fused pass over the d model rows: a touched row gets its update row
   ``sum_p data[p] * A[row_of[p]]`` accumulated in a per-thread scratch row and the step
   applied at once; an untouched row has a zero data term, so it is updated with the
   regularisers' terms alone when some column has L1 or L2, and skipped when none has
   (exactly what the dense step does to it: ``u = 0`` changes neither ADAGrad's sum of
   squares nor the weight).

The formulas are :class:`bidlab.learn.updaters.ADAGrad`'s and ``Grad``'s with the
L1 / L2 mixins' terms (ascent convention: the model's score is maximised)::

    u = (X.T @ A)[i, c] - l1[c] * sign(w) - l2[c] * w        # w = M[i, c]
    S[i, c] += u * u                                          # ADAGrad only
    M[i, c] += u / (sqrt(S[i, c] * inv_t) + eps[c]) * lr[c] * scale    # ADAGrad
    M[i, c] += u * lr[c] * scale                              # Grad

``M`` and ``S`` are C-ordered d x T numpy arrays (a T x d column-major model matrix seen
transposed); the per-column vectors are 1-D of length T in ``M``'s dtype. Each model row
is computed by one thread, so the kernels go through
:func:`~bidlab.kern.adaptive.adaptive_kernel` (the split never changes a bit).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from bidlab import backend
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.columns import ColumnListing
from bidlab.kern.cpu import _add_listed_rows

__all__ = ["TouchedStep"]


@numba.njit(inline="always")
def _rows_of_part(d, t, nparts):  # pragma: no cover - compiled
    return d * t // nparts, d * (t + 1) // nparts


@numba.njit(inline="always")
def _data_term(i, pos, colptr, perm, row_of, data, A, reg, buf):  # pragma: no cover
    """Put row i's data term in buf; False when the row needs no update at all."""
    u = pos[i]
    if u >= 0:
        for c in range(buf.shape[0]):
            buf[c] = 0
        _add_listed_rows(buf, A, perm, row_of, data, colptr[u], colptr[u + 1])
        return True
    if reg:
        for c in range(buf.shape[0]):
            buf[c] = 0
        return True
    return False


@numba.njit(inline="always")
def _regularised(u, w, l1, l2):  # pragma: no cover - compiled
    if w > 0:
        u -= l1
    elif w < 0:
        u += l1
    return u - l2 * w


# Two kernels rather than one with an ``adagrad`` flag: the flag inside the inner loop
# measured 1.7x slower (19.6 vs 11.5 ms for the sweep's T = 640 step), LLVM did not split it.
@adaptive_kernel(fastmath=True, cache=True, nogil=True)
def _adagrad_touched(M, S, pos, colptr, perm, row_of, data, A, lr, l1, l2, eps, inv_t, scale,
                     reg, work):
    d, T = M.shape  # pragma: no cover - compiled
    nparts = work.shape[0]
    for t in prange(nparts):
        lo, hi = _rows_of_part(d, t, nparts)
        buf = work[t]
        for i in range(lo, hi):
            if _data_term(i, pos, colptr, perm, row_of, data, A, reg, buf):
                for c in range(T):
                    w = M[i, c]
                    u = _regularised(buf[c], w, l1[c], l2[c])
                    s = S[i, c] + u * u
                    S[i, c] = s
                    M[i, c] = w + u / (np.sqrt(s * inv_t) + eps[c]) * lr[c] * scale


@adaptive_kernel(fastmath=True, cache=True, nogil=True)
def _grad_touched(M, pos, colptr, perm, row_of, data, A, lr, l1, l2, scale, reg, work):
    d, T = M.shape  # pragma: no cover - compiled
    nparts = work.shape[0]
    for t in prange(nparts):
        lo, hi = _rows_of_part(d, t, nparts)
        buf = work[t]
        for i in range(lo, hi):
            if _data_term(i, pos, colptr, perm, row_of, data, A, reg, buf):
                for c in range(T):
                    w = M[i, c]
                    M[i, c] = w + _regularised(buf[c], w, l1[c], l2[c]) * lr[c] * scale


class TouchedStep:
    """The fused sparse-gradient step for one C-ordered numpy d x T model matrix.

    Owns the column listing and the per-thread scratch rows (allocated once; the listing's
    nonzero buffers grow with the largest minibatch). ``X`` is the n x d CSR minibatch
    (scipy matrix or SMat), ``A`` the n x T C-ordered dense factor.
    """

    def __init__(self, d: int, T: int, dtype: Any) -> None:
        self.d, self.T, self.dtype = int(d), int(T), np.dtype(dtype)
        self.columns = ColumnListing(self.d)
        self.nparts = max(1, min(self.d, 4 * numba.config.NUMBA_NUM_THREADS))
        self.work = backend.empty((self.nparts, self.T), self.dtype)

    def _check(self, X: Any, A: Any, M: Any) -> None:
        if X.data.dtype != M.dtype or A.dtype != M.dtype:  # before fill(): nothing listed yet
            raise TypeError(f"minibatch values are {X.data.dtype} and its factor {A.dtype} "
                            f"but the model is {M.dtype}: convert the data to {M.dtype}")

    def _run(self, X: Any, M: Any, reg: bool, call: Any) -> None:
        cols = self.columns
        nu = cols.fill(X)
        # the work the adaptive dispatch sorts by: update multiply-adds + updated weights
        work = float(X.indptr[-1]) * self.T + (M.size if reg else nu * self.T)
        try:
            call(work, cols)
        finally:
            cols.clear()

    def adagrad(self, X: Any, A: Any, M: Any, S: Any, lr: Any, l1: Any, l2: Any, eps: Any,
                inv_t: float, scale: float) -> None:
        """ADAGrad's step on M (and its sums of squares S) from ``X.T @ A``, in place."""
        self._check(X, A, M)
        reg = bool(l1.any() or l2.any())
        t = M.dtype.type

        def call(work: float, c: ColumnListing) -> None:
            _adagrad_touched(work, M, S, c.pos, c.colptr, c.perm, c.row_of, X.data, A, lr, l1,
                             l2, eps, t(inv_t), t(scale), reg, self.work)

        self._run(X, M, reg, call)

    def grad(self, X: Any, A: Any, M: Any, lr: Any, l1: Any, l2: Any, scale: float) -> None:
        """Plain gradient ascent on M from ``X.T @ A``, in place."""
        self._check(X, A, M)
        reg = bool(l1.any() or l2.any())

        def call(work: float, c: ColumnListing) -> None:
            _grad_touched(work, M, c.pos, c.colptr, c.perm, c.row_of, X.data, A, lr, l1, l2,
                          M.dtype.type(scale), reg, self.work)

        self._run(X, M, reg, call)
