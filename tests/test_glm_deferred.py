"""GLM's sparse step over the rows a minibatch touches, through the estimator and the
learner: against the formed-gradient step, and its deferred L1 / L2 terms landing before a
checkpoint and when a run ends (the kernels themselves: test_glm_touched.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bidlab.datasets import synthetic_glm
from bidlab.kern import touched
from bidlab.learn import updaters
from bidlab.models.glm import GLM


@pytest.mark.parametrize("updater", ["adagrad", "grad"])
@pytest.mark.parametrize("mode", ["swept", "deferred"])
def test_touched_rows_step_equals_the_formed_gradient_step(updater, mode, monkeypatch):
    """The sparse fast path (no dense gradient) and the formed-gradient path (the updater's
    dense step after the mixins' terms) train the same weights when the untouched rows'
    regulariser terms are swept every step; deferred, they differ by under 5 % of what the
    regularisation changes."""
    X, Y, _ = synthetic_glm(2000, 300, 10, n_targets=4, seed=3)
    kw = dict(lrate=[0.1, 0.2, 0.3, 0.4], l1=[0, 1e-4, 0, 1e-3], l2=[1e-3, 0, 1e-4, 0],
              updater=updater, n_passes=2, batch_size=256, random_state=0)
    with monkeypatch.context() as m:
        m.setattr(touched, "DEFER_BELOW", 0 if mode == "deferred" else 10**9)
        fast = GLM("logistic", **kw).fit(X, Y)
    with monkeypatch.context() as m:
        calls = []
        m.setattr(updaters._Stepper, "_sparse_args", lambda self, *a: calls.append(1))
        formed = GLM("logistic", **kw).fit(X, Y)
    assert len(calls) == formed.n_steps_ == 2 * 8
    assert not np.array_equal(fast.coef_, np.zeros_like(fast.coef_))
    if mode == "swept":
        np.testing.assert_allclose(fast.coef_, formed.coef_, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(fast.intercept_, formed.intercept_, rtol=1e-4, atol=1e-6)
        return
    free = GLM("logistic", **{**kw, "l1": 0.0, "l2": 0.0}).fit(X, Y)
    effect = np.abs(formed.coef_ - free.coef_).max(axis=1)
    assert (effect > 1e-5).all()
    l2_only = [0, 2]  # targets without L1: deferred L2 within 5 % of the terms' effect
    gap = np.abs(fast.coef_ - formed.coef_).max(axis=1)
    assert (gap[l2_only] < 0.05 * effect[l2_only]).all(), (gap, effect)
    # with L1 the deferred step stops at zero where the dense sign(w) step oscillates
    # around it: the weights differ there, the fits' losses agree
    np.testing.assert_allclose(fast.loss_targets(X, Y), formed.loss_targets(X, Y), rtol=0.01)


def test_deferred_regulariser_terms_land_before_a_checkpoint_and_at_the_end(tmp_path,
                                                                          monkeypatch):
    """With the untouched rows' L2 deferred, a checkpoint written mid-pass (the learner
    paused) and the model after the run hold every deferred term: nothing is pending and
    the saved weights are the live ones."""
    monkeypatch.setattr(touched, "DEFER_BELOW", 0)
    X, Y, _ = synthetic_glm(3000, 2000, 8, n_targets=3, seed=2)
    lrn = GLM("logistic", l2=1e-3, batch_size=100, random_state=0).learner(X, Y, n_passes=40)

    def pending() -> bool:
        return any(step.deferring for step in lrn.updater._steps.values())

    lrn.start()
    try:
        while lrn.step < 5:
            time.sleep(0.01)
        lrn.pause(wait=True)
        for _ in range(50):  # a pause that lands on a pass end finds every term landed
            if lrn.source.position[1] != 0:
                break
            lrn.resume()
            time.sleep(0.005)
            lrn.pause(wait=True)
        assert lrn.source.position[1] != 0
        assert pending()  # mid-pass: untouched rows owe terms
        path = lrn.save(str(tmp_path / "mid.bidlab"))
        assert not pending()
        W = lrn.model.modelmats[0].numpy().copy()
    finally:
        lrn.stop()
    assert not pending()
    back = GLM("logistic", l2=1e-3, batch_size=100, random_state=0).learner(X, Y, n_passes=40)
    back.load(path)
    np.testing.assert_array_equal(back.model.modelmats[0].numpy(), W)
