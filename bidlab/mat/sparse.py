"""``SMat``: a CSR sparse matrix (scipy or cupyx) with a GUID and recyclable buffers.

Two things make sparse matrices cheap in a minibatch loop:

* **Growth.** An ``SMat`` owns index and value buffers that may be longer than its nnz.
  :meth:`SMat.copy_from` refills them when a new minibatch arrives; while they are big
  enough nothing is allocated, and when they are not they grow to ``ceil(nnz * growth)``
  (default growth 1.2), so a stream of minibatches with varying nnz settles after a few
  steps.
* **Shared patterns.** A result with its operand's sparsity pattern (an SDDMM, ``S / P``,
  ``exp(S)``) does not copy the pattern: it points at its *pattern root* and reads
  ``indptr`` / ``indices`` from there. When the root is refilled with the next minibatch,
  every derived result sees the new pattern at once; only its values buffer is its own.

Element-wise operators act on the stored entries only (``S * 2`` scales them, ``S + 1``
adds 1 to each stored entry, never to the implicit zeros). Like ``Mat``'s, the operators
are attached by :mod:`bidlab.mat.methods`; this module defines the container only.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.mat.cache import CACHE
from bidlab.mat.dense import new_guid

DEFAULT_GROWTH = 1.2


def validate_csr(matrix: Any, what: str = "the sparse matrix") -> None:
    """Check a CSR matrix's structure before any kernel reads it (O(nnz), vectorised).

    ``indptr`` must have rows + 1 entries, start at 0, never decrease and end at the
    number of stored entries; every column index must lie in ``[0, columns)``. A bad matrix
    raises ``ValueError`` naming the first bad row (and column), instead of a kernel
    reading or writing out of bounds.
    """
    shape = tuple(matrix.shape)
    if len(shape) != 2:
        raise ValueError(f"{what}: a sparse matrix of shape {shape} is not 2-D: reshape it "
                         "first, e.g. x.reshape(1, -1) for one row")
    validate_csr_parts(matrix.data, matrix.indices, matrix.indptr, shape, what, exact=True)


def validate_csr_parts(data: Any, indices: Any, indptr: Any, shape: tuple[int, int],
                       what: str = "the sparse matrix", exact: bool = False) -> None:
    """:func:`validate_csr` on a CSR matrix's three arrays. ``data`` and ``indices`` may be
    longer than the ``indptr[-1]`` entries stored (spare room) unless ``exact``."""
    n_rows, n_cols = (int(v) for v in shape)
    fix = ("; the matrix is corrupt: rebuild it (e.g. scipy.sparse.csr_matrix(dense)) or "
           "repair its indptr / indices")
    if indptr.ndim != 1 or indptr.shape[0] != n_rows + 1:
        raise ValueError(f"{what}: indptr has {indptr.shape[0]} entries for {n_rows} rows "
                         f"(a CSR matrix needs rows + 1){fix}")
    if indices.ndim != 1 or data.ndim != 1 or (
            exact and indices.shape[0] != data.shape[0]):
        raise ValueError(f"{what}: {indices.shape[0]} column indices for {data.shape[0]} "
                         f"values{fix}")
    if n_rows == 0:
        return
    xp = backend.namespace(indptr)
    first, last = int(indptr[0]), int(indptr[-1])
    if first != 0:
        raise ValueError(f"{what}: indptr starts at {first}, not 0{fix}")
    stored = min(indices.shape[0], data.shape[0])
    if (last != indices.shape[0]) if exact else (last > stored):
        raise ValueError(f"{what}: indptr ends at {last} but {stored} entries are "
                         f"stored{fix}")
    steps = xp.diff(indptr)
    if bool((steps < 0).any()):
        r = int(xp.flatnonzero(steps < 0)[0])
        raise ValueError(f"{what}: row {r} ends before it starts (indptr[{r}] = "
                         f"{int(indptr[r])}, indptr[{r + 1}] = {int(indptr[r + 1])}){fix}")
    if last == 0:
        return
    indices = indices[:last]
    lo, hi = int(indices.min()), int(indices.max())
    if lo < 0 or hi >= n_cols:
        bad = xp.flatnonzero((indices < 0) | (indices >= n_cols))
        p = int(bad[0])
        r = int(xp.searchsorted(indptr, p, side="right")) - 1
        raise ValueError(f"{what}: row {r} has column index {int(indices[p])}, outside "
                         f"[0, {n_cols}){fix}")


def csr_view(data: Any, indices: Any, indptr: Any, shape: tuple[int, int]) -> Any:
    """A scipy / cupyx ``csr_matrix`` over exactly these arrays: writes go both ways.

    Why: scipy's constructor copies, even with ``copy=False``, a ``data`` or ``indices``
    array that views less than half of its buffer (its ``prune``), and narrows int64
    indices to int32. A matrix built over a growable buffer would then hold a copy that
    misses every later write into the buffer. The arrays are put back after construction.
    """
    csp = backend.sparse_module(backend.namespace(data))
    m = csp.csr_matrix((data, indices, indptr), shape=shape, copy=False)
    if m.data.dtype == data.dtype:
        m.data = data
    if indices.dtype == indptr.dtype:
        m.indices, m.indptr = indices, indptr
    return m


class SMat:
    """A CSR sparse matrix with a GUID, growable buffers and an optional shared pattern."""

    __array_priority__ = 1000  # numpy arrays and scalars defer to the reflected operators
    __slots__ = (
        "guid",
        "growth",
        "_shape",
        "_indptr",
        "_indices",
        "_values",
        "_nnz",
        "_root",
        "_version",
        "_owned",
        "_csr",
        "_csr_key",
        "_rows",
        "_rows_version",
        "_t",
        "_pinned",
        "__weakref__",
    )

    def __init__(self, matrix: Any, growth: float = DEFAULT_GROWTH) -> None:
        """Wrap a scipy / cupyx sparse matrix (CSR is wrapped without copying)."""
        if isinstance(matrix, SMat):
            matrix = matrix.csr
        if not backend.is_sparse(matrix):
            raise TypeError(
                f"SMat wraps a scipy.sparse or cupyx sparse matrix; got {type(matrix).__name__}"
                " (use bidlab.Mat for dense arrays, or scipy.sparse.csr_matrix(x))"
            )
        if matrix.format != "csr":
            matrix = matrix.tocsr()
        if matrix.dtype.kind not in "biuf":
            raise TypeError(f"an SMat holds numbers; got dtype {matrix.dtype}")
        validate_csr(matrix, "SMat")
        self._init_empty(tuple(matrix.shape), growth)
        self._indptr = matrix.indptr
        self._indices = matrix.indices
        self._values = matrix.data
        self._nnz = int(matrix.nnz)

    def _init_empty(self, shape: tuple[int, int], growth: float) -> None:
        if growth < 1.0:
            raise ValueError(f"growth must be >= 1.0; got {growth}")
        self.guid = new_guid()
        self.growth = growth
        self._shape = shape
        self._root: SMat | None = None
        self._version = 0
        self._owned = False  # wrapping a caller's arrays: never write into them
        self._csr = None
        self._csr_key: tuple = ()
        self._rows = None
        self._rows_version = -1
        self._t: SparseTranspose | None = None
        self._pinned: dict | None = None  # cached results derived from this root (cache.py)

    @classmethod
    def with_pattern_of(cls, source: SMat, dtype: Any) -> SMat:
        """A new result sharing ``source``'s pattern root, with its own values buffer."""
        root = source.root
        out = cls.__new__(cls)
        out._init_empty(root.shape, root.growth)
        out._root = root
        out._indptr = out._indices = None
        out._nnz = 0
        out._values = backend.empty((max(root.nnz, 1),), dtype, root.xp)
        out._owned = True
        return out

    # -- pattern and buffers --------------------------------------------------------------
    @property
    def root(self) -> SMat:
        """The SMat that owns this matrix's indptr/indices (itself when it owns them)."""
        return self if self._root is None else self._root

    @property
    def shape(self) -> tuple[int, int]:
        return self.root._shape

    @property
    def nnz(self) -> int:
        return self.root._nnz

    @property
    def indptr(self) -> Any:
        return self.root._indptr

    @property
    def indices(self) -> Any:
        root = self.root
        return root._indices[: root._nnz]

    @property
    def data(self) -> Any:
        """The stored values (a view of the first nnz entries of the values buffer)."""
        return self._values[: self.nnz]

    @property
    def dtype(self) -> np.dtype:
        return self._values.dtype

    @property
    def nbytes(self) -> int:
        own = int(self._values.nbytes)
        if self._root is None:
            own += int(self._indptr.nbytes) + int(self._indices.nbytes)
        return own

    @property
    def capacity(self) -> int:
        """How many entries the values buffer holds before it must grow."""
        return int(self._values.shape[0])

    @property
    def xp(self) -> ModuleType:
        return backend.namespace(self._values)

    @property
    def version(self) -> int:
        """Incremented each time the pattern root is refilled."""
        return self.root._version

    def ensure_capacity(self) -> bool:
        """Grow the values buffer to hold the root's nnz; True when it had to grow."""
        need = self.nnz
        if self._values.shape[0] >= need:
            return False
        old = self.nbytes
        self._values = backend.empty((math.ceil(need * self.growth),), self.dtype, self.xp)
        CACHE.resized(self, old, self.nbytes)
        return True

    def copy_from(self, source: Any) -> SMat:
        """Refill this matrix (which must own its pattern) with ``source``'s CSR contents.

        Buffers are reused while they are big enough and grow by ``growth`` when not.
        The row count must match; the column count must match too.
        """
        if self._root is not None:
            raise ValueError(
                "this SMat shares another matrix's pattern (it is a derived result); "
                "refill its pattern root instead"
            )
        src = source.csr if isinstance(source, SMat) else source
        if not backend.is_sparse(src):
            raise TypeError(f"copy_from takes a sparse matrix; got {type(src).__name__}")
        if src.format != "csr":
            src = src.tocsr()
        if tuple(src.shape) != self._shape:
            raise ValueError(
                f"cannot copy a sparse matrix of shape {tuple(src.shape)} into an SMat of "
                f"shape {self._shape}: shapes must match"
            )
        return self.copy_from_parts(src.data, src.indices, src.indptr)

    def copy_from_parts(self, data: Any, indices: Any, indptr: Any) -> SMat:
        """:meth:`copy_from` given a CSR matrix's three arrays (this matrix's row count + 1
        row pointers starting at 0), so a row range of a larger matrix refills this one
        without a ``csr_matrix`` in between: scipy's constructor copies arrays that view
        less than half of their buffer.

        Example::

            a, b = X.indptr[r0], X.indptr[r1]
            s.copy_from_parts(X.data[a:b], X.indices[a:b], X.indptr[r0:r1 + 1] - a)

        Host arrays are checked (:func:`validate_csr_parts`, against this matrix's shape)
        before anything is copied: a corrupt minibatch raises ``ValueError`` and leaves
        this matrix as it was, instead of a kernel later reading out of bounds.
        """
        backend.namespace(self._values, data)
        if indptr.shape[0] != self._shape[0] + 1:
            raise ValueError(f"indptr has {indptr.shape[0]} entries; this SMat has "
                             f"{self._shape[0]} rows, so it needs {self._shape[0] + 1}")
        if isinstance(indices, np.ndarray):  # (device arrays: a check would sync the GPU
            # every minibatch; the sources validated them when they were made)
            validate_csr_parts(data, indices, indptr, self._shape, "SMat.copy_from")
        nnz = int(indptr[-1])
        old = self.nbytes
        owned = self._owned
        if not owned or self._indices.shape[0] < nnz:
            cap = math.ceil(nnz * self.growth)
            self._indices = backend.empty((cap,), self._indices.dtype, self.xp)
        if not owned or self._values.shape[0] < nnz:
            cap = max(self._indices.shape[0], nnz)
            self._values = backend.empty((cap,), self._values.dtype, self.xp)
        if not owned:
            self._indptr = backend.empty(self._indptr.shape, self._indptr.dtype, self.xp)
            self._owned = True
        self._indptr[...] = indptr
        self._indices[:nnz] = indices[:nnz]
        self._values[:nnz] = data[:nnz]
        self._nnz = nnz
        self._version += 1
        if self.nbytes != old:
            CACHE.resized(self, old, self.nbytes)
        return self

    @property
    def csr(self) -> Any:
        """A scipy / cupyx ``csr_matrix`` viewing this matrix's buffers (no copy)."""
        root = self.root
        key = (root._version, id(self._values), id(root._indices), root._nnz)
        if self._csr is None or self._csr_key != key:
            self._csr = csr_view(self.data, self.indices, self.indptr, self.shape)
            self._csr_key = key
        return self._csr

    def row_index(self) -> Any:
        """For each stored entry, its row (cached on the pattern root per version)."""
        root = self.root
        if (
            root._rows is None
            or root._rows_version != root._version
            or (root._rows.shape[0] < root._nnz)
        ):
            xp = self.xp
            if root._rows is None or root._rows.shape[0] < root._nnz:
                root._rows = backend.empty(
                    (math.ceil(max(root._nnz, 1) * root.growth),), root._indices.dtype, xp
                )
            if xp is np:
                root._rows[: root._nnz] = np.repeat(
                    np.arange(root._shape[0], dtype=root._indices.dtype), np.diff(root._indptr)
                )
            else:  # CuPy before 14.1 takes no array of repeats: each entry's row by search
                at = xp.arange(root._nnz, dtype=root._indptr.dtype)
                root._rows[: root._nnz] = xp.searchsorted(root._indptr, at, side="right") - 1
            root._rows_version = root._version
        return root._rows[: root._nnz]

    # -- conversions ----------------------------------------------------------------------
    @property
    def T(self) -> SparseTranspose:
        """A lazy transpose, understood by the products (never materialised)."""
        if self._t is None:
            self._t = SparseTranspose(self)
        return self._t

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as a host scipy CSR matrix: loads without CuPy, with a fresh GUID."""
        return (SMat, (self.numpy(),))

    def numpy(self) -> Any:
        """A host scipy CSR copy."""
        return backend.to_host(self.csr).copy()

    def toarray(self) -> np.ndarray:
        """A dense host copy (numpy)."""
        return np.asarray(backend.to_host(self.csr.toarray()))

    def copy(self) -> SMat:
        """An independent copy that owns its pattern."""
        return SMat(self.csr.copy())

    def __repr__(self) -> str:
        shared = "" if self._root is None else f", pattern of {self._root.guid:#x}"
        return (
            f"SMat({self.shape[0]}x{self.shape[1]} {self.dtype}, nnz={self.nnz} on "
            f"{backend.backend_name(self._values)}, guid={self.guid:#x}{shared})"
        )


class SparseTranspose:
    """``S.T`` for an SMat: a marker the products use to pick the transposed kernel."""

    __array_priority__ = 1000  # ``ndarray @ S.T`` goes to the reflected product
    __slots__ = ("parent", "guid")

    def __init__(self, parent: SMat) -> None:
        self.parent = parent
        self.guid = parent.guid ^ (1 << 62)

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self.parent.shape
        return (n, m)

    @property
    def dtype(self) -> np.dtype:
        return self.parent.dtype

    @property
    def T(self) -> SMat:
        return self.parent

    def __repr__(self) -> str:
        return f"SparseTranspose({self.parent!r})"
