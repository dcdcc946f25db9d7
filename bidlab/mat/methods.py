"""The operator methods of ``Mat``, ``SMat`` and ``SparseTranspose``, bound to the classes.

Why a module of its own: :mod:`bidlab.mat.dense` and :mod:`bidlab.mat.sparse` define the
containers, :mod:`bidlab.mat.ops` the operations on them (it imports both). If the
containers imported ``ops`` for their operators the modules would import each other; here
the operators are attached once, when :mod:`bidlab.mat` is imported (importing any
``bidlab.mat`` module imports the package first). Every operator is a one-line call into
:mod:`bidlab.mat.ops`: ``a + b`` is ``ops.add(a, b)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bidlab.mat import ops
from bidlab.mat.dense import Mat
from bidlab.mat.sparse import SMat, SparseTranspose

__all__ = ["bind"]

# -- binary operators: name -> (operation, reflected) ---------------------------------------
_ARITHMETIC = {
    "__add__": (ops.add, False), "__radd__": (ops.add, True),
    "__sub__": (ops.subtract, False), "__rsub__": (ops.subtract, True),
    "__mul__": (ops.multiply, False), "__rmul__": (ops.multiply, True),
    "__truediv__": (ops.divide, False), "__rtruediv__": (ops.divide, True),
    "__pow__": (ops.power, False),
    "__matmul__": (ops.matmul, False), "__rmatmul__": (ops.matmul, True),
}
_MAT_ONLY = {
    "__rpow__": (ops.power, True),
    "__gt__": (ops.greater, False), "__ge__": (ops.greater_equal, False),
    "__lt__": (ops.less, False), "__le__": (ops.less_equal, False),
    "__eq__": (ops.equal, False), "__ne__": (ops.not_equal, False),
}
_PRODUCTS = {"__matmul__": (ops.matmul, False), "__rmatmul__": (ops.matmul, True)}


def _binary(name: str, op: Callable[..., Any], reflected: bool) -> Callable[[Any, Any], Any]:
    if reflected:
        def method(self: Any, other: Any) -> Any:
            return op(other, self)
    else:
        def method(self: Any, other: Any) -> Any:
            return op(self, other)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{op.__name__}({'other, self' if reflected else 'self, other'})``"
    return method


# -- the other methods -----------------------------------------------------------------------
def _neg(self: Any) -> Any:
    return ops.negative(self)


def _abs(self: Mat) -> Mat:
    return ops.absolute(self)


def _getitem(self: Mat, index: Any) -> Mat:
    return ops.getitem(self, index)


def _setitem(self: Mat, index: Any, value: Any) -> None:
    ops.setitem(self, index, value)


def _ilshift(self: Any, other: Any) -> Any:
    """``dst <<= src``: BIDMat's ``dst <-- src``; copies src's values into dst."""
    return ops.copy_into(self, other)


def _set(self: Mat, value: Any) -> Mat:
    """Overwrite the contents in place (a number, an array or a Mat of the same shape).

    This is how live hyperparameters change: the matrix keeps its GUID, so no cache entry
    is added.
    """
    return ops.copy_into(self, value)


def _reduction(name: str, doc: str) -> Callable[..., Mat]:
    def method(self: Any, axis: int | None = None, out: Mat | None = None) -> Mat:
        return ops.reduce(name, self, axis, out)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    return method


_SUM_DOC = "Sum over rows (axis=0 -> 1 x n), columns (axis=1 -> m x 1) or all (1 x 1)."


def bind() -> None:
    """Attach the operators and reductions to the container classes (idempotent)."""
    for cls, table in ((Mat, {**_ARITHMETIC, **_MAT_ONLY}), (SMat, _ARITHMETIC),
                       (SparseTranspose, _PRODUCTS)):
        for name, (op, reflected) in table.items():
            setattr(cls, name, _binary(name, op, reflected))
    for cls in (Mat, SMat):
        cls.__neg__ = _neg
        cls.__ilshift__ = _ilshift
        cls.sum = _reduction("sum", _SUM_DOC)
    Mat.__abs__ = _abs
    Mat.__getitem__ = _getitem
    Mat.__setitem__ = _setitem
    Mat.set = _set
    Mat.mean = _reduction("mean", "Mean over axis 0, 1 or all (see :meth:`sum`).")
    Mat.max = _reduction("max", "Maximum over axis 0, 1 or all (see :meth:`sum`).")
    Mat.min = _reduction("min", "Minimum over axis 0, 1 or all (see :meth:`sum`).")
    Mat.__hash__ = object.__hash__  # == is element-wise; a Mat hashes by identity


bind()
