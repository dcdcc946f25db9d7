"""A CSR matrix's nonzeros listed by column, in buffers reused from call to call.

Why: the products that push CSR rows into the rows of a d x k output -- ``S.T @ B``, a
GLM's gradient -- either sum per-thread private copies of the whole output (each thread
zeroes and fills d x k, then one pass adds them: at k = 640 and d = 39,115 that is ~0.5 GB
moved for a 28,000-nonzero minibatch) or need the nonzeros in column order, so that each
output row is one thread's sum of the input rows that hold its feature. Listing a
minibatch's nonzeros by column is a counting sort, O(nnz + d) (O(nnz + nu log nu) when its
nu touched columns are few against d); scipy's ``tocsc`` does the same but allocates a
new matrix every call.

:class:`ColumnListing` keeps: ``pos`` (d: a column's index among the touched ones, -1 if
untouched; reset after each use in O(touched)), ``touched`` (d), ``colptr`` (d + 1) and,
sized by the largest matrix so far (grown by :data:`GROWTH`), ``perm`` (the nonzero
numbers in column order, row order within a column) and ``row_of`` (each nonzero's row).
Indices are int32: half the cache footprint of int64 in the random-access passes that use
them.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab import backend
from bidlab.kern import touched_arrays
from bidlab.kern.standin import stand_in

__all__ = ["GROWTH", "ColumnListing"]

#: buffers sized by the nonzeros grow by this factor when too small
GROWTH = 1.2
_INT32_MAX = 2**31 - 1


@numba.njit(cache=True, nogil=True)
def _by_column(indptr, indices, pos, touched, colptr, perm, row_of):  # pragma: no cover
    """List a CSR minibatch's nonzeros by column; return the number of touched columns.

    Fills ``touched[:nu]`` (the columns, increasing), ``colptr[:nu + 1]`` (column u's
    nonzeros are ``perm[colptr[u]:colptr[u + 1]]``, nonzero numbers in row order) and
    ``row_of[p]`` (the row of nonzero p); ``pos[j]`` becomes column j's touched index.
    ``pos`` is all -1 on entry; :func:`_forget` resets it. (The listing keeps nonzero
    numbers rather than copying values: scattering the values into column order is slower,
    BENCHMARKS.md, "design measurements".)
    """
    n = indptr.shape[0] - 1
    d = pos.shape[0]
    nu = 0
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if pos[j] < 0:
                pos[j] = 0
                touched[nu] = j
                nu += 1
            row_of[p] = i
    # increasing feature order (the update then walks W front to back): a sort of the few
    # touched columns of a wide model, else a pass over pos
    if nu * 16 < d:
        touched[:nu].sort()
    else:
        nu = 0
        for j in range(d):
            if pos[j] == 0:
                touched[nu] = j
                nu += 1
    for u in range(nu):
        pos[touched[u]] = u
    for u in range(nu + 1):
        colptr[u] = 0
    for p in range(indptr[n]):
        colptr[pos[indices[p]] + 1] += 1
    for u in range(nu):
        colptr[u + 1] += colptr[u]
    for p in range(indptr[n]):  # colptr[u] runs ahead as the fill cursor of column u...
        u = pos[indices[p]]
        q = colptr[u]
        perm[q] = p
        colptr[u] = q + 1
    for u in range(nu, 0, -1):  # ...and is shifted back to the column starts
        colptr[u] = colptr[u - 1]
    colptr[0] = 0
    return nu


@numba.njit(cache=True, nogil=True)
def _forget(pos, touched, nu):  # pragma: no cover - compiled
    for u in range(nu):
        pos[touched[u]] = -1


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
# The listing compiles first: a second's compile, and its stand-in is several times slower.
stand_in(_by_column, priority=-1)(touched_arrays.by_column)
stand_in(_forget)(touched_arrays.forget)


class ColumnListing:
    """A CSR matrix's nonzeros listed by column, in buffers reused from call to call.

    ``pos`` (d), ``touched`` (d) and ``colptr`` (d + 1) are sized by the model; ``perm`` and
    ``row_of`` by the largest minibatch so far, grown by :data:`GROWTH` when a bigger one
    comes (every buffer is counted by :data:`bidlab.backend.allocations`). Indices are
    int32: half the cache footprint of int64 in these random-access passes.
    """

    def __init__(self, d: int) -> None:
        if d >= _INT32_MAX:
            raise ValueError(f"{d} columns: the column listing indexes columns with int32")
        self.d = int(d)
        self.pos = backend.empty((self.d,), np.int32)
        self.pos.fill(-1)
        self.touched = backend.empty((self.d,), np.int32)
        self.colptr = backend.empty((self.d + 1,), np.int32)
        self.perm = backend.empty((0,), np.int32)
        self.row_of = backend.empty((0,), np.int32)
        self.n_touched = 0

    def fill(self, X: Any) -> int:
        """List ``X``'s (n x d CSR, numpy) nonzeros by column; return the touched count."""
        if X.shape[1] != self.d:
            raise ValueError(f"the minibatch has {X.shape[1]} columns but the model has {self.d}")
        return self.fill_arrays(X.indptr, X.indices)

    def fill_arrays(self, indptr: Any, indices: Any) -> int:
        """:meth:`fill` from a CSR matrix's index arrays (every index below ``d``)."""
        nnz = int(indptr[-1])
        if nnz >= _INT32_MAX:
            raise ValueError(
                f"a minibatch with {nnz} nonzeros is too big for one step: use a smaller "
                "batch_size"
            )
        if self.perm.shape[0] < nnz:
            size = min(max(nnz, int(self.perm.shape[0] * GROWTH) + 1), _INT32_MAX - 1)
            self.perm = backend.empty((size,), np.int32)
            self.row_of = backend.empty((size,), np.int32)
        self.n_touched = _by_column(
            indptr, indices, self.pos, self.touched, self.colptr, self.perm, self.row_of
        )
        return self.n_touched

    def clear(self) -> None:
        """Reset the column positions for the next minibatch."""
        _forget(self.pos, self.touched, self.n_touched)
        self.n_touched = 0
