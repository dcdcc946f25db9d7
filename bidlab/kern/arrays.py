"""Array-level (numpy / scipy) forms of the CPU kernels, run while numba compiles them.

Each function takes the same arguments as the numba kernel it stands in for (an adaptive
kernel's without the work size; the thread-split arguments ``nparts`` and scratch buffers
are accepted and ignored where only the result depends on them) and writes the same
outputs, equal to float tolerance (the sums may be added in another order).
:mod:`bidlab.kern.standin` runs them while the kernel compiles in the background; the
kernel modules register them (``stand_in(kernel)(form)``) and the tests compare each with
its kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy import special

__all__ = ["sddmm", "gather", "scatter_copies", "scatter_listed", "scatter_serial",
           "push_parts", "fold",
           "csr_row_sums", "csr_col_sums", "expdigamma", "dist_dense", "dist_csr",
           "assign", "lloyd", "adagrad_step", "grad_step", "adagrad_l1_step", "grad_l1_step",
           "subtract_scaled",
           "subtract_scaled_sign", "sums_dense_parts", "sums_csr_parts", "kl_w_numerator",
           "kl_h_push", "pull_step"]

_CHUNK = 1 << 16  # nonzeros per SDDMM step: bounds the gathered rows' memory


def _csr(indptr: Any, indices: Any, data: Any, n_cols: int) -> sp.csr_matrix:
    """scipy's CSR over the stored part of a (possibly over-allocated) CSR's arrays."""
    nnz = int(indptr[-1])
    return sp.csr_matrix((data[:nnz], indices[:nnz], indptr),
                         shape=(indptr.shape[0] - 1, n_cols), copy=False)


def _rows(indptr: Any) -> np.ndarray:
    """The row of each stored entry."""
    return np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))


# ----------------------------------------------------------------------------- products


def sddmm(indptr: Any, indices: Any, R: Any, C: Any, out: Any, nparts: int = 0) -> None:
    """``out[p] = R[i] . C[indices[p]]`` for the p-th stored entry of CSR row i."""
    rows = _rows(indptr)
    for a in range(0, rows.shape[0], _CHUNK):
        b = min(a + _CHUNK, rows.shape[0])
        out[a:b] = np.einsum("ij,ij->i", R[rows[a:b]], C[indices[a:b]])


def gather(indptr: Any, indices: Any, data: Any, G: Any, out: Any, nparts: int = 0) -> None:
    """``out[i] = sum_p data[p] * G[indices[p]]`` over CSR row i."""
    out[...] = _csr(indptr, indices, data, G.shape[0]) @ G


def scatter_serial(indptr: Any, indices: Any, data: Any, G: Any, out: Any) -> None:
    """``out[indices[p]] += data[p] * G[i]`` over CSR row i, out zeroed first."""
    out[...] = _csr(indptr, indices, data, out.shape[0]).T @ G


def scatter_copies(indptr: Any, indices: Any, data: Any, G: Any, out: Any, work: Any) -> None:
    """:func:`scatter_serial` (the private copies in ``work`` are not needed)."""
    scatter_serial(indptr, indices, data, G, out)


def scatter_listed(pos: Any, touched: Any, nu: int, colptr: Any, perm: Any, row_of: Any,
                   data: Any, G: Any, out: Any, nparts: int = 0) -> None:
    """:func:`scatter_serial` from a column listing (:mod:`bidlab.kern.columns`)."""
    nnz = int(colptr[nu])
    cols = np.repeat(touched[:nu], np.diff(colptr[: nu + 1]))
    p = perm[:nnz]
    S = sp.csr_matrix((data[p], (cols, row_of[p])), shape=(out.shape[0], G.shape[0]))
    out[...] = S @ G


# ----------------------------------------------------------------------------- sums


def push_parts(indptr: Any, indices: Any, data: Any, G: Any, out: Any, work: Any,
               each: bool) -> None:
    """``_push_parts`` (:mod:`bidlab.kern.scatter_sums`): ``out += S.T @ G`` for the CSR
    ``S``, all of it into ``out`` (the thread copies ``work`` stay as they are)."""
    out += _csr(indptr, indices, data, out.shape[0]).T @ G


def fold(out: Any, work: Any, dst: Any) -> None:
    """``_fold``: ``out`` += the copies' sum, the copies zeroed; ``dst = out.T`` unless it
    is 0 x 0."""
    if work.shape[0]:
        out += work.sum(axis=0)
        work[...] = 0
    if dst.shape[0]:
        dst[...] = out.T


def csr_row_sums(indptr: Any, data: Any, out: Any) -> None:
    """``out[i]`` = the sum of CSR row i's stored values."""
    counts = np.diff(indptr)
    out[...] = 0
    full = counts > 0
    if full.any():
        out[full] = np.add.reduceat(data[: int(indptr[-1])], indptr[:-1][full])


def csr_col_sums(indices: Any, data: Any, nnz: int, out: Any) -> None:
    """``out[j]`` = the sum of the stored values in column j."""
    out[...] = np.bincount(indices[:nnz], weights=data[:nnz], minlength=out.shape[0])


def expdigamma(x: Any, out: Any) -> None:
    """``out = exp(digamma(x))`` in float64, stored in out's dtype (x may be out)."""
    out[...] = np.exp(special.digamma(np.asarray(x, np.float64)))


# ----------------------------------------------------------------------------- k-means


def dist_dense(X: Any, labels: Any, C: Any, out: Any) -> None:
    """``out[i] = ||X[i] - C[labels[i]]||^2`` (float64 sums)."""
    diff = (X - C[labels]).astype(np.float64, copy=False)
    out[...] = np.einsum("ij,ij->i", diff, diff)


def dist_csr(indptr: Any, indices: Any, data: Any, labels: Any, C: Any, cc: Any,
             out: Any) -> None:
    """The same for CSR rows: ``sum v (v - 2 c) + ||c||^2`` over the stored entries."""
    nnz = int(indptr[-1])
    rows = _rows(indptr)
    v = data[:nnz].astype(np.float64)
    terms = v * (v - 2.0 * C[labels[rows], indices[:nnz]])
    acc = np.bincount(rows, weights=terms, minlength=indptr.shape[0] - 1)
    out[...] = np.maximum(acc + cc[labels], 0.0)


def _two_smallest(D: np.ndarray, cc: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of D (rows x k): argmin and the two smallest of ``cc - 2 D``."""
    vals = cc[None, :] - (D + D)
    j1 = vals.argmin(axis=1)
    b1 = vals[np.arange(vals.shape[0]), j1]
    if vals.shape[1] < 2:
        return j1, b1, np.full_like(b1, np.inf)
    return j1, b1, np.partition(vals, 1, axis=1)[:, 1]


def assign(D: Any, cc: Any, xx: Any, labels: Any, d1: Any, d2: Any) -> None:
    """Nearest two centres from ``D = X @ C.T``: labels and squared distances."""
    j1, b1, b2 = _two_smallest(np.asarray(D), cc)
    labels[...] = j1
    d1[...] = np.maximum(xx + b1, 0.0)
    d2[...] = np.maximum(xx + b2, 0.0)


def _add_sums(P: Any, pc: Any, X: Any, labels: Any, w: Any) -> None:
    """Add the rows of X (times w) to the cluster sums P (k x d) and weights pc (k,)."""
    k = P.shape[0]
    weights = np.ones(X.shape[0]) if w is None else np.asarray(w, np.float64)
    onehot = sp.csr_matrix((weights, (labels, np.arange(X.shape[0]))), shape=(k, X.shape[0]))
    P += onehot @ X
    pc += np.bincount(labels, weights=weights, minlength=k)


def sums_csr(indptr: Any, indices: Any, data: Any, labels: Any, w: Any, sums: Any,
             counts: Any, nparts: int = 0, sorted_: bool = False) -> None:
    """Add each cluster's (weighted) CSR row sum to ``sums`` and its weight to ``counts``."""
    k, n = sums.shape[0], indptr.shape[0] - 1
    weights = w if w.shape[0] else np.ones(n)
    onehot = sp.csr_matrix((weights, (labels, np.arange(n))), shape=(k, n))
    sums += (onehot @ _csr(indptr, indices, data, sums.shape[1])).toarray()
    counts += np.bincount(labels, weights=weights, minlength=k)


def _shares(n: int, nparts: int) -> list[tuple[int, int, int]]:
    """Part t's rows [lo, hi) when n rows are cut into nparts equal ranges."""
    step = (n + nparts - 1) // nparts
    return [(t, t * step, min(n, (t + 1) * step)) for t in range(nparts)]


def sums_dense_parts(X: Any, labels: Any, w: Any, part: Any, pc: Any, nparts: int,
                     zero: bool) -> None:
    """``_sums_dense_cpu`` (:mod:`bidlab.kern.kmeans`): part t's rows (the t-th of
    ``nparts`` equal ranges) added to ``part[t]`` and ``pc[t]``, zeroed first if ``zero``."""
    weighted = w.shape[0] > 0
    for t, lo, hi in _shares(X.shape[0], nparts):
        if zero:
            part[t] = 0
            pc[t] = 0
        if lo < hi:
            _add_sums(part[t], pc[t], X[lo:hi], labels[lo:hi], w[lo:hi] if weighted else None)


def sums_csr_parts(indptr: Any, indices: Any, data: Any, labels: Any, w: Any, part: Any,
                   pc: Any, nparts: int, zero: bool) -> None:
    """``_sums_csr_cpu`` (:mod:`bidlab.kern.kmeans`): :func:`sums_dense_parts` of CSR rows."""
    S = _csr(indptr, indices, data, part.shape[2])
    weighted = w.shape[0] > 0
    for t, lo, hi in _shares(S.shape[0], nparts):
        if zero:
            part[t] = 0
            pc[t] = 0
        if lo < hi:
            sums_csr(S.indptr[lo:hi + 1] - S.indptr[lo], S.indices[S.indptr[lo]:],
                     S.data[S.indptr[lo]:], labels[lo:hi], w[lo:hi] if weighted else w,
                     part[t], pc[t])


def _kl_ratio(indptr: Any, indices: Any, data: Any, W: Any, Ht: Any, eps: Any) -> Any:
    """``x / max(W Ht^T, eps)`` at the stored entries, in W's dtype."""
    nnz = int(indptr[-1])
    s = np.empty(nnz, W.dtype)
    sddmm(indptr, indices, W, Ht, s)
    return data[:nnz] / np.maximum(s, eps)


def kl_w_numerator(indptr: Any, indices: Any, data: Any, W: Any, Ht: Any, eps: Any,
                   out: Any, nparts: int = 0) -> None:
    """``_w_numerator`` (:mod:`bidlab.kern.nmf_kl`): ``out = Q @ Ht``."""
    q = _kl_ratio(indptr, indices, data, W, Ht, eps)
    out[...] = _csr(indptr, indices, q, Ht.shape[0]) @ Ht


def kl_h_push(indptr: Any, indices: Any, data: Any, W: Any, Ht: Any, eps: Any, tiny: Any,
              out: Any, work: Any, parts: Any) -> None:
    """``_h_push`` (:mod:`bidlab.kern.nmf_kl`): ``out += Q.T @ W`` (all into ``out``, the
    copies ``work`` as they are); ``parts[0]`` = the block's ``sum x log(q + tiny)`` and
    ``sum x``, the other parts' rows 0."""
    q = _kl_ratio(indptr, indices, data, W, Ht, eps)
    x = data[: q.shape[0]]
    out += _csr(indptr, indices, q, out.shape[0]).T @ W
    parts[: work.shape[0] + 1] = 0
    parts[0, 0] = np.dot(x.astype(np.float64), np.log(q + tiny).astype(np.float64))
    parts[0, 1] = x.sum(dtype=np.float64)


def pull_step(indptr: Any, indices: Any, weights: Any, y: Any, d: float, a: float, b: float,
              u: Any, p: Any, out: Any) -> Any:
    """``pull_step`` (:mod:`bidlab.kern.pagerank`): ``out = d W^T y + a u + b p`` over the
    in-edge lists, summed in float64."""
    n = out.shape[0]
    nnz = int(indptr[n])
    w = weights[:nnz] if weights.shape[0] else np.ones(nnz)
    A = sp.csr_matrix((np.asarray(w, np.float64), indices[:nnz], indptr[: n + 1]),
                      shape=(n, y.shape[0]))
    out[...] = d * (A @ np.asarray(y, np.float64)) + a * u + b * p
    return out


def centre_drift(S: Any, prev: Any, out: Any) -> None:
    """``out[j] = ||S[j] - prev[j]||`` in float64."""
    diff = S.astype(np.float64) - prev
    out[...] = np.sqrt((diff * diff).sum(axis=1))


def centre_means(S: Any, N: Any, prev: Any, out: Any) -> None:
    """``S[j] /= N[j]`` (``prev[j]`` where ``N[j] <= 0``), then ``out`` = the drift."""
    empty = N <= 0
    np.divide(S, np.where(empty, 1, N)[:, None], out=S, casting="unsafe")
    S[empty] = prev[empty]
    centre_drift(S, prev, out)


def lloyd(X: Any, C: Any, cc: Any, xx: Any, xx_ready: bool, labels: Any, u: Any,
          lo: Any, w: Any, part: Any, pc: Any, nparts: int, D: Any, E: Any, G: Any, idx: Any,
          B1: Any, B2: Any, J1: Any, pruned: bool, drift: Any, s: Any, top: int, m1: float,
          m2: float, sums: bool, root: bool, rows_first: bool, stats: Any) -> None:
    """The fused Lloyd step (:mod:`bidlab.kern.kmeans_lloyd`): bound test, nearest two
    centres, bounds or distances, and each share's cluster sums, over all rows at once."""
    n = X.shape[0]
    step = max(1, -(-n // nparts))
    if not xx_ready:
        xx[...] = np.einsum("ij,ij->i", X, X, dtype=np.float64)
    if pruned:
        j = labels
        u += drift[j]
        lo -= np.where(j == top, m2, m1).astype(lo.dtype)
        need = np.flatnonzero(u + 1e-3 * (u + 1e-12) > np.maximum(s[j], lo))
    else:
        need = np.arange(n)
    stats[...] = 0
    if need.shape[0]:
        j1, b1, b2 = _two_smallest(X[need] @ C.T, cc)
        share = need // step
        stats[:nparts, 0] = np.bincount(share[labels[need] != j1], minlength=nparts)
        stats[:nparts, 1] = np.bincount(share, minlength=nparts)
        labels[need] = j1
        v1 = np.maximum(xx[need] + b1, 0.0)
        v2 = np.maximum(xx[need] + b2, 0.0)
        u[need] = np.sqrt(v1) if root else v1
        lo[need] = np.sqrt(v2) if root else v2
    if sums:
        weighted = w.shape[0] > 0
        for t in range(nparts):
            a, b = t * step, min(n, (t + 1) * step)
            if a < b:
                _add_sums(part[t], pc[t], X[a:b], labels[a:b], w[a:b] if weighted else None)


# ----------------------------------------------------------------------------- updater steps
# (bidlab.kern.steps: per-row hyperparameters follow the inner axis when ``by_inner``)


def farthest(dist: Any, w: Any, floor: float, out: Any) -> int:
    """:func:`bidlab.kern.kmeans_lloyd.farthest`'s kernel (the R = ``out.shape[0]`` largest
    values above ``floor``, ties to the lower position)."""
    keep = dist > floor
    if w.shape[0] > 0:
        keep &= w > 0
    cand = np.flatnonzero(keep)
    top = cand[np.argsort(-dist[cand], kind="stable")[: out.shape[0]]]
    out[: top.shape[0]] = top
    return int(top.shape[0])


def _per_row(h: Any, by_inner: bool) -> Any:
    return h[None, :] if by_inner else h[:, None]


def adagrad_step(M: Any, U: Any, S: Any, lr: Any, eps: Any, inv_t: Any, scale: Any,
                 by_inner: bool) -> None:
    """``S += U*U; M += U / (sqrt(S * inv_t) + eps) * lr * scale``."""
    S += U * U
    M += U / (np.sqrt(S * inv_t) + _per_row(eps, by_inner)) * _per_row(lr, by_inner) * scale


def grad_step(M: Any, U: Any, lr: Any, scale: Any, by_inner: bool) -> None:
    """``M += U * lr * scale``."""
    M += U * _per_row(lr, by_inner) * scale


def _shrink(M: Any, thr: Any) -> None:
    """``M <- sign(M) * max(|M| - thr, 0)`` in place (the L1 proximal step)."""
    w = np.abs(M)
    w -= thr
    np.maximum(w, 0, out=w)
    np.copysign(w, M, out=M)


def adagrad_l1_step(M: Any, U: Any, S: Any, lr: Any, eps: Any, l1: Any, inv_t: Any,
                    scale: Any, by_inner: bool) -> None:
    """ADAGrad's step, then the L1 proximal step with each weight's step size."""
    S += U * U
    den = np.sqrt(S * inv_t) + _per_row(eps, by_inner)
    a = _per_row(lr, by_inner)
    M += U / den * a * scale
    _shrink(M, a / den * scale * _per_row(l1, by_inner))


def grad_l1_step(M: Any, U: Any, lr: Any, l1: Any, scale: Any, by_inner: bool) -> None:
    """``M += U * lr * scale``, then the L1 proximal step with the step size ``lr * scale``."""
    a = _per_row(lr, by_inner)
    M += U * a * scale
    _shrink(M, a * scale * _per_row(l1, by_inner))


def subtract_scaled(U: Any, M: Any, c: Any, by_inner: bool) -> None:
    """``U -= M * c``."""
    U -= M * _per_row(c, by_inner)


def subtract_scaled_sign(U: Any, M: Any, c: Any, by_inner: bool) -> None:
    """``U -= sign(M) * c``."""
    U -= np.sign(M) * _per_row(c, by_inner)
