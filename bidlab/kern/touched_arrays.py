"""Array-level (numpy / scipy) forms of the sparse GLM step kernels and the column listing,
run while numba compiles them (:mod:`bidlab.kern.standin`).

Same arguments and outputs as :mod:`bidlab.kern.touched`'s ``_adagrad_touched``,
``_grad_touched`` and ``_catch_up_all`` and :mod:`bidlab.kern.columns`' ``_by_column`` and
``_forget``; the arithmetic is in the model's dtype as there, but a row's L2 decay is one
``power`` call where the kernels square and multiply, and the sums come in another order,
so the results agree to float tolerance. The thread-split scratch (``work``, ``scalars``,
``powers``) is not used.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["by_column", "forget", "adagrad_touched", "grad_touched", "catch_up_all"]

_SMALL = 0.05  # as bidlab.kern.touched: below this l2 * eta_sum the polynomial is used


def by_column(indptr: Any, indices: Any, pos: Any, touched: Any, colptr: Any, perm: Any,
              row_of: Any) -> int:
    """List a CSR minibatch's nonzeros by column; return the number of touched columns."""
    n, d = indptr.shape[0] - 1, pos.shape[0]
    nnz = int(indptr[n])
    row_of[:nnz] = np.repeat(np.arange(n), np.diff(indptr))
    # scipy's CSR -> CSC keeps the row order within a column: the nonzero numbers in
    # column order are the transposed matrix's values
    numbers = sp.csr_matrix((np.arange(nnz, dtype=np.int64), indices[:nnz], indptr),
                            shape=(n, d), copy=False).tocsc()
    cols = np.flatnonzero(np.diff(numbers.indptr))
    nu = cols.shape[0]
    touched[:nu] = cols
    pos[cols] = np.arange(nu)
    colptr[0] = 0
    colptr[1: nu + 1] = numbers.indptr[cols + 1]
    perm[:nnz] = numbers.data
    return int(nu)


def forget(pos: Any, touched: Any, nu: int) -> None:
    """Reset the touched columns' positions to -1."""
    pos[touched[:nu]] = -1


def _catch_up(M: Any, S: Any, rows: np.ndarray, lr: Any, l1: Any, l2: Any, eps: Any,
              done: np.ndarray, t: int, rates: Any, base: int, adagrad: bool) -> None:
    """Rows ``rows``' deferred regulariser terms of their steps ``done`` .. t-1 (per-weight
    arithmetic in the model's dtype, a row's scalars and the power in float64, as the
    kernel). ``rows`` increasing; all of M's rows are worked on in place, without copies."""
    n = rows.shape[0]
    if n == 0:
        return
    whole = n == M.shape[0]  # every row (rows is increasing): views, not gathers
    dt = M.dtype
    k64 = (t - done).astype(np.float64)[:, None]
    k, c2 = k64.astype(dt), (0.5 * (1.0 - 1.0 / k64)).astype(dt)
    col = int(adagrad)
    q = (rates[t - base, col] - rates[done - base, col])[:, None].astype(dt)
    W = M if whole else M[rows]
    with_l1 = bool(np.any(l1))
    if adagrad:
        u = np.multiply(l2, W)
        if with_l1:
            u += np.sign(W) * l1
        grow = np.multiply(u, u, out=u)
        grow *= k
        s = S if whole else S[rows]
        mid = np.sqrt(0.5 * (done + t - 1) + 1.0)[:, None].astype(dt)
        eta = np.multiply(grow, dt.type(0.5))
        eta += s
        np.sqrt(eta, out=eta)
        eta += eps * mid
        np.divide(lr * q, eta, out=eta)
        if whole:
            S += grow
        else:
            S[rows] = s + grow
    else:
        eta = np.broadcast_to(lr * q, W.shape)
    x = np.multiply(l2, eta)
    factor = c2 * x  # 1 - x + c2 x^2 = 1 + x (c2 x - 1)
    factor -= 1
    factor *= x
    factor += 1
    w = np.multiply(W, factor, out=factor)
    if x.max() > _SMALL:  # the power where the polynomial is not close enough
        _power(w, W, x, k64)
    if with_l1:
        shrunk = np.abs(w)
        shrunk -= l1 * eta
        np.maximum(shrunk, 0, out=shrunk)
        w = np.copysign(shrunk, w, out=shrunk)
    if whole:
        M[...] = w
    else:
        M[rows] = w


def _power(w: np.ndarray, W: np.ndarray, x: np.ndarray, k64: np.ndarray) -> None:
    """``w = W * max(1 - x / k, 0) ** k`` (in float64) where ``x > _SMALL``: over the
    whole array when most elements need it (large rates), else gathered."""
    big = x > _SMALL
    if np.count_nonzero(big) * 4 > big.size:
        p = np.divide(x, k64, dtype=np.float64)
        np.subtract(1.0, p, out=p)
        np.maximum(p, 0.0, out=p)
        np.power(p, k64, out=p)
        p *= W
        np.copyto(w, p, casting="same_kind", where=big)
        return
    at = np.nonzero(big)
    kb = np.broadcast_to(k64, x.shape)[at]
    w[at] = W[at] * np.maximum(1.0 - x[at].astype(np.float64) / kb, 0.0) ** kb


def _data_rows(pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any,
               A: Any) -> tuple[np.ndarray, np.ndarray]:
    """The touched rows (increasing) and their data terms ``(X.T @ A)[rows]``."""
    rows = np.flatnonzero(pos >= 0)
    nu = rows.shape[0]
    nnz = int(colptr[nu])
    p = perm[:nnz]
    Xt = sp.csr_matrix((data[p], row_of[p], colptr[: nu + 1]), shape=(nu, A.shape[0]))
    return rows, np.asarray(Xt @ A)


def _step_rows(M: Any, pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any, A: Any,
               lr: Any, l1: Any, l2: Any, dense_reg: bool, defer: bool, done: Any, t: int,
               rates: Any, base: int, S: Any, eps: Any,
               adagrad: bool) -> tuple[np.ndarray, np.ndarray]:
    """The rows a step updates and their regularised updates ``u``."""
    rows, U = _data_rows(pos, colptr, perm, row_of, data, A)
    if defer:
        behind = rows[done[rows] < t]
        _catch_up(M, S, behind, lr, l1, l2, eps, done[behind], t, rates, base, adagrad)
        done[rows] = t + 1
    if dense_reg:
        full = np.zeros(M.shape, U.dtype)
        full[rows] = U
        rows, U = np.arange(M.shape[0]), full
    W = M[rows]
    U -= l1 * np.sign(W)
    U -= l2 * W
    return rows, U


def adagrad_touched(M: Any, S: Any, pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any,
                    A: Any, lr: Any, l1: Any, l2: Any, eps: Any, inv_t: Any, scale: Any,
                    dense_reg: bool, defer: bool, done: Any, t: int, rates: Any, base: int,
                    work: Any, scalars: Any, powers: Any) -> None:
    """ADAGrad's step on the rows a minibatch touches (all rows when ``dense_reg``)."""
    rows, u = _step_rows(M, pos, colptr, perm, row_of, data, A, lr, l1, l2, dense_reg, defer,
                         done, t, rates, base, S, eps, True)
    s = S[rows] + u * u
    S[rows] = s
    M[rows] = M[rows] + u / (np.sqrt(s * float(inv_t)) + eps) * lr * float(scale)


def grad_touched(M: Any, pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any, A: Any,
                 lr: Any, l1: Any, l2: Any, scale: Any, dense_reg: bool, defer: bool, done: Any,
                 t: int, rates: Any, base: int, work: Any, scalars: Any,
                 powers: Any) -> None:
    """Plain gradient ascent on the rows a minibatch touches (all when ``dense_reg``)."""
    rows, u = _step_rows(M, pos, colptr, perm, row_of, data, A, lr, l1, l2, dense_reg, defer,
                         done, t, rates, base, M, lr, False)
    M[rows] = M[rows] + u * lr * float(scale)


def catch_up_all(M: Any, S: Any, lr: Any, l1: Any, l2: Any, eps: Any, done: Any, t: int,
                 rates: Any, base: int, adagrad: bool, work: Any, scalars: Any,
                 powers: Any) -> None:
    """Every row's deferred regulariser terms of the steps before ``t``."""
    rows = np.flatnonzero(done < t)
    _catch_up(M, S, rows, lr, l1, l2, eps, done[rows], t, rates, base, adagrad)
    done[rows] = t
