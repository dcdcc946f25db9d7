"""Conjugate-gradient steps of alternating least squares, every row's system at once.

One side of a factorisation ``R ~ X @ O.T`` is solved with the other side ``O`` fixed: for
each row ``u`` of the sparse ratings ``S`` (rows x others, CSR) the normal equations

* **explicit** (squared loss on the stored entries, with biases): ``z_j = [o_j, 1]`` (the
  other side's factors with its bias column read as 1), target ``s_uj - mu - O[j, -1]``,
  ``(sum_j z_j z_j' + l2 I) x_u = sum_j (s_uj - mu - O[j, -1]) z_j``; the last column of
  ``X`` is then the row's own bias;
* **implicit** (Hu-Koren-Volinsky confidence ``c = 1 + alpha s``, preference 1 where
  stored, 0 elsewhere): ``(G + sum_j alpha s_uj o_j o_j') x_u = sum_j (1 + alpha s_uj) o_j``
  with ``G = O' O + l2 I`` (every entry, stored or not, counts with confidence 1);

and :func:`solve_rows` runs ``steps`` conjugate-gradient iterations on them from ``X`` as it
is (a warm start). On the CPU one numba kernel does it all: the rows are cut into blocks of
:data:`BLOCK` consecutive rows that idle threads take one at a time (the rows' costs follow
their stored entries, so equal shares of rows would leave one thread with most of the work
when the rows are sorted by activity), and a block takes every step before the next: the
dense ``G`` product of its rows is one single-threaded GEMM a step (``P @ G``), and the
sparse part, the dot products and the vector updates of a row are fused in one loop, while
the block's rows and the other side's rows they read are in the cache. No step allocates.

With many factors the ``P @ G`` products dominate a step (f^2 per row against f per stored
entry). :func:`rotation` diagonalises ``G = Q diag(lam) Q'``; with ``O`` and ``X`` turned
into that basis (``O Q``, ``X Q``: whole-matrix products at the BLAS's full speed) the same
steps (CG commutes with an orthogonal change of basis) take f per row for the Gram
product, the blocks shrink to one row (nothing left to share), and ``X`` is turned back
after the last step (``diagonal=True``; :class:`bidlab.models.sfa.model.SFAModel` does this for
implicit feedback from ``ROTATE_MIN_F`` factors on).

:func:`solve_rows_reference` is the same iteration written as whole-array ``xp`` operations
(numpy or CuPy): the GPU path and the CPU kernels' oracle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from numba import prange

from bidlab import backend
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.als_entries import entry_products
from bidlab.kern.standin import stand_in

__all__ = ["Scratch", "blas_threads", "rotation", "solve_rows", "solve_rows_reference"]

#: rows per block: a block's rows take their conjugate-gradient steps together (one
#: ``P @ G`` product each), and idle threads take the next block
BLOCK = 32
#: rows per block when the Gram matrix is diagonal (:func:`rotation`): with no block
#: product to share, one row takes all its steps while the other side's rows it reads
#: stay in the core's cache
DIAGONAL_BLOCK = 1


@numba.njit(inline="always")
def _zdot(o, x, fk, bias, zero):  # pragma: no cover - compiled
    """``z . x`` for ``z = [o, 1]``: the first ``fk`` numbers of ``o`` and ``x``, and with
    ``bias`` the bias, ``x[fk]`` (times the 1 that ``o``'s bias column reads as)."""
    dot = zero
    for t in range(fk):
        dot += o[t] * x[t]
    if bias:
        dot += x[fk]
    return dot


@numba.njit(inline="always")
def _zaxpy(y, a, o, fk, bias):  # pragma: no cover - compiled
    """``y += a z`` for ``z = [o, 1]`` (as :func:`_zdot`)."""
    for t in range(fk):
        y[t] += a * o[t]
    if bias:
        y[fk] += a


@numba.njit(inline="always")
def _start_row(u, indptr, indices, data, O, X, AP, R, P, rs, err, fk, bias, implicit, alpha,
               mu, l2, zero, one):  # pragma: no cover - compiled
    """Row ``u``'s residual ``r = b - A x`` (``AP[u]`` holds ``x G`` when implicit),
    ``p = r``, ``rs[u] = |r|^2`` and its squared error over its stored entries."""
    f = X.shape[1]
    e = zero
    for t in range(f):
        R[u, t] = -AP[u, t] if implicit else -l2 * X[u, t]
    x = X[u]
    r = R[u]
    for q in range(indptr[u], indptr[u + 1]):
        o = O[indices[q]]
        v = data[q]
        dot = _zdot(o, x, fk, bias, zero)
        if implicit:
            c = (one + alpha * v) - alpha * v * dot
            e += (one - dot) * (one - dot)
        else:
            c = v - mu - o[f - 1] - dot
            e += c * c
        _zaxpy(r, c, o, fk, bias)
    s = zero
    for t in range(f):
        P[u, t] = R[u, t]
        s += R[u, t] * R[u, t]
    rs[u] = s
    err[u] = e


@numba.njit(inline="always")
def _step_row(u, indptr, indices, data, O, X, AP, R, P, rs, fk, bias, implicit, alpha, l2,
              tiny, zero, one):  # pragma: no cover - compiled
    """One conjugate-gradient step of row ``u`` (``AP[u]`` holds ``p G`` when implicit)."""
    f = X.shape[1]
    if rs[u] <= tiny:
        return
    if not implicit:
        for t in range(f):
            AP[u, t] = l2 * P[u, t]
    p = P[u]
    ap = AP[u]
    for q in range(indptr[u], indptr[u + 1]):
        o = O[indices[q]]
        w = alpha * data[q] if implicit else one
        _zaxpy(ap, _zdot(o, p, fk, bias, zero) * w, o, fk, bias)
    pap = zero
    for t in range(f):
        pap += P[u, t] * AP[u, t]
    if pap <= tiny:
        rs[u] = 0.0
        return
    a = rs[u] / pap
    s = zero
    for t in range(f):
        X[u, t] += a * P[u, t]
        R[u, t] -= a * AP[u, t]
        s += R[u, t] * R[u, t]
    beta = s / rs[u]
    for t in range(f):
        P[u, t] = R[u, t] + beta * P[u, t]
    rs[u] = s


@numba.njit(inline="always")
def _gram_rows(A, G, out, lo, hi, diag):  # pragma: no cover - compiled
    """``out[lo:hi] = A[lo:hi] @ G``; with ``diag``, ``G`` is the 1 x f diagonal of a
    diagonal Gram matrix and the product is elementwise."""
    if diag:
        for u in range(lo, hi):
            for t in range(A.shape[1]):
                out[u, t] = G[0, t] * A[u, t]
    else:
        np.dot(A[lo:hi], G, out[lo:hi])


@adaptive_kernel(cache=True, nogil=True, fastmath=True)
def _solve(indptr, indices, data, O, X, G, R, P, AP, rs, err, steps, block, bias, implicit,
           diag, alpha, mu, l2, tiny, zero, one):  # pragma: no cover - compiled
    n, f = X.shape
    fk = f - bias
    nb = (n + block - 1) // block
    for b in prange(nb):
        lo = b * block
        hi = min(n, lo + block)
        if implicit:
            _gram_rows(X, G, AP, lo, hi, diag)
        for u in range(lo, hi):
            _start_row(u, indptr, indices, data, O, X, AP, R, P, rs, err, fk, bias,
                       implicit, alpha, mu, l2, zero, one)
        for _ in range(steps):
            live = 0
            for u in range(lo, hi):
                if rs[u] > tiny:
                    live += 1
            if live == 0:
                break
            if implicit:
                _gram_rows(P, G, AP, lo, hi, diag)
            for u in range(lo, hi):
                _step_row(u, indptr, indices, data, O, X, AP, R, P, rs, fk, bias,
                          implicit, alpha, l2, tiny, zero, one)


@dataclass
class Scratch:
    """The iteration's arrays for ``rows`` rows of ``f`` numbers: residuals ``R``,
    directions ``P``, products ``AP``, squared residual norms ``rs`` and each row's squared
    error over its stored entries at the start (``err``); kept and reused."""

    R: Any
    P: Any
    AP: Any
    rs: Any
    err: Any

    @classmethod
    def new(cls, rows: int, f: int, dtype: Any, xp: Any = np) -> Scratch:
        """Scratch for ``rows`` x ``f`` factors of ``dtype`` on ``xp``."""
        return cls(*(backend.zeros((rows, f), dtype, xp) for _ in range(3)),
                   backend.zeros((rows,), dtype, xp), backend.zeros((rows,), dtype, xp))

    def view(self, n: int) -> Scratch:
        """The first ``n`` rows (a minibatch shorter than the scratch)."""
        return Scratch(self.R[:n], self.P[:n], self.AP[:n], self.rs[:n], self.err[:n])


_NO_GRAM: dict[Any, np.ndarray] = {}


def _no_gram(dtype: Any) -> np.ndarray:
    """A 1 x 1 stand-in for the Gram matrix of explicit ratings (never read; contiguous,
    so both feedbacks share one compiled kernel)."""
    got = _NO_GRAM.get(np.dtype(dtype))
    if got is None:
        got = _NO_GRAM[np.dtype(dtype)] = np.zeros((1, 1), dtype)
    return got


def _csr(S: Any) -> tuple[Any, Any, Any]:
    return S.indptr, S.indices, S.data


def rotation(gram: Any) -> tuple[Any, Any]:
    """The eigen-decomposition ``gram = Q diag(lam) Q'`` of a Gram matrix ``O' O + l2 I``:
    ``(lam as a 1 x f row, Q)`` in ``gram``'s dtype (computed in float64).

    Conjugate gradient commutes with an orthogonal change of basis: the steps on
    ``(G + sum_j w_j o_j o_j') x = b`` from ``x0`` and those on the same system with
    ``x = Q y``, ``o_j = Q p_j`` (so ``G`` becomes ``diag(lam)``) from ``y0 = Q' x0`` give
    ``x_t = Q y_t``. Rotated, a step's Gram product costs f per row instead of f^2, for
    three products a side (``O Q``, ``X Q`` and back) instead of one per step.

    Examples
    --------
    >>> import numpy as np
    >>> O = np.random.default_rng(0).standard_normal((50, 3))
    >>> lam, Q = rotation(O.T @ O + np.eye(3))
    >>> bool(np.allclose(Q * lam @ Q.T, O.T @ O + np.eye(3)))
    True
    """
    xp = backend.namespace(gram)
    lam, Q = xp.linalg.eigh(gram.astype(xp.float64))
    return lam.astype(gram.dtype).reshape(1, -1), xp.ascontiguousarray(Q.astype(gram.dtype))


def solve_rows(S: Any, O: Any, X: Any, sc: Scratch, *, steps: int, gram: Any = None,
               l2: float = 0.0, alpha: float = 1.0, mu: float = 0.0,
               bias: bool = False, diagonal: bool = False) -> None:
    """``steps`` conjugate-gradient steps on each row of ``X`` (in place, from its values).

    Parameters
    ----------
    S
        ratings, rows x others (scipy or CuPy CSR, ``X``'s dtype).
    O
        the other side's factors (others x f; with ``bias``, its last column is its
        bias and reads as 1 in the products).
    X
        this side's factors (rows x f), updated in place.
    sc
        :class:`Scratch` of ``X``'s rows.
    steps
        conjugate-gradient steps.
    gram
        ``O' O + l2 I`` (implicit feedback), or None (explicit ratings).
    l2
        the L2 weight (explicit; the implicit one is in ``gram``).
    alpha
        the implicit confidence slope.
    mu
        the global mean (explicit).
    bias
        the last columns are biases (explicit).
    diagonal
        ``gram`` is the 1 x f diagonal of a diagonal Gram matrix: ``O`` and
        ``X`` are in the eigenvector basis of ``O' O + l2 I`` (:func:`rotation`), where
        each step's Gram product costs f instead of f^2 per row.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> S = sp.csr_matrix(np.array([[5.0, 0, 3], [0, 4, 1]]))
    >>> O = np.ones((3, 2)); X = np.zeros((2, 2)); sc = Scratch.new(2, 2, np.float64)
    >>> solve_rows(S, O, X, sc, steps=2, gram=O.T @ O + np.eye(2), alpha=1.0)
    >>> X.shape
    (2, 2)
    """
    xp = backend.namespace(X)
    if xp is not np:
        solve_rows_reference(S, O, X, sc, steps=steps, gram=gram, l2=l2, alpha=alpha,
                             mu=mu, bias=bias, diagonal=diagonal)
        return
    implicit = gram is not None
    diag = implicit and bool(diagonal)
    G = gram if implicit else _no_gram(X.dtype)
    ip, ix, dv = _csr(S)
    dt = X.dtype.type
    # one-thread BLAS: the kernel's threads call it on their blocks; chunks of one block:
    # each idle thread takes the next block
    chunk = numba.set_parallel_chunksize(1)
    try:
        with blas_threads(0):
            _solve((S.nnz + X.size) * X.shape[1] * (steps + 1), ip, ix, dv, O, X, G,
                   sc.R, sc.P, sc.AP, sc.rs, sc.err, int(steps),
                   DIAGONAL_BLOCK if diag else BLOCK, int(bias), implicit, diag, dt(alpha),
                   dt(mu), dt(l2), dt(np.finfo(X.dtype).tiny), dt(0), dt(1))
    finally:
        numba.set_parallel_chunksize(chunk)


#: below this many multiply-adds a product runs on one BLAS thread (:func:`blas_threads`;
#: :func:`solve_rows` always runs its block products on one): a threaded BLAS takes ~100x
#: longer on small products when the cores are busy (610 x 64 x 64: 34 ms on two threads
#: of a loaded 2-core machine, 0.2 ms on one)
SMALL_GEMM = 1 << 26
_BLAS: list[Any] = []


def blas_threads(work: int) -> Any:
    """A context: BLAS on one thread when ``work`` (multiply-adds) is below
    :data:`SMALL_GEMM`, else as it is."""
    if work >= SMALL_GEMM:
        return contextlib.nullcontext()
    if not _BLAS:
        import scipy.linalg.cython_blas  # noqa: F401 - numba's np.dot calls SciPy's BLAS
        from threadpoolctl import ThreadpoolController

        _BLAS.append(ThreadpoolController().select(user_api="blas"))
    return _BLAS[0].limit(limits=1)


def _solve_arrays(indptr, indices, data, O, X, G, R, P, AP, rs, err, steps, block, bias,  # noqa: ANN001
                  implicit, diag, alpha, mu, l2, tiny, zero, one) -> None:
    """``_solve``'s array-level form (:mod:`bidlab.kern.standin` runs it while the kernel
    compiles): :func:`solve_rows_reference` on the same arrays. ``AP`` is scratch it does
    not write; ``block`` only splits the kernel's work."""
    import scipy.sparse as sp

    nnz = int(indptr[X.shape[0]])
    S = sp.csr_matrix((data[:nnz], indices[:nnz], indptr), shape=(X.shape[0], O.shape[0]),
                      copy=False)
    solve_rows_reference(S, O, X, Scratch(R, P, AP, rs, err), steps=int(steps),
                         gram=G if implicit else None, l2=float(l2), alpha=float(alpha),
                         mu=float(mu), bias=bool(bias), diagonal=bool(diag))


def solve_rows_reference(S: Any, O: Any, X: Any, sc: Scratch, *, steps: int,
                         gram: Any = None, l2: float = 0.0, alpha: float = 1.0,
                         mu: float = 0.0, bias: bool = False, diagonal: bool = False,
                         allreduce: Callable[[list[Any]], None] | None = None) -> None:
    """:func:`solve_rows` as whole-array operations of ``X``'s array module (numpy or
    CuPy): the GPU path and the CPU kernels' oracle (it allocates temporaries).

    ``allreduce``: the stored entries are one share of the ratings, the other shares held
    by other ranks (a side whose rows' entries are split among ranks: the items, when each
    rank holds some users). It sums a list of arrays over the ranks in place; the data
    terms of the residual and of each step's product are summed with it (one call each),
    so every rank takes the steps of the whole system, and ends with the same ``X`` when
    it started with the same ``X`` and ``gram`` holds the summed ``O' O`` (``sc.err``
    stays its share's).
    """
    xp = backend.namespace(X)
    implicit = gram is not None
    v = S.data
    Zf = O.copy()
    if bias:
        Zf[:, -1] = 1
    dots, pull, row_sums = entry_products(S, Zf, xp)
    if implicit:
        target = 1 + alpha * v
        weights = alpha * v
    else:
        target = v - mu - O[S.indices, -1]
        weights = None

    B = pull(target)

    def entries(V: Any) -> Any:
        """``sum_j w_uj (z_j . V[u]) z_j`` over the stored entries."""
        d = dots(V)
        return pull(d * weights if implicit else d)

    def regular(V: Any) -> Any:
        """The Gram (implicit) or L2 (explicit) part of ``A V``."""
        if implicit:
            return V * gram if diagonal else V @ gram
        return l2 * V

    def matvec(V: Any) -> Any:
        """``A V``, its data term summed over the ranks."""
        share = entries(V)
        if allreduce is not None:
            allreduce([share])
        return share + regular(V)

    pred = dots(X)
    e = (1 - pred) ** 2 if implicit else (target - pred) ** 2
    sc.err[...] = row_sums(e)
    R = B - entries(X)
    if allreduce is not None:
        allreduce([R])
    R -= regular(X)
    P = R.copy()
    rs = (R * R).sum(axis=1)
    tiny = xp.finfo(X.dtype).tiny
    for _ in range(steps):
        live = rs > tiny
        AP = matvec(P)
        pap = (P * AP).sum(axis=1)
        live &= pap > tiny
        a = xp.where(live, rs / xp.where(live, pap, 1), 0)[:, None]
        X += a * P
        R -= a * AP
        rs_new = (R * R).sum(axis=1)
        beta = xp.where(live, rs_new / xp.where(live, rs, 1), 0)[:, None]
        P = R + beta * P
        rs = xp.where(live, rs_new, 0)
    sc.R[...] = R
    sc.P[...] = P
    sc.rs[...] = rs


stand_in(_solve)(_solve_arrays)  # run while _solve compiles in the background
