"""Starting states for observations that ancestral draws cannot complete.

A row of data whose missing values must agree with observed descendants through tables
with zeros (pedigrees such as pigs and link, where a child's genotype rules out most of its
parents' ones; munin's and mildew's sparse tables) is completed by an ancestral draw with a
probability that shrinks geometrically with the number of such constraints: thousands of
draws may find none, although the row is perfectly possible. :func:`anneal_rows` finds
one by Gibbs sweeps over tables smoothed towards uniform (every state possible), the
smoothing shrunk step by step, so the chains settle where the real tables give the row a
positive probability. What it cannot place is left for the caller to report.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["anneal_rows", "SMOOTHING", "SWEEPS_PER_LEVEL", "ROUNDS"]

#: the weights of the uniform table mixed into every row, largest first
SMOOTHING = np.geomspace(0.3, 1e-6, 14)
#: sweeps at each smoothing weight
SWEEPS_PER_LEVEL = 20
#: schedules run, each from where the last left the rows it did not place
ROUNDS = 4


def anneal_rows(ch: Any, rows: np.ndarray) -> np.ndarray:
    """Move the state rows ``rows`` of ``ch`` (with their observations and evidence
    clamped) by annealed Gibbs sweeps towards states of positive probability under
    ``ch``'s tables; returns the rows still of probability zero.

    Parameters
    ----------
    ch
        the chains (learning's replicated observations).
    rows
        int64 indices of rows of ``ch.X`` whose state has probability zero.
    """
    for attempt in range(ROUNDS):
        if rows.size == 0:
            break
        ch.X[rows] = _annealed(ch, rows, attempt)
        rows = rows[np.isneginf(ch._log_joint(rows))]
    return rows


def _annealed(ch: Any, rows: np.ndarray, attempt: int) -> np.ndarray:
    """The states of ``rows`` after one annealing schedule from where they are (on chains
    of ``ch``'s own class, so this module needs no import of the sampler's)."""
    net = ch.net
    obs = ch.obs[rows % ch.n_obs]
    seed = int(np.random.SeedSequence([ch.seed, ch.sweeps, attempt]).generate_state(1)[0]
               >> 1)
    sub: Any = None
    for eps in SMOOTHING:
        smooth = net.with_tables(np.concatenate(
            [((1.0 - eps) * t + eps / t.shape[1]).ravel() for t in net.cpts]))
        if sub is None:
            sub = type(ch)(smooth, obs, seed=seed, init_tries=1)
            sub.ev[...] = ch.ev
            sub.X[...] = ch.X[rows]
            sub.m_init = 1
        else:
            sub.set_tables(smooth)
        for _ in range(SWEEPS_PER_LEVEL):
            sub.sweep(1, record=False)
    return sub.X
