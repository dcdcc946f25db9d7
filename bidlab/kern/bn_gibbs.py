"""Blocked Gibbs sampling in discrete Bayesian networks: numba on the CPU.

The state is an int32 matrix ``X`` (rows = chains, or replicas of observations; columns =
variables). A network is handed over as flat arrays (:class:`bidlab.models.bayesnet.tables.
Tables` builds them): ``cpt`` (every table, row-major, one after the other, ``off[v]``
where variable ``v``'s starts), ``card`` (state counts), the parents of each variable with
their strides in its configuration index (``par_ptr``, ``par_idx``, ``par_stride``), the
units drawn (a variable, with a strongly coupled child: ``unit_a``, ``unit_b``), the tables
each unit's draw multiplies (``fac_ptr``, ``fac_idx``), the deterministic variables drawn
with it (``det_ptr``, ``det_idx``) and the colour blocks of units (``blk_ptr``,
``blk_units``).

One :func:`sweep` draws, block after block, every free variable of the block in every row
from its full conditional (numpy oracle for one row ``x`` and variable ``v``)::

    p[s] = P(v = s | pa(v)) * prod over children c of P(x_c | pa(c) with v = s)

(with deterministic children recomputed for each ``s``: the draw is then joint).
    x[v] ~ p / p.sum()

Rows share only the (read-only) tables, so rows run in parallel, each drawn block after
block in one pass: :func:`_sweep_rows` draws a range of rows on one thread, and
:func:`sweep` runs it on pieces of the rows in parallel. A fresh installation's background
compiler makes the one-thread kernel in about a third of a ``prange`` kernel's time, so it
replaces the numpy stand-in early in a first inference. Each kernel but
:func:`_sweep_rows` is an :func:`~bidlab.kern.adaptive.adaptive_kernel`: call it with the
work size first (rows x variables); it runs on all cores or one, whichever is faster now.
Random numbers: row ``r`` of block ``c`` in a sweep keyed ``key`` reads the counter-based
stream ``key + (r * n_blocks + c) * STRIDE`` (:mod:`bidlab.kern.random`), so the draws do
not depend on the number of threads.

Rows are replicas of observations: row ``j * n_obs + i`` is replica ``j`` of observation
``i``; ``obs[i, v] >= 0`` clamps ``v`` in every replica of ``i``, ``ev[v] >= 0`` clamps it
in every row (evidence), ``-1`` leaves it free.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from bidlab.kern import bn_gibbs_arrays as arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.random import STRIDE, uniform
from bidlab.kern.standin import stand_in

__all__ = ["sweep", "conditionals", "forward_fill", "log_joint", "counts"]

_PIECES = 64  # sweep cuts its rows into at most this many pieces, run in parallel


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
def _recompute(x, ev, obs, i, u, det_ptr, det_idx, cpt, off, card, par_ptr, par_idx,
               par_stride):  # pragma: no cover - compiled
    """Set the free deterministic variables hanging on unit ``u`` from their parents."""
    for q in range(det_ptr[u], det_ptr[u + 1]):
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


@numba.njit(inline="always")
def _joint(p, x, ev, obs, i, u, va, vb, ka, kb, cpt, off, card, par_ptr, par_idx,
           par_stride, fac_ptr, fac_idx, det_ptr, det_idx):  # pragma: no cover - compiled
    """Unit ``u``'s unnormalised joint conditional into ``p`` (returns its total), its
    deterministic descendants recomputed from their parents for every candidate."""
    tot = 0.0
    for sa in range(ka):
        x[va] = sa
        for sb in range(kb):
            if kb > 1:
                x[vb] = sb
            _recompute(x, ev, obs, i, u, det_ptr, det_idx, cpt, off, card, par_ptr,
                       par_idx, par_stride)
            pv = 1.0
            for e in range(fac_ptr[u], fac_ptr[u + 1]):
                f = fac_idx[e]
                pv *= cpt[off[f] + _config(x, f, par_ptr, par_idx, par_stride) * card[f]
                          + x[f]]
                if pv == 0.0:
                    break
            p[sa * kb + sb] = pv
            tot += pv
    return tot


@numba.njit(cache=True, nogil=True)
def _sweep_rows(X, obs, ev, n_obs, m_active, lo, hi, t_lo, t_hi, cpt, off, card, par_ptr,
                par_idx, par_stride, unit_a, unit_b, fac_ptr, fac_idx, fac_step_a, fac_step_b,
                det_ptr, det_idx, blk_ptr, blk_units, cond, cond_ptr, mb_ptr, mb_idx,
                mb_stride, key, rb, rb_off, record, bad):  # pragma: no cover - compiled
    """One Gibbs sweep over observations ``lo..hi`` of the first ``m_active`` replicas:
    the rows ``t_lo..t_hi`` of that list (row ``t`` is replica ``t // (hi - lo)`` of
    observation ``lo + t % (hi - lo)``), on the calling thread without the GIL.

    A unit ``u`` draws variable ``unit_a[u]`` jointly with ``unit_b[u]`` (a strongly
    coupled child, or -1 for none) from the product of the tables
    ``fac_idx[fac_ptr[u]:fac_ptr[u + 1]]`` (every table holding a variable the unit
    writes), with the deterministic descendants ``det_idx[det_ptr[u]:det_ptr[u + 1]]``
    recomputed from their parents for each candidate (drawn jointly too, so neither
    deterministic nor near-deterministic links lock the chain). Units of one block share
    no table, so a block's units are drawn at once. A unit without deterministic
    descendants reads each table's entry for the unit's first states and steps through
    the rest by ``fac_step_a[e]`` / ``fac_step_b[e]`` (the flat index's change per state
    of ``unit_a`` / ``unit_b``), so a candidate costs one multiply per table rather than
    a walk over the table's parents. ``det_ptr`` and ``det_idx`` are None when no unit has
    deterministic descendants: that specialization is compiled without the joint draw (a
    fresh installation compiles it in 1.7 s instead of 2.9 s, and it runs ~15 % faster).
    A unit with a tabled conditional
    (``cond_ptr[u] >= 0``, see :func:`conditionals`) reads its row of ``cond`` instead: the
    same products, formed once.

    ``record``: write the first variable's marginal under the unit's normalised joint
    conditional (its Rao-Blackwellised marginal) to ``rb[r, rb_off[v] + s]``. ``bad[r]``
    is set to 1 where a unit's conditional was all zero (the row's state has probability
    zero; it is left as is).
    """
    n = hi - lo
    n_blk = blk_ptr.shape[0] - 1
    kmax = 1
    for v in range(card.shape[0]):
        kmax = max(kmax, card[v])
    p = np.empty(kmax * kmax)
    for t in range(t_lo, t_hi):
        j = t // n
        i = lo + t - j * n
        r = j * n_obs + i
        x = X[r]
        for c in range(n_blk):
            s = key + np.uint64(r * n_blk + c) * STRIDE
            for q in range(blk_ptr[c], blk_ptr[c + 1]):
                u = blk_units[q]
                va = unit_a[u]
                if _clamped(ev, obs, i, va):
                    if ev[va] >= 0:
                        x[va] = ev[va]
                    continue
                vb = unit_b[u]
                kb = 1
                if vb >= 0 and not _clamped(ev, obs, i, vb):
                    kb = card[vb]
                ka = card[va]
                tot = 0.0
                if cond_ptr[u] >= 0 and (vb < 0 or kb > 1):
                    kk = ka * kb
                    row = 0
                    for q in range(mb_ptr[u], mb_ptr[u + 1]):
                        row += x[mb_idx[q]] * mb_stride[q]
                    base = cond_ptr[u] + row * kk
                    for st in range(kk):
                        p[st] = cond[base + st]
                        tot += p[st]
                elif det_ptr is None or det_ptr[u] == det_ptr[u + 1]:
                    kk = ka * kb
                    for st in range(kk):
                        p[st] = 1.0
                    xa = x[va]
                    xb = x[vb] if kb > 1 else 0
                    for e in range(fac_ptr[u], fac_ptr[u + 1]):
                        f = fac_idx[e]
                        da = fac_step_a[e]
                        db = fac_step_b[e] if kb > 1 else 0
                        b0 = (off[f] + _config(x, f, par_ptr, par_idx, par_stride)
                              * card[f] + x[f] - xa * da - xb * db)
                        for sa in range(ka):
                            for sb in range(kb):
                                p[sa * kb + sb] *= cpt[b0 + sa * da + sb * db]
                    for st in range(kk):
                        tot += p[st]
                else:
                    tot = _joint(p, x, ev, obs, i, u, va, vb, ka, kb, cpt, off, card,
                                 par_ptr, par_idx, par_stride, fac_ptr, fac_idx,
                                 det_ptr, det_idx)
                if not tot > 0.0:
                    bad[r] = 1
                    continue
                u01, s = uniform(s)
                u01 *= tot
                acc = 0.0
                kk = ka * kb
                pick = kk - 1
                for st in range(kk):
                    acc += p[st]
                    if u01 < acc and p[st] > 0.0:
                        pick = st
                        break
                while p[pick] <= 0.0:  # rounding at the top end: the last positive
                    pick -= 1
                x[va] = pick // kb
                if kb > 1:
                    x[vb] = pick - (pick // kb) * kb
                if det_ptr is not None:
                    _recompute(x, ev, obs, i, u, det_ptr, det_idx, cpt, off, card, par_ptr,
                               par_idx, par_stride)
                if record:
                    inv = 1.0 / tot
                    for sa in range(ka):
                        acc = 0.0
                        for sb in range(kb):
                            acc += p[sa * kb + sb]
                        rb[r, rb_off[va] + sa] = acc * inv
    return bad


@adaptive_kernel(cache=True, nogil=True)
def sweep(X, obs, ev, n_obs, m_active, lo, hi, cpt, off, card, par_ptr, par_idx,
          par_stride, unit_a, unit_b, fac_ptr, fac_idx, fac_step_a, fac_step_b, det_ptr,
          det_idx, blk_ptr, blk_units, cond, cond_ptr, mb_ptr, mb_idx, mb_stride, key, rb,
          rb_off, record, bad):  # pragma: no cover - compiled
    """One Gibbs sweep over observations ``lo..hi`` of the first ``m_active`` replicas:
    :func:`_sweep_rows` on pieces of the rows in parallel (returns ``bad``)."""
    total = m_active * (hi - lo)
    pieces = min(_PIECES, max(total, 1))
    for piece in prange(pieces):
        _sweep_rows(X, obs, ev, n_obs, m_active, lo, hi, piece * total // pieces,
                    (piece + 1) * total // pieces, cpt, off, card, par_ptr, par_idx,
                    par_stride, unit_a, unit_b, fac_ptr, fac_idx, fac_step_a, fac_step_b,
                    det_ptr, det_idx, blk_ptr, blk_units, cond, cond_ptr, mb_ptr, mb_idx,
                    mb_stride, key, rb, rb_off, record, bad)
    return bad


def _all_rows(X: np.ndarray, obs: np.ndarray, ev: np.ndarray, n_obs: int, m_active: int,
              lo: int, hi: int, *tables: Any) -> np.ndarray:
    """:func:`sweep` on the calling thread: :func:`_sweep_rows` over every row (its machine
    code once compiled, else its numpy stand-in), run while :func:`sweep` compiles."""
    total = max(int(m_active) * (int(hi) - int(lo)), 0)
    return _sweep_rows(X, obs, ev, n_obs, m_active, lo, hi, 0, total, *tables)


@numba.njit(cache=True)
def conditionals(cond, cond_ptr, mb_ptr, mb_idx, mb_stride, cpt, off, card, par_ptr,
                 par_idx, par_stride, unit_a, unit_b, fac_ptr, fac_idx, fac_step_a,
                 fac_step_b):  # pragma: no cover - compiled
    """Fill ``cond`` with every tabled unit's full conditional: for each state of the
    variables ``mb_idx[mb_ptr[u]:mb_ptr[u + 1]]`` (row ``sum x[v] * mb_stride``), the
    product over the unit's tables for each joint state, multiplied in :func:`sweep`'s
    order (so a tabled draw equals the untabled one bit for bit)."""
    x = np.zeros(card.shape[0], np.int64)
    for u in range(cond_ptr.shape[0]):
        if cond_ptr[u] < 0:
            continue
        va = unit_a[u]
        vb = unit_b[u]
        ka = card[va]
        kb = card[vb] if vb >= 0 else 1
        kk = ka * kb
        rows = 1
        for q in range(mb_ptr[u], mb_ptr[u + 1]):
            rows *= card[mb_idx[q]]
        for row in range(rows):
            for q in range(mb_ptr[u], mb_ptr[u + 1]):
                x[mb_idx[q]] = (row // mb_stride[q]) % card[mb_idx[q]]
            x[va] = 0
            if vb >= 0:
                x[vb] = 0
            base = cond_ptr[u] + row * kk
            for st in range(kk):
                cond[base + st] = 1.0
            for e in range(fac_ptr[u], fac_ptr[u + 1]):
                f = fac_idx[e]
                da = fac_step_a[e]
                db = fac_step_b[e] if vb >= 0 else 0
                b0 = off[f] + _config(x, f, par_ptr, par_idx, par_stride) * card[f] + x[f]
                for sa in range(ka):
                    for sb in range(kb):
                        cond[base + sa * kb + sb] *= cpt[b0 + sa * da + sb * db]


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


# array-level forms, run while the kernels compile in the background (bidlab.kern.standin);
# the sampler's sweep carries an inference's work: its one-thread kernel compiles first (a
# third of the parallel one's time), and runs until the parallel one is there
stand_in(_sweep_rows, priority=-1)(arrays.sweep)
stand_in(sweep)(_all_rows)
stand_in(forward_fill)(arrays.forward_fill)
stand_in(conditionals)(arrays.conditionals)
stand_in(log_joint)(arrays.log_joint)
stand_in(counts)(arrays.counts)
