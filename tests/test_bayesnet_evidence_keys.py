"""Evidence keys given as integers mean variable indices; where that index is also another
variable's name the key is ambiguous and refused, naming both readings."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.models.bayesnet.network import BayesNetError, Network, evidence_vector


def _net(names: list[str]) -> Network:
    p = np.array([[0.5, 0.5]])
    return Network(names, [["no", "yes"]] * len(names), [[]] * len(names), [p] * len(names))


def test_an_index_that_is_another_variables_name_is_refused():
    net = _net(["1", "0"])  # variable 0 is named '1', variable 1 is named '0'
    with pytest.raises(BayesNetError, match="ambiguous.*'1'.*'0'"):
        evidence_vector(net, {0: "yes"})
    assert evidence_vector(net, {"0": "yes"}).tolist() == [-1, 1]  # names as strings
    assert evidence_vector(net, {"1": "yes"}).tolist() == [1, -1]


def test_unambiguous_integer_keys_still_mean_indices():
    assert evidence_vector(_net(["a", "b"]), {1: "yes"}).tolist() == [-1, 1]
    assert evidence_vector(_net(["0", "1"]), {1: "no"}).tolist() == [-1, 0]  # same variable
    assert evidence_vector(_net(["a", "b"]), {np.int64(0): "yes"}).tolist() == [1, -1]


def test_an_inference_learner_refuses_learning_options_given_at_the_start():
    """Learning-only options (alpha, nsamps, ...) change nothing when no data is given:
    refused when the learner is made, as they are when set on it later."""
    from bidlab.models import BayesNet

    net = Network(["a", "b"], [["no", "yes"], ["no", "yes"]], [[], [0]],
                  [np.array([[0.3, 0.7]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    est = BayesNet(net, n_chains=20, burn_in=5, n_samples=10, random_state=0)
    with pytest.raises(ValueError, match="alpha: learning options"):
        est.learner(alpha=2.0)
    lrn = est.learner()  # without them it is made, and refuses them later as before
    with pytest.raises(ValueError, match="nsamps: learning options"):
        lrn.set(nsamps=3.0)
