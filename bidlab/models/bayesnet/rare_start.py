"""Inference chains' start for evidence that is possible but rare: :func:`rare_start`.

Evidence reached only through a near-deterministic link (a child that a rare cause alone
makes possible: the cause at 1e-6 a priori) agrees with about one ancestral draw in a
million, so the likelihood-weighted draws the chains start from
(:meth:`~bidlab.models.bayesnet.sampler.GibbsChains._weighted_start`) find none, or a few
that every chain would start from (the other modes never reached). When fewer than the
chains agree, even after ``init_tries`` rounds (:func:`agreeing_draws`), the idea
of :mod:`~bidlab.models.bayesnet.anneal_start` -- every table smoothed towards uniform,
so that every state is possible -- then gives a proposal: ancestral draws from the
smoothed tables, the evidence clamped, importance-weighted by ``p(x, e) / q(x)`` (``p``
the network's tables, ``q`` the smoothed ones over the free variables). Resampled by those
weights, the chains start in the posterior's modes in about the right shares, as from the
ordinary start. The smoothing tried grows from the least (the weights of a less smoothed
proposal vary less) until the draws' effective number is the chains'; the one with
the largest effective number is kept.

When no smoothed draw agrees either (evidence that many constraints must meet at once),
annealed Gibbs sweeps (:func:`~bidlab.models.bayesnet.anneal_start.anneal_rows`) look for
states of positive probability, each kept with equal weight; when they find none, the
evidence is reported as having probability zero (:meth:`GibbsChains._zero_probability`):
evidence of probability exactly zero never gets a positive weight.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab.kern import bn_gibbs
from bidlab.kern.random import stream_key
from bidlab.models.bayesnet.anneal_start import SMOOTHING, anneal_rows

__all__ = ["agreeing_draws", "rare_start", "ANNEALED_ROWS"]

#: at most this many rows are annealed when no smoothed draw agrees (the chains resample
#: them): the search's cost does not grow with the number of chains
ANNEALED_ROWS = 64
_STEP = 3 << 40  # the draws' sweep keys: far from the sweeps' and the other starts'


def agreeing_draws(ch: Any, n: int, ev: np.ndarray, pool: tuple[np.ndarray, np.ndarray],
                   key0: int) -> tuple[np.ndarray, np.ndarray]:
    """Start states for ``n`` chains of ``ch`` under ``ev`` and their log-weights when fewer
    than ``n`` of the ordinary ``pool`` of likelihood draws (states, log-weights) agree
    with it: up to ``ch.init_tries`` rounds of ``n`` more (the streams of sweep keys from
    ``key0``) until ``n`` agree; fewer even then: :func:`rare_start`'s."""
    P, lw = pool
    ok = np.isfinite(lw)
    keep_P, keep_lw = ([P[ok]], [lw[ok]]) if ok.any() else ([], [])
    found = int(ok.sum())
    for attempt in range(ch.init_tries):
        if found >= n:
            return np.concatenate(keep_P), np.concatenate(keep_lw)
        P, lw = ch._likelihood_draws(n, key0 + attempt, ev)
        ok = np.isfinite(lw)
        if ok.any():
            keep_P.append(P[ok])
            keep_lw.append(lw[ok])
            found += int(ok.sum())
    if found >= n:
        return np.concatenate(keep_P), np.concatenate(keep_lw)
    return rare_start(ch, n, ev, pool[0].shape[0], pool[0].shape[0] + ch.init_tries * n,
                      (keep_P, keep_lw))


def rare_start(ch: Any, n: int, ev: np.ndarray, pool: int, draws: int,
               found: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
               ) -> tuple[np.ndarray, np.ndarray]:
    """Start states for ``n`` chains of ``ch`` under evidence ``ev`` and their log-weights
    (the module doc), ``pool`` draws per smoothing tried; raises ``ch``'s zero-probability
    error (naming ``draws``, the ordinary draws already made) when none is found. ``found``:
    the ordinary draws that agreed (fewer than ``n``: lists of states and log-weights), a
    start too when their effective number is the largest. ``ch`` itself is left as it is
    (the evidence may still be refused)."""
    t = ch.t
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    if found[0]:
        lw = np.concatenate(found[1])
        w = np.exp(lw - lw.max())
        best = (float(w.sum() ** 2 / (w * w).sum()), np.concatenate(found[0]), lw)
    for level, eps in enumerate(SMOOTHING[::-1]):
        q = np.concatenate([((1.0 - eps) * c + eps / c.shape[1]).ravel()
                            for c in ch.net.cpts])
        P = np.zeros((pool, t.card.size), np.int32)
        key = np.uint64(stream_key(ch.seed, _STEP + ch.sweeps * 64 + level))
        bn_gibbs.forward_fill(P.size, P, np.arange(pool, dtype=np.int64),
                              np.full((1, t.card.size), -1, np.int32), ev, 1, t.order, q,
                              t.off, t.card, *t.parents, key)
        lw = _log_probs(t, t.cpt, P, ev, clamped=True) - _log_probs(t, q, P, ev,
                                                                     clamped=False)
        ok = np.isfinite(lw)
        if not ok.any():
            continue
        w = np.exp(lw[ok] - lw[ok].max())
        ess = float(w.sum() ** 2 / (w * w).sum())
        if best is None or ess > best[0]:
            best = (ess, P[ok], lw[ok])
        if ess >= n:
            break
    if best is not None:
        return best[1], best[2]
    return _annealed_start(ch, n, ev, draws + pool * SMOOTHING.size)


def _log_probs(t: Any, cpt: np.ndarray, P: np.ndarray, ev: np.ndarray,
               clamped: bool) -> np.ndarray:
    """Each draw's summed log-probability under the tables ``cpt``: of every variable
    (``clamped``), or of the free ones only (the proposal's own draws)."""
    out = np.zeros(P.shape[0])
    with np.errstate(divide="ignore"):
        for v in range(t.card.size):
            if not clamped and ev[v] >= 0:
                continue
            cfg = np.zeros(P.shape[0], np.int64)
            for q in range(t.par_ptr[v], t.par_ptr[v + 1]):
                cfg += P[:, t.par_idx[q]].astype(np.int64) * t.par_stride[q]
            out += np.log(cpt[t.off[v] + cfg * t.card[v] + P[:, v]])
    return out


def _annealed_start(ch: Any, n: int, ev: np.ndarray,
                    draws: int) -> tuple[np.ndarray, np.ndarray]:
    """States of positive probability found by annealed sweeps on chains of their own
    (``ch`` untouched), each of weight 1; the zero-probability error when none is."""
    m = min(n, ANNEALED_ROWS)
    scratch = type(ch)(ch.net, np.full((m, ch.t.card.size), -1, np.int32), seed=ch.seed,
                       init_tries=1)
    scratch.ev[...] = ev
    scratch.sweeps = ch.sweeps
    rows = np.arange(m, dtype=np.int64)
    bn_gibbs.forward_fill(scratch.X.size, scratch.X, rows, scratch.obs, ev, m,
                          ch.t.order, ch.t.cpt, ch.t.off, ch.t.card, *ch.t.parents,
                          np.uint64(stream_key(ch.seed, _STEP - 1 - ch.sweeps)))
    bad = anneal_rows(scratch, rows)
    good = np.setdiff1d(rows, bad)
    if good.size == 0:
        ch._zero_probability(0, ev, draws=draws)
    return scratch.X[good].copy(), np.zeros(good.size)
