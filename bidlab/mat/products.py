"""Matrix products of the core: ``matmul`` (dense, sparse and transposed-sparse operands)
and the sparse products ``sparse_dense``, ``sparse_t_dense``, ``dense_sparse``,
``dense_sparse_t`` and ``sddmm``, cached like every operation (:mod:`bidlab.mat.ops`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend, kern
from bidlab.mat.dense import Mat
from bidlab.mat.operands import _key, _mats, _resolve, _unwrap, result, sparse_result
from bidlab.mat.sparse import SMat, SparseTranspose


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
    sparse_a = isinstance(a, (SMat, SparseTranspose))
    sparse_b = isinstance(b, (SMat, SparseTranspose))
    if sparse_a and sparse_b:
        raise TypeError("sparse x sparse products are not supported; densify one operand")
    if sparse_a or sparse_b:
        other = type(b if sparse_a else a).__name__
        raise TypeError(f"a sparse product takes a bidlab.Mat as its dense operand; got "
                        f"{other}: wrap it, bidlab.Mat(x), once outside the loop")
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


def _dense_by_sparse(op: str, a: Mat, s: SMat, out: Mat | None, transposed: bool) -> Mat:
    """``A @ S`` (or ``A @ S.T``), F-ordered, by the kernel of the name ``op``."""
    right = (s.shape[1], s.shape[0]) if transposed else s.shape
    _mm_shapes(op, a.shape, right)
    xp = backend.namespace(a.data, s.data)
    shape = (a.shape[0], right[1])
    res = result((op, a.guid, s.guid), (a, s), shape, _product_dtype(a, s), xp, out, "F")
    getattr(kern, op)(a.data, s.csr, out=res.data)
    return res


def dense_sparse(a: Mat, s: SMat, out: Mat | None = None) -> Mat:
    """A @ S: A k x m, S m x n CSR -> k x n (stored F-ordered, rows of k contiguous)."""
    return _dense_by_sparse("dense_sparse", a, s, out, transposed=False)


def dense_sparse_t(a: Mat, s: SMat, out: Mat | None = None) -> Mat:
    """A @ S.T: A k x n, S m x n CSR -> k x m (F-ordered), without forming S.T."""
    return _dense_by_sparse("dense_sparse_t", a, s, out, transposed=True)


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
