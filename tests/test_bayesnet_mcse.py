"""BayesNet.mcse_: the Monte-Carlo standard error of the marginals, from the spread of the
chains' means, against exact enumeration."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.models import BayesNet
from bidlab.models.bayesnet.exact import exact_marginals
from bidlab.models.bayesnet.network import Network


def _net() -> Network:
    """cloudy -> (sprinkler, rain) -> wet: the textbook network, with some dependence."""
    two = ["no", "yes"]
    return Network(["cloudy", "sprinkler", "rain", "wet"], [two] * 4,
                   [[], [0], [0], [1, 2]],
                   [np.array([[0.5, 0.5]]),
                    np.array([[0.5, 0.5], [0.9, 0.1]]),
                    np.array([[0.8, 0.2], [0.2, 0.8]]),
                    np.array([[1.0, 0.0], [0.1, 0.9], [0.1, 0.9], [0.01, 0.99]])])


def _max_error(net: Network, est: list[np.ndarray], evidence: dict) -> float:
    exact = exact_marginals(net, evidence)
    return max(float(np.abs(a - b).max()) for a, b in zip(exact, est, strict=True))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_marginals_lie_within_a_few_standard_errors_of_the_exact_ones(seed):
    net, evidence = _net(), {"wet": "yes"}
    bn = BayesNet(net, n_chains=50, burn_in=20, n_samples=60, random_state=seed)
    bn.infer(evidence)
    assert 0 < bn.mcse_ < 0.05
    assert _max_error(net, bn.marginals_, evidence) <= 4 * bn.mcse_


def test_the_standard_error_shrinks_with_more_chains_and_is_nan_with_one():
    net = _net()
    few = BayesNet(net, n_chains=25, burn_in=20, n_samples=60, random_state=0)
    many = BayesNet(net, n_chains=400, burn_in=20, n_samples=60, random_state=0)
    few.infer({"wet": "yes"})
    many.infer({"wet": "yes"})
    assert many.mcse_ < few.mcse_ / 2.5  # 16x the chains: about a quarter
    one = BayesNet(net, n_chains=1, burn_in=5, n_samples=10, random_state=0)
    one.infer({"wet": "yes"})
    assert np.isnan(one.mcse_)


def test_tol_stops_inference_once_the_standard_error_is_small_enough():
    net, evidence = _net(), {"wet": "yes"}
    capped = BayesNet(net, n_chains=100, burn_in=20, n_samples=20_000, tol=0.004,
                      random_state=0)
    capped.infer(evidence)
    kept = capped.model_.chains.kept
    assert 20 <= kept < 20_000 and capped.mcse_ <= 0.004
    assert _max_error(net, capped.marginals_, evidence) <= 0.012
    full = BayesNet(net, n_chains=100, burn_in=20, n_samples=kept + 50, random_state=0)
    full.infer(evidence)
    assert full.model_.chains.kept == kept + 50  # without tol every sweep is kept
    with pytest.raises(ValueError, match="tol"):
        BayesNet(net, tol=0.0).infer(evidence)


def test_mcse_is_the_spread_of_the_chains_means():
    bn = BayesNet(_net(), n_chains=300, burn_in=5, n_samples=40, random_state=3)
    bn.infer({"wet": "yes"})
    ch = bn.model_.chains
    direct = (ch.rb / ch.kept).std(axis=0, ddof=1).max() / np.sqrt(ch.rb.shape[0])
    assert bn.mcse_ == pytest.approx(direct, rel=1e-9)
