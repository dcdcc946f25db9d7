"""Array-level (numpy / scipy) forms of the SAME Gibbs sampler's numba kernels, run while
numba compiles them (:mod:`bidlab.kern.standin`).

Same arguments and outputs as :mod:`bidlab.kern.lda_sampler`'s ``_sweeps`` and
``_add_rows`` and :mod:`bidlab.kern.lda_rows`' ``_fill_heated``,
``_unique_cols`` and ``_rows_step``. The draws are the kernels' own: the same SplitMix64
stream per (nonzero, topic) (uint64 arithmetic wraps in numpy as in numba), the same
inversion for rates below ``LAM_INV`` and the same PTRS rejection loop above it, run for
all of a block's nonzeros and topics at once. The kernels may fuse a multiply-add where
numpy rounds twice, so a rate can differ in its last bit and, once in a great many draws, a
uniform that falls within that bit of a CDF step gives a count one apart; the sums come in
another order and are rounded once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from bidlab.kern.lda_poisson import _EXP_C, _INV, LAM_INV, MAX_TERMS, SURE
from bidlab.kern.random import GOLD, STRIDE, stream_key

__all__ = ["fill_heated", "unique_cols", "rows_step", "sample_rows", "sweeps", "add_rows"]

_CP = np.uint64(0xD1B54A32D192ED03)  # as lda_sampler: spreads nonzero p's streams apart
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_TWO_M53 = 1.1102230246251565e-16
_BLOCK = 1 << 12  # nonzeros drawn at once: the n x k temporaries stay near the cache (a
# KOS minibatch's sweep ran 1.1-3x faster than in blocks of 16,384; the streams are keyed
# by the nonzero, so the block size never changes a draw)


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on a uint64 array (a new array)."""
    x = x ^ (x >> np.uint64(30))
    x *= _C1
    x ^= x >> np.uint64(27)
    x *= _C2
    x ^= x >> np.uint64(31)
    return x


def _unit(x: np.ndarray) -> np.ndarray:
    """Each state's double in [0, 1): its 53 high mixed bits."""
    return (_mix64(x) >> np.uint64(11)).astype(np.float64) * _TWO_M53


def _exp_neg(lam: np.ndarray) -> np.ndarray:
    """exp(-lam) for 0 <= lam < 10 as the kernel forms it: exp(-lam / 16) ** 16."""
    y = lam * 0.0625
    r = np.full_like(y, _EXP_C[0])
    for c in _EXP_C[1:]:
        r *= y
        r += c
    for _ in range(4):
        r *= r
    return r


def _invert(lam: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Poisson(lam) for lam < LAM_INV by inversion from the uniforms ``u``: the kernel's
    CDF terms ``t_x = t_{x-1} * (lam / x)`` and sums ``F_x = F_{x-1} + t_x`` in the same
    order. F only grows, so the kernel's count of the leading x with ``u > F_x`` is the
    count of all of them: whole-array steps, narrowed to the draws still below their
    uniform once few are."""
    f = _exp_neg(lam)
    z = (u > f).astype(np.int64)
    at = None  # where the working arrays' draws are in z (None: all of them)
    t = f.copy()
    for x in range(1, MAX_TERMS):
        t *= lam * _INV[x]
        f += t
        more = u > f
        n = np.count_nonzero(more)
        if n == 0:
            break
        if at is None:
            z += more
        else:
            z[at] += more
        if 4 * n < more.shape[0]:
            keep = np.flatnonzero(more)
            at = keep if at is None else at[keep]
            lam, u, t, f = lam[keep], u[keep], t[keep], f[keep]
    return z


def _ptrs(lam: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Poisson(lam) for lam >= LAM_INV by PTRS from the streams at states ``s``: round r
    of every draw's rejection loop at once."""
    n = lam.shape[0]
    z = np.floor(lam + 0.5).astype(np.int64)  # the kernel's answer after 1000 rejections
    slam, loglam = np.sqrt(lam), np.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    loginvalpha = np.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2.0)
    live = np.arange(n)
    s = s.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(1000):
            if live.shape[0] == 0:
                break
            s[live] += GOLD
            uu = _unit(s[live]) - 0.5
            s[live] += GOLD
            v = _unit(s[live])
            al, bl, lm = a[live], b[live], lam[live]
            us = 0.5 - np.abs(uu)
            kk = np.floor((2.0 * al / us + bl) * uu + lm + 0.43)
            take = (us >= 0.07) & (v <= vr[live])
            skip = ~take & ((kk < 0.0) | ((us < 0.013) & (v > us)))
            test = np.flatnonzero(~take & ~skip)
            if test.shape[0]:
                kt, ut = kk[test], us[test]
                lhs = np.log(v[test]) + loginvalpha[live[test]] - np.log(
                    a[live[test]] / (ut * ut) + b[live[test]])
                take[test] = lhs <= -lm[test] + kt * loglam[live[test]] - gammaln(kt + 1.0)
            z[live[take]] = kk[take].astype(np.int64)
            live = live[~take]
    return z


def _sum_rows(values: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """Row sums of ``values`` (m x k) by ``group`` (m ids < n): an n x k float64 array."""
    m = values.shape[0]
    member = sp.csr_matrix((np.ones(m), group, np.arange(m + 1)), shape=(m, n))
    return np.asarray(member.T @ values)


def sample_rows(lo: int, hi: int, indptr: Any, indices: Any, counts: Any, theta: Any,
                cnt: Any, a: float, beta: float, invden: Any, temp: Any, hot: Any,
                theta_hat: Any, out: Any, with_phi: bool, nsamps: float, key: int) -> None:
    """One sweep over documents ``lo:hi``: ``theta_hat`` rows overwritten, the draws added to
    ``out`` (V x k) when ``with_phi`` (one sweep of the kernel's document loop)."""
    k = theta.shape[1]
    theta_hat[lo:hi] = 0
    p0, p1 = int(indptr[lo]), int(indptr[hi])
    if p1 <= p0:
        return
    docs = np.repeat(np.arange(lo, hi), np.diff(np.asarray(indptr[lo: hi + 1], np.int64)))
    inv_m = 1.0 / nsamps
    inv64 = np.asarray(invden, np.float64)
    acc = np.zeros((hi - lo, k))
    topics = np.arange(k, dtype=np.uint64) * STRIDE
    for c0 in range(p0, p1, _BLOCK):
        c1 = min(c0 + _BLOCK, p1)
        d, w = docs[c0 - p0: c1 - p0], np.asarray(indices[c0:c1], np.int64)
        phi = np.multiply(cnt[w], a, dtype=np.float64)
        phi += beta
        phi *= inv64
        q = np.multiply(theta[d], phi, dtype=np.float64)
        mu = q.sum(axis=1)
        ok = mu > 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            q *= (nsamps * np.asarray(counts[c0:c1], np.float64) / mu)[:, None]
        base = np.uint64(key) ^ _mix64(np.arange(c0, c1, dtype=np.uint64) * _CP)
        base += GOLD
        states = base[:, None] + topics
        uu = _unit(states)
        heated = hot[w] != 0
        any_heat = bool(heated.any())
        if any_heat:
            q[heated] /= temp[w[heated]]
        with np.errstate(invalid="ignore"):
            act = uu > (1.0 - q) * SURE
        act &= ok[:, None]
        at = np.flatnonzero(act)
        lam, u = q.reshape(-1)[at], uu.reshape(-1)[at]
        z = np.empty(at.shape[0], np.int64)
        small = lam < LAM_INV
        z[small] = _invert(lam[small], u[small])
        big = ~small
        if big.any():
            z[big] = _ptrs(lam[big], states.reshape(-1)[at[big]])
        draws = np.zeros(q.shape)  # z / m per (nonzero, topic)
        draws.reshape(-1)[at] = z * inv_m
        if any_heat:
            draws[heated] *= temp[w[heated]]
        acc += _sum_rows(draws, d - lo, hi - lo)
        if with_phi:
            words, where = np.unique(w, return_inverse=True)
            out[words] += _sum_rows(draws, where, words.shape[0])
    theta_hat[lo:hi] += acc


def sweeps(indptr, indices, counts, theta, cnt, a, beta, invden, temp, hot,  # noqa: ANN001
           theta_hat, out, rows, nsamps, seed, step, sweeps, alpha, with_phi,
           set_theta) -> None:
    """``_sweeps``: ``sweeps`` sweeps (stream of ``step + i``), ``theta = theta_hat +
    alpha`` after each with ``set_theta``, the last one's draws into ``out`` (its ``rows``
    zeroed first) with ``with_phi``."""
    for i in range(int(sweeps)):
        phi = bool(with_phi) and i == sweeps - 1
        if phi:
            out[rows] = 0
        sample_rows(0, theta.shape[0], indptr, indices, counts, theta, cnt, a, beta, invden,
                    temp, hot, theta_hat, out, phi, nsamps, stream_key(int(seed), int(step) + i))
        if set_theta:
            np.add(theta_hat, alpha, out=theta)


def fill_heated(temp: Any, out: Any) -> None:
    """``_fill_heated``: 1 where a word's row of temperatures holds a value other than 1."""
    out[:] = (temp != 1.0).any(axis=1)


def unique_cols(indices: Any, stamp: Any, tick: Any, out: Any) -> int:
    """``_unique_cols``: the distinct values of ``indices`` into ``out`` in first-seen
    order, ``stamp`` set to ``tick`` where seen; returns how many."""
    values, first = np.unique(np.asarray(indices), return_index=True)
    fresh = stamp[values] != tick
    seen = values[fresh][np.argsort(first[fresh], kind="stable")]
    n = seen.shape[0]
    out[:n] = seen
    stamp[seen] = tick
    return int(n)


def rows_step(counts: Any, colsum: Any, phi_hat: Any, rows: Any, s: float) -> None:
    """``_rows_step``: ``counts[rows] += s * phi_hat[rows]``, their column sums into
    ``colsum``, then ``phi_hat[rows] = 0``."""
    v = np.multiply(phi_hat[rows], s, dtype=np.float64)
    counts[rows] += v
    colsum += v.sum(axis=0, dtype=np.float64)
    phi_hat[rows] = 0


def add_rows(dst: Any, bufs: Any, rows: Any) -> None:
    """``_add_rows``: ``dst[rows] += bufs[c][rows]`` for each buffer c in order."""
    for c in range(bufs.shape[0]):
        dst[rows] += bufs[c][rows]
