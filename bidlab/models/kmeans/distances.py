"""Squared distances between rows and k-means centres, by GEMM.

Distances are ``||x||^2 - 2 x.c + ||c||^2`` with the cross term from one GEMM per block
of rows (BLAS / cuBLAS; ``kern.sparse_dense`` for CSR) and a fused nearest-centre pass
(:mod:`bidlab.kern.kmeans`). The k-means engine (:mod:`bidlab.models.kmeans.model`),
its initialisation and the estimator's ``predict`` / ``transform`` all measure distances
here, on dense or CSR rows, numpy or CuPy alike.

A fitted estimator's ``labels_`` and ``predict`` both come from :func:`labels_inertia`
(one computation, so ``fit(X).labels_ == predict(X)`` to the bit, as in scikit-learn), and
a row tied between equal centres goes to the lowest index of them, whatever rounding the
GEMM gives each column (:func:`first_equal`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend, kern
from bidlab.kern.kmeans import assign, assigned_sq_dist, row_norms_sq
from bidlab.mat import Mat, SMat
from bidlab.models.kmeans.shift import centre_shift

__all__ = ["CHUNK_ENTRIES", "sq_distances", "nearest", "labels_inertia", "first_equal", "raw",
           "xp_of", "cross", "dense_rows", "distinct_rows"]

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
    (GEMM formula, clipped at 0), in ``C``'s dtype. Without ``xx`` (the rows' squared
    norms), dense rows and centres far from the origin are first moved near it
    (:func:`~bidlab.models.kmeans.shift.centre_shift`, a copy of ``X``), and then each
    row's distance to its nearest centre is measured directly (a row on a centre is at 0,
    not at the GEMM's rounding of the offset)."""
    xp = backend.namespace(C)
    exact = False
    if xx is None:
        shift = centre_shift(X, C)
        if shift is not None:  # far from the origin: move them near it (a copy of X)
            X, C, exact = X - shift, C - shift, True
        xx = row_norms_sq(X)
    D = backend.empty((X.shape[0], C.shape[0]), C.dtype, xp)
    # CSR products take a contiguous C.T; BLAS multiplies by the transposed view as it is
    cross(X, xp.ascontiguousarray(C.T) if backend.is_sparse(X) else C.T, D)
    D *= -2.0
    D += xx[:, None]
    D += xp.einsum("ij,ij->i", C, C)[None, :]
    xp.maximum(D, 0.0, out=D)
    first = first_equal(C)
    if exact and D.shape[0] and D.shape[1]:
        lab = xp.ascontiguousarray(D.argmin(axis=1))
        near = backend.empty((D.shape[0],), C.dtype, xp)
        assigned_sq_dist(X, lab, xp.ascontiguousarray(C), near)
        D[xp.arange(D.shape[0]), lab] = near
    if first is not None:  # equal centres: equal columns (the GEMM may round them apart)
        D[:, :] = D[:, xp.asarray(first)]
    return D


def distinct_rows(C: np.ndarray) -> int:
    """How many rows of ``C`` differ beyond their last bits (centres of equal rows may
    differ there): rows rounded to 9 digits of the largest entry, compared as bytes (a
    sort of k keys; ``np.unique(axis=0)`` took 0.2 s on 64 x 56,123 centres).

    Examples
    --------
    >>> import numpy as np
    >>> distinct_rows(np.array([[1.0, 0.0], [1.0 + 1e-12, -0.0], [0.0, 1.0]]))
    2
    """
    scale = max(float(np.abs(C).max(initial=0.0)), 1e-300)
    R = np.ascontiguousarray(np.round(C / scale, 9) + 0.0)  # -0.0 + 0.0 is 0.0: equal bytes
    return len(np.unique(R.view(np.dtype((np.void, R.dtype.itemsize * R.shape[1]))).ravel()))


def first_equal(C: Any) -> np.ndarray | None:
    """For each centre, the lowest index of a centre equal to it (k,), or None when all
    ``k`` centres differ.

    BLAS rounds the columns of one product differently (edge kernels), so a row's
    distances to two equal centres may differ in the last bit; mapping a label through this
    sends a row to the first of equal centres, as scikit-learn's ties do.

    Examples
    --------
    >>> import numpy as np
    >>> first_equal(np.array([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0]])).tolist()
    [0, 1, 0]
    >>> first_equal(np.eye(3)) is None
    True
    """
    xp = backend.namespace(C)
    k = C.shape[0]
    if k < 2:
        return None
    # equal centres have equal squared norms: only then compare whole rows (a sort of k
    # rows of d bytes each, a tenth of a sparse Lloyd pass at d = 25,000)
    norms = np.sort(np.asarray(backend.to_host(xp.einsum("ij,ij->i", C, C))))
    if not (norms[1:] == norms[:-1]).any():
        return None
    Ch = np.asarray(backend.to_host(C))
    Ch = np.ascontiguousarray(Ch + Ch.dtype.type(0))  # -0.0 + 0.0 is 0.0: equal bytes
    rows = Ch.view(np.dtype((np.void, Ch.dtype.itemsize * Ch.shape[1]))).ravel()
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    if first.shape[0] == k:
        return None
    return first[inverse.reshape(-1)].astype(np.int64)


def nearest(X: Any, C: Any, w: Any = None) -> tuple[Any, Any]:
    """(labels, squared distances) of every row of ``X`` to its nearest centre in ``C``.

    Chunked GEMM + fused argmin (dense rows and centres far from the origin moved near it
    first, :func:`~bidlab.models.kmeans.shift.centre_shift`); the distances are then
    measured directly (no GEMM cancellation), so their (weighted) sum is the inertia.
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
    shift = centre_shift(X, C)
    if shift is not None:  # far from the origin: each block and the centres moved near it
        C = C - shift
    CT = xp.ascontiguousarray(C.T)
    cc = xp.einsum("ij,ij->i", C, C)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        Xc = X[a:b] if shift is None else X[a:b] - shift
        cross(Xc, CT, D[: b - a])
        assign(D[: b - a], cc, row_norms_sq(Xc), labels[a:b], d1[: b - a], d2[: b - a])
        assigned_sq_dist(Xc, labels[a:b], C, dist[a:b])
    return labels, dist


def labels_inertia(X: Any, C: Any, w: Any = None) -> tuple[Any, float]:
    """(labels, inertia) of the rows of ``X`` by the centres ``C``: :func:`nearest`, with
    the (``w``-weighted) sum of the squared distances. ``fit``'s ``labels_`` and
    ``inertia_`` and ``predict`` / ``score`` all come from here, so they agree."""
    if isinstance(X, np.ndarray) and isinstance(C, np.ndarray):
        labels, dist = _nearest_fused(X, C)
    else:
        labels, dist = nearest(X, C)
    first = first_equal(C)
    if first is not None:  # equal centres: equal distances (dist stands)
        labels = backend.namespace(labels).asarray(first)[labels]
    total = dist.sum(dtype=np.float64) if w is None else (w * dist).sum(dtype=np.float64)
    return labels, float(total)


def _nearest_fused(X: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nearest` for dense CPU rows by the fused Lloyd kernel (every row computed,
    no sums: all threads, BLAS on one thread inside), the distances then measured
    directly (rows and centres far from the origin moved near it first, a block of rows at a
    time). Rows and centres of different types meet in the wider float type (integer
    rows with float32 centres in float64), never by rounding the centres to the rows'."""
    from bidlab.kern.kmeans import CenterWork
    from bidlab.kern.kmeans_lloyd import lloyd_block

    dtype = np.result_type(X.dtype, C.dtype, np.float32)
    C = np.ascontiguousarray(C, dtype=dtype)
    shift = centre_shift(X, C)
    if shift is None:
        X = np.ascontiguousarray(X, dtype=dtype)
    else:  # far from the origin: the centres and each block of rows moved near it
        C = C - shift
    n, (k, d) = X.shape[0], C.shape
    labels = np.empty(n, np.int64)
    near, second = np.empty(n, dtype), np.empty(n, dtype)
    cc = np.einsum("ij,ij->i", C, C)
    work = CenterWork(k, d)
    step = n if shift is None else max(1024, CHUNK_ENTRIES // max(d, 1))
    for a in range(0, n, step):
        b = min(n, a + step)
        Xb = X[a:b] if shift is None else np.subtract(X[a:b], shift, dtype=dtype)
        lloyd_block(Xb, C, cc, row_norms_sq(Xb), labels[a:b], near[a:b], second[a:b], work,
                    sums=False, root=False)
        assigned_sq_dist(Xb, labels[a:b], C, near[a:b])
    return labels, near
