"""``Mat``: a 2-D dense matrix on numpy or cupy with a 64-bit GUID.

A ``Mat`` wraps an array without copying it. Its GUID names it in the result cache, so
operations on the same operands find the same result container step after step. All
arithmetic goes through :mod:`bidlab.mat.ops`; the operators here are thin sugar.

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

    def set(self, value: Any) -> Mat:
        """Overwrite the contents in place (a number, an array or a Mat of the same shape).

        This is how live hyperparameters change: the matrix keeps its GUID, so no cache
        entry is added.
        """
        from bidlab.mat.ops import copy_into

        return copy_into(self, value)

    def __ilshift__(self, other: Any) -> Mat:
        """``dst <<= src``: BIDMat's ``dst <-- src``; copies src's values into dst."""
        from bidlab.mat.ops import copy_into

        return copy_into(self, other)

    def __repr__(self) -> str:
        where = backend.backend_name(self._data)
        m, n = self.shape
        return f"Mat({m}x{n} {self.dtype} on {where}, guid={self.guid:#x})"

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __float__(self) -> float:
        if self.shape != (1, 1):
            raise TypeError(f"only a 1x1 Mat converts to float; this one is {self.shape}")
        return float(self._data[0, 0])

    def __bool__(self) -> bool:
        raise TypeError(
            "the truth value of a Mat is ambiguous: use (a > b).numpy().all() or .any()"
        )

    # -- operators (all arithmetic lives in bidlab.mat.ops) --------------------------------
    def __add__(self, o):
        return ops.add(self, o)

    def __radd__(self, o):
        return ops.add(o, self)

    def __sub__(self, o):
        return ops.subtract(self, o)

    def __rsub__(self, o):
        return ops.subtract(o, self)

    def __mul__(self, o):
        return ops.multiply(self, o)

    def __rmul__(self, o):
        return ops.multiply(o, self)

    def __truediv__(self, o):
        return ops.divide(self, o)

    def __rtruediv__(self, o):
        return ops.divide(o, self)

    def __pow__(self, o):
        return ops.power(self, o)

    def __rpow__(self, o):
        return ops.power(o, self)

    def __matmul__(self, o):
        return ops.matmul(self, o)

    def __rmatmul__(self, o):
        return ops.matmul(o, self)

    def __neg__(self):
        return ops.negative(self)

    def __abs__(self):
        return ops.absolute(self)

    def __gt__(self, o):
        return ops.greater(self, o)

    def __ge__(self, o):
        return ops.greater_equal(self, o)

    def __lt__(self, o):
        return ops.less(self, o)

    def __le__(self, o):
        return ops.less_equal(self, o)

    def __eq__(self, o):  # type: ignore[override]
        return ops.equal(self, o)

    def __ne__(self, o):  # type: ignore[override]
        return ops.not_equal(self, o)

    __hash__ = object.__hash__

    def __getitem__(self, index: Any) -> Mat:
        return ops.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        ops.setitem(self, index, value)

    # -- reductions -----------------------------------------------------------------------
    def sum(self, axis: int | None = None, out: Mat | None = None) -> Mat:
        """Sum over rows (axis=0 -> 1 x n), columns (axis=1 -> m x 1) or all (1 x 1)."""
        return ops.reduce("sum", self, axis, out)

    def mean(self, axis: int | None = None, out: Mat | None = None) -> Mat:
        return ops.reduce("mean", self, axis, out)

    def max(self, axis: int | None = None, out: Mat | None = None) -> Mat:
        return ops.reduce("max", self, axis, out)

    def min(self, axis: int | None = None, out: Mat | None = None) -> Mat:
        return ops.reduce("min", self, axis, out)


from bidlab.mat import ops  # noqa: E402  (ops needs Mat defined first)
