"""Regression tests of the Bayesian-network family: evidence refused on a live learner,
evidence naming a variable twice."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest

from bidlab.models.bayesnet import BayesNet, BayesNetError, Network
from bidlab.models.bayesnet.model import BayesNetModel


def _or_net() -> Network:
    """a, b roots; c = a or b (a deterministic table): c=no with a=yes is impossible."""
    yn = ["yes", "no"]
    c = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    return Network(["a", "b", "c"], [yn, yn, yn], [[], [], [0, 1]],
                   [np.array([[0.3, 0.7]]), np.array([[0.4, 0.6]]), c])


def test_impossible_evidence_on_a_running_learner_is_refused_and_the_learner_runs_on():
    """Evidence of probability zero set while a learner samples raises at the call and
    leaves the learner running with its evidence, instead of failing it at its next
    sweep."""
    bn = BayesNet(_or_net(), n_chains=50, burn_in=2, n_samples=1_000_000, random_state=0)
    lrn = bn.learner(evidence={"c": "no"})
    lrn.start()
    try:
        deadline = time.monotonic() + 30
        while lrn.model.chains.sweeps < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(ValueError, match="probability zero"):
            lrn.model.set_evidence({"c": "no", "a": "yes"})
        time.sleep(0.2)
        assert lrn.state == "running" and lrn.error is None
        assert lrn.model.chains.evidence == {"c": "no"}
    finally:
        lrn.stop()
    assert lrn.state != "failed"


def test_impossible_evidence_on_an_idle_learner_is_refused_and_it_goes_on():
    bn = BayesNet(_or_net(), n_chains=40, burn_in=2, n_samples=5, random_state=0)
    lrn = bn.learner(evidence={"c": "no"})
    lrn.fit(progress=None)
    model = lrn.model
    with pytest.raises(BayesNetError, match="probability zero"):
        model.set_evidence({"c": "no", "b": "yes"})
    assert model.chains.evidence == {"c": "no"} and model.chains._pending is None
    model.set_evidence({"c": "yes", "a": "yes"})  # possible: taken at the next sweep
    lrn.set(n_passes=lrn.opts.n_passes + 10)
    lrn.fit(progress=None)
    assert lrn.state == "done" and model.chains.evidence == {"c": "yes", "a": "yes"}
    m = model.marginals()
    assert m[0][0] == 1.0 and m[2][0] == 1.0


def test_refused_evidence_leaves_the_models_evidence_as_it_was():
    """A refused ``set_evidence`` must not replace the evidence the model starts from
    (a copy of it, or a fresh init, would fail or clamp what was refused)."""
    bn = BayesNet(_or_net(), n_chains=20, burn_in=1, n_samples=3, random_state=0)
    lrn = bn.learner(evidence={"c": "no"})
    lrn.fit(progress=None)
    for bad in ({"nope": "yes"}, {"a": "maybe"}, {"c": "no", "a": "yes"}):
        with pytest.raises(ValueError):
            lrn.model.set_evidence(bad)
    copy = pickle.loads(pickle.dumps(lrn.model))
    copy.init_from(lrn.source.info)
    assert copy.chains.evidence == {"c": "no"}
    fresh = BayesNetModel(_or_net())
    with pytest.raises(BayesNetError, match="unknown variable"):
        fresh.set_evidence({"nope": "yes"})  # checked before the model has chains too
    assert fresh._evidence is None


def test_evidence_giving_a_variable_by_name_and_by_index_is_refused():
    bn = BayesNet(_or_net(), n_chains=20, burn_in=1, n_samples=3, random_state=0)
    with pytest.raises(BayesNetError, match="'a' twice"):
        bn.infer({"a": "yes", 0: "no"})
    assert "marginals_" not in bn.__dict__
    m = bn.infer({"a": "yes", 1: "no"})  # two variables: fine
    assert m["a"]["yes"] == 1.0 and m["b"]["no"] == 1.0
