"""Regressions of the training spine: the end of a run, observers during a pause, a
PerMatrix's updaters' own options, start() beside a fit() that is returning, option and
mixin arguments."""

from __future__ import annotations

import pathlib
import threading
import time

import numpy as np
import pytest
from conftest import in_thread

from bidlab.learn import Grad, L2Regularizer, Learner
from bidlab.learn.options import OptionError
from bidlab.models.lsq import LeastSquares


def _data(n=400, f=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, f)).astype(np.float32)
    return X, X @ np.arange(1, f + 1, dtype=np.float32)[:, None]


class _EndBreaks(LeastSquares):
    def run_ended(self, state, error):
        raise RuntimeError("run_ended broke")


@pytest.mark.parametrize("background", [True, False])
def test_a_model_whose_run_ended_raises_fails_the_run_and_nothing_hangs(background):
    """The learner set its end state, released the guard and signalled join() / fit()
    after the model's run_ended; one that raised left fit(background=True) waiting
    forever and join() returning False."""
    lr = Learner(_EndBreaks(), _data(), Grad(lrate=0.05), batch_size=100, n_passes=2)
    finished, got = in_thread(lambda: lr.fit(progress=None, background=background))
    assert finished, "fit() hung after run_ended raised"
    assert isinstance(got, RuntimeError) and "run_ended broke" in str(got)
    assert lr.state == "failed"
    finished, got = in_thread(lambda: lr.join(2.0))
    assert finished and isinstance(got, RuntimeError)


def test_every_observer_is_told_of_a_pause_at_its_rate():
    """Only an observer due at the very boundary that paused got a ``paused`` snapshot;
    one captured less than its interval before never learnt of the pause."""
    lr = Learner(LeastSquares(), _data(2000), Grad(lrate=0.05), batch_size=100,
                 n_passes=10**6)
    states: list[str] = []
    lr.observe(lambda s: states.append(s.state), rate=2.0)
    lr.start()
    try:
        deadline = time.monotonic() + 10
        while not states and time.monotonic() < deadline:  # the first snapshot came
            time.sleep(0.01)
        lr.pause(wait=True)
        assert lr.state == "paused"
        deadline = time.monotonic() + 5
        while states[-1:] != ["paused"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert states[-1] == "paused", states
        time.sleep(0.7)  # told once: no repeats while it stays paused
        assert states.count("paused") == 1, states
    finally:
        lr.stop(timeout=10)
    assert lr.state == "stopped"


def test_an_option_set_on_a_per_matrix_updater_reaches_its_step():
    """A PerMatrix's updaters keep their own options, set on the object itself; the new
    value reached ``opts`` but never the hyperparameter column the step reads, and the
    documented ``upd.set(...)`` was an AttributeError."""
    lr = Learner(LeastSquares(), _data(), {"W": Grad(lrate=0.05), "b": Grad(lrate=0.05)},
                 batch_size=100, n_passes=10**6)
    w = lr.updater.updaters["W"]
    lr.start()
    try:
        lr.pause(wait=True)
        assert w.set(lrate=1e-3) >= 1
        lr.resume()
        deadline = time.monotonic() + 10
        while float(w.lrate[0][0, 0]) != 1e-3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert float(w.lrate[0][0, 0]) == pytest.approx(1e-3)
        assert float(lr.updater.updaters["b"].lrate[1][0, 0]) == pytest.approx(0.05)
    finally:
        lr.stop(timeout=10)


def test_start_beside_a_fit_that_is_returning_does_not_wait_for_its_thread():
    """start() joined whatever thread the learner last ran in, also the caller of a fit()
    that had just ended (still inside fit), which waits for the lock start() held."""
    lr = Learner(LeastSquares(), _data(), Grad(lrate=0.05), batch_size=100, n_passes=1)
    lr.fit(progress=None)
    release = threading.Event()
    caller = threading.Thread(target=release.wait, args=(30,), daemon=True)
    caller.start()  # a fit() caller between the end of its run and its return
    lr._thread = caller
    lr.set(n_passes=2)
    try:
        finished, got = in_thread(lambda: lr.start().join(10), timeout=5)
        assert finished, "start() waited for the thread of a fit() caller"
        assert got is True and lr.state == "done"
    finally:
        release.set()


def test_the_checkpoint_option_takes_a_pathlib_path(tmp_path):
    """``checkpoint`` is a path option, yet a ``pathlib.Path`` was refused."""
    path = tmp_path / "run.ckpt"
    lr = Learner(LeastSquares(), _data(), Grad(lrate=0.05), batch_size=100, n_passes=1,
                 checkpoint=path)
    assert lr.opts.checkpoint == str(path)
    lr.fit(progress=None)
    assert path.is_file()
    lr.opts.checkpoint = pathlib.PurePath(tmp_path / "other.ckpt")
    assert lr.opts.checkpoint == str(tmp_path / "other.ckpt")
    with pytest.raises(OptionError, match="checkpoint"):
        lr.set(checkpoint=3)


@pytest.mark.parametrize("mats", [0, "W", ["W"], ("W",), [np.int64(0)]])
def test_a_mixin_takes_one_matrix_or_matrix_names(mats):
    """``mats=0`` was a bare "'int' object is not iterable" and a name a ValueError about
    int(); updater mappings name matrices, so mixins take names too."""
    X, y = _data()
    reg = L2Regularizer(mats=mats, l2=0.5)
    lr = Learner(LeastSquares(), (X, y), Grad(lrate=0.05), [reg], batch_size=100, n_passes=1)
    lr.init()
    assert reg.idx == [0]


@pytest.mark.parametrize("mats", [1.5, [None], object()])
def test_a_mixin_refuses_what_names_no_matrix_with_the_forms_it_takes(mats):
    with pytest.raises(TypeError, match=r"mats must name model matrices by index or name"):
        L2Regularizer(mats=mats)


def test_a_mixin_naming_a_matrix_the_model_lacks_lists_its_matrices():
    lr = Learner(LeastSquares(), _data(), Grad(), [L2Regularizer(mats=["Z"])], batch_size=100)
    with pytest.raises(ValueError, match=r"no model matrix 'Z': its model matrices are"):
        lr.init()
