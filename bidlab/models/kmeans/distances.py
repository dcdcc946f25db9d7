"""Squared distances between rows and k-means centres, by GEMM.

Distances are ``||x||^2 - 2 x.c + ||c||^2`` with the cross term from one GEMM per block
of rows (BLAS / cuBLAS; ``kern.sparse_dense`` for CSR) and a fused nearest-centre pass
(:mod:`bidlab.kern.kmeans`). The k-means engine (:mod:`bidlab.models.kmeans.model`),
its initialisation and the estimator's ``predict`` / ``transform`` all measure distances
here, on dense or CSR rows, numpy or CuPy alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend, kern
from bidlab.kern.kmeans import assign, assigned_sq_dist, row_norms_sq
from bidlab.mat import Mat, SMat

__all__ = ["CHUNK_ENTRIES", "sq_distances", "nearest", "raw", "xp_of", "cross", "dense_rows"]

CHUNK_ENTRIES = 1 << 22  # distances per GEMM block (16 MiB of float32)


def raw(X: Any) -> Any:
    """The raw array (or CSR matrix) of a ``Mat`` / ``SMat``; anything else as given."""
    return X.csr if isinstance(X, SMat) else (X.data if isinstance(X, Mat) else X)


def xp_of(X: Any) -> Any:
    """The array module (numpy or CuPy) of a dense array or CSR matrix."""
    return backend.namespace(X.data if backend.is_sparse(X) else X)


def cross(X: Any, CT: Any, out: Any) -> None:
    """out = X @ CT (X dense or CSR m x d, CT d x k)."""
    if backend.is_sparse(X):
        kern.sparse_dense(X, CT, out=out)
    else:
        xp_of(X).matmul(X, CT, out=out)


def dense_rows(X: Any, idx: Any) -> Any:
    """The rows ``idx`` of ``X`` (dense or CSR) as a dense array."""
    rows = X[idx]
    return rows.toarray() if backend.is_sparse(rows) else rows


def sq_distances(X: Any, C: Any, xx: Any = None) -> Any:
    """n x m squared distances from every row of ``X`` (dense or CSR) to the rows of ``C``
    (GEMM formula, clipped at 0), in ``C``'s dtype."""
    xp = backend.namespace(C)
    if xx is None:
        xx = row_norms_sq(X)
    D = backend.empty((X.shape[0], C.shape[0]), C.dtype, xp)
    cross(X, xp.ascontiguousarray(C.T), D)
    D *= -2.0
    D += xx[:, None]
    D += xp.einsum("ij,ij->i", C, C)[None, :]
    xp.maximum(D, 0.0, out=D)
    return D


def nearest(X: Any, C: Any, w: Any = None) -> tuple[Any, Any]:
    """(labels, squared distances) of every row of ``X`` to its nearest centre in ``C``.

    Chunked GEMM + fused argmin; the distances are then measured directly (no GEMM
    cancellation), so their (weighted) sum is the inertia.
    """
    xp = backend.namespace(C)
    n, k = X.shape[0], C.shape[0]
    chunk = max(1, CHUNK_ENTRIES // max(k, 1))
    labels = backend.empty((n,), np.int64, xp)
    dist = backend.empty((n,), C.dtype, xp)
    rows = min(chunk, n)
    D = backend.empty((rows, k), C.dtype, xp)
    d1 = backend.empty((rows,), C.dtype, xp)
    d2 = backend.empty((rows,), C.dtype, xp)
    CT = xp.ascontiguousarray(C.T)
    cc = xp.einsum("ij,ij->i", C, C)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        Xc = X[a:b]
        cross(Xc, CT, D[: b - a])
        assign(D[: b - a], cc, row_norms_sq(Xc), labels[a:b], d1[: b - a], d2[: b - a])
        assigned_sq_dist(Xc, labels[a:b], C, dist[a:b])
    return labels, dist
