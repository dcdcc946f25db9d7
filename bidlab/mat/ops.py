"""Every matrix operation of the core, written once for numpy and cupy.

Each operation (1) takes ``xp`` from its operands (mixing backends is a TypeError that
names both), (2) checks shapes and names both in any error, (3) resolves the result dtype
the numpy way (``ufunc.resolve_dtypes``: float32 * 0.5 stays float32, int / int is
float64), (4) asks :func:`result` for a container -- ``out=`` if given, else the cached
one when caching is on, else a fresh counted allocation -- and (5) writes into it.

Cache keys are ``(op, operand keys..., shape-determining args)`` where a matrix operand's
key is its GUID and a Python number's key is its value. That is why live
hyperparameters must be 1 x 1 (or vector) matrices: their GUID never changes, so updating
their contents never adds a cache entry, while a changing Python float would.

This module holds the elementwise operations and reductions; the shared parts live in
:mod:`bidlab.mat.operands`, the products in :mod:`bidlab.mat.products`, indexing and
copying in :mod:`bidlab.mat.indexing`, all reachable from here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend, kern
from bidlab.mat.dense import Mat

# re-exported: every operation is reachable as bidlab.mat.ops.<name>
from bidlab.mat.indexing import copy_into, getitem, setitem  # noqa: F401
from bidlab.mat.operands import (
    _broadcast,
    _key,
    _mats,
    _order,
    _resolve,
    _shape,
    _ufunc,
    _unwrap,
    result,
    sparse_result,
)
from bidlab.mat.products import (  # noqa: F401
    dense_sparse,
    dense_sparse_t,
    matmul,
    sddmm,
    sparse_dense,
    sparse_t_dense,
)
from bidlab.mat.sparse import SMat

# ----------------------------------------------------------------------------- binary


def _binary(name: str, a: Any, b: Any, out: Any = None) -> Any:
    if isinstance(a, SMat) or isinstance(b, SMat):
        return _sparse_binary(name, a, b, out)
    aa, ka = _unwrap(a)
    bb, kb = _unwrap(b)
    xp = backend.namespace(aa, bb)
    shape = _broadcast(name, _shape(aa), _shape(bb))
    if len(shape) != 2:
        raise ValueError(f"{name}: needs at least one matrix operand")
    dtype = _resolve(getattr(np, name), aa, bb)
    first = aa if hasattr(aa, "shape") else bb
    res = result(_key(name, ka, kb), _mats(a, b), shape, dtype, xp, out, _order(first, shape))
    getattr(xp, name)(aa, bb, out=res.data)
    return res


def _sparse_binary(name: str, a: Any, b: Any, out: Any = None) -> SMat:
    """Element-wise op on the stored entries of a sparse operand (result keeps its pattern)."""
    s = a if isinstance(a, SMat) else b
    other = b if s is a else a
    if name not in ("add", "subtract", "multiply", "true_divide", "power"):
        raise TypeError(f"{name} is not supported on sparse matrices")
    sv = s.data
    if isinstance(other, SMat):
        if other.root is not s.root and not _same_pattern(s, other):
            raise ValueError(
                f"{name}: sparse operands of shapes {a.shape} and {b.shape} have different "
                "sparsity patterns; element-wise ops between SMats need one pattern (e.g. "
                "P = sddmm(A, B, S) has S's pattern)"
            )
        ov, ko = other.data, other.guid
    else:
        ov, ko = _unwrap(other)
        if hasattr(ov, "shape") and not isinstance(ov, np.generic):
            oshape = tuple(ov.shape)
            if _broadcast(name, s.shape, oshape) != s.shape:
                raise ValueError(
                    f"{name}: the result keeps the sparse operand's shape {s.shape}, so the "
                    f"dense operand of shape {oshape} cannot broadcast over it (it must be "
                    "m x n, 1 x n, m x 1 or 1 x 1); densify the sparse one with .toarray()"
                )
            if oshape != (1, 1):
                ov = _gather_dense_at_pattern(s, ov, oshape)
            else:
                ov = ov.reshape(1)
    xp = backend.namespace(sv, ov)
    args = (sv, ov) if s is a else (ov, sv)
    dtype = _resolve(getattr(np, name), *args)
    key = _key("s" + name, a.guid if s is a else ko, ko if s is a else b.guid)
    res = sparse_result(key, _mats(a, b), s, dtype, out)
    getattr(xp, name)(*args, out=res.data)
    return res


def _same_pattern(a: SMat, b: SMat) -> bool:
    xp = a.xp
    return (
        a.shape == b.shape
        and a.nnz == b.nnz
        and bool(xp.array_equal(a.indptr, b.indptr))
        and bool(xp.array_equal(a.indices, b.indices))
    )


def _gather_dense_at_pattern(s: SMat, d: Any, dshape: tuple[int, ...]) -> Any:
    """The dense operand's value at each stored entry of ``s`` (broadcasting 1 x n / m x 1)."""
    if dshape[0] == 1:
        return d[0, s.indices]
    if dshape[1] == 1:
        return d[s.row_index(), 0]
    return d[s.row_index(), s.indices]


def add(a: Any, b: Any, out: Any = None) -> Any:
    """a + b element-wise (edge-broadcast)."""
    return _binary("add", a, b, out)


def subtract(a: Any, b: Any, out: Any = None) -> Any:
    """a - b element-wise."""
    return _binary("subtract", a, b, out)


def multiply(a: Any, b: Any, out: Any = None) -> Any:
    """a * b element-wise (use ``@`` for the matrix product)."""
    return _binary("multiply", a, b, out)


def divide(a: Any, b: Any, out: Any = None) -> Any:
    """a / b element-wise (true division)."""
    return _binary("true_divide", a, b, out)


def power(a: Any, b: Any, out: Any = None) -> Any:
    """a ** b element-wise."""
    return _binary("power", a, b, out)


def maximum(a: Any, b: Any, out: Any = None) -> Mat:
    """Element-wise maximum (NaN propagates)."""
    return _binary("maximum", a, b, out)


def minimum(a: Any, b: Any, out: Any = None) -> Mat:
    """Element-wise minimum (NaN propagates)."""
    return _binary("minimum", a, b, out)


def greater(a: Any, b: Any, out: Any = None) -> Mat:
    return _binary("greater", a, b, out)


def greater_equal(a: Any, b: Any, out: Any = None) -> Mat:
    return _binary("greater_equal", a, b, out)


def less(a: Any, b: Any, out: Any = None) -> Mat:
    return _binary("less", a, b, out)


def less_equal(a: Any, b: Any, out: Any = None) -> Mat:
    return _binary("less_equal", a, b, out)


def equal(a: Any, b: Any, out: Any = None) -> Mat:
    return _binary("equal", a, b, out)


def not_equal(a: Any, b: Any, out: Any = None) -> Mat:
    return _binary("not_equal", a, b, out)


# ----------------------------------------------------------------------------- unary

_SPECIAL = {"digamma", "gammaln", "expit"}


def _unary(name: str, a: Any, out: Any = None) -> Any:
    if not isinstance(a, (Mat, SMat)):
        a = Mat(a) if not backend.is_sparse(a) else SMat(a)
    arr = a.data
    xp = backend.namespace(arr)
    if name == "expdigamma":
        dtype = _resolve(np.exp, arr)
    else:
        ufunc = getattr(backend.special_module(np), name) if name in _SPECIAL else getattr(np, name)
        dtype = _resolve(ufunc, arr)
    if dtype.kind == "f" and dtype.itemsize < 4 and arr.dtype.kind in "bui":
        dtype = np.dtype(np.float32)  # bool / small ints: numpy says float16; compute in f32
    if isinstance(a, SMat):
        res = sparse_result(_key("s" + name, a.guid), (a,), a, dtype, out)
    else:
        res = result(_key(name, a.guid), (a,), a.shape, dtype, xp, out, _order(arr, a.shape))
    if name == "expdigamma":
        src = arr if arr.dtype == dtype else arr.astype(dtype)
        kern.expdigamma(src, out=res.data)
    else:
        _ufunc(xp, name)(arr, out=res.data)
    return res


def exp(a: Any, out: Any = None) -> Any:
    """Element-wise exp (sparse: on stored entries)."""
    return _unary("exp", a, out)


def log(a: Any, out: Any = None) -> Any:
    """Element-wise natural log (log 0 = -inf, log of a negative = NaN, as numpy)."""
    return _unary("log", a, out)


def sqrt(a: Any, out: Any = None) -> Any:
    return _unary("sqrt", a, out)


def absolute(a: Any, out: Any = None) -> Any:
    return _unary("absolute", a, out)


def negative(a: Any, out: Any = None) -> Any:
    return _unary("negative", a, out)


def sign(a: Any, out: Any = None) -> Any:
    return _unary("sign", a, out)


def log1p(a: Any, out: Any = None) -> Any:
    return _unary("log1p", a, out)


def tanh(a: Any, out: Any = None) -> Any:
    return _unary("tanh", a, out)


def sigmoid(a: Any, out: Any = None) -> Any:
    """1 / (1 + exp(-a)), computed stably (scipy.special.expit)."""
    return _unary("expit", a, out)


def digamma(a: Any, out: Any = None) -> Any:
    """The digamma function psi(a) (scipy.special.digamma / cupyx)."""
    return _unary("digamma", a, out)


def gammaln(a: Any, out: Any = None) -> Any:
    """log |Gamma(a)| (scipy.special.gammaln / cupyx)."""
    return _unary("gammaln", a, out)


def expdigamma(a: Any, out: Any = None) -> Any:
    """exp(digamma(a)) fused in one kernel (the variational LDA update's hot spot)."""
    return _unary("expdigamma", a, out)


abs = absolute  # noqa: A001  (bidlab.abs mirrors numpy.abs)

# ----------------------------------------------------------------------------- reductions


def reduce(name: str, a: Any, axis: int | None = None, out: Mat | None = None) -> Mat:
    """sum / mean / max / min over axis 0 (-> 1 x n), 1 (-> m x 1) or all (-> 1 x 1)."""
    if axis not in (None, 0, 1):
        raise ValueError(f"{name}: axis must be 0, 1 or None; got {axis!r}")
    if not isinstance(a, (Mat, SMat)):
        a = Mat(a)
    m, n = a.shape
    shape = (1, n) if axis == 0 else (m, 1) if axis == 1 else (1, 1)
    xp = a.xp
    dtype = a.dtype
    if name == "sum":
        dtype = np.add.reduce(np.zeros(1, a.dtype)).dtype
    elif name == "mean":
        dtype = np.mean(np.zeros(1, a.dtype)).dtype
    res = result(_key(name, a.guid, axis), (a,), shape, dtype, xp, out)
    if isinstance(a, SMat):
        if name != "sum":
            raise TypeError(f"{name} over a sparse matrix is not supported; use sum")
        if axis == 0:
            kern.col_sums(a.csr, out=res.data.reshape(-1))
        elif axis == 1:
            kern.row_sums(a.csr, out=res.data.reshape(-1))
        else:
            xp.sum(a.data, keepdims=True, out=res.data.reshape(1))
        return res
    if min(m, n) == 0 and name in ("max", "min"):
        raise ValueError(f"{name} of an empty {m}x{n} matrix is undefined")
    if xp is not np and name in ("max", "min"):
        # CuPy's CUB min/max path rejects out= under numpy 2 (it compares an array with a
        # dtype); the pooled temporary is copied into the cached result.
        res.data[...] = getattr(xp, name)(a.data, axis=axis, keepdims=True)
    else:
        getattr(xp, name)(a.data, axis=axis, keepdims=True, out=res.data)
    return res
