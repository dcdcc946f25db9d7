"""Exact marginals of a small Bayesian network by enumeration, the reference the sampler's
tests compare against."""

from __future__ import annotations

import itertools

import numpy as np

from bidlab.models.bayesnet import Network


def exact_marginals(net: Network, ev: dict[int, int]) -> list[np.ndarray]:
    """Each variable's marginal given the evidence ``ev`` (variable -> state), summed over
    every joint state (a few thousand at most: small networks only)."""
    cards = [len(s) for s in net.states]
    tot = [np.zeros(c) for c in cards]
    for x in itertools.product(*[range(c) for c in cards]):
        if any(x[v] != s for v, s in ev.items()):
            continue
        p = 1.0
        for v in range(net.n_vars):
            r = 0
            for q in net.parents[v]:
                r = r * cards[q] + x[q]
            p *= net.cpts[v][r, x[v]]
        for v in range(net.n_vars):
            tot[v][x[v]] += p
    return [t / tot[0].sum() for t in tot]
