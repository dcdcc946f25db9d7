"""BayesNet's estimator surface: an inference learner's end gives the estimator its
results and a new run clears the last one's, temperatures are refused after an inference
run, scipy sparse input is read as the table it stands for, and huge data values are
refused before the integer cast."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from bidlab.models import BayesNet
from bidlab.models.bayesnet.exact import exact_marginals
from bidlab.models.bayesnet.network import Network


def _net() -> Network:
    return Network(["rain", "wet"], [["no", "yes"], ["no", "yes"]], [[], [0]],
                   [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]])])


def _bn(**params) -> BayesNet:
    return BayesNet(_net(), **{"n_chains": 100, "n_samples": 100, "burn_in": 10,
                               "random_state": 0, "n_passes": 3, **params})


def _rows() -> np.ndarray:
    return np.array([[0, 0], [1, 1], [0, 1], [1, -1]] * 10, np.float64)


# -- results: an inference learner's end, and a new run ----------------------------------

@pytest.mark.parametrize("how", ["fit", "start"])
def test_an_inference_learners_end_gives_the_estimator_its_marginals(how: str) -> None:
    bn = _bn()
    lrn = bn.learner(evidence={"wet": "yes"})
    if how == "fit":
        lrn.fit(progress=None)
    else:  # the training thread
        lrn.start()
        lrn.join()
    assert lrn.state == "done"
    got = bn.marginal("rain")
    exact = exact_marginals(bn.network_, {"wet": "yes"})[0]
    assert got["yes"] == pytest.approx(exact[1], abs=0.05)
    np.testing.assert_array_equal(bn.marginals_[0], lrn.model.marginals()[0])
    assert bn.rhat_ == lrn.model.chains.rhat() and bn.mcse_ == lrn.model.chains.mcse()
    assert bn.evidence_support_ > 0.1


def test_a_learning_run_clears_the_marginals_of_the_tables_before() -> None:
    bn = _bn()
    bn.infer({"wet": "yes"})
    assert bn.rhat_ is not None
    bn.fit(_rows())
    for name in ("marginals_", "rhat_", "mcse_", "evidence_support_"):
        assert not hasattr(bn, name), name
    with pytest.raises(NotFittedError, match="call infer"):
        bn.marginal("rain")
    # the next inference is on the learned tables
    m = bn.infer()
    exact = exact_marginals(bn.network_, {})
    assert m["rain"]["yes"] == pytest.approx(exact[0][1], abs=0.05)
    assert exact[0][1] == pytest.approx(bn.network_.cpts[0][0, 1])


def test_an_inference_learners_end_warns_about_nearly_impossible_evidence() -> None:
    eps = 1e-9
    copy = np.array([[1 - eps, eps], [eps, 1 - eps]])
    e = np.array([[1 - 1e-12, 1e-12]] * 3 + [[0.5, 0.5]])
    net = Network(["a", "b", "c", "e"], [["0", "1"]] * 4, [[], [0], [1], [0, 2]],
                  [np.array([[1 - 1e-6, 1e-6]]), copy, copy.copy(), e])
    bn = BayesNet(net, n_chains=200, n_samples=50, burn_in=10, random_state=0)
    lrn = bn.learner(evidence={"e": "1"})
    with pytest.warns(ConvergenceWarning, match=r"e='1' is nearly impossible") as rec:
        lrn.fit(progress=None)
    assert len([w for w in rec if w.category is ConvergenceWarning]) == 1  # once a run
    assert bn.evidence_support_ <= 1e-12


# -- temperatures ------------------------------------------------------------------------

def test_set_temperature_after_infer_is_refused_and_nothing_carries_over() -> None:
    bn = _bn()
    bn.infer()
    with pytest.raises(RuntimeError, match=r"last run inferred marginals.*bn.learner\(X\)"):
        bn.set_temperature(3.0, "wet")
    bn.fit(_rows())
    assert all((t == 1.0).all() for t in bn.temperature())
    assert bn.temperature_log_ == []
    # temperatures set on a learning run carry over through an inference run
    bn.set_temperature(2.0, "wet")
    bn.infer()
    with pytest.raises(RuntimeError, match="last run inferred marginals"):
        bn.reset_temperature()
    lrn = bn.learner(_rows())
    assert bn.temperature()[1].max() == 2.0
    bn.set_temperature(3.0, "rain")
    lrn.fit(progress=None)
    assert [(e["variable"], e["value"]) for e in bn.temperature_log_] == [("wet", 2.0),
                                                                          ("rain", 3.0)]


# -- input -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.coo_array])
def test_fit_reads_a_sparse_state_table_as_the_dense_one(kind) -> None:
    X = np.array([[0, 0], [1, 1], [0, 1], [1, 0], [1, 1]] * 8, np.float64)
    dense, sparse = _bn().fit(X), _bn().fit(kind(X))
    for a, b in zip(dense.network_.cpts, sparse.network_.cpts, strict=True):
        np.testing.assert_array_equal(a, b)
    assert sparse.log_likelihood(kind(X)) == dense.log_likelihood(X)


@pytest.mark.parametrize("big", [2.0**63, 1e300])
def test_huge_values_are_refused_without_a_cast_warning(big: float) -> None:
    X = _rows()
    X[3, 1] = big
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=rf"row 3 gives 'wet' the state index "
                           rf"{int(big)}, but it has 2 states"):
            _bn().fit(X)
