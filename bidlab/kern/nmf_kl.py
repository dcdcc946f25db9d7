"""NMF's Kullback-Leibler multiplicative step on a CSR block, fused (numba, CPU).

The step's ratio ``Q = X / max(W H, eps)`` lives at ``X``'s stored entries only; unfused,
a minibatch forms ``P = W H`` there (SDDMM), floors it, divides, and then reads the same
rows of ``H^T`` again for the product with ``Q``, and the loss reads ``Q`` twice more (a
logarithm and a sum). Here one loop over the stored entries does it all, reading each
``H^T`` row once while it is in cache:

* :func:`kl_w_numerator`: ``out = Q @ Ht`` (the row factors' numerator; each output row
  belongs to one thread);
* :func:`kl_h_push`: ``Q.T @ W`` pushed into the running sums of a
  :class:`~bidlab.kern.scatter_sums.ScatterSums` (the components' numerator over a pass),
  returning the block's ``sum x log(x / p)`` and ``sum x`` (float64 accumulators).

``eps`` is the floor of ``W H`` (scikit-learn's float32 epsilon); the logarithm adds
``tiny`` (the dtype's smallest normal) so that a stored zero contributes 0.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> from bidlab.kern.nmf_kl import kl_w_numerator
>>> X = sp.random(5, 4, density=0.6, format="csr", random_state=0)
>>> W, Ht = np.ones((5, 2)), np.ones((4, 2))
>>> out = np.empty((5, 2))
>>> kl_w_numerator(X, W, Ht, 1e-7, out)
>>> bool(np.allclose(out, (X / 2.0) @ Ht))
True
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from bidlab.kern import arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.cpu import _FM, _nparts, _part
from bidlab.kern.scatter_sums import ScatterSums
from bidlab.kern.standin import stand_in

__all__ = ["kl_w_numerator", "kl_h_push"]


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _w_numerator(indptr, indices, data, W, Ht, eps, out, nparts):  # pragma: no cover
    k = W.shape[1]
    for t in prange(nparts):
        lo, hi = _part(indptr, t, nparts)
        for i in range(lo, hi):
            acc = out[i]
            for c in range(k):
                acc[c] = 0
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                s = W[i, 0] * Ht[j, 0]
                for c in range(1, k):
                    s += W[i, c] * Ht[j, c]
                q = data[p] / max(s, eps)
                for c in range(k):
                    acc[c] += q * Ht[j, c]


@numba.njit(inline="always")
def _push_kl(indptr, indices, data, W, Ht, eps, tiny, dst, lo, hi):  # pragma: no cover
    k = W.shape[1]
    xlogq = 0.0
    xsum = 0.0
    for i in range(lo, hi):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            s = W[i, 0] * Ht[j, 0]
            for c in range(1, k):
                s += W[i, c] * Ht[j, c]
            x = data[p]
            q = x / max(s, eps)
            for c in range(k):
                dst[j, c] += q * W[i, c]
            xlogq += x * np.log(q + tiny)
            xsum += x
    return xlogq, xsum


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _h_push(indptr, indices, data, W, Ht, eps, tiny, out, work, parts):  # pragma: no cover
    nparts = work.shape[0] + 1
    for t in prange(nparts):
        lo, hi = _part(indptr, t, nparts)
        if t == 0:
            a, b = _push_kl(indptr, indices, data, W, Ht, eps, tiny, out, lo, hi)
        else:
            a, b = _push_kl(indptr, indices, data, W, Ht, eps, tiny, work[t - 1], lo, hi)
        parts[t, 0] = a
        parts[t, 1] = b


# array-level forms, run while the kernels compile in the background (bidlab.kern.standin)
stand_in(_w_numerator)(arrays.kl_w_numerator)
stand_in(_h_push)(arrays.kl_h_push)


def _check(X: Any, W: Any, Ht: Any) -> None:
    if W.shape[0] != X.shape[0] or Ht.shape[0] != X.shape[1] or W.shape[1] != Ht.shape[1]:
        raise ValueError(f"NMF KL step: X {X.shape}, W {W.shape} and Ht {Ht.shape} do not "
                         "fit (X m x n, W m x k, Ht n x k)")


def kl_w_numerator(X: Any, W: Any, Ht: Any, eps: float, out: Any) -> None:
    """``out = (X / max(W Ht^T, eps)) @ Ht`` at ``X``'s stored entries (``X`` m x n CSR,
    ``W`` m x k, ``Ht`` n x k, ``out`` m x k). Oracle:
    ``(X.multiply(1 / np.maximum(sddmm, eps))) @ Ht``."""
    _check(X, W, Ht)
    eps = W.dtype.type(eps)  # float32 data stays in float32 arithmetic
    _w_numerator(float(X.indptr[-1]) * W.shape[1], X.indptr, X.indices, X.data, W, Ht, eps,
                 out, _nparts(X.indptr))


def kl_h_push(X: Any, W: Any, Ht: Any, eps: float, sums: ScatterSums,
              parts: np.ndarray) -> tuple[float, float]:
    """Push ``Q.T @ W`` (``Q = X / max(W Ht^T, eps)`` at ``X``'s stored entries) into
    ``sums``; return ``sum x log(x / p + tiny)`` and ``sum x`` over the block. ``parts``:
    float64 scratch of at least ``sums.work.shape[0] + 1`` rows and 2 columns."""
    _check(X, W, Ht)
    n = sums.work.shape[0] + 1
    eps, tiny = W.dtype.type(eps), np.finfo(W.dtype).tiny
    _h_push(float(X.indptr[-1]) * W.shape[1], X.indptr, X.indices, X.data, W, Ht, eps, tiny,
            sums.out, sums.work, parts)
    sums.mark()
    return float(parts[:n, 0].sum()), float(parts[:n, 1].sum())
