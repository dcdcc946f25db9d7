"""The CPU sparse products of :mod:`bidlab.kern`, in numba (parallel over cores).

Every product works on *row views*: 2-D arrays whose rows are the k-vectors being combined
(``A.T`` of a k x m matrix is such a view, free of copies). Three loops cover all products:

* :func:`sddmm_rows`  ``out[p] = R[i] . C[j]`` for each stored (i, j);
* :func:`gather_rows` ``out[i] = sum_p data[p] * G[indices[p]]`` (a CSR row pulls rows of G;
  each output row belongs to one thread, no races);
* :func:`scatter_rows` ``out[indices[p]] += data[p] * G[i]`` (a CSR row pushes into rows of
  ``out``: each thread accumulates a private copy of the output, then one parallel pass
  sums the copies; or, when the output is large against the nonzeros, the nonzeros are
  first listed by column so that each output row again belongs to one thread. No atomics;
  the scratch comes from a pool, so no per-call allocation).

Every compiled kernel releases the GIL (``nogil=True``): while a minibatch computes in the
training thread, the notebook's own thread and the dashboard's pump keep running, which is
what lets a slider or a click reach a running learner within a tick.

Each ``prange`` kernel whose result does not depend on how its work is split (all but the
private-copy scatter) is an :func:`~bidlab.kern.adaptive.adaptive_kernel`: called with its
work size first, it runs on all threads or on the calling one, whichever is measured
cheaper now.

Rows are split between threads by nonzero count, not row count, so power-law data stays
balanced. Accumulation is in the operands' own precision (float32 stays float32); NaN
propagates (fastmath allows re-association and contraction only).

The element-wise kernel (``expdigamma``) and the CSR sums are in
:mod:`bidlab.kern.cpu_elementwise`.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from bidlab import _forksafe, backend

from . import arrays
from .adaptive import adaptive_kernel
from .columns import ColumnListing
from .standin import stand_in

_FM = {"reassoc", "contract"}


@numba.njit(inline="always")
def _part(indptr, t, nparts):
    """Rows [lo, hi) of part t when the nonzeros are split into nparts equal shares."""
    m = indptr.shape[0] - 1
    nnz = indptr[m]
    lo = 0 if t == 0 else np.searchsorted(indptr, nnz * t // nparts, side="right") - 1
    if t == nparts - 1:
        return lo, m
    hi = np.searchsorted(indptr, nnz * (t + 1) // nparts, side="right") - 1
    return lo, hi



def _nparts(indptr: Any) -> int:
    """Four shares of the nonzeros per thread (work stealing evens out the rest)."""
    return max(1, min(numba.get_num_threads() * 4, indptr.shape[0] - 1))


# ----------------------------------------------------------------------------- SDDMM


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _sddmm(indptr, indices, R, C, out, nparts):
    """Four stored entries of a row at a time: R[i] is loaded once for the four dot products,
    and the four independent reductions keep four rows of C in flight (the loop is bound by
    the latency of fetching C's rows; the gain over one entry at a time: BENCHMARKS.md,
    "design measurements"). Same sums in the same order per
    entry as before, so results and NaN / inf propagation are unchanged."""
    k = R.shape[1]
    for t in prange(nparts):
        lo, hi = _part(indptr, t, nparts)
        for i in range(lo, hi):
            p = indptr[i]
            end = indptr[i + 1]
            while p + 4 <= end:
                j0 = indices[p]
                j1 = indices[p + 1]
                j2 = indices[p + 2]
                j3 = indices[p + 3]
                r = R[i, 0]
                s0 = r * C[j0, 0]
                s1 = r * C[j1, 0]
                s2 = r * C[j2, 0]
                s3 = r * C[j3, 0]
                for c in range(1, k):
                    r = R[i, c]
                    s0 += r * C[j0, c]
                    s1 += r * C[j1, c]
                    s2 += r * C[j2, c]
                    s3 += r * C[j3, c]
                out[p] = s0
                out[p + 1] = s1
                out[p + 2] = s2
                out[p + 3] = s3
                p += 4
            while p < end:
                j = indices[p]
                s = R[i, 0] * C[j, 0]
                for c in range(1, k):
                    s += R[i, c] * C[j, c]
                out[p] = s
                p += 1


def sddmm_rows(indptr: Any, indices: Any, R: Any, C: Any, out: Any) -> None:
    """out[p] = R[i] . C[indices[p]] for the p-th stored entry of CSR row i."""
    if R.shape[1] == 0:
        out[:] = 0
        return
    _sddmm(float(indptr[-1]) * R.shape[1], indptr, indices, R, C, out, _nparts(indptr))


# ----------------------------------------------------------------------------- gather


@numba.njit(inline="always")
def _add_rows(acc, G, rows, vals, q, end):  # pragma: no cover - compiled
    """acc += sum over q in [q, end) of vals[q'] * G[rows[q']], four terms per pass.

    Four rows of G are in flight at once and ``acc`` is loaded and stored once per four
    terms, not once per term. Against one term per pass, interleaved calls, medians, 2
    threads: 1.35x at k = 640 and k = 20 (a 500-document 20 Newsgroups minibatch), 1.16x
    at k = 64, 1.27x at k = 64 on a 0.9 M-nonzero power-law matrix.
    """
    k = acc.shape[0]
    while q + 4 <= end:
        j0, j1, j2, j3 = rows[q], rows[q + 1], rows[q + 2], rows[q + 3]
        v0, v1, v2, v3 = vals[q], vals[q + 1], vals[q + 2], vals[q + 3]
        for c in range(k):
            acc[c] += (v0 * G[j0, c] + v1 * G[j1, c]) + (v2 * G[j2, c] + v3 * G[j3, c])
        q += 4
    while q < end:
        j, v = rows[q], vals[q]
        for c in range(k):
            acc[c] += v * G[j, c]
        q += 1


@numba.njit(inline="always")
def _add_listed_rows(acc, G, perm, row_of, data, q, end):  # pragma: no cover - compiled
    """:func:`_add_rows` over listed nonzeros: term q is data[p] * G[row_of[p]], p = perm[q]."""
    k = acc.shape[0]
    while q + 4 <= end:
        p0, p1, p2, p3 = perm[q], perm[q + 1], perm[q + 2], perm[q + 3]
        j0, j1, j2, j3 = row_of[p0], row_of[p1], row_of[p2], row_of[p3]
        v0, v1, v2, v3 = data[p0], data[p1], data[p2], data[p3]
        for c in range(k):
            acc[c] += (v0 * G[j0, c] + v1 * G[j1, c]) + (v2 * G[j2, c] + v3 * G[j3, c])
        q += 4
    while q < end:
        p = perm[q]
        j, v = row_of[p], data[p]
        for c in range(k):
            acc[c] += v * G[j, c]
        q += 1


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _gather(indptr, indices, data, G, out, nparts):
    k = G.shape[1]
    for t in prange(nparts):
        lo, hi = _part(indptr, t, nparts)
        for i in range(lo, hi):
            acc = out[i]
            for c in range(k):
                acc[c] = 0
            _add_rows(acc, G, indices, data, indptr[i], indptr[i + 1])


def gather_rows(indptr: Any, indices: Any, data: Any, G: Any, out: Any) -> None:
    """out[i] = sum_{p in row i} data[p] * G[indices[p]] (every row of out is written)."""
    _gather(float(indptr[-1]) * G.shape[1], indptr, indices, data, G, out, _nparts(indptr))


# ----------------------------------------------------------------------------- scatter


@numba.njit(inline="always")
def push_rows(indptr, indices, data, G, dst, lo, hi):  # pragma: no cover - compiled
    """Rows [lo, hi) pushed into dst (added to what it holds), four nonzeros of a row per
    pass: G[i] is loaded once for four output rows (same sums in the same order:
    bit-identical to one at a time, 1.05-1.08x on power-law matrices with 0.75-4.5 M
    nonzeros, k = 64)."""
    k = G.shape[1]
    for i in range(lo, hi):
        p = indptr[i]
        end = indptr[i + 1]
        while p + 4 <= end:
            j0, j1, j2, j3 = indices[p], indices[p + 1], indices[p + 2], indices[p + 3]
            v0, v1, v2, v3 = data[p], data[p + 1], data[p + 2], data[p + 3]
            for c in range(k):
                g = G[i, c]
                dst[j0, c] += v0 * g
                dst[j1, c] += v1 * g
                dst[j2, c] += v2 * g
                dst[j3, c] += v3 * g
            p += 4
        while p < end:
            j = indices[p]
            v = data[p]
            for c in range(k):
                dst[j, c] += v * G[i, c]
            p += 1


@numba.njit(fastmath=_FM, cache=True, nogil=True)
def _scatter_range(indptr, indices, data, G, dst, lo, hi):
    """Rows [lo, hi) pushed into dst, zeroed first (:func:`push_rows`)."""
    dst[:, :] = 0
    push_rows(indptr, indices, data, G, dst, lo, hi)


@numba.njit(parallel=True, fastmath=_FM, cache=True, nogil=True)
def _scatter_copies(indptr, indices, data, G, out, work):
    """Part t accumulates its rows into work[t - 1] (part 0 into out), then one sum."""
    n, k = out.shape
    nparts = work.shape[0] + 1
    for t in prange(nparts):
        lo, hi = _part(indptr, t, nparts)
        if t == 0:
            _scatter_range(indptr, indices, data, G, out, lo, hi)
        else:
            _scatter_range(indptr, indices, data, G, work[t - 1], lo, hi)
    for j in prange(n):
        for w in range(nparts - 1):
            for c in range(k):
                out[j, c] += work[w, j, c]


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _scatter_listed(pos, touched, nu, colptr, perm, row_of, data, G, out, nparts):
    """out[j] = sum of data[p] * G[row of p] over column j's listed nonzeros (row order)."""
    n, k = out.shape
    for t in prange(nparts):  # untouched rows: zero
        for j in range(n * t // nparts, n * (t + 1) // nparts):
            if pos[j] < 0:
                for c in range(k):
                    out[j, c] = 0
    for t in prange(nparts):  # touched rows, split by nonzero count
        lo, hi = _part(colptr[: nu + 1], t, nparts)
        for u in range(lo, hi):
            acc = out[touched[u]]
            for c in range(k):
                acc[c] = 0
            _add_listed_rows(acc, G, perm, row_of, data, colptr[u], colptr[u + 1])


@numba.njit(cache=True, nogil=True)
def _scatter_serial(indptr, indices, data, G, out):
    _scatter_range(indptr, indices, data, G, out, 0, indptr.shape[0] - 1)


# Below this many multiply-adds one plain loop beats the parallel versions' set-up.
PARALLEL_MIN_WORK = 1 << 18
# Listing the nonzeros by column pays when the output has at least this many elements per
# nonzero-or-output-row; below it, summing per-thread copies of the output is faster (the
# listed gather reads each nonzero's value and row at random; the measured crossover:
# BENCHMARKS.md, "design measurements").
LISTING_MIN_RATIO = 32
# Private copies may cost at most this many bytes.
WORKSPACE_LIMIT = 256 * 2**20

class _Pool:
    """Scratch objects shared by every thread: a call takes one, uses it, gives it back.

    Why not one per thread: a learner starts a new training thread on every ``fit`` /
    ``start``, and per-thread scratch would be allocated again by each (the zero-allocation
    contract is about the learner's whole life). Two threads computing at once take two.
    """

    def __init__(self) -> None:
        self._lock = _forksafe.lock(self, "_lock")
        self._free: dict[Any, list[Any]] = {}

    def take(self, key: Any) -> Any | None:
        with self._lock:
            free = self._free.get(key)
            return free.pop() if free else None

    def give(self, key: Any, item: Any) -> None:
        with self._lock:
            self._free.setdefault(key, []).append(item)


_workspaces = _Pool()
_listings = _Pool()


def _workspace(copies: int, n: int, k: int, dtype: np.dtype) -> np.ndarray:
    """Private accumulators from the pool (give the base array back to ``_workspaces``).

    One flat buffer per dtype grows to the largest (copies, n, k) seen (a counted
    allocation) and is sliced for smaller calls.
    """
    need = copies * n * k
    buf = _workspaces.take(np.dtype(dtype))
    if buf is None or buf.size < need:
        buf = backend.empty((max(need, 1),), dtype, np)
    return buf


def _listing(n: int) -> ColumnListing:
    """A column listing for n output rows from the pool (give it back to ``_listings``)."""
    found = _listings.take(n)
    return ColumnListing(n) if found is None else found


def scatter_rows(indptr: Any, indices: Any, data: Any, G: Any, out: Any) -> None:
    """out[indices[p]] += data[p] * G[i] for p in CSR row i, out zeroed first.

    Small calls run one plain loop. Parallel calls either sum per-thread private copies of
    the output, or -- when the output is large against the nonzeros, as a GLM minibatch's
    d x T gradient is -- write it once: the nonzeros are listed by column (O(nnz + n),
    :mod:`bidlab.kern.columns`) and each output row is one thread's sum, in row order, of
    the G rows that hold it. :data:`LISTING_MIN_RATIO` separates the two (the timings it
    was chosen from: BENCHMARKS.md, "design measurements").
    """
    n, k = out.shape
    work_size = int(indptr[-1]) * k
    threads = numba.get_num_threads()
    if threads < 2 or work_size < PARALLEL_MIN_WORK:
        _scatter_serial(indptr, indices, data, G, out)
        return
    if n * k < LISTING_MIN_RATIO * (int(indptr[-1]) + n) or n >= 2**31 - 1:
        copies = min(threads - 1, WORKSPACE_LIMIT // max(n * k * out.itemsize, 1))
        if copies <= 0:
            _scatter_serial(indptr, indices, data, G, out)
            return
        buf = _workspace(copies, n, k, out.dtype)
        try:
            work = buf[: copies * n * k].reshape(copies, n, k)
            _scatter_copies(indptr, indices, data, G, out, work)
        finally:
            _workspaces.give(buf.dtype, buf)
        return
    cols = _listing(n)
    try:
        nu = cols.fill_arrays(indptr, indices)
        _scatter_listed(float(work_size) + n * k, cols.pos, cols.touched, nu, cols.colptr,
                        cols.perm, cols.row_of, data, G, out, _nparts(cols.colptr[: nu + 1]))
    finally:
        cols.clear()
        _listings.give(n, cols)


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
stand_in(_sddmm)(arrays.sddmm)
stand_in(_gather)(arrays.gather)
stand_in(_scatter_copies)(arrays.scatter_copies)
stand_in(_scatter_listed)(arrays.scatter_listed)
stand_in(_scatter_serial)(arrays.scatter_serial)
