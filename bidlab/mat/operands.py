"""The parts every matrix operation shares: the result container (``out=``, the cached one
or a fresh counted allocation) and the operand helpers (unwrapping, shapes, dtypes the
numpy way, broadcasting, cache keys). :mod:`bidlab.mat.ops` and its neighbours build on
them.
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable
from types import ModuleType
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.mat.cache import CACHE
from bidlab.mat.cache import _state as _cache_state
from bidlab.mat.dense import Mat
from bidlab.mat.sparse import SMat, SparseTranspose

_UNCACHED = object()

# ----------------------------------------------------------------------------- results


def result(
    key: Hashable | None,
    operands: tuple[Any, ...],
    shape: tuple[int, int],
    dtype: Any,
    xp: ModuleType,
    out: Mat | None = None,
    order: str = "C",
) -> Mat:
    """The container an operation writes into: ``out``, a cached Mat, or a new one."""
    dtype = np.dtype(dtype)
    if out is not None:
        if not isinstance(out, Mat):
            raise TypeError(f"out= must be a bidlab Mat; got {type(out).__name__}")
        if out.shape != shape:
            raise ValueError(f"out= has shape {out.shape} but the result has shape {shape}")
        if not np.can_cast(dtype, out.dtype, casting="same_kind"):
            raise TypeError(
                f"out= has dtype {out.dtype}; the result's {dtype} cannot be cast to it"
            )
        if (xp is np) == backend.is_cupy_array(out.data):
            where = backend.backend_name(out.data)
            raise TypeError(f"out= lives on {where} but the operands do not: use one backend")
        return out
    scope = getattr(_cache_state, "active", None)  # cache.active_scope(): None when off
    if key is not None and scope is not None:
        key = (scope, key)  # one thread's (or learner's) containers
        found = CACHE.get(key, lambda m: m.shape == shape and m.dtype == dtype)
        if found is not None:
            return found
        made = Mat(backend.empty(shape, dtype, xp, order))
        CACHE.put(key, made, operands)
        return made
    return Mat(backend.empty(shape, dtype, xp, order))


def sparse_result(
    key: Hashable | None,
    operands: tuple[Any, ...],
    pattern: SMat,
    dtype: Any,
    out: SMat | None = None,
) -> SMat:
    """A container with ``pattern``'s sparsity: ``out``, a cached SMat, or a new one."""
    dtype = np.dtype(dtype)
    if out is not None:
        if not isinstance(out, SMat) or out.root is not pattern.root:
            raise ValueError(
                "out= for a sparse result must be an SMat sharing the operand's pattern "
                "(made by an earlier op on the same matrix)"
            )
        out.ensure_capacity()
        return out
    scope = getattr(_cache_state, "active", None)
    if key is not None and scope is not None:
        key = (scope, key)
        found = CACHE.get(key, lambda m: m.root is pattern.root and m.dtype == dtype)
        if found is not None:
            found.ensure_capacity()
            return found
        made = SMat.with_pattern_of(pattern, dtype)
        CACHE.put(key, made, operands)
        return made
    return SMat.with_pattern_of(pattern, dtype)


# ----------------------------------------------------------------------------- operands


def _unwrap(x: Any) -> tuple[Any, Hashable]:
    """(array-or-number, cache key part) for one operand."""
    if isinstance(x, (Mat, SMat)):
        return x.data, x.guid
    if isinstance(x, SparseTranspose):
        raise TypeError("S.T of an SMat is understood by the products (@) only: for an "
                        "element-wise op transpose a dense copy, Mat(S.toarray().T)")
    if isinstance(x, bool | numbers.Integral | numbers.Real) and not hasattr(x, "shape"):
        # a float keys by its bits: 0.0 == -0.0 (x / 0.0 and x / -0.0 differ) and nan != nan
        return x, ("scalar", type(x).__name__, x.hex() if isinstance(x, float) else x)
    if isinstance(x, np.generic):
        return x, ("scalar", x.dtype.str, x.tobytes())
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        if backend.is_sparse(x):
            raise TypeError("wrap sparse matrices with bidlab.SMat before using them in ops")
        if getattr(x, "ndim", 2) != 2:
            raise ValueError(
                f"operand has shape {tuple(x.shape)}; bidlab matrices are 2-D (use "
                "x.reshape(1, -1) or x.reshape(-1, 1))"
            )
        return x, _UNCACHED  # a raw array has no GUID: results are not cached
    raise TypeError(f"unsupported operand of type {type(x).__name__}")


def _shape(a: Any) -> tuple[int, ...]:
    shape = tuple(getattr(a, "shape", (1, 1)))
    return shape or (1, 1)  # a numpy scalar (shape ()) acts as a 1 x 1 operand


def _dtype_arg(a: Any) -> Any:
    if hasattr(a, "dtype"):
        return np.dtype(a.dtype)
    # a Python bool is numpy's bool (resolve_dtypes takes only int, float, complex as weak)
    return type(a) if not isinstance(a, bool) else np.dtype(bool)


_RESOLVED: dict[tuple, np.dtype] = {}


def _resolve(ufunc: np.ufunc, *args: Any) -> np.dtype:
    """The numpy result dtype of ``ufunc`` on these operands (Python numbers are weak)."""
    sig = (ufunc.__name__, *(_dtype_arg(a) for a in args))
    found = _RESOLVED.get(sig)
    if found is None:
        try:
            found = ufunc.resolve_dtypes((*sig[1:], None))[-1]
        except Exception as exc:
            names = ", ".join(str(s) for s in sig[1:])
            raise TypeError(f"{ufunc.__name__} is not defined for dtypes ({names})") from exc
        _RESOLVED[sig] = found
    return found


def _broadcast(op: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[int, int]:
    if sa == sb:
        return sa  # type: ignore[return-value]
    out = []
    for x, y in zip(sa, sb, strict=True):
        if x != y and x != 1 and y != 1:
            raise ValueError(
                f"{op}: shapes {sa} and {sb} do not match: an element-wise op needs equal "
                "shapes, or one operand 1 x n, m x 1 or 1 x 1 (edge operators)"
            )
        out.append(max(x, y) if x != 0 and y != 0 else 0)
    return tuple(out)  # type: ignore[return-value]


def _order(a: Any, shape: tuple[int, ...]) -> str:
    if hasattr(a, "flags") and tuple(a.shape) == shape:
        if a.flags.f_contiguous and not a.flags.c_contiguous:
            return "F"
    return "C"


def _key(op: str, *parts: Hashable) -> Hashable | None:
    return None if any(p is _UNCACHED for p in parts) else (op, *parts)


def _mats(*xs: Any) -> tuple[Any, ...]:
    return tuple(x for x in xs if isinstance(x, (Mat, SMat)))


def _ufunc(xp: ModuleType, name: str) -> Any:
    if hasattr(xp, name):
        return getattr(xp, name)
    return getattr(backend.special_module(xp), name)
