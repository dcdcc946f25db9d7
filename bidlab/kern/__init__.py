"""Rooflined compute kernels on raw arrays: numba on the CPU, CUDA (CuPy) on the GPU.

This module is the one place a kernel call is checked and dispatched: it validates shapes
and dtypes, maps each product onto one of three loops over *row views* (SDDMM, gather,
scatter; see :mod:`bidlab.kern.cpu`) and sends it to :mod:`bidlab.kern.cpu` or
:mod:`bidlab.kern.cuda` according to the operands' backend (``expdigamma`` and the CSR
sums to :mod:`bidlab.kern.cpu_elementwise` on the CPU). No transpose is ever formed: a
k x m matrix's row view is its ``.T`` (a free view).

Every function writes into ``out`` when given (the allocation-free contract) and otherwise
allocates it through :func:`bidlab.backend.empty`. Each docstring names the numpy oracle
the tests compare against.

Sparse input is a scipy / cupyx CSR matrix. Unsorted column indices are handled (every
kernel visits entries in storage order); duplicate (i, j) entries follow scipy's meaning:
the products sum them, and SDDMM gives each stored copy the same value.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from bidlab import backend

__all__ = [
    "sddmm",
    "sparse_dense",
    "sparse_t_dense",
    "dense_sparse",
    "dense_sparse_t",
    "expdigamma",
    "row_sums",
    "col_sums",
]


def _impl(xp: ModuleType) -> ModuleType:
    """The module with the products (``sddmm_rows``, ``gather_rows``, ``scatter_rows``)
    for ``xp``'s backend."""
    if xp is np:
        from bidlab.kern import cpu

        return cpu
    from bidlab.kern import cuda

    return cuda


def _sums_impl(xp: ModuleType) -> ModuleType:
    """The module with ``csr_row_sums`` and ``csr_col_sums`` for ``xp``'s backend."""
    if xp is np:
        from bidlab.kern import cpu_elementwise

        return cpu_elementwise
    from bidlab.kern import cuda

    return cuda


def _check_csr(S: Any, name: str) -> None:
    if not backend.is_sparse(S) or S.format != "csr":
        kind = type(S).__name__ if not backend.is_sparse(S) else f"{S.format.upper()} matrix"
        raise TypeError(f"{name}: S must be a CSR sparse matrix; got {kind} (use S.tocsr())")
    if S.indptr.shape[0] != S.shape[0] + 1:
        raise ValueError(
            f"{name}: S's indptr has {S.indptr.shape[0]} entries for {S.shape[0]} rows; a CSR "
            "matrix needs rows + 1"
        )


def _check_float(name: str, **arrays: Any) -> None:
    for label, a in arrays.items():
        if np.dtype(a.dtype).kind not in "biuf":
            raise TypeError(f"{name}: {label} must hold real numbers; got dtype {a.dtype}")


def _float_dtype(*arrays: Any) -> np.dtype:
    """numpy's promotion of the operands, at least float32 (integer counts become float)."""
    dt = np.result_type(*(np.dtype(a.dtype) for a in arrays))
    if dt.kind != "f":
        dt = np.result_type(dt, np.float32)
    if dt not in (np.float32, np.float64):
        dt = np.dtype(np.float64)
    return dt


def _out(out: Any, shape: tuple[int, ...], dtype: np.dtype, xp: ModuleType, name: str,
         order: str = "C") -> Any:
    if out is None:
        return backend.empty(shape, dtype, xp, order)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name}: out has shape {tuple(out.shape)}; expected {tuple(shape)}")
    if np.dtype(out.dtype).kind != "f":
        raise TypeError(f"{name}: out must be float32 or float64; got {out.dtype}")
    backend.namespace(out)
    return out


def _as(a: Any, dtype: np.dtype) -> Any:
    """``a`` in ``dtype``: a view when it already is, else a cast copy (mixed dtypes only)."""
    return a if a.dtype == dtype else a.astype(dtype)


# ----------------------------------------------------------------------------- products


def sddmm(A: Any, B: Any, S: Any, out: Any = None) -> Any:
    """Sampled dense-dense product: the values of S's pattern ``out[p] = A[:, i] . B[:, j]``.

    A is k x m, B is k x n, S is an m x n CSR matrix; ``out`` has S's nnz entries, in S's
    storage order (S's own values are not used). Fastest with A and B F-ordered (each
    column's k values contiguous). Oracle::

        rows = np.repeat(np.arange(m), np.diff(S.indptr))
        np.einsum("ki,ki->i", A[:, rows], B[:, S.indices])
    """
    _check_csr(S, "sddmm")
    xp = backend.namespace(A, B, S)
    _check_float("sddmm", A=A, B=B)
    m, n = S.shape
    if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[0] or A.shape[1] != m or B.shape[1] != n:
        raise ValueError(
            f"sddmm: A {tuple(A.shape)}, B {tuple(B.shape)} and S {tuple(S.shape)} do not fit: "
            "need A k x m, B k x n and S m x n"
        )
    dtype = _float_dtype(A, B)
    out = _out(out, (S.nnz,), dtype, xp, "sddmm")
    if xp is not np:
        A, B = _as(A, out.dtype), _as(B, out.dtype)
    _impl(xp).sddmm_rows(S.indptr, S.indices, A.T, B.T, out)
    return out


def _product_args(name: str, S: Any, D: Any, need_rows: int, which: str) -> ModuleType:
    _check_csr(S, name)
    xp = backend.namespace(S, D)
    _check_float(name, S=S.data, dense=D)
    if D.ndim != 2 or D.shape[0 if which == "rows" else 1] != need_rows:
        want = f"{need_rows} rows" if which == "rows" else f"{need_rows} columns"
        raise ValueError(
            f"{name}: the dense operand {tuple(D.shape)} and S {tuple(S.shape)} do not fit: "
            f"the dense operand needs {want}"
        )
    return xp


def _dispatch(kind: str, xp: ModuleType, S: Any, G: Any, rows_out: Any) -> None:
    data = S.data
    if xp is not np:
        data, G = _as(data, rows_out.dtype), _as(G, rows_out.dtype)
    impl = _impl(xp)
    fn = impl.gather_rows if kind == "gather" else impl.scatter_rows
    fn(S.indptr, S.indices, data, G, rows_out)


def sparse_dense(S: Any, B: Any, out: Any = None) -> Any:
    """``S @ B``: S m x n CSR, B n x k -> m x k (C-ordered). Oracle: ``S.toarray() @ B``."""
    xp = _product_args("sparse_dense", S, B, S.shape[1], "rows")
    out = _out(out, (S.shape[0], B.shape[1]), _float_dtype(S.data, B), xp, "sparse_dense")
    _dispatch("gather", xp, S, B, out)
    return out


def sparse_t_dense(S: Any, B: Any, out: Any = None) -> Any:
    """``S.T @ B``: S m x n CSR, B m x k -> n x k, without forming S.T.

    Oracle: ``S.toarray().T @ B``.
    """
    xp = _product_args("sparse_t_dense", S, B, S.shape[0], "rows")
    out = _out(out, (S.shape[1], B.shape[1]), _float_dtype(S.data, B), xp, "sparse_t_dense")
    _dispatch("scatter", xp, S, B, out)
    return out


def dense_sparse(A: Any, S: Any, out: Any = None) -> Any:
    """``A @ S``: A k x m, S m x n CSR -> k x n (F-ordered: each column's k values contiguous).

    Oracle: ``A @ S.toarray()``.
    """
    xp = _product_args("dense_sparse", S, A, S.shape[0], "cols")
    out = _out(out, (A.shape[0], S.shape[1]), _float_dtype(S.data, A), xp, "dense_sparse", "F")
    _dispatch("scatter", xp, S, A.T, out.T)
    return out


def dense_sparse_t(A: Any, S: Any, out: Any = None) -> Any:
    """``A @ S.T``: A k x n, S m x n CSR -> k x m (F-ordered), without forming S.T.

    Oracle: ``A @ S.toarray().T``.
    """
    xp = _product_args("dense_sparse_t", S, A, S.shape[1], "cols")
    out = _out(out, (A.shape[0], S.shape[0]), _float_dtype(S.data, A), xp, "dense_sparse_t",
               "F")
    _dispatch("gather", xp, S, A.T, out.T)
    return out


# ----------------------------------------------------------------------------- element-wise


def expdigamma(x: Any, out: Any = None) -> Any:
    """``exp(digamma(x))`` element-wise, fused. Oracle: ``np.exp(scipy.special.digamma(x))``.

    digamma(0) = -inf (so the result is 0), negative integers give NaN, NaN propagates.
    ``out`` may be ``x`` itself.
    """
    xp = backend.namespace(x, out)
    _check_float("expdigamma", x=x)
    dtype = _float_dtype(x)
    order = "F" if x.ndim == 2 and x.flags.f_contiguous and not x.flags.c_contiguous else "C"
    out = _out(out, tuple(x.shape), dtype, xp, "expdigamma", order)
    if xp is np:
        from bidlab.kern import cpu_elementwise

        cpu_elementwise.expdigamma(x, out)
        return out
    from bidlab.kern import cuda

    same = (x.flags.c_contiguous and out.flags.c_contiguous) or (
        x.flags.f_contiguous and out.flags.f_contiguous)
    if same:
        cuda.expdigamma(x, out)
    else:  # mismatched layouts: CuPy's own element-wise ops (allocates a temporary)
        special = backend.special_module(xp)
        xp.exp(special.digamma(x.astype(dtype, copy=False)), out=out)
    return out


# ----------------------------------------------------------------------------- sums


def _sum_dtype(a: Any) -> np.dtype:
    return np.add.reduce(np.zeros(1, a.dtype)).dtype


def row_sums(X: Any, out: Any = None) -> Any:
    """Sum of each row: X m x n (dense or CSR) -> (m,). Oracle: ``np.asarray(X.sum(axis=1))``."""
    return _sums(X, out, 1, "row_sums")


def col_sums(X: Any, out: Any = None) -> Any:
    """Sum of each column: X m x n (dense or CSR) -> (n,). Oracle: ``X.sum(axis=0)``."""
    return _sums(X, out, 0, "col_sums")


def _sums(X: Any, out: Any, axis: int, name: str) -> Any:
    """The sums along ``axis`` (1: of each row, 0: of each column) into ``out``."""
    xp = backend.namespace(X, out)
    n = X.shape[1 - axis]
    if backend.is_sparse(X):
        _check_csr(X, name)
        out = _out_sum(out, n, X.data, xp, name)
        impl = _sums_impl(xp)
        if axis == 1:
            impl.csr_row_sums(X.indptr, X.data, out)
        else:
            impl.csr_col_sums(X.indptr, X.indices, X.data, out)
        return out
    out = _out_sum(out, n, X, xp, name)
    xp.sum(X, axis=axis, out=out)
    return out


def _out_sum(out: Any, n: int, values: Any, xp: ModuleType, name: str) -> Any:
    dtype = _sum_dtype(values)
    if out is None:
        if xp is not np and dtype.kind != "f":
            dtype = np.dtype(np.float64)
        return backend.empty((n,), dtype, xp)
    if tuple(out.shape) != (n,):
        raise ValueError(f"{name}: out has shape {tuple(out.shape)}; expected ({n},)")
    return out
