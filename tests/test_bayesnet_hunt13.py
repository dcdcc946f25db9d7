"""BayesNet: an inference learner split into minibatches, and learning from rows whose
missing values no ancestral draw completes."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.models.bayesnet import BayesNet, BayesNetError, Network


def _chain_net() -> Network:
    """a -> b -> c, binary, no zero entries."""
    return Network(["a", "b", "c"], [["no", "yes"]] * 3, [[], [0], [1]],
                   [np.array([[0.3, 0.7]]), np.array([[0.9, 0.1], [0.2, 0.8]]),
                    np.array([[0.6, 0.4], [0.25, 0.75]])])


def test_an_inference_learner_split_into_minibatches_is_refused():
    """``bn.learner(batch_size=10)`` over 40 chains swept a quarter of the chains per
    minibatch, counted burn-in and kept sweeps in minibatches and kept marginals of chains
    never recorded as zeros: P(a) summed to 0.99. It now says to leave batch_size out; a
    batch_size covering every chain is one minibatch, as before."""
    bn = BayesNet(_chain_net(), n_chains=40, burn_in=5, n_samples=30, random_state=0)
    with pytest.raises(ValueError, match="leave batch_size out"):
        bn.learner(batch_size=10)
    lrn = bn.learner(batch_size=40)
    lrn.fit()
    for m in lrn.model.marginals():
        assert abs(m.sum() - 1.0) < 1e-12


def _copies_net(n: int) -> Network:
    """``n`` uniform roots a_i, each with a child b_i = a_i (a deterministic copy)."""
    names = [f"{x}{i}" for i in range(n) for x in "ab"]
    tabs = [t for _ in range(n) for t in (np.array([[0.5, 0.5]]), np.eye(2))]
    parents = [p for i in range(n) for p in ([], [2 * i])]
    return Network(names, [["0", "1"]] * (2 * n), parents, tabs)


def test_rows_no_ancestral_draw_completes_are_learned_from():
    """Every b_i observed, every a_i missing: a row is completed by an ancestral draw only
    when all 24 a_i happen to match (2**-24), so fit raised 'has probability zero ...
    none of 1,000 ancestral draws agreed' for rows drawn from the network itself (pigs,
    link, munin1 and mildew with 30 % missing did the same). Annealed sweeps now place
    them, and the copies are learned."""
    net = _copies_net(24)
    X = BayesNet(net, random_state=0).sample(20).astype(np.float64)
    X[:, 0::2] = np.nan
    bn = BayesNet(net, n_passes=1, alpha=0.01, random_state=0, init_tries=50).fit(X)
    for i in range(24):  # every completion copies b_i into a_i
        assert np.all(np.diag(bn.network_.cpts[2 * i + 1]) > 0.99)
    impossible = X.copy()
    impossible[0, 0], impossible[0, 1] = 1 - X[0, 1], X[0, 1]  # a0 observed against b0
    with pytest.raises(BayesNetError, match="probability zero"):
        BayesNet(net, n_passes=1, random_state=0, init_tries=5).fit(impossible)
