"""CSR rows gathered into a reused staging buffer (numba, CPU), and their numpy forms run
while the two kernels compile (:mod:`bidlab.kern.standin`); used by
:mod:`bidlab.learn.staging`.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab.kern.standin import stand_in

__all__ = ["_gather_rows", "_nnz_of_rows"]


@numba.njit(cache=True, nogil=True)
def _nnz_of_rows(indptr, rows):  # pragma: no cover - compiled
    total = 0
    for r in rows:
        total += indptr[r + 1] - indptr[r]
    return total


@numba.njit(cache=True, nogil=True)
def _gather_rows(indptr, indices, data, rows, out_indptr, out_indices, out_data, r0, p0):
    """Append CSR rows ``rows`` at output row ``r0`` / entry ``p0``; return the new p."""
    p = p0
    for k in range(rows.shape[0]):
        r = rows[k]
        a = indptr[r]
        b = indptr[r + 1]
        for q in range(a, b):
            out_indices[p] = indices[q]
            out_data[p] = data[q]
            p += 1
        out_indptr[r0 + k + 1] = p
    return p


# numpy forms run while the two kernels compile (bidlab.kern.standin)
@stand_in(_nnz_of_rows)
def _nnz_of_rows_arrays(indptr: Any, rows: Any) -> int:
    return int((indptr[rows + 1] - indptr[rows]).sum())


@stand_in(_gather_rows)
def _gather_rows_arrays(indptr: Any, indices: Any, data: Any, rows: Any, out_indptr: Any,
                        out_indices: Any, out_data: Any, r0: int, p0: int) -> int:
    lengths = indptr[rows + 1] - indptr[rows]
    ends = p0 + np.cumsum(lengths)
    p = int(ends[-1]) if ends.shape[0] else p0
    src = np.repeat(indptr[rows] - (ends - lengths), lengths) + np.arange(p0, p)
    out_indices[p0:p] = indices[src]
    out_data[p0:p] = data[src]
    out_indptr[r0 + 1: r0 + 1 + rows.shape[0]] = ends
    return p
