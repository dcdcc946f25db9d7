"""Array-level (numpy / scipy) forms of the sparse GLM step kernels and the column listing,
run while numba compiles them (:mod:`bidlab.kern.standin`).

Same arguments and outputs as :mod:`bidlab.kern.touched`'s ``_adagrad_touched``,
``_grad_touched`` and ``_catch_up_all`` and :mod:`bidlab.kern.columns`' ``_by_column`` and
``_forget``; the arithmetic is in the model's dtype as there, but a row's L2 decay is one
``power`` call where the kernels square and multiply, and the sums come in another order,
so the results agree to float tolerance. The thread-split scratch (``work``, ``scalars``,
``powers``) and the column listing's ``touched`` / ``nu`` (the kernels' way to the touched
rows without a pass over all of them) are not used.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["by_column", "forget", "adagrad_touched", "grad_touched", "catch_up_all"]

_SMALL = 0.05  # as bidlab.kern.touched: below this l2 * eta_sum the polynomial is used
#: elements in a block of rows worked on at once: the block's temporaries stay in the cache
#: (whole-matrix temporaries are slower by several times: memory traffic and page faults)
_CHUNK = 1 << 14


def by_column(indptr: Any, indices: Any, pos: Any, touched: Any, colptr: Any, perm: Any,
              row_of: Any) -> int:
    """List a CSR minibatch's nonzeros by column; return the number of touched columns."""
    n, d = indptr.shape[0] - 1, pos.shape[0]
    nnz = int(indptr[n])
    row_of[:nnz] = np.repeat(np.arange(n), np.diff(indptr))
    ind = indices[:nnz]
    # one sort of the keys column * nnz + nonzero number: column order, row order within a
    # column (the nonzero numbers of a CSR matrix increase with the row)
    keys = ind.astype(np.int64)
    keys *= max(nnz, 1)
    keys += np.arange(nnz)
    keys.sort()
    np.remainder(keys, max(nnz, 1), out=keys)
    perm[:nnz] = keys
    counts = np.bincount(ind, minlength=d)
    cols = np.flatnonzero(counts)
    nu = cols.shape[0]
    touched[:nu] = cols
    pos[cols] = np.arange(nu)
    colptr[0] = 0
    colptr[1: nu + 1] = np.cumsum(counts[cols])
    return int(nu)


def forget(pos: Any, touched: Any, nu: int) -> None:
    """Reset the touched columns' positions to -1."""
    pos[touched[:nu]] = -1


def _catch_up_block(W: np.ndarray, S: Any, k64: np.ndarray, q: np.ndarray, mid: Any,
                    lr: Any, l1: Any, l2: Any, eps: Any, adagrad: bool) -> None:
    """Deferred regulariser terms of the rows ``W`` (and ADAGrad's sums of squares ``S``),
    in place: ``k64`` their gaps (n x 1, float64), ``q`` their step-size sums (n x 1) and
    ``mid`` the square root at the gaps' middles (n x 1). Per-weight arithmetic in the
    model's dtype, the power in float64, as the kernel; a zero weight stays zero, so only
    nonzero weights ever take the power."""
    dt = W.dtype
    k, c2 = k64.astype(dt), (0.5 * (1.0 - 1.0 / k64)).astype(dt)
    with_l1 = bool(np.any(l1))
    if adagrad:
        grow = np.multiply(W, l2)  # the L2-only updates (L1 is a proximal step)
        np.multiply(grow, grow, out=grow)
        grow *= k
        eta = np.multiply(grow, dt.type(0.5))
        eta += S
        np.sqrt(eta, out=eta)
        eta += eps * mid
        np.divide(lr * q, eta, out=eta)
        S += grow
    else:
        eta = np.broadcast_to(lr * q, W.shape)
    x = np.multiply(l2, eta)
    factor = c2 * x  # 1 - x + c2 x^2 = 1 + x (c2 x - 1)
    factor -= 1
    factor *= x
    factor += 1
    if x.max() > _SMALL:  # the power where the polynomial is not close enough
        big = x > _SMALL
        big &= W != 0
        at = np.nonzero(big)
        if at[0].shape[0]:
            kb = k64[at[0], 0]
            factor[at] = np.maximum(1.0 - x[at].astype(np.float64) / kb, 0.0) ** kb
    W *= factor
    if with_l1:
        shrunk = np.abs(W)
        shrunk -= l1 * eta
        np.maximum(shrunk, 0, out=shrunk)
        np.copysign(shrunk, W, out=W)


def _prox(W: Any, thr: Any) -> None:
    """``W <- sign(W) * max(|W| - thr, 0)`` in place (L1's proximal step)."""
    shrunk = np.abs(W)
    shrunk -= thr
    np.maximum(shrunk, 0, out=shrunk)
    np.copysign(shrunk, W, out=W)


def _row_chunks(n: int, T: int) -> range:
    """Starts of the blocks of rows worked on at once (:data:`_CHUNK` elements each)."""
    return range(0, n, max(1, _CHUNK // max(T, 1)))


def _catch_up_rows(W: np.ndarray, S: Any, done: np.ndarray, t: int, rates: Any, base: int,
                   lr: Any, l1: Any, l2: Any, eps: Any, adagrad: bool) -> None:
    """The deferred terms of every row of ``W`` (and ``S``), each behind by
    ``t - done`` steps (all > 0), in place."""
    dt = W.dtype
    k64 = (t - done).astype(np.float64)[:, None]
    col = int(adagrad)
    q = (rates[t - base, col] - rates[done - base, col])[:, None].astype(dt)
    mid = np.sqrt(0.5 * (done + t - 1) + 1.0)[:, None].astype(dt) if adagrad else None
    _catch_up_block(W, S, k64, q, mid, lr, l1, l2, eps, adagrad)


def _catch_up_some(W: np.ndarray, S: Any, done: np.ndarray, t: int, rates: Any, base: int,
                   lr: Any, l1: Any, l2: Any, eps: Any, adagrad: bool) -> None:
    """The rows of ``W`` (a block small enough for the cache) that are behind (``done <
    t``) catch up, in place: views when all of them are, else a gather of those. A zero
    weight keeps its value and sum of squares (its regulariser terms are zero), so rows
    all zero (features not seen yet) are left out."""
    late = done < t
    late &= W.any(axis=1)
    behind = np.flatnonzero(late)
    nb = behind.shape[0]
    if nb == W.shape[0]:
        _catch_up_rows(W, S, done, t, rates, base, lr, l1, l2, eps, adagrad)
    elif nb:
        Wb, Sb = W[behind], S[behind] if adagrad else None
        _catch_up_rows(Wb, Sb, done[behind], t, rates, base, lr, l1, l2, eps, adagrad)
        W[behind] = Wb
        if adagrad:
            S[behind] = Sb


def _data_rows(pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any,
               A: Any) -> tuple[np.ndarray, np.ndarray]:
    """The touched rows (increasing) and their data terms ``(X.T @ A)[rows]``."""
    rows = np.flatnonzero(pos >= 0)
    nu = rows.shape[0]
    nnz = int(colptr[nu])
    p = perm[:nnz]
    Xt = sp.csr_matrix((data[p], row_of[p], colptr[: nu + 1]), shape=(nu, A.shape[0]))
    return rows, np.asarray(Xt @ A)


def _step_dense(M: Any, pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any, A: Any,
                lr: Any, l1: Any, l2: Any, S: Any, eps: Any, inv_t: Any, scale: Any,
                adagrad: bool) -> None:
    """A step whose regulariser terms are swept over every row (most rows touched)."""
    rows, U = _data_rows(pos, colptr, perm, row_of, data, A)
    full = np.zeros(M.shape, U.dtype)
    full[rows] = U
    u = full
    u -= l2 * M
    if adagrad:
        S += u * u
        den = np.sqrt(S * float(inv_t)) + eps
        M += u / den * lr * float(scale)
        eta = lr / den * float(scale)
    else:
        M += u * lr * float(scale)
        eta = lr * float(scale)
    if np.any(l1):
        _prox(M, eta * l1)


def _step(M: Any, pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any, A: Any,
          lr: Any, l1: Any, l2: Any, dense_reg: bool, defer: bool, done: Any, t: int,
          rates: Any, base: int, S: Any, eps: Any, inv_t: Any, scale: Any,
          adagrad: bool) -> None:
    """One step on the rows a minibatch touches (all rows when ``dense_reg``): the touched
    rows (and their sums of squares) gathered once, their deferred terms, data terms and
    step applied block by block, written back once."""
    if dense_reg:
        _step_dense(M, pos, colptr, perm, row_of, data, A, lr, l1, l2, S, eps, inv_t, scale,
                    adagrad)
        return
    rows, U = _data_rows(pos, colptr, perm, row_of, data, A)
    n, T = U.shape
    if n == 0:
        return
    W = M[rows]
    Sb = S[rows] if adagrad else None
    gap = done[rows] if defer else None
    with_l1, with_l2 = bool(np.any(l1)), bool(np.any(l2))
    rate = lr * M.dtype.type(scale)
    inv_t = M.dtype.type(inv_t)
    tmp = np.empty((min(n, max(1, _CHUNK // max(T, 1))), T), U.dtype)
    for a in _row_chunks(n, T):
        b = min(a + tmp.shape[0], n)
        w, u, x = W[a:b], U[a:b], tmp[: b - a]
        s = Sb[a:b] if adagrad else None
        if defer:
            _catch_up_some(w, s, gap[a:b], t, rates, base, lr, l1, l2, eps, adagrad)
        if with_l2:
            np.multiply(w, l2, out=x)
            u -= x
        if adagrad:
            np.multiply(u, u, out=x)
            s += x
            np.multiply(s, inv_t, out=x)
            np.sqrt(x, out=x)
            x += eps
            u /= x
        u *= rate
        w += u
        if with_l1:
            if adagrad:
                np.divide(rate, x, out=x)
            else:
                x[...] = rate
            x *= l1
            _prox(w, x)
    if defer:
        done[rows] = t + 1
    if adagrad:
        S[rows] = Sb
    M[rows] = W


def adagrad_touched(M: Any, S: Any, pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any,
                    A: Any, lr: Any, l1: Any, l2: Any, eps: Any, inv_t: Any, scale: Any,
                    dense_reg: bool, defer: bool, done: Any, t: int, rates: Any, base: int,
                    work: Any, scalars: Any, powers: Any, touched: Any = None,
                    nu: int = 0, has_l1: bool = False) -> None:
    """ADAGrad's step on the rows a minibatch touches (all rows when ``dense_reg``)."""
    _step(M, pos, colptr, perm, row_of, data, A, lr, l1, l2, dense_reg, defer, done, t, rates,
          base, S, eps, inv_t, scale, True)


def grad_touched(M: Any, pos: Any, colptr: Any, perm: Any, row_of: Any, data: Any, A: Any,
                 lr: Any, l1: Any, l2: Any, scale: Any, dense_reg: bool, defer: bool, done: Any,
                 t: int, rates: Any, base: int, work: Any, scalars: Any,
                 powers: Any, touched: Any = None, nu: int = 0,
                 has_l1: bool = False) -> None:
    """Plain gradient ascent on the rows a minibatch touches (all when ``dense_reg``)."""
    _step(M, pos, colptr, perm, row_of, data, A, lr, l1, l2, dense_reg, defer, done, t, rates,
          base, M, lr, 1.0, scale, False)


def catch_up_all(M: Any, S: Any, lr: Any, l1: Any, l2: Any, eps: Any, done: Any, t: int,
                 rates: Any, base: int, adagrad: bool, work: Any, scalars: Any,
                 powers: Any) -> None:
    """Every row's deferred regulariser terms of the steps before ``t``: block by block
    of rows, in place."""
    d, T = M.shape
    step = max(1, _CHUNK // max(T, 1))
    for a in _row_chunks(d, T):
        b = min(a + step, d)
        _catch_up_some(M[a:b], S[a:b] if adagrad else None, done[a:b], t, rates, base, lr,
                       l1, l2, eps, adagrad)
    np.maximum(done, t, out=done)  # the rows behind are now at t
