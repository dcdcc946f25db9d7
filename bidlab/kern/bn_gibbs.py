"""Blocked Gibbs sampling in discrete Bayesian networks: numba on the CPU.

The state is an int32 matrix ``X`` (rows = chains, or replicas of observations; columns =
variables). A network is handed over as flat arrays (:class:`bidlab.models.bayesnet.tables.
Tables` builds them): ``cpt`` (every table, row-major, one after the other, ``off[v]``
where variable ``v``'s starts), ``card`` (state counts), the parents of each variable with
their strides in its configuration index (``par_ptr``, ``par_idx``, ``par_stride``), the
tables each variable's draw multiplies (``fac_ptr``, ``fac_idx``), the deterministic
variables drawn with it (``det_ptr``, ``det_idx``, ``is_det``) and the colour blocks
(``blk_ptr``, ``blk_nodes``).

One :func:`sweep` draws, block after block, every free variable of the block in every row
from its full conditional (numpy oracle for one row ``x`` and variable ``v``)::

    p[s] = P(v = s | pa(v)) * prod over children c of P(x_c | pa(c) with v = s)

(with deterministic children recomputed for each ``s``: the draw is then joint).
    x[v] ~ p / p.sum()

Rows of one block are independent given the other blocks, so rows run in parallel.
Each kernel is an :func:`~bidlab.kern.adaptive.adaptive_kernel`: call it with the work
size first (rows x variables); it runs on all cores or one, whichever is faster now.
Random numbers: row ``r`` of block ``c`` in a sweep keyed ``key`` reads the counter-based
stream ``key + (r * n_blocks + c) * STRIDE`` (:mod:`bidlab.kern.random`), so the draws do
not depend on the number of threads.

Rows are replicas of observations: row ``j * n_obs + i`` is replica ``j`` of observation
``i``; ``obs[i, v] >= 0`` clamps ``v`` in every replica of ``i``, ``ev[v] >= 0`` clamps it
in every row (evidence), ``-1`` leaves it free.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.random import STRIDE, uniform

__all__ = ["sweep", "forward_fill", "log_joint", "counts"]

_CHUNKS = 256  # rows are cut into at most this many parallel pieces (not per thread)


@numba.njit(inline="always")
def _config(x, v, par_ptr, par_idx, par_stride):  # pragma: no cover - compiled
    c = 0
    for q in range(par_ptr[v], par_ptr[v + 1]):
        c += x[par_idx[q]] * par_stride[q]
    return c


@numba.njit(inline="always")
def _clamped(ev, obs, i, v):  # pragma: no cover - compiled
    return ev[v] >= 0 or obs[i, v] >= 0


@numba.njit(inline="always")
def _recompute(x, ev, obs, i, v, det_ptr, det_idx, cpt, off, card, par_ptr, par_idx,
               par_stride):  # pragma: no cover - compiled
    """Set the free deterministic variables hanging on ``v`` from their parents."""
    for q in range(det_ptr[v], det_ptr[v + 1]):
        d = det_idx[q]
        if _clamped(ev, obs, i, d):
            continue
        k = card[d]
        base = off[d] + _config(x, d, par_ptr, par_idx, par_stride) * k
        best = 0
        for st in range(1, k):
            if cpt[base + st] > cpt[base + best]:
                best = st
        x[d] = best


@adaptive_kernel(cache=True, nogil=True)
def sweep(X, obs, ev, n_obs, m_active, lo, hi, cpt, off, card, par_ptr, par_idx,
          par_stride, fac_ptr, fac_idx, det_ptr, det_idx, is_det, blk_ptr, blk_nodes, key,
          rb, rb_off, record, bad):  # pragma: no cover - compiled
    """One Gibbs sweep over observations ``lo..hi`` of the first ``m_active`` replicas.

    ``fac_idx[fac_ptr[v]:fac_ptr[v + 1]]``: the variables whose table holds ``v`` or one
    of its deterministic descendants ``det_idx[det_ptr[v]:det_ptr[v + 1]]`` (those are
    recomputed from their parents with ``v``: drawn jointly with it, so deterministic
    links do not lock the chain). ``is_det[v]``: ``v`` itself is deterministic given its
    parents and is never drawn on its own.

    ``record``: write each free variable's normalised conditional (its Rao-Blackwellised
    marginal) to ``rb[r, rb_off[v] + s]``. ``bad[r]`` is set to 1 where a variable's
    conditional was all zero (the row's state has probability zero; it is left as is).
    """
    n = hi - lo
    total = m_active * n
    n_blk = blk_ptr.shape[0] - 1
    kmax = 1
    for v in range(card.shape[0]):
        kmax = max(kmax, card[v])
    pieces = min(_CHUNKS, max(total, 1))
    for c in range(n_blk):
        for piece in prange(pieces):
            p = np.empty(kmax)
            a = piece * total // pieces
            b = (piece + 1) * total // pieces
            for t in range(a, b):
                j = t // n
                i = lo + t - j * n
                r = j * n_obs + i
                x = X[r]
                s = key + np.uint64(r * n_blk + c) * STRIDE
                for q in range(blk_ptr[c], blk_ptr[c + 1]):
                    v = blk_nodes[q]
                    if ev[v] >= 0:
                        x[v] = ev[v]
                        continue
                    if obs[i, v] >= 0 or (is_det[v] and par_ptr[v + 1] > par_ptr[v]):
                        continue
                    k = card[v]
                    base = off[v] + _config(x, v, par_ptr, par_idx, par_stride) * k
                    tot = 0.0
                    for st in range(k):
                        pv = cpt[base + st]
                        if pv > 0.0:
                            x[v] = st
                            _recompute(x, ev, obs, i, v, det_ptr, det_idx, cpt, off, card,
                                       par_ptr, par_idx, par_stride)
                            for e in range(fac_ptr[v], fac_ptr[v + 1]):
                                f = fac_idx[e]
                                pv *= cpt[off[f] + _config(x, f, par_ptr, par_idx, par_stride)
                                          * card[f] + x[f]]
                        p[st] = pv
                        tot += pv
                    if not tot > 0.0:
                        bad[r] = 1
                        continue
                    u, s = uniform(s)
                    u *= tot
                    acc = 0.0
                    pick = k - 1
                    for st in range(k):
                        acc += p[st]
                        if u < acc and p[st] > 0.0:
                            pick = st
                            break
                    while p[pick] <= 0.0:  # rounding at the top end: the last positive
                        pick -= 1
                    x[v] = pick
                    _recompute(x, ev, obs, i, v, det_ptr, det_idx, cpt, off, card, par_ptr,
                               par_idx, par_stride)
                    if record:
                        inv = 1.0 / tot
                        for st in range(k):
                            rb[r, rb_off[v] + st] = p[st] * inv
    return bad


@adaptive_kernel(cache=True, nogil=True)
def forward_fill(X, rows, obs, ev, n_obs, order, cpt, off, card, par_ptr, par_idx,
                 par_stride, key):  # pragma: no cover - compiled
    """Draw the free variables of the listed rows from their tables, parents first
    (ancestral sampling; clamped variables keep their values)."""
    for t in prange(rows.shape[0]):
        r = rows[t]
        i = r % n_obs
        x = X[r]
        s = key + np.uint64(r) * STRIDE
        for q in range(order.shape[0]):
            v = order[q]
            if ev[v] >= 0:
                x[v] = ev[v]
                continue
            if obs[i, v] >= 0:
                x[v] = obs[i, v]
                continue
            k = card[v]
            base = off[v] + _config(x, v, par_ptr, par_idx, par_stride) * k
            u, s = uniform(s)
            acc = 0.0
            pick = k - 1
            for st in range(k):
                acc += cpt[base + st]
                if u < acc and cpt[base + st] > 0.0:
                    pick = st
                    break
            while cpt[base + pick] <= 0.0 and pick > 0:
                pick -= 1
            x[v] = pick
    return X


@adaptive_kernel(cache=True, nogil=True)
def log_joint(X, cpt, off, card, par_ptr, par_idx, par_stride, out):  # pragma: no cover
    """``out[r] = log P(X[r])`` (``-inf`` where a table entry is 0)."""
    for r in prange(X.shape[0]):
        x = X[r]
        acc = 0.0
        for v in range(card.shape[0]):
            pv = cpt[off[v] + _config(x, v, par_ptr, par_idx, par_stride) * card[v] + x[v]]
            if pv > 0.0:
                acc += np.log(pv)
            else:
                acc = -np.inf
                break
        out[r] = acc
    return out


@adaptive_kernel(cache=True, nogil=True)
def counts(X, n_obs, weights, cpt_size, off, card, par_ptr, par_idx, par_stride,
           out):  # pragma: no cover - compiled
    """``out[off[v] + cfg * k + x_v] += weights[j]`` over rows ``r = j * n_obs + i`` of the
    replicas with a weight (the expected counts of every table entry; variables run in
    parallel, each writing its own table)."""
    nv = card.shape[0]
    for v in prange(nv):
        k = card[v]
        for j in range(weights.shape[0]):
            w = weights[j]
            if w == 0.0:
                continue
            for i in range(n_obs):
                x = X[j * n_obs + i]
                out[off[v] + _config(x, v, par_ptr, par_idx, par_stride) * k + x[v]] += w
    return out
