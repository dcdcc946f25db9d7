"""Exact posterior marginals of small networks by enumerating the whole joint table.

The joint is the product of every table broadcast over all variables (one numpy array of
``prod(cards)`` entries), so this is for networks of up to :data:`MAX_JOINT` joint states
(asia, cancer, earthquake, sachs, survey): the reference the sampler is tested against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab.models.bayesnet.network import BayesNetError, Network, evidence_vector

__all__ = ["exact_marginals", "joint_table", "MAX_JOINT"]

#: the most joint states :func:`joint_table` builds
MAX_JOINT = 4_000_000


def joint_table(net: Network) -> np.ndarray:
    """The joint distribution as an array with one axis per variable.

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(["a", "b"], [["0", "1"], ["0", "1"]], [[], [0]],
    ...               [np.array([[0.5, 0.5]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    >>> joint_table(net).round(2).tolist()
    [[0.45, 0.05], [0.1, 0.4]]
    """
    cards = [int(k) for k in net.cards]
    size = int(np.prod(cards, dtype=np.float64))
    if size > MAX_JOINT:
        raise BayesNetError(f"the joint of {net.name!r} has {size:.3g} states, more than "
                            f"{MAX_JOINT:,} to enumerate: use the sampler instead")
    joint = np.ones(cards)
    for v in range(net.n_vars):
        axes = [*net.parents[v], v]
        shape = [1] * net.n_vars
        for a in axes:
            shape[a] = cards[a]
        table = net.cpts[v].reshape([cards[a] for a in axes])
        order = np.argsort(axes)  # put the table's axes in variable order
        joint *= np.transpose(table, order).reshape(shape)
    return joint


def exact_marginals(net: Network, evidence: dict[str, Any] | None = None) -> list[np.ndarray]:
    """Each variable's posterior marginal given ``evidence`` (``{variable: state}``).

    Raises :class:`BayesNetError` when the evidence has probability zero.

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(["a", "b"], [["0", "1"], ["0", "1"]], [[], [0]],
    ...               [np.array([[0.5, 0.5]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    >>> exact_marginals(net, {"b": "1"})[0].round(3).tolist()
    [0.111, 0.889]
    """
    joint = joint_table(net)
    ev = evidence_vector(net, evidence)
    index = tuple(slice(None) if e < 0 else slice(int(e), int(e) + 1) for e in ev)
    sub = joint[index]
    total = sub.sum()
    if not total > 0:
        raise BayesNetError(f"the evidence {evidence} has probability zero under the network")
    out = []
    for v in range(net.n_vars):
        axes = tuple(a for a in range(net.n_vars) if a != v)
        m = sub.sum(axis=axes) / total
        if ev[v] >= 0:
            m = np.zeros(len(net.states[v]))
            m[ev[v]] = 1.0
        out.append(m)
    return out
