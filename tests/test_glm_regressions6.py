"""GLM regressions: standardize's fold after a stopped fit, constant features, a sweep's
selected model, and the averaged window of warm-started fits and later partial fits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_iris

import bidlab.models.glm.engine as engine
from bidlab.models.glm import GLM, best_config, glm_sweep
from bidlab.models.glm.model import GLMModel
from bidlab.models.glm.standardize import choose_scaling


@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer(return_X_y=True)


def _stop_after(monkeypatch, passes: int) -> None:
    """Make every GLM fit stop (as Ctrl-C stops it) at the end of pass ``passes``."""
    end_pass = GLMModel.end_pass

    def stopping(self, pass_):
        end_pass(self, pass_)
        if self.passes_done == passes:
            raise KeyboardInterrupt

    monkeypatch.setattr(GLMModel, "end_pass", stopping)


def test_a_stop_before_the_model_is_made_surfaces_as_itself(cancer, monkeypatch):
    X, y = cancer

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "pick_rates", interrupted)  # Ctrl-C in the rate pilot
    with pytest.raises(KeyboardInterrupt):
        GLM(n_passes=2, random_state=0).fit(X, y)  # not a ValueError from the fold


def test_a_stopped_fit_keeps_its_iterate_sum_for_the_features_as_given(cancer, monkeypatch):
    X, y = cancer
    _stop_after(monkeypatch, 6)  # in the averaged second half of 8 passes
    kw = dict(lrate=0.3, n_passes=8, tol=None, random_state=0)
    a = GLM(**kw)
    with pytest.raises(KeyboardInterrupt):
        a.fit(X, y)
    mean, scale = a.scaling_["mean"], a.scaling_["scale"]
    b = GLM(standardize=False, **kw)  # the same run on the standardised features
    with pytest.raises(KeyboardInterrupt):
        b.fit((X - mean) * scale, y)
    sa, sb = a.updater_.state(), b.updater_.state()
    assert a.updater_.iterates.n == b.updater_.iterates.n > 0
    W_sum = sb["average_sum0"].numpy() * scale[None, :]
    np.testing.assert_allclose(sa["average_sum0"].numpy(), W_sum, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(sa["average_sum1"].numpy(),
                               sb["average_sum1"].numpy() - (W_sum @ mean)[:, None],
                               rtol=1e-9, atol=1e-7)
    # and a warm start turns the sum back with the weights: it continues that same run
    a.set_params(warm_start=True, n_passes=2)
    b.set_params(warm_start=True, n_passes=2)
    monkeypatch.undo()
    a.fit(X, y)
    b.fit((X - mean) * scale, y)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function((X - mean) * scale),
                               rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("standardize", [True, False])
def test_partial_fit_after_a_stopped_fit_does_not_land_the_stopped_average(
        cancer, monkeypatch, standardize):
    X, y = cancer
    kw = dict(lrate=0.3, tol=None, random_state=0, standardize=standardize)
    _stop_after(monkeypatch, 6)
    stopped = GLM(n_passes=8, **kw)  # stopped in its averaged second half
    with pytest.raises(KeyboardInterrupt):
        stopped.fit(X, y)
    monkeypatch.undo()
    last = GLM(n_passes=6, average=0.0, **kw).fit(X, y)  # the same iterate, no sum
    np.testing.assert_allclose(stopped.coef_, last.coef_, rtol=1e-9, atol=1e-12)
    for est in (stopped, last):
        est.partial_fit(X[:100], y[:100])
    np.testing.assert_allclose(stopped.coef_, last.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(stopped.intercept_, last.intercept_, rtol=1e-9, atol=1e-12)
    assert stopped.updater_.counters()["average_n"] == 0


def test_a_warm_started_fit_averages_the_last_fraction_of_its_own_updates(cancer):
    X, y = cancer
    est = GLM(lrate=0.3, n_passes=4, tol=None, random_state=0, warm_start=True).fit(X, y)
    before = est.updater_.t
    est.fit(X, y)
    run = est.updater_.t - before  # the warm fit's updates
    assert run == before == 64
    assert est.updater_.opts.average_from == before + run // 2  # its last half


@pytest.mark.parametrize("n", [569, 1000, 5000, 20000])
@pytest.mark.parametrize("value", [0.1, 1.0, 3.0, 7.0, 100.0, 1234.5])
def test_a_constant_feature_keeps_scale_one(n, value):
    rng = np.random.default_rng(0)
    D = np.column_stack([rng.standard_normal(n) * 4 + 2, np.full(n, value)])
    for X, dense in ((sp.csr_matrix(D), True), (sp.csr_matrix(D), False)):
        s = choose_scaling(X, True, dense)
        assert s.scale[1] == 1.0
        np.testing.assert_allclose(s.scale[0], 1 / D[:, 0].std(), rtol=1e-10)
    w = rng.uniform(0.5, 2.0, n)
    assert choose_scaling(sp.csr_matrix(D), True, True, w).scale[1] == 1.0


def test_a_column_of_ones_in_sparse_standardized_data_trains():
    n = 5000
    X = sp.random(n, 20, density=0.2, format="csr", random_state=1)
    X = sp.hstack([X, np.ones((n, 1))]).tocsr()  # a bias feature
    y = (X[:, :5].sum(axis=1).A1 > 0.5).astype(int)
    given = GLM(standardize=False, random_state=0, n_passes=3).fit(X, y)
    scaled = GLM(standardize=True, random_state=0, n_passes=3).fit(X, y)
    assert scaled.scaling_["scale"][-1] == 1.0
    assert scaled.score(X, y) > given.score(X, y) - 0.01  # was 0.56: scale 3.6e6


def test_a_sparse_feature_with_zeros_has_its_standard_deviation():
    rng = np.random.default_rng(3)
    D = rng.standard_normal((400, 3)) * [1.0, 10.0, 0.1] + [5.0, 0.0, 1.0]
    D[rng.random((400, 3)) < 0.6] = 0.0
    w = rng.uniform(0.0, 3.0, 400)
    s = choose_scaling(sp.csr_matrix(D), True, False, w)
    sd = np.sqrt(np.average((D - np.average(D, axis=0, weights=w)) ** 2, axis=0, weights=w))
    np.testing.assert_allclose(s.scale, 1 / sd, rtol=1e-10)


def test_a_selected_sweep_model_keeps_the_map_it_was_trained_through():
    X, y = load_iris(return_X_y=True)
    X = X * 10 + 3
    sweep = glm_sweep("softmax", lrate=[0.3, 1.0], l2=[0.0, 1e-3], n_passes=3,
                      random_state=0).fit(X, y)
    best = best_config(sweep, X, y)
    one = best.model
    assert one.scaling_ is not None
    np.testing.assert_array_equal(one.scaling_["scale"], sweep.scaling_["scale"])
    cols = sweep.layout_.columns(best.index)
    np.testing.assert_allclose(one.decision_function(X), sweep.decision_function(X)[:, cols])
    # a warm start continues on the standardised features the sweep's penalty applied to
    one.set_params(warm_start=True, n_passes=2).fit(X, y)
    assert one.scaling_ is not None and one.score(X, y) > 0.9


def test_models_not_trained_through_a_map_say_so(cancer):
    X, y = cancer
    assert GLM().partial_fit(X, y, classes=[0, 1]).scaling_ is None
    est = GLM(n_passes=2, random_state=0).fit(X, y)
    assert est.scaling_ is not None
    est.learner(X, y, n_passes=1).fit(progress=None)  # a fresh model, trained as given
    assert est.scaling_ is None
