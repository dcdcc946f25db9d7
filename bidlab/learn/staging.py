"""Copying planned minibatch rows into the same containers step after step.

A data source decides *which* rows make the next minibatch (a :class:`Plan`: pieces of
aligned source matrices and the rows taken from each); the :class:`Stager` here copies
them into containers that it allocates once per minibatch size and then reuses. That is
what lets the model's cached operations hit the result cache every step: the containers'
GUIDs never change. A source sees at most a few sizes (the full batch and the last,
partial one of a pass), so after warm-up nothing is allocated.

Samples are rows. Three placements are handled:

* host data -> host containers (CPU training): dense rows are gathered straight into the
  container with ``np.take(..., out=)``; sparse rows through a reusable CSR staging area
  into :meth:`bidlab.SMat.copy_from`, which reuses its buffers.
* host data -> GPU containers: rows are gathered into pinned host staging buffers and
  copied asynchronously on the current stream; an event guards each staging buffer so it
  is not refilled before its copy has finished.
* GPU data -> GPU containers: dense rows with ``cupy.take(..., out=)``; contiguous sparse
  row ranges without a copy of the pattern. Shuffled sparse rows on the GPU go through
  cupyx fancy indexing, which uses CuPy's memory pool (documented exception).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.kern.csr_rows import (  # noqa: F401  (stand-ins re-exported)
    _gather_rows,
    _gather_rows_arrays,
    _nnz_of_rows,
    _nnz_of_rows_arrays,
)
from bidlab.mat import Mat, SMat
from bidlab.mat.sparse import csr_view

__all__ = ["Piece", "Plan", "Minibatch", "Stager", "RowsLike"]

RowsLike = slice | np.ndarray


@dataclass
class Piece:
    """Rows ``rows`` (a slice or an int index array) of the aligned matrices ``mats``.

    ``offset``: the global id of ``mats``' first row (a shard's place in the data set), so
    that row ``r`` here is row ``offset + r`` of the whole data; None for rows of another
    data set (a blended source's second stream), whose ids read -1.
    """

    mats: tuple[Any, ...]
    rows: Any
    offset: int | None = 0

    @property
    def n(self) -> int:
        r = self.rows
        if isinstance(r, slice):
            return int(r.stop - r.start)
        return int(r.shape[0])


@dataclass
class Plan:
    """Which rows make one minibatch, and where it sits in the stream."""

    pieces: list[Piece]
    pass_: int
    index: int
    last: bool
    start: int  # position of its first row in the pass's order

    @property
    def n(self) -> int:
        return sum(p.n for p in self.pieces)


@dataclass
class Minibatch:
    """One minibatch: ``mats`` (features first, then targets, weights, ...), samples as rows.

    The same ``Minibatch`` object and the same containers come back every time a minibatch of
    this size is produced; copy what must outlive the step.

    Attributes
    ----------
    mats
        the containers (``Mat`` or ``SMat``), each ``n`` rows.
    n
        rows (samples) in this minibatch; the last one of a pass may be shorter.
    pass_
        the pass it belongs to (0-based).
    index
        its index within the pass (0-based).
    last
        True for the last minibatch of the pass.
    start
        position of its first row in the pass's (possibly shuffled) order.
    ids
        the global ids of its ``n`` rows (a host int64 array; the row's index in the
        whole data set, the same every pass however the source shuffles; -1 where a
        row has none): what :class:`~bidlab.learn.rowstate.RowState` keys rows by.
    run
        ``ids[0]`` when the source knows its ids are one ascending run
        (``ids[0], ids[0] + 1, ...``: :class:`~bidlab.learn.blocks.BlockSource`),
        -1 when unknown; spares RowState the check.
    """

    mats: tuple[Any, ...]
    n: int
    pass_: int = 0
    index: int = 0
    last: bool = False
    start: int = 0
    nbytes: int = field(default=0)
    ids: Any = None
    run: int = -1

    def __getitem__(self, i: int) -> Any:
        return self.mats[i]

    def __len__(self) -> int:
        return len(self.mats)


def _host_array(shape: tuple[int, ...], dtype: Any, pinned: bool) -> np.ndarray:
    """A host buffer (pinned when it feeds a GPU copy), counted like the core's arrays."""
    if pinned:
        import cupyx

        arr = cupyx.empty_pinned(shape, dtype=dtype)
        backend.allocations.record(arr.nbytes)
        return arr
    return backend.empty(shape, dtype, np)


class _CsrStaging:
    """A growable host CSR area that rows of several pieces are gathered into."""

    def __init__(self, n: int, cols: int, dtype: Any, index_dtype: Any, pinned: bool) -> None:
        self.n, self.cols, self.pinned = n, cols, pinned
        self.dtype, self.index_dtype = np.dtype(dtype), np.dtype(index_dtype)
        self.indptr = _host_array((n + 1,), self.index_dtype, pinned)
        self.indptr[0] = 0
        self.indices = _host_array((16,), self.index_dtype, pinned)
        self.data = _host_array((16,), self.dtype, pinned)
        self.nnz = 0

    def reserve(self, nnz: int) -> None:
        if self.indices.shape[0] < nnz:
            cap = math.ceil(nnz * 1.25) + 16
            self.indices = _host_array((cap,), self.index_dtype, self.pinned)
            self.data = _host_array((cap,), self.dtype, self.pinned)

    def gather(self, pieces: list[tuple[Any, Any]]) -> None:
        """Fill from ``(csr, rows)`` pairs, in order."""
        total = 0
        for csr, rows in pieces:
            if isinstance(rows, slice):
                total += int(csr.indptr[rows.stop] - csr.indptr[rows.start])
            else:
                total += int(_nnz_of_rows(csr.indptr, rows))
        self.reserve(total)
        r0, p = 0, 0
        for csr, rows in pieces:
            if isinstance(rows, slice):
                a, b = int(csr.indptr[rows.start]), int(csr.indptr[rows.stop])
                m = rows.stop - rows.start
                self.indices[p : p + b - a] = csr.indices[a:b]
                self.data[p : p + b - a] = csr.data[a:b]
                np.add(csr.indptr[rows.start + 1 : rows.stop + 1], p - a,
                       out=self.indptr[r0 + 1 : r0 + m + 1], casting="unsafe")
                p += b - a
            else:
                m = rows.shape[0]
                p = _gather_rows(csr.indptr, csr.indices, csr.data, rows, self.indptr,
                                 self.indices, self.data, r0, p)
            r0 += m
        self.nnz = p

    def csr(self) -> sp.csr_matrix:
        """A scipy CSR view of the staged rows (no copy)."""
        return csr_view(self.data[: self.nnz], self.indices[: self.nnz], self.indptr,
                        (self.n, self.cols))


# --------------------------------------------------------------------------- slots
class _DenseSlot:
    """One dense container and, for host->GPU, its pinned staging buffer."""

    def __init__(self, n: int, cols: int, dtype: Any, xp: Any, host_data: bool) -> None:
        self.mat = Mat(backend.empty((n, cols), dtype, xp))
        self.to_device = xp is not np and host_data
        self.staging = _host_array((n, cols), dtype, True) if self.to_device else None
        self.event = None

    def fill(self, pieces: list[tuple[Any, Any]]) -> None:
        dst = self.mat.data
        if self.to_device:
            if self.event is not None:
                self.event.synchronize()  # the previous async copy has read the staging
            _dense_gather(np, pieces, self.staging)
            cp = backend.cupy()
            stream = cp.cuda.get_current_stream()
            dst.set(self.staging, stream=stream)
            self.event = stream.record()
        else:
            _dense_gather(self.mat.xp, pieces, dst)


def _dense_gather(xp: Any, pieces: list[tuple[Any, Any]], dst: Any) -> None:
    r0 = 0
    for src, rows in pieces:
        if isinstance(rows, slice):
            m = rows.stop - rows.start
            dst[r0 : r0 + m] = src[rows]
        else:
            m = rows.shape[0]
            backend.take_into(src, rows, out=dst[r0 : r0 + m], axis=0)
        r0 += m


class _SparseSlot:
    """One SMat container fed from host CSR rows (through staging) or device CSR rows."""

    def __init__(self, n: int, cols: int, dtype: Any, index_dtype: Any, xp: Any,
                 host_data: bool) -> None:
        csp = backend.sparse_module(xp)
        empty_indptr = backend.zeros((n + 1,), index_dtype, xp)
        empty = csp.csr_matrix(
            (backend.empty((0,), dtype, xp), backend.empty((0,), index_dtype, xp), empty_indptr),
            shape=(n, cols))
        self.mat = SMat(empty)
        self.xp = xp
        self.host_data = host_data
        self.n, self.cols = n, cols
        self.index_dtype = np.dtype(index_dtype)
        self.staging = _CsrStaging(n, cols, dtype, index_dtype, pinned=xp is not np) if (
            host_data) else None
        self.event = None
        # device staging for host -> GPU
        self.d_indptr = self.d_indices = self.d_data = None
        # device indptr for a contiguous GPU row range
        self.d_shift = None

    def reserve(self, nnz: int) -> None:
        """Size every buffer for ``nnz`` stored entries now, so later fills never grow."""
        if nnz <= self.mat.capacity and self.mat.nnz:
            return
        if self.staging is not None:
            self.staging.reserve(nnz)
        xp = self.xp
        if self.host_data and xp is not np:
            self.d_indices = backend.empty((nnz,), self.index_dtype, xp)
            self.d_data = backend.empty((nnz,), self.mat.dtype, xp)
        # prime the SMat: a valid CSR with nnz entries (all in the last row) makes it size
        # its buffers once; the real minibatch overwrites it next
        indptr = backend.zeros((self.n + 1,), self.index_dtype, xp)
        indptr[-1] = nnz
        csp = backend.sparse_module(xp)
        fake = csp.csr_matrix((backend.zeros((nnz,), self.mat.dtype, xp),
                               backend.zeros((nnz,), self.index_dtype, xp), indptr),
                              shape=(self.n, self.cols), copy=False)
        self.mat.copy_from(fake)

    def fill(self, pieces: list[tuple[Any, Any]]) -> None:
        if self.host_data:
            if self.xp is np:
                if len(pieces) == 1 and isinstance(pieces[0][1], slice):
                    self.mat.copy_from_parts(*_slice_parts_host(pieces[0][0], pieces[0][1], self))
                    return
                self.staging.gather(pieces)
                self.mat.copy_from(self.staging.csr())
                return
            self._host_to_device(pieces)
            return
        self._device_to_device(pieces)

    def _host_to_device(self, pieces: list[tuple[Any, Any]]) -> None:
        cp = backend.cupy()
        if self.event is not None:
            self.event.synchronize()
        st = self.staging
        st.gather(pieces)
        nnz = st.nnz
        if self.d_indices is None or self.d_indices.shape[0] < nnz:
            cap = max(st.indices.shape[0], nnz)
            self.d_indices = backend.empty((cap,), self.index_dtype, cp)
            self.d_data = backend.empty((cap,), st.dtype, cp)
        if self.d_indptr is None:
            self.d_indptr = backend.empty((self.n + 1,), self.index_dtype, cp)
        stream = cp.cuda.get_current_stream()
        self.d_indptr.set(st.indptr, stream=stream)
        if nnz:
            self.d_indices[:nnz].set(st.indices[:nnz], stream=stream)
            self.d_data[:nnz].set(st.data[:nnz], stream=stream)
        self.event = stream.record()
        csp = backend.sparse_module(cp)
        view = csp.csr_matrix((self.d_data[:nnz], self.d_indices[:nnz], self.d_indptr),
                              shape=(self.n, self.cols), copy=False)
        self.mat.copy_from(view)

    def _device_to_device(self, pieces: list[tuple[Any, Any]]) -> None:
        xp = self.xp
        csp = backend.sparse_module(xp)
        if len(pieces) == 1 and isinstance(pieces[0][1], slice):
            src, rows = pieces[0]
            if self.d_shift is None:
                self.d_shift = backend.empty((self.n + 1,), src.indptr.dtype, xp)
            a = src.indptr[rows.start : rows.start + 1]
            xp.subtract(src.indptr[rows.start : rows.stop + 1], a, out=self.d_shift)
            p0, p1 = int(src.indptr[rows.start]), int(src.indptr[rows.stop])
            view = csp.csr_matrix((src.data[p0:p1], src.indices[p0:p1], self.d_shift),
                                  shape=(self.n, self.cols), copy=False)
            self.mat.copy_from(view)
            return
        # shuffled / blended GPU-resident sparse rows: cupyx indexing (uses CuPy's pool)
        parts = [src[rows] for src, rows in pieces]
        self.mat.copy_from(parts[0] if len(parts) == 1 else csp.vstack(parts, format="csr"))


def _slice_parts_host(csr: Any, rows: slice, slot: _SparseSlot) -> tuple[Any, Any, Any]:
    """A contiguous row range as CSR arrays (views of ``csr``'s; the shifted row pointers
    live in the staging area)."""
    st = slot.staging
    a, b = int(csr.indptr[rows.start]), int(csr.indptr[rows.stop])
    np.subtract(csr.indptr[rows.start : rows.stop + 1], a, out=st.indptr, casting="unsafe")
    return csr.data[a:b], csr.indices[a:b], st.indptr


# --------------------------------------------------------------------------- stager
@dataclass(frozen=True)
class MatSpec:
    """What one column block of the data looks like: columns, dtype, dense or CSR."""

    cols: int
    dtype: np.dtype
    sparse: bool
    index_dtype: np.dtype | None = None


class Stager:
    """Allocates one container set per minibatch size and fills it from a :class:`Plan`.

    Parameters
    ----------
    specs
        one :class:`MatSpec` per aligned matrix.
    device
        ``"cpu"`` or ``"gpu"``: where the containers live.
    host_data
        True when the source matrices live on the host (numpy/scipy).
    nnz_bound
        ``f(j, n)`` -> the most stored entries ``n`` rows of sparse matrix ``j``
        can hold (or None). Sparse containers are sized for it up front, so shuffled
        minibatches with more entries than any before never make them grow.
    """

    def __init__(self, specs: list[MatSpec], device: str, host_data: bool,
                 nnz_bound: Any = None) -> None:
        self.specs = specs
        self.nnz_bound = nnz_bound
        self.device = device
        self.host_data = host_data
        self.xp = np if device == "cpu" else backend.cupy()
        self._slots: dict[int, tuple[Minibatch, list[Any]]] = {}
        self._id_bufs: dict[int, np.ndarray] = {}

    @property
    def sizes(self) -> list[int]:
        """The minibatch sizes that have containers so far."""
        return sorted(self._slots)

    def _make(self, n: int) -> tuple[Minibatch, list[Any]]:
        slots: list[Any] = []
        for s in self.specs:
            if s.sparse:
                slot = _SparseSlot(n, s.cols, s.dtype, s.index_dtype, self.xp, self.host_data)
                bound = self.nnz_bound(len(slots), n) if self.nnz_bound else None
                if bound:
                    slot.reserve(int(bound))
                slots.append(slot)
            else:
                slots.append(_DenseSlot(n, s.cols, s.dtype, self.xp, self.host_data))
        batch = Minibatch(tuple(sl.mat for sl in slots), n)
        return batch, slots

    def stage(self, plan: Plan) -> Minibatch:
        """Copy ``plan``'s rows into the containers for its size; return the reused Minibatch."""
        n = plan.n
        found = self._slots.get(n)
        if found is None:
            found = self._slots[n] = self._make(n)
        batch, slots = found
        nbytes = 0
        for j, slot in enumerate(slots):
            pieces = [(p.mats[j], p.rows) for p in plan.pieces]
            slot.fill(pieces)
            nbytes += _data_bytes(slot.mat)
        batch.n = n
        batch.pass_, batch.index, batch.last, batch.start = (
            plan.pass_, plan.index, plan.last, plan.start)
        batch.nbytes = nbytes
        batch.ids = self._ids(plan, n)
        return batch

    def _ids(self, plan: Plan, n: int) -> np.ndarray:
        """The plan's global row ids, in a buffer kept per minibatch size."""
        ids = self._id_bufs.get(n)
        if ids is None:
            ids = self._id_bufs[n] = np.empty(n, np.int64)
        fill_ids(plan.pieces, ids)
        return ids


def fill_ids(pieces: Any, ids: np.ndarray) -> None:
    """Write the global ids of ``pieces``' rows, in order, into ``ids``."""
    r0 = 0
    for p in pieces:
        m = p.n
        dst = ids[r0 : r0 + m]
        if p.offset is None:
            dst.fill(-1)
        elif isinstance(p.rows, slice):
            if m:  # offset + start, offset + start + 1, ...: no range array made
                dst.fill(1)
                dst[0] = p.offset + p.rows.start
                np.cumsum(dst, out=dst)
        elif isinstance(p.rows, np.ndarray):
            np.add(p.rows, p.offset, out=dst, casting="unsafe")
        else:  # row indices on the GPU: copied into the host buffer
            p.rows.get(out=dst)
            dst += p.offset
        r0 += m


def _data_bytes(m: Any) -> int:
    if isinstance(m, SMat):
        nnz = m.nnz
        return int(nnz * (m.dtype.itemsize + m.indices.dtype.itemsize)
                   + m.indptr.nbytes)
    return int(m.nbytes)
