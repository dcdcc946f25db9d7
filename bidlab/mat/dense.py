"""``Mat``: a 2-D dense matrix on numpy or cupy with a 64-bit GUID.

A ``Mat`` wraps an array without copying it. Its GUID names it in the result cache, so
operations on the same operands find the same result container step after step. All
arithmetic lives in :mod:`bidlab.mat.ops`; the operators (``+ - * / ** @``, comparisons,
indexing, ``<<=``, ``set`` and the reductions ``sum / mean / max / min``) are thin sugar
over it, attached by :mod:`bidlab.mat.methods` so that this module depends on no operation.

Shapes are always 2-D (BIDMat's convention): a row vector is 1 x n, a column vector
m x 1, a scalar 1 x 1. Binary operators broadcast ("edge operators") a 1 x n, m x 1 or
1 x 1 operand against an m x n one.

The aliasing hazard: with caching on, ``c = a + b`` returns the cached container for
``(add, a, b)``. Computing ``a + b`` again overwrites ``c`` in place, and so does
every later minibatch step. Keep a value across steps with ``c.copy()`` or
``keep <<= c`` into a matrix you own, never by holding on to ``c`` itself.
"""

from __future__ import annotations

import itertools
import secrets
from types import ModuleType
from typing import Any

import numpy as np

from bidlab import backend

_guids = itertools.count(secrets.randbits(40) << 20)
_NUMERIC_KINDS = "biuf"


def new_guid() -> int:
    """A fresh process-unique 64-bit identifier."""
    return next(_guids) & 0x7FFF_FFFF_FFFF_FFFF


def _as_2d(data: Any) -> Any:
    if data.ndim == 2:
        return data
    if data.ndim == 0:
        return data.reshape(1, 1)
    raise ValueError(
        f"a Mat is 2-D, got an array with shape {tuple(data.shape)}: reshape it first, e.g. "
        "x.reshape(1, -1) for a row vector or x.reshape(-1, 1) for a column vector"
    )


class Mat:
    """A dense 2-D matrix (numpy or cupy array) with a GUID for the result cache.

    Parameters
    ----------
    data:
        A 2-D numpy or cupy array (0-d arrays become 1 x 1). Wrapped without a copy.
    """

    __slots__ = ("_data", "guid", "_t", "__weakref__")
    __array_priority__ = 1000  # numpy scalars defer to Mat's reflected operators

    def __init__(self, data: Any) -> None:
        if isinstance(data, Mat):
            data = data.data
        if not hasattr(data, "dtype") or backend.is_sparse(data):
            if backend.is_sparse(data):
                raise TypeError("Mat wraps dense arrays; use bidlab.SMat for sparse matrices")
            data = np.asarray(data)
        if data.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(
                f"a Mat holds numbers (bool, int or float); got dtype {data.dtype}: convert "
                "with x.astype(np.float32) first"
            )
        self._data = _as_2d(data)
        self.guid = new_guid()
        self._t: Mat | None = None

    # -- the array ------------------------------------------------------------------------
    @property
    def data(self) -> Any:
        """The wrapped numpy or cupy array."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        self._data = _as_2d(value)
        self._t = None

    @property
    def shape(self) -> tuple[int, int]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    @property
    def xp(self) -> ModuleType:
        """numpy or cupy: the backend this matrix lives on."""
        return backend.namespace(self._data)

    @property
    def T(self) -> Mat:
        """The transpose as a view; the same Mat object (and GUID) every time."""
        if self._t is None:  # the data setter drops a stale view
            t = Mat.__new__(Mat)
            t._data = self._data.T
            t.guid = self.guid ^ (1 << 62)
            t._t = self
            self._t = t
        return self._t

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as its host (numpy) array: loads without CuPy, with a fresh GUID."""
        return (Mat, (self.numpy(),))

    def numpy(self) -> np.ndarray:
        """A host (numpy) copy, or the array itself when already on the host."""
        return np.asarray(backend.to_host(self._data))

    def copy(self) -> Mat:
        """A new, uncached matrix with the same values (escapes the aliasing hazard)."""
        out = Mat(backend.empty(self.shape, self.dtype, self.xp))
        out._data[...] = self._data
        return out

    def __repr__(self) -> str:
        where = backend.backend_name(self._data)
        m, n = self.shape
        return f"Mat({m}x{n} {self.dtype} on {where}, guid={self.guid:#x})"

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """numpy's conversion protocol: ``copy=True`` (``np.array(m)``) returns a copy,
        never the wrapped array, ``copy=False`` refuses a conversion that must copy (a GPU
        matrix, another dtype) and ``None`` (``np.asarray(m)``) copies only when it must."""
        arr = self.numpy()
        fresh = arr is not self._data  # moved from the GPU: already a copy
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"Mat of {arr.dtype} to {np.dtype(dtype)} needs a copy, but "
                                 "copy=False was asked for")
            return arr.astype(dtype)
        if copy is False and fresh:
            raise ValueError("a GPU Mat converts to numpy by a copy, but copy=False was asked "
                             "for: use m.numpy()")
        return arr.copy() if copy and not fresh else arr

    def __float__(self) -> float:
        if self.shape != (1, 1):
            raise TypeError(f"only a 1x1 Mat converts to float; this one is {self.shape}")
        return float(self._data[0, 0])

    def __bool__(self) -> bool:
        raise TypeError(
            "the truth value of a Mat is ambiguous: use (a > b).numpy().all() or .any()"
        )
