"""BayesNet's per-parameter temperatures in SAME Gibbs-EM: a heated entry counts m / T of
the m replicas (checked against counts taken from the sampler's replicas), changes are
queued while training and logged, and bad indices are refused."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from bidlab.datasets.paths import find_shared_data_dir
from bidlab.models import BayesNet

_SHARED = find_shared_data_dir()
BNLEARN = None if _SHARED is None else _SHARED / "bnlearn"
pytestmark = pytest.mark.skipif(BNLEARN is None or not BNLEARN.is_dir(),
                                reason="shared data folder with bnlearn/ not found")

M = 4  # SAME replicas, constant


def _learner_on_cancer(n_passes: int = 3):
    truth = BayesNet.from_bif(BNLEARN / "cancer.bif.gz")
    X = truth.sample(600, random_state=3).astype(np.float64)
    X[np.random.default_rng(0).random(X.shape) < 0.4] = np.nan
    bn = BayesNet(truth.network_.uniform(), n_passes=n_passes, nsamps=M, nsamps0=M,
                  anneal="constant", alpha=1.0, random_state=1)
    return bn, X


def _expected_table(bn: BayesNet, v: int, replicas: list[int]) -> np.ndarray:
    """(mean count over ``replicas`` + alpha), rows normalised, from the chains' states."""
    net, ch = bn.network_, bn.model_.chains
    n = ch.n_obs
    ps = net.parents[v]
    k = int(net.cards[v])
    rows = int(np.prod([net.cards[p] for p in ps])) if ps else 1
    c = np.zeros((rows, k))
    for j in replicas:
        x = ch.X[j * n:(j + 1) * n]
        cfg = (np.ravel_multi_index(tuple(x[:, p] for p in ps), [int(net.cards[p]) for p in ps])
               if ps else np.zeros(n, np.int64))
        np.add.at(c, (cfg, x[:, v]), 1.0)
    c = c / len(replicas) + 1.0
    return c / c.sum(axis=1, keepdims=True)


def test_heated_table_counts_m_over_t_replicas():
    bn, X = _learner_on_cancer()
    lrn = bn.learner(X)
    net = bn.network_
    hot = net.index("Smoker")
    bn.set_temperature(float(M), "Smoker")  # m / T = 1: the first replica only
    lrn.fit(progress=None)
    learned = bn.network_.cpts
    np.testing.assert_allclose(learned[hot], _expected_table(bn, hot, [0]), rtol=1e-12)
    cold = net.index("Cancer")
    np.testing.assert_allclose(learned[cold], _expected_table(bn, cold, list(range(M))),
                               rtol=1e-12)
    # one replica differs from the mean of four (the check can fail)
    assert not np.allclose(_expected_table(bn, hot, [0]),
                           _expected_table(bn, hot, list(range(M))))
    temps = bn.temperature()
    assert temps[hot].shape == learned[hot].shape and (temps[hot] == M).all()
    assert (temps[cold] == 1).all()


def test_one_entry_half_heated_and_the_log():
    bn, X = _learner_on_cancer(n_passes=2)
    lrn = bn.learner(X)
    v = bn.network_.index("Cancer")
    bn.set_temperature(2.0, "Cancer", row=1, state="True")
    t = bn.temperature()[v]
    assert t[1, bn.network_.states[v].index("True")] == 2.0 and t.sum() == t.size + 1.0
    lrn.fit(progress=None)
    log = bn.temperature_log_
    assert log[-1] == {"pass": 0, "batch": 0, "variable": "Cancer", "row": 1,
                       "state": "True", "value": 2.0}
    # temperatures carry over to the next fit and survive pickling; reset goes back to 1
    bn.fit(X)
    assert bn.temperature()[v].max() == 2.0
    back = pickle.loads(pickle.dumps(bn))
    assert back.temperature()[v].max() == 2.0
    bn.reset_temperature()
    assert all((t == 1).all() for t in bn.temperature())
    assert bn.temperature_log_[-1]["variable"] is None


def test_bad_temperature_requests_are_refused():
    bn, X = _learner_on_cancer(n_passes=1)
    with pytest.raises(RuntimeError, match="call fit\\(X\\) or learner\\(X\\) first"):
        bn.set_temperature(2.0)
    bn.learner(X)
    with pytest.raises(ValueError, match="temperature"):
        bn.set_temperature(0.0, "Cancer")
    with pytest.raises(IndexError, match="row must be in 0..3"):
        bn.set_temperature(2.0, "Cancer", row=4)
    with pytest.raises(ValueError, match="give variable= too"):
        bn.set_temperature(2.0, row=0)
    with pytest.raises((KeyError, ValueError), match="Nope"):
        bn.set_temperature(2.0, "Nope")
