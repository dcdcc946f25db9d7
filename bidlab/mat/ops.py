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
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable
from types import ModuleType
from typing import Any

import numpy as np

from bidlab import backend, kern
from bidlab.mat.cache import CACHE, caching_enabled
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
    if key is not None and caching_enabled():
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
    if key is not None and caching_enabled():
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
    if isinstance(x, bool | numbers.Integral | numbers.Real) and not hasattr(x, "shape"):
        return x, ("scalar", type(x).__name__, x)
    if isinstance(x, np.generic):
        return x, ("scalar", x.dtype.str, x.item())
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
    return tuple(getattr(a, "shape", (1, 1)))


def _dtype_arg(a: Any) -> Any:
    if hasattr(a, "dtype"):
        return np.dtype(a.dtype)
    return type(a) if not isinstance(a, bool) else bool


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
        if hasattr(ov, "shape"):
            oshape = tuple(ov.shape)
            _broadcast(name, s.shape, oshape)
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


# ----------------------------------------------------------------------------- products


def _mm_shapes(op: str, sa: tuple[int, int], sb: tuple[int, int]) -> None:
    if sa[1] != sb[0]:
        raise ValueError(
            f"{op}: shapes {sa} and {sb} are not aligned: {sa[1]} (columns of the left) "
            f"!= {sb[0]} (rows of the right)"
        )


def matmul(a: Any, b: Any, out: Mat | None = None) -> Mat:
    """The matrix product ``a @ b`` for dense, sparse (CSR) and transposed-sparse operands.

    Sparse products go to the rooflined kernels without materialising a transpose:
    ``S @ D`` -> sparse_dense, ``S.T @ D`` -> sparse_t_dense, ``D @ S`` -> dense_sparse,
    ``D @ S.T`` -> dense_sparse_t.
    """
    if isinstance(a, SMat) and isinstance(b, Mat):
        return sparse_dense(a, b, out)
    if isinstance(a, SparseTranspose) and isinstance(b, Mat):
        return sparse_t_dense(a.parent, b, out)
    if isinstance(a, Mat) and isinstance(b, SMat):
        return dense_sparse(a, b, out)
    if isinstance(a, Mat) and isinstance(b, SparseTranspose):
        return dense_sparse_t(a, b.parent, out)
    if isinstance(a, (SMat, SparseTranspose)) or isinstance(b, (SMat, SparseTranspose)):
        raise TypeError("sparse x sparse products are not supported; densify one operand")
    aa, ka = _unwrap(a)
    bb, kb = _unwrap(b)
    if not hasattr(aa, "shape") or not hasattr(bb, "shape"):
        raise TypeError("@ needs two matrices; use * to scale by a number")
    xp = backend.namespace(aa, bb)
    _mm_shapes("matmul", tuple(aa.shape), tuple(bb.shape))
    shape = (aa.shape[0], bb.shape[1])
    dtype = _resolve(np.matmul, aa, bb)
    res = result(_key("matmul", ka, kb), _mats(a, b), shape, dtype, xp, out)
    xp.matmul(aa, bb, out=res.data)
    return res


def _product_dtype(*arrays: Any) -> np.dtype:
    """The products' result dtype: numpy's, promoted to a float the kernels compute in
    (bool and small ints -> float32, larger ints -> float64)."""
    dt = np.result_type(*(np.dtype(x.dtype) for x in arrays))
    if dt.kind != "f" or dt.itemsize < 4:
        dt = np.result_type(dt, np.float32)
    return dt


def sparse_dense(s: SMat, b: Mat, out: Mat | None = None) -> Mat:
    """S @ B: (m x n CSR) @ (n x k) -> m x k. Oracle: ``S.toarray() @ B``."""
    _mm_shapes("sparse_dense", s.shape, b.shape)
    xp = backend.namespace(s.data, b.data)
    dtype = _product_dtype(s, b)
    res = result(("sparse_dense", s.guid, b.guid), (s, b), (s.shape[0], b.shape[1]), dtype, xp, out)
    kern.sparse_dense(s.csr, b.data, out=res.data)
    return res


def sparse_t_dense(s: SMat, b: Mat, out: Mat | None = None) -> Mat:
    """S.T @ B: S m x n, B m x k -> n x k, without forming S.T. Oracle: ``S.toarray().T @ B``."""
    _mm_shapes("sparse_t_dense", (s.shape[1], s.shape[0]), b.shape)
    xp = backend.namespace(s.data, b.data)
    dtype = _product_dtype(s, b)
    shape = (s.shape[1], b.shape[1])
    res = result(("sparse_t_dense", s.guid, b.guid), (s, b), shape, dtype, xp, out)
    kern.sparse_t_dense(s.csr, b.data, out=res.data)
    return res


def dense_sparse(a: Mat, s: SMat, out: Mat | None = None) -> Mat:
    """A @ S: A k x m, S m x n CSR -> k x n (stored F-ordered, rows of k contiguous)."""
    _mm_shapes("dense_sparse", a.shape, s.shape)
    xp = backend.namespace(a.data, s.data)
    dtype = _product_dtype(a, s)
    shape = (a.shape[0], s.shape[1])
    res = result(("dense_sparse", a.guid, s.guid), (a, s), shape, dtype, xp, out, "F")
    kern.dense_sparse(a.data, s.csr, out=res.data)
    return res


def dense_sparse_t(a: Mat, s: SMat, out: Mat | None = None) -> Mat:
    """A @ S.T: A k x n, S m x n CSR -> k x m (F-ordered), without forming S.T."""
    _mm_shapes("dense_sparse_t", a.shape, (s.shape[1], s.shape[0]))
    xp = backend.namespace(a.data, s.data)
    dtype = _product_dtype(a, s)
    shape = (a.shape[0], s.shape[0])
    res = result(("dense_sparse_t", a.guid, s.guid), (a, s), shape, dtype, xp, out, "F")
    kern.dense_sparse_t(a.data, s.csr, out=res.data)
    return res


def sddmm(a: Mat, b: Mat, s: SMat, out: SMat | None = None) -> SMat:
    """Sampled dense-dense product: value (i, j) = A[:, i] . B[:, j] for each stored (i, j) of S.

    A is k x m, B is k x n, S is m x n; the result shares S's sparsity pattern.
    Oracle: ``np.einsum('ki,ki->i', A[:, rows], B[:, cols])``.
    """
    if not isinstance(s, SMat):
        raise TypeError(f"sddmm's third operand must be an SMat; got {type(s).__name__}")
    k = a.shape[0]
    if b.shape[0] != k or a.shape[1] != s.shape[0] or b.shape[1] != s.shape[1]:
        raise ValueError(
            f"sddmm: A {a.shape}, B {b.shape} and S {s.shape} do not fit: need A k x m, "
            "B k x n and S m x n"
        )
    backend.namespace(a.data, b.data, s.data)
    dtype = _product_dtype(a, b)
    res = sparse_result(("sddmm", a.guid, b.guid, s.guid), (a, b, s), s, dtype, out)
    kern.sddmm(a.data, b.data, s.csr, out=res.data)
    return res


# ----------------------------------------------------------------------------- indexing


def _index_key(index: Any) -> Hashable:
    parts = index if isinstance(index, tuple) else (index,)
    key = []
    for p in parts:
        if isinstance(p, slice):
            key.append(("slice", p.start, p.stop, p.step))
        elif isinstance(p, (int, np.integer)):
            key.append(("int", int(p)))
        elif isinstance(p, Mat):
            key.append(("mat", p.guid))
        else:
            return _UNCACHED
    return tuple(key)


def _normalise_index(index: Any) -> tuple[Any, Any]:
    parts = index if isinstance(index, tuple) else (index, slice(None))
    if len(parts) != 2:
        raise IndexError(f"a Mat takes [rows] or [rows, cols]; got {len(parts)} indices")
    out = []
    for p in parts:
        if isinstance(p, (int, np.integer)):
            out.append(slice(int(p), int(p) + 1 if int(p) != -1 else None))
        elif isinstance(p, Mat):
            if p.dtype.kind not in "iu":
                raise TypeError(f"an index Mat must hold integers; got {p.dtype}")
            out.append(p.data.reshape(-1))
        else:
            out.append(p)
    return out[0], out[1]


def _take_checked(view: Any, idx: Any, out: Any, axis: int) -> None:
    """Gather along ``axis`` into ``out``; host indices are checked first (numpy's in-place
    take wraps out-of-range ones instead of raising)."""
    n = view.shape[axis]
    if isinstance(idx, np.ndarray) and idx.size and (idx.max() >= n or idx.min() < -n):
        bad = int(idx.max()) if idx.max() >= n else int(idx.min())
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")
    backend.take_into(view, idx, out=out, axis=axis)


def getitem(a: Mat, index: Any, out: Mat | None = None) -> Mat:
    """A copy of a block (slices, ints -> kept 2-D) or a row/column gather by an index Mat.

    The result is cached under the slice values or the index Mat's GUID: in a loop whose
    offsets change, gather with an integer index Mat whose contents you update.
    """
    rows, cols = _normalise_index(index)
    arr = a.data
    xp = a.xp
    if not isinstance(rows, slice) and not isinstance(cols, slice):
        raise IndexError("gather rows or columns with one index Mat at a time")
    if not isinstance(rows, slice):
        view = arr[:, cols]
        shape = (int(rows.shape[0]), view.shape[1])
        res = result(
            _key("getitem", a.guid, _index_key(index)),
            _mats(a, *index) if isinstance(index, tuple) else _mats(a, index),
            shape,
            a.dtype,
            xp,
            out,
        )
        _take_checked(view, rows, res.data, 0)
        return res
    if not isinstance(cols, slice):
        view = arr[rows, :]
        shape = (view.shape[0], int(cols.shape[0]))
        res = result(
            _key("getitem", a.guid, _index_key(index)), _mats(a, *index), shape, a.dtype, xp, out
        )
        _take_checked(view, cols, res.data, 1)
        return res
    view = arr[rows, cols]
    res = result(
        _key("getitem", a.guid, _index_key(index)), (a,), tuple(view.shape), a.dtype, xp, out
    )
    res.data[...] = view
    return res


def setitem(a: Mat, index: Any, value: Any) -> None:
    """In-place assignment into a block of ``a``."""
    rows, cols = _normalise_index(index)
    v, _ = _unwrap(value)
    backend.namespace(a.data, v)
    if not isinstance(rows, slice):
        a.data[rows, cols] = v
    else:
        a.data[rows, cols] = v


# ----------------------------------------------------------------------------- copying


def copy_into(dst: Mat | SMat, src: Any) -> Mat | SMat:
    """BIDMat's ``dst <-- src``: write src's values into dst (same shape), return dst.

    The safe loop pattern computes new values from the loop variables, then copies them
    into the loop variables at the end of the step, so no cached result is mutated while
    it is still an input.
    """
    if isinstance(dst, SMat):
        return dst.copy_from(src)
    if not isinstance(dst, Mat):
        raise TypeError(f"copy_into writes into a Mat or SMat; got {type(dst).__name__}")
    if isinstance(src, SMat):
        raise TypeError("copying a sparse matrix into a dense Mat: use src.toarray() explicitly")
    v, _ = _unwrap(src)
    if hasattr(v, "shape"):
        shape = tuple(v.shape)
        if shape != dst.shape and shape != (1, 1):
            raise ValueError(f"cannot copy shape {shape} into a Mat of shape {dst.shape}")
        backend.namespace(dst.data, v)
        dst.xp.copyto(dst.data, v, casting="same_kind")
    else:
        dst.data.fill(v)
    return dst
