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
