"""One training at a time per estimator, divergence by growth, the bounded temperature log.

Two threads fitting one estimator used to corrupt its model (glibc aborts, SIGSEGV, shape
errors inside the kernels); now the second gets a clear RuntimeError at once. The race runs
in a subprocess, so that a regression fails the test instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

import bidlab as bl
from bidlab.datasets import synthetic_glm
from bidlab.learn import DivergedError, Grad, Learner
from bidlab.learn.divergence import FLOOR, magnitude
from bidlab.models import GLM, LDA, LDAGibbs
from bidlab.models.lda.temperature import TEMPERATURE_LOG_KEPT
from bidlab.models.lsq import LeastSquares

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fresh_cache():
    bl.clear_cache()
    yield
    bl.clear_cache()


def _counts(n: int = 300, v: int = 200, seed: int = 0) -> sp.csr_matrix:
    X = sp.random(n, v, density=0.05, format="csr", random_state=seed)
    X.data = np.ceil(X.data * 5)
    return X


def _glm_data(n: int = 2000):
    X = sp.random(n, 500, density=0.02, format="csr", random_state=0, dtype=np.float64)
    y = np.random.default_rng(0).integers(0, 2, n)
    return X, y


# Both threads pass a barrier and call fit on one estimator; each fit lasts a few tenths of a
# second, far longer than the threads' start skew, so they always overlap.
_RACE = r"""
import json, sys, threading
import numpy as np, scipy.sparse as sp
from bidlab.models import GLM, LDA, LDAGibbs
out = {}
rng = np.random.default_rng(0)
for name in sys.argv[1:]:
    if name == "GLM":
        X = sp.random(4000, 2000, density=0.01, format="csr", random_state=0)
        args, make = (X, rng.integers(0, 2, 4000)), lambda n: GLM(
            "logistic", n_passes=n, batch_size=100)
    else:
        X = sp.random(600, 500, density=0.05, format="csr", random_state=0)
        X.data = np.ceil(X.data * 5)
        cls = LDA if name == "LDA" else LDAGibbs
        args, make = (X,), lambda n: cls(8, n_passes=n, batch_size=20, random_state=0)
    make(1).fit(*args)  # compiles the kernels before the race
    est = make(5)
    gate = threading.Barrier(2)
    res = []
    def go():
        gate.wait()
        try:
            est.fit(*args)
            res.append("ok")
        except Exception as exc:
            res.append(f"{type(exc).__name__}: {exc}")
    threads = [threading.Thread(target=go) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    out[name] = sorted(res)
    out[name + " fitted"] = bool(np.isfinite(est.transform(X[:5]) if name != "GLM"
                                             else est.decision_function(X[:5])).all())
print(json.dumps(out))
"""


def test_two_threads_fitting_one_estimator_one_is_refused_and_nothing_crashes():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    names = ["GLM", "LDA", "LDAGibbs"]
    proc = subprocess.run([sys.executable, "-c", _RACE, *names], capture_output=True,
                          text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, (
        f"the race crashed the interpreter (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in names:
        refused, ok = out[name]
        assert ok == "ok", out[name]
        assert refused.startswith(f"RuntimeError: {name}.fit is already running in another "
                                  "thread on this estimator"), out[name]
        assert "clone" in refused
        assert out[name + " fitted"], f"{name}: the fit that ran left a broken model"


def _wait_running(lrn, timeout: float = 30.0) -> None:
    t_end = time.monotonic() + timeout
    while lrn.state != "running" or lrn.step < 1:
        assert lrn.state in ("created", "running"), lrn.state
        assert time.monotonic() < t_end, "the learner did not start"
        time.sleep(0.005)


def test_glm_fit_while_its_learner_runs_refuses_until_stopped():
    X, y = _glm_data()
    est = GLM("logistic", n_passes=2, batch_size=50)
    lrn = est.learner(X, y, n_passes=100_000).start()
    try:
        _wait_running(lrn)
        for call in (lambda: est.fit(X, y), lambda: est.partial_fit(X, y),
                     lambda: est.learner(X, y)):
            with pytest.raises(RuntimeError, match=r"learner 'glm[^']*' is running .*"
                               r"learner\.stop\(\) and then learner\.join\(\)"):
                call()
        lrn.pause(wait=True)
        with pytest.raises(RuntimeError, match="is paused"):
            est.fit(X, y)
    finally:
        lrn.stop()
        lrn.join()
    assert lrn.state == "stopped"
    est.fit(X, y)  # released: fits from scratch
    assert est.n_steps_ == 2 * 40


def test_lda_learners_on_one_estimator_run_one_at_a_time():
    X = _counts()
    est = LDAGibbs(n_components=4, n_passes=2, batch_size=20, random_state=0)
    first = est.learner(X, n_passes=100_000)
    second = est.learner(X, n_passes=1)  # made while the first is idle: allowed
    first.start()
    try:
        _wait_running(first)
        with pytest.raises(RuntimeError, match=rf"Learner '{second.name}' cannot start: "
                           rf"learner '{first.name}' .* is running"):
            second.start()
        assert second.state == "created"
        with pytest.raises(RuntimeError, match=r"LDAGibbs\.fit refused: .*learner\.stop\(\)"):
            est.fit(X)
    finally:
        first.stop()
    second.fit(progress=None)  # the first one stopped: the second may run now
    assert second.state == "done"
    est.fit(X)
    assert est.n_passes_done_ == 2


def test_a_learner_cannot_start_while_its_estimator_fits_in_another_thread():
    X, y = _glm_data(4000)
    est = GLM("logistic", n_passes=1, batch_size=50)
    lrn = est.learner(X, y)
    est.set_params(n_passes=10)
    done = threading.Event()
    errors: list[BaseException] = []

    def fit() -> None:
        try:
            est.fit(X, y)
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)
        done.set()

    t = threading.Thread(target=fit)
    t.start()
    t_end = time.monotonic() + 30
    while est._training_guard().holder != "GLM.fit" and not done.is_set():
        assert time.monotonic() < t_end
        time.sleep(0.001)
    assert not done.is_set(), "the fit was too short to overlap"
    with pytest.raises(RuntimeError, match=r"cannot start: GLM\.fit is running"):
        lrn.start()
    t.join()
    assert not errors and lrn.state == "created"


def test_fit_passes_holds_the_estimator_until_closed():
    X = _counts()
    est = LDA(n_components=4, n_passes=3, batch_size=50, random_state=0)
    passes = est.fit_passes(X)
    assert next(passes) == 1
    with pytest.raises(RuntimeError, match=r"LDA\.fit refused: LDA\.fit_passes is in "
                                           r"progress .*close\(\)"):
        est.fit(X)
    passes.close()
    est.fit(X)
    assert est.n_passes_done_ == 3


def test_the_guard_is_neither_pickled_nor_cloned():
    X, y = _glm_data()
    est = GLM("logistic", n_passes=1, batch_size=100)
    lrn = est.learner(X, y)
    lrn.fit(progress=None)
    assert "_fit_guard" in est.__dict__
    copy = pickle.loads(pickle.dumps(est))
    assert "_fit_guard" not in copy.__dict__
    copy.fit(X, y)  # a fresh guard of its own
    assert copy._training_guard() is not est._training_guard()
    assert "_fit_guard" not in clone(est).__dict__


# ----------------------------------------------------------------------------- divergence


def test_glm_growing_to_finite_garbage_raises_diverged_naming_lrate():
    # float64 with lrate 1e12: before the growth check the coefficients reached 1e199 and
    # stayed finite, R^2 = -inf, and fit returned without a word
    d = synthetic_glm(2000, 300, 10, link="linear", seed=0, dtype=np.float64)
    est = GLM("linear", lrate=1e12, updater="grad", n_passes=4, random_state=0)
    with pytest.raises(DivergedError, match=r"grew from .* more than 1e\+06 times, with "
                                            r"lrate=1e\+12"):
        est.fit(d.X, d.Y.ravel())


def test_a_legitimately_large_model_does_not_count():
    # targets of order 1e10: the weights pass the floor, but they got their scale in the
    # first steps, so they never grow a million times past it
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3000, 20))
    w = rng.standard_normal((20, 1))
    Y = (X @ w + 3.0) * 1e10
    lrn = Learner(LeastSquares(), (X, Y), Grad(lrate=0.1), batch_size=100, n_passes=3,
                  val_every=0)
    lrn.fit(progress=None)
    assert magnitude(lrn.model) > FLOOR
    W = lrn.model.modelmats[0].numpy()
    np.testing.assert_allclose(W.ravel() * 1e-10, w.ravel(), atol=1e-3)  # trained well


# ----------------------------------------------------------------------- temperature log


def test_temperature_log_keeps_its_cap_and_counts_the_rest(tmp_path):
    X = _counts(120, 60)
    est = LDAGibbs(n_components=3, n_passes=1, batch_size=40, random_state=0).fit(X)
    extra = 25
    for i in range(TEMPERATURE_LOG_KEPT + extra):
        est.set_temperature(1.0 + (i % 7) / 10, topic=i % 3)
    log = est.temperature_log_
    assert len(log) == TEMPERATURE_LOG_KEPT
    assert est.model_.temperature_log_dropped == extra
    assert log[-1]["value"] == pytest.approx(1.0 + ((TEMPERATURE_LOG_KEPT + extra - 1) % 7)
                                             / 10)
    back = LDAGibbs.load(est.save(tmp_path / "gibbs"))
    assert back.temperature_log_ == log
    assert back.model_.temperature_log_dropped == extra


def test_a_lazily_scaled_model_with_huge_stored_entries_is_not_diverged():
    """Stored float32 counts near 1e20 times a factor of 1e-19 are counts near 10: their
    squares overflow float32, the model does not (SAME Gibbs after a few hundred passes)."""
    import bidlab as bl
    from bidlab.learn.divergence import magnitude

    class Scaled:
        def __init__(self, stored, factor):
            self.m, self.factor = bl.Mat(stored), factor

        def divergence_mats(self):
            return [(self.m, self.factor)]

    stored = np.full((50, 40), 1e20, np.float32)
    assert magnitude(Scaled(stored, 1e-19)) == pytest.approx(10.0, rel=1e-5)
    stored[3, 4] = np.inf
    assert magnitude(Scaled(stored, 1e-19)) == np.inf
