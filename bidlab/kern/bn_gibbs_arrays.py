"""Array-level (numpy) forms of the Bayesian-network Gibbs kernels, run while numba compiles
them (:mod:`bidlab.kern.standin`).

Same arguments and outputs as the kernels of :mod:`bidlab.kern.bn_gibbs`
(:func:`~bidlab.kern.bn_gibbs._sweep_rows`, :func:`~bidlab.kern.bn_gibbs.forward_fill`,
:func:`~bidlab.kern.bn_gibbs.conditionals`, :func:`~bidlab.kern.bn_gibbs.log_joint` and
:func:`~bidlab.kern.bn_gibbs.counts`), with the rows (chains) as the vector dimension: a
unit's conditional is formed for every row at once,
multiplied table by table in the kernel's order, summed and searched state by state as the
kernel does, and drawn from each row's own counter-based stream, so the draws are the
kernels' own, bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab.kern.lda_sampler_arrays import _unit
from bidlab.kern.random import GOLD, STRIDE

__all__ = ["sweep", "forward_fill", "conditionals", "log_joint", "counts"]


def _config(x: np.ndarray, v: int, par_ptr: Any, par_idx: Any, par_stride: Any) -> np.ndarray:
    """Each row's configuration index of ``v``'s parents (int64)."""
    c = np.zeros(x.shape[0], np.int64)
    for q in range(par_ptr[v], par_ptr[v + 1]):
        c += x[:, par_idx[q]].astype(np.int64) * int(par_stride[q])
    return c


def _pick(p: np.ndarray, acc: np.ndarray, u01: np.ndarray) -> np.ndarray:
    """The kernels' inversion: the first state whose running sum ``acc`` exceeds ``u01``
    (already scaled by the total) with a positive weight, else the last; then back to the
    last positive one (rounding at the top end), or to the first."""
    hit = (u01[:, None] < acc) & (p > 0.0)
    pick = np.where(hit.any(axis=1), hit.argmax(axis=1), p.shape[1] - 1)
    rows = np.arange(p.shape[0])
    low = (p[rows, pick] <= 0.0) & (pick > 0)
    while low.any():
        pick[low] -= 1
        low &= (p[rows, pick] <= 0.0) & (pick > 0)
    return pick


def _products(x: np.ndarray, u: int, va: int, vb: int, kb: int,
              arrays: tuple[Any, ...]) -> np.ndarray:
    """Unit ``u``'s unnormalised conditional in every row of ``x`` (rows x ka kb, ``kb``
    states of its partner ``vb``): its tables' entries multiplied in the kernels' order,
    each read at the rows' own states of ``va`` / ``vb`` and stepped from there by
    ``fac_step_a`` / ``fac_step_b``."""
    (cpt, off, card, par_ptr, par_idx, par_stride, fac_ptr, fac_idx, fac_step_a,
     fac_step_b) = arrays
    ka = int(card[va])
    p = np.ones((x.shape[0], ka * kb))
    xa = x[:, va].astype(np.int64)
    xb = x[:, vb].astype(np.int64) if kb > 1 else 0
    sa = np.repeat(np.arange(ka), kb)
    sb = np.tile(np.arange(kb), ka)
    for e in range(fac_ptr[u], fac_ptr[u + 1]):
        f = fac_idx[e]
        da = int(fac_step_a[e])
        db = int(fac_step_b[e]) if kb > 1 else 0
        b0 = (off[f] + _config(x, f, par_ptr, par_idx, par_stride) * card[f]
              + x[:, f] - xa * da - xb * db)
        p *= cpt[b0[:, None] + (sa * da + sb * db)]
    return p


def _recompute(x: np.ndarray, free: Any, u: int, det_ptr: Any, det_idx: Any, cpt: Any,
               off: Any, card: Any, par_ptr: Any, par_idx: Any, par_stride: Any) -> None:
    """The free deterministic variables of unit ``u`` set from their parents (``free(d)``:
    a mask of the rows where ``d`` is not clamped, or None for all)."""
    for q in range(det_ptr[u], det_ptr[u + 1]):
        d = det_idx[q]
        rows = free(d)
        k = int(card[d])
        if rows is None:
            base = off[d] + _config(x, d, par_ptr, par_idx, par_stride) * k
            x[:, d] = cpt[base[:, None] + np.arange(k)].argmax(axis=1)
            continue
        if not rows.any():
            continue
        base = off[d] + _config(x[rows], d, par_ptr, par_idx, par_stride) * k
        x[rows, d] = cpt[base[:, None] + np.arange(k)].argmax(axis=1)


def sweep(X, obs, ev, n_obs, m_active, lo, hi, t_lo, t_hi, cpt, off, card, par_ptr,  # noqa: ANN001, ANN201
          par_idx, par_stride, unit_a, unit_b, fac_ptr, fac_idx, fac_step_a, fac_step_b,
          det_ptr, det_idx, blk_ptr, blk_units, cond, cond_ptr, mb_ptr, mb_idx, mb_stride,
          key, rb, rb_off, record, bad):
    """:func:`~bidlab.kern.bn_gibbs._sweep_rows`: one sweep over rows ``t_lo..t_hi`` of the
    first ``m_active`` replicas of observations ``lo..hi``, every row at once."""
    n = int(hi) - int(lo)
    if n <= 0 or m_active <= 0 or t_hi <= t_lo:
        return bad
    i = np.tile(np.arange(lo, hi, dtype=np.int64), int(m_active))[t_lo:t_hi]
    r = np.repeat(np.arange(m_active, dtype=np.int64), n)[t_lo:t_hi] * int(n_obs) + i
    x = X[r]
    n_blk = blk_ptr.shape[0] - 1
    oi = obs[i]  # each row's observation clamps
    held = (oi >= 0).any(axis=0)  # the variables some row's observation clamps

    def free(v: int) -> Any:
        """The rows where ``v`` is drawn: a mask, or None for all of them."""
        if ev[v] >= 0:
            return np.zeros(r.shape[0], bool)
        return (oi[:, v] < 0) if held[v] else None

    plan = (cpt, off, card, par_ptr, par_idx, par_stride, fac_ptr, fac_idx, fac_step_a,
            fac_step_b, det_ptr, det_idx, cond, cond_ptr, mb_ptr, mb_idx, mb_stride, rb,
            rb_off, bool(record), bad, r, free)
    key = np.uint64(key)
    r64 = r.astype(np.uint64) * np.uint64(n_blk)
    for c in range(n_blk):
        s = key + (r64 + np.uint64(c)) * STRIDE
        for q in range(blk_ptr[c], blk_ptr[c + 1]):
            u = int(blk_units[q])
            va = int(unit_a[u])
            if ev[va] >= 0:
                x[:, va] = ev[va]
                continue
            rows_a = free(va)
            vb = int(unit_b[u])
            fb = free(vb) if vb >= 0 else False
            if vb < 0 or (fb is not None and not fb.any()):
                groups = [(rows_a, 1)]
            elif fb is None:
                groups = [(rows_a, int(card[vb]))]
            else:
                every = np.ones(r.shape[0], bool) if rows_a is None else rows_a
                groups = [(every & fb, int(card[vb])), (every & ~fb, 1)]
            for rows, kb in groups:
                if rows is None:
                    _draw_unit(x, s, u, va, vb, kb, None, plan)
                elif rows.any():
                    s_rows = s[rows]
                    xr = x[rows]
                    _draw_unit(xr, s_rows, u, va, vb, kb, np.flatnonzero(rows), plan)
                    x[rows] = xr
                    s[rows] = s_rows
    X[r] = x
    return bad


def _draw_unit(x, s, u, va, vb, kb, sub, plan) -> None:  # noqa: ANN001
    """Draw unit ``u`` in every row of ``x`` (the rows ``sub`` of the sweep's, or all of
    them when None), where its first variable is free and its second, if any, has ``kb``
    candidates; ``x`` and the stream states ``s`` are updated in place."""
    (cpt, off, card, par_ptr, par_idx, par_stride, fac_ptr, fac_idx, fac_step_a, fac_step_b,
     det_ptr, det_idx, cond, cond_ptr, mb_ptr, mb_idx, mb_stride, rb, rb_off, record, bad, r,
     free) = plan
    ka = int(card[va])
    kk = ka * kb
    has_det = det_ptr is not None and det_ptr[u] != det_ptr[u + 1]

    def sub_free(d: int) -> Any:
        f = free(d)
        return f if f is None or sub is None else f[sub]

    if cond_ptr[u] >= 0 and (vb < 0 or kb > 1):
        a, b = mb_ptr[u], mb_ptr[u + 1]
        row = x[:, mb_idx[a:b]].astype(np.int64) @ mb_stride[a:b].astype(np.int64)
        p = cond[(cond_ptr[u] + row * kk)[:, None] + np.arange(kk)]
    elif not has_det:
        p = _products(x, u, va, vb, kb, plan[:10])
    else:  # deterministic descendants: the joint over candidates, recomputed for each
        p = np.empty((x.shape[0], kk))
        for a in range(ka):
            x[:, va] = a
            for b in range(kb):
                if kb > 1:
                    x[:, vb] = b
                _recompute(x, sub_free, u, det_ptr, det_idx, cpt, off, card, par_ptr,
                           par_idx, par_stride)
                pv = np.ones(x.shape[0])
                for e in range(fac_ptr[u], fac_ptr[u + 1]):
                    f = fac_idx[e]
                    pv *= cpt[off[f] + _config(x, f, par_ptr, par_idx, par_stride) * card[f]
                              + x[:, f]]
                p[:, a * kb + b] = pv
    acc = np.cumsum(p, axis=1)  # sequential, as the kernel's running sum
    tot = acc[:, -1]  # the same additions in the same order as the kernel's total
    good = tot > 0.0
    every = bool(good.all())
    if not every:
        bad[r[np.flatnonzero(~good) if sub is None else sub[~good]]] = 1
        if not good.any():
            return
        p, acc, tot = p[good], acc[good], tot[good]
    sg = s if every else s[good]
    sg += GOLD
    pick = _pick(p, acc, _unit(sg) * tot)
    if not every:
        s[good] = sg
    xg = x if every else x[good]
    xg[:, va] = pick // kb
    if kb > 1:
        xg[:, vb] = pick - (pick // kb) * kb
    rows_g = np.arange(x.shape[0]) if every else np.flatnonzero(good)
    if has_det:
        at = rows_g if sub is None else sub[rows_g]

        def good_free(d: int) -> Any:
            f = free(d)
            return None if f is None and every else (
                np.ones(at.shape[0], bool) if f is None else f[at])

        _recompute(xg, good_free, u, det_ptr, det_idx, cpt, off, card, par_ptr, par_idx,
                   par_stride)
    if not every:
        x[good] = xg
    if record:
        inv = 1.0 / tot
        out = r[rows_g] if sub is None else r[sub[rows_g]]
        for a in range(ka):
            m = np.zeros(p.shape[0])
            for b in range(kb):
                m += p[:, a * kb + b]
            rb[out, rb_off[va] + a] = m * inv


def forward_fill(X, rows, obs, ev, n_obs, order, cpt, off, card, par_ptr, par_idx,  # noqa: ANN001, ANN201
                 par_stride, key):
    """:func:`~bidlab.kern.bn_gibbs.forward_fill`: ancestral draws of the listed rows."""
    if rows.shape[0] == 0:
        return X
    r = np.asarray(rows, np.int64)
    i = r % int(n_obs)
    x = X[r]
    s = np.uint64(key) + r.astype(np.uint64) * STRIDE
    for v in order:
        if ev[v] >= 0:
            x[:, v] = ev[v]
            continue
        clamp = obs[i, v]
        held = clamp >= 0
        x[held, v] = clamp[held]
        draw = ~held
        if not draw.any():
            continue
        k = int(card[v])
        base = off[v] + _config(x[draw], v, par_ptr, par_idx, par_stride) * k
        p = cpt[base[:, None] + np.arange(k)]
        s[draw] += GOLD
        pick = _pick(p, np.cumsum(p, axis=1), _unit(s[draw]))
        x[draw, v] = pick
    X[r] = x
    return X


def conditionals(cond, cond_ptr, mb_ptr, mb_idx, mb_stride, cpt, off, card, par_ptr,  # noqa: ANN001, ANN201
                 par_idx, par_stride, unit_a, unit_b, fac_ptr, fac_idx, fac_step_a,
                 fac_step_b):
    """:func:`~bidlab.kern.bn_gibbs.conditionals`: every tabled unit's rows at once."""
    for u in range(cond_ptr.shape[0]):
        if cond_ptr[u] < 0:
            continue
        va, vb = int(unit_a[u]), int(unit_b[u])
        ka = int(card[va])
        kb = int(card[vb]) if vb >= 0 else 1
        kk = ka * kb
        n = 1
        for q in range(mb_ptr[u], mb_ptr[u + 1]):
            n *= int(card[mb_idx[q]])
        x = np.zeros((n, card.shape[0]), np.int64)
        states = np.arange(n)
        for q in range(mb_ptr[u], mb_ptr[u + 1]):
            x[:, mb_idx[q]] = (states // int(mb_stride[q])) % int(card[mb_idx[q]])
        x[:, va] = 0
        if vb >= 0:
            x[:, vb] = 0
        p = _products(x, u, va, vb, kb, (cpt, off, card, par_ptr, par_idx, par_stride,
                                         fac_ptr, fac_idx, fac_step_a, fac_step_b))
        cond[cond_ptr[u]: cond_ptr[u] + n * kk] = p.reshape(-1)


def log_joint(X, cpt, off, card, par_ptr, par_idx, par_stride, out):  # noqa: ANN001, ANN201
    """:func:`~bidlab.kern.bn_gibbs.log_joint`: ``out[r] = log P(X[r])``."""
    acc = np.zeros(X.shape[0])
    dead = np.zeros(X.shape[0], bool)
    for v in range(card.shape[0]):
        pv = cpt[off[v] + _config(X, v, par_ptr, par_idx, par_stride) * card[v] + X[:, v]]
        ok = pv > 0.0
        dead |= ~ok
        with np.errstate(divide="ignore"):
            acc += np.where(ok & ~dead, np.log(np.where(ok, pv, 1.0)), 0.0)
    out[:] = np.where(dead, -np.inf, acc)
    return out


def counts(X, n_obs, weights, cpt_size, off, card, par_ptr, par_idx, par_stride, out):  # noqa: ANN001, ANN201
    """:func:`~bidlab.kern.bn_gibbs.counts`: every table entry's weighted count, added in
    the kernel's order (replica by replica, observation by observation)."""
    for j in range(weights.shape[0]):
        w = weights[j]
        if w == 0.0:
            continue
        x = X[j * n_obs: (j + 1) * n_obs]
        for v in range(card.shape[0]):
            np.add.at(out, off[v] + _config(x, v, par_ptr, par_idx, par_stride) * card[v]
                      + x[:, v], w)
    return out
