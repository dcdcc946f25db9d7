"""How plausible the evidence is where the chains are: the check that finds nearly
impossible evidence and chains stuck away from what explains it.

Gibbs chains that start far from the states which make the evidence likely (the evidence
contradicts a near-deterministic table row, and the ancestral draws the chains start from
never reach the rare parent states that explain it) can stay there: every chain agrees, so
R-hat is 1 and the Monte-Carlo error is tiny, yet the marginals are wrong. What gives them
away is the evidence itself: in every chain some clamped variable's state has almost no
probability given its parents. :func:`evidence_support` measures that after the sweeps (a
few table look-ups per chain and clamped variable, no sweep does it) and
:func:`check_evidence_support` warns below :data:`NEARLY_IMPOSSIBLE`.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from bidlab.models.bayesnet.network import Network

__all__ = ["NEARLY_IMPOSSIBLE", "check_evidence_support", "evidence_support"]

#: a clamped state whose probability given its parents is at most this in every chain
#: makes :func:`check_evidence_support` warn (bnlearn's networks hold no positive entry
#: below 1e-6)
NEARLY_IMPOSSIBLE = 1e-9


def evidence_support(net: Network, X: np.ndarray, ev: np.ndarray) -> tuple[float, int, int]:
    """The clamped variable whose state the chains explain least: over the clamped
    variables, the smallest of (the largest over the chains, rows of ``X``, of the
    probability of its evidence state ``ev[v]`` given the chain's parent states).

    Returns ``(probability, variable, parent configuration of the chain that gave it)``;
    ``(1.0, -1, -1)`` when nothing is clamped or there are no chains.

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(["a", "b"], [["0", "1"], ["0", "1"]], [[], [0]],
    ...               [np.array([[0.5, 0.5]]), np.array([[0.9, 0.1], [1e-12, 1 - 1e-12]])])
    >>> X = np.array([[0, 0], [0, 0]], np.int32)
    >>> evidence_support(net, X, np.array([-1, 0], np.int32))
    (0.9, 1, 0)
    >>> X[:, 0] = 1   # both chains in the state that makes b = 0 nearly impossible
    >>> evidence_support(net, X, np.array([-1, 0], np.int32))
    (1e-12, 1, 1)
    """
    best = (1.0, -1, -1)
    if X.shape[0] == 0:
        return best
    for v in np.flatnonzero(ev >= 0):
        cfg = np.zeros(X.shape[0], np.int64)
        for p in net.parents[v]:
            cfg = cfg * int(net.cards[p]) + X[:, p]
        p_ev = net.cpts[v][cfg, int(ev[v])]
        i = int(np.argmax(p_ev))
        if float(p_ev[i]) < best[0]:
            best = (float(p_ev[i]), int(v), int(cfg[i]))
    return best


def check_evidence_support(net: Network, X: np.ndarray, ev: np.ndarray,
                           stacklevel: int = 3) -> float:
    """:func:`evidence_support` of the chains ``X`` under evidence ``ev``, with a
    :class:`~sklearn.exceptions.ConvergenceWarning` when it is at most
    :data:`NEARLY_IMPOSSIBLE`; returns the probability."""
    p, v, r = evidence_support(net, X, ev)
    if v >= 0 and p <= NEARLY_IMPOSSIBLE:
        name, state = net.names[v], net.states[v][int(ev[v])]
        parents = dict(zip((net.names[q] for q in net.parents[v]), net.config_states(v, r),
                           strict=True))
        given = f" given {parents}" if parents else ""
        warnings.warn(
            f"BayesNet: the evidence {name}={state!r} is nearly impossible where the chains "
            f"are: in every chain its probability is at most {p:.3g}{given}. Either the "
            "evidence (nearly) contradicts the network's tables, or the chains are stuck "
            "away from the rare states that explain it, and then the marginals are wrong "
            "although R-hat and mcse_ look fine. Check the evidence and that table row; on a "
            "small network compare with bidlab.models.bayesnet.exact.exact_marginals",
            ConvergenceWarning, stacklevel=stacklevel)
    return p
