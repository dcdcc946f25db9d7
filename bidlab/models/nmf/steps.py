"""The multiplicative steps of NMF on one block of rows, over its observed entries only.

``X ~ W @ H`` with a block's rows ``X`` (m x n), their row factors ``W`` (m x k) and the
components ``H`` (k x n; ``Ht`` is a C-ordered copy of ``H.T``). A :class:`Block` says which
entries count:

==============  ==========================================================================
``"dense"``     every entry of a dense ``X``
``"masked"``    a dense ``X`` (zeros where missing) and a dense 0 / 1 mask ``M``
``"sparse"``    every entry of a CSR ``X`` (unstored entries are observed zeros)
``"stored"``    the stored entries of a CSR ``X`` only (those a mask marked observed; their
                values may be zero); ``M`` is a CSR of ones with ``X``'s pattern
==============  ==========================================================================

Losses (Lee and Seung's updates; scikit-learn's ``solver="mu"``):

* Frobenius ``sum (x - p)^2 / 2``: ``W *= (X H^T) / (P H^T)``, ``H *= (W^T X) / (W^T P)``
  with ``P = M * (W H)`` (``W (H H^T)`` and ``(W^T W) H`` when every entry counts);
* generalised KL ``sum x log(x / p) - x + p``: ``W *= ((X / P) H^T) / (M H^T)``,
  ``H *= (W^T (X / P)) / (W^T M)``, ``P`` floored at float32's epsilon as scikit-learn does.

With a sparse mask the products at the observed entries are SDDMMs (``bidlab.sddmm``), so
no m x n dense matrix is ever formed. Every step runs on the cached core: inside
``bidlab.caching()`` (the learner's thread) a block of a given shape allocates nothing
after its first step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.kern import nmf_cd
from bidlab.kern.nmf_kl import kl_w_numerator
from bidlab.mat import Mat

__all__ = ["Block", "EPS", "w_step", "w_cd_step", "h_stats", "objective", "penalised"]

#: scikit-learn's floor of ``W H`` in the KL ratio and of a zero denominator
EPS = float(np.finfo(np.float32).eps)


@dataclass
class Block:
    """Rows of the data and which of their entries are observed (see the module doc)."""

    kind: str
    X: Any
    M: Any = None

    @property
    def sparse(self) -> bool:
        return self.kind in ("sparse", "stored")


def _set(dst: Mat, src: Mat) -> None:
    dst <<= src


def _floor(P: Any) -> None:
    """``P <- max(P, EPS)`` in place (a Mat or an SMat's values)."""
    xp = P.xp
    xp.maximum(P.data, EPS, out=P.data)


def _wh(b: Block, W: Mat, H: Mat, Ht: Mat) -> Any:
    """``W H`` at the entries the loss needs: dense (m x n) or at X's stored entries."""
    if b.sparse:
        return bl.sddmm(W.T, Ht.T, b.X)
    return W @ H


def w_step(b: Block, W: Mat, H: Mat, Ht: Mat, loss: str, l1: float = 0.0,
           l2: float = 0.0, *, XHt: Mat | None = None, HHt: Mat | None = None,
           Htsum: Mat | None = None, num_out: Mat | None = None) -> None:
    """One multiplicative step of the row factors ``W`` (in place), ``H`` fixed; ``l1`` and
    ``l2``: the penalties ``l1 |W| + l2 ||W||^2 / 2`` (scikit-learn's scaled terms).
    ``XHt`` (``X @ Ht``), ``HHt`` (``H @ Ht``) and ``Htsum`` (``Ht.sum(axis=0)``): the
    products of ``H`` already formed, or None (formed here). ``num_out``: an m x k Mat for
    the KL numerator, which a CSR block on the CPU then forms in one fused loop
    (:func:`bidlab.kern.nmf_kl.kl_w_numerator`)."""
    X = b.X
    if loss == "frobenius":
        num = X @ Ht if XHt is None else XHt
        if b.kind in ("dense", "sparse"):
            den = W @ (H @ Ht if HHt is None else HHt)
        elif b.kind == "masked":
            den = (_wh(b, W, H, Ht) * b.M) @ Ht
        else:
            den = _wh(b, W, H, Ht) @ Ht
    elif num_out is not None and b.sparse and W.xp is np:
        kl_w_numerator(X.csr, W.data, Ht.data, EPS, num_out.data)
        num = num_out
    else:
        P = _wh(b, W, H, Ht)
        _floor(P)
        num = (X / P) @ Ht
    if loss != "frobenius":
        if b.kind in ("dense", "sparse"):
            den = Ht.sum(axis=0) if Htsum is None else Htsum
        else:
            den = b.M @ Ht
    den = penalised(den, W, l1, l2)
    _set(W, W * (num / bl.maximum(den, EPS)))


def w_cd_step(W: Mat, XHt: Mat, HHt: Mat, l1: float = 0.0, l2: float = 0.0,
              cols: Mat | None = None) -> None:
    """One coordinate-descent sweep of ``W``'s columns (every entry observed, Frobenius):
    ``W[:, t] <- max(0, W[:, t] - (W (H H^T)[:, t] - (X H^T)[:, t] + l1 + l2 W[:, t]) /
    ((H H^T)[t, t] + l2))``, column after column (scikit-learn's ``solver="cd"``; its
    penalties: ``l2`` on the Hessian's diagonal, ``l1`` off the gradient). ``cols``: an
    m x 2 scratch (no allocation then)."""
    xp, w, G, B = W.xp, W.data, HHt.data, XHt.data
    if xp is np:  # one row at a time while it is in cache, the rows split between threads
        nmf_cd.cd_rows(w, G, B, l1, l2)
        return
    c2 = cols.data if cols is not None else xp.empty((w.shape[0], 2), w.dtype)
    g, tmp = c2[:, 0:1], c2[:, 1:2]
    diag = backend.to_host(xp.diagonal(G))
    for t in range(w.shape[1]):
        h = float(diag[t]) + l2
        if not h > 0.0:
            continue
        c = w[:, t:t + 1]
        xp.matmul(w, G[:, t:t + 1], out=g)
        if l2:
            xp.multiply(c, l2, out=tmp)
            g += tmp
        g -= B[:, t:t + 1]
        if l1:
            g += l1
        g *= 1.0 / h
        xp.subtract(c, g, out=c)
        xp.maximum(c, 0.0, out=c)


def penalised(den: Mat, M: Mat, l1: float, l2: float) -> Mat:
    """``den + l1 + l2 M``: a denominator with the penalties of the factor ``M`` added."""
    if l1:
        den = den + l1
    if l2:
        den = den + M * l2
    return den


def _transposed(dst: Mat, src: Mat) -> None:
    dst.data[...] = src.data.T


def h_stats(b: Block, W: Mat, H: Mat, Ht: Mat, loss: str, num: Mat,
            den: Mat) -> tuple[float, float]:
    """Write the statistics of ``H``'s multiplicative step (``num``, ``den``: k x n) for this
    block; return the block's loss and its number of observed entries, at ``W`` and ``H``."""
    X, M = b.X, b.M
    if loss == "frobenius":
        if b.sparse:
            _transposed(num, X.T @ W)
        else:
            _set(num, W.T @ X)
        if b.kind in ("dense", "sparse"):
            G = W.T @ W
            _set(den, G @ H)
            HHt = H @ Ht
            xx = X * X
            total = float(xx.sum().data[0, 0]) - 2.0 * float((num * H).sum().data[0, 0])
            total += float((G * HHt).sum().data[0, 0])
            return 0.5 * max(total, 0.0), float(X.shape[0] * X.shape[1])
        P = _wh(b, W, H, Ht)
        if b.kind == "masked":
            P = P * M
            _set(den, W.T @ P)
            count = float(M.sum().data[0, 0])
        else:
            _transposed(den, P.T @ W)
            count = float(X.nnz)
        D = P - X
        return 0.5 * float((D * D).sum().data[0, 0]), count
    P = _wh(b, W, H, Ht)
    _floor(P)
    Q = X / P
    if b.sparse:
        _transposed(num, Q.T @ W)
    else:
        _set(num, W.T @ Q)
    if b.kind in ("dense", "sparse"):
        ws = W.sum(axis=0)
        den.data[...] = ws.data.T
        mass = float((ws * Ht.sum(axis=0)).sum().data[0, 0])  # sum of W H
        count = float(X.shape[0] * X.shape[1])
    else:
        if b.kind == "masked":
            _set(den, W.T @ M)
            mass = float((P * M).sum().data[0, 0])
            count = float(M.sum().data[0, 0])
        else:
            _transposed(den, M.T @ W)
            mass = float(P.sum().data[0, 0])
            count = float(X.nnz)
    tiny = float(np.finfo(P.dtype).tiny)
    xlogq = (X * bl.log(Q + tiny)).sum()
    total = float(xlogq.data[0, 0]) - float(X.sum().data[0, 0]) + mass
    return max(total, 0.0), count


def objective(b: Block, W: Mat, H: Mat, Ht: Mat, loss: str) -> tuple[float, float]:
    """The loss of ``W @ H`` on the block's observed entries and how many they are."""
    X, M = b.X, b.M
    if loss == "frobenius" and b.kind == "sparse":
        P = None  # not formed: the unstored zeros count
    else:
        P = _wh(b, W, H, Ht)
    if b.kind == "masked":
        P = P * M
    if loss == "frobenius":
        if b.kind == "sparse":  # the unstored zeros count: ||X||^2 - 2 <X, WH> + ||WH||^2
            G = W.T @ W
            xx = float((X * X).sum().data[0, 0])
            cross = float(((X @ Ht) * W).sum().data[0, 0])
            quad = float((G * (H @ Ht)).sum().data[0, 0])
            return 0.5 * max(xx - 2.0 * cross + quad, 0.0), float(X.shape[0] * X.shape[1])
        D = P - X
        total = 0.5 * float((D * D).sum().data[0, 0])
    else:
        if b.kind == "sparse":
            mass = float((W.sum(axis=0) * Ht.sum(axis=0)).sum().data[0, 0])
        else:
            mass = float(P.sum().data[0, 0])
        _floor(P)
        if b.kind == "masked":  # floored zeros at the missing entries carry no mass
            mass = float((P * M).sum().data[0, 0])
        Q = X / P
        tiny = float(np.finfo(P.dtype).tiny)
        total = float((X * bl.log(Q + tiny)).sum().data[0, 0]) - float(X.sum().data[0, 0])
        total = max(total + mass, 0.0)
    if b.kind == "masked":
        count = float(M.sum().data[0, 0])
    elif b.kind == "stored":
        count = float(X.nnz)
    else:
        count = float(X.shape[0] * X.shape[1])
    return total, count
