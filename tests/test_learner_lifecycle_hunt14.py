"""A learner's lifecycle as a notebook or a script meets it: the interpreter exiting while a
run goes on, pause(wait=True) from the loop's own thread, observers that raise, and two
learners of different families training at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from bidlab.learn import Grad, Learner
from bidlab.learn.checkpoint import load_checkpoint
from bidlab.models.lsq import LeastSquares

ROOT = Path(__file__).resolve().parent.parent

_EXIT_SCRIPT = """
import sys, time
import numpy as np
from bidlab.learn import Grad, Learner
from bidlab.models.lsq import LeastSquares
rng = np.random.default_rng(0)
X = rng.standard_normal((20000, 4)).astype(np.float32)
y = X @ np.arange(1, 5, dtype=np.float32)[:, None]
lr = Learner(LeastSquares(), (X, y), Grad(lrate=0.01), batch_size=5, n_passes=100,
             checkpoint=sys.argv[1])
lr.start()
while lr.step < 50:
    time.sleep(0.005)
if sys.argv[2] == "paused":
    lr.pause(wait=True)
print("leaving at step", lr.step, lr.state, flush=True)
"""


def _data(n=2000, f=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, f)).astype(np.float32)
    return X, X @ np.arange(1, f + 1, dtype=np.float32)[:, None]


@pytest.mark.parametrize("state", ["running", "paused"])
def test_interpreter_exit_stops_a_background_run_and_writes_its_checkpoint(tmp_path, state):
    """A script that ended while ``start()`` trained (4000 minibatches a pass, left at
    step 50) dropped the daemon thread wherever it was: the checkpoint it had asked for,
    written on stop, was never written, and the run's progress was lost."""
    ck = tmp_path / "run.npz"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, str(ck), state], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "leaving at step" in done.stdout and state in done.stdout, done.stdout
    assert ck.is_file(), "no checkpoint written when the interpreter exited"
    left = int(done.stdout.split("leaving at step")[1].split()[0])
    progress = load_checkpoint(ck).meta["progress"]
    assert progress["pass"] == 0 and progress["step"] >= left
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.npz.tmp")]


def test_pause_wait_from_the_training_thread_returns_at_once():
    """``pause(wait=True)`` in the loop's own thread (a view, a model's hook) waited for
    the loop to pause, which it cannot while it waits: the whole timeout (forever with
    ``timeout=None``), stalling the run."""
    lr = Learner(LeastSquares(), _data(), Grad(lrate=0.05), batch_size=10, n_passes=1000)
    took = []

    def view(model):
        if lr.step >= 20 and not took:
            t0 = time.perf_counter()
            lr.pause(wait=True, timeout=30.0)
            took.append(time.perf_counter() - t0)

    lr.observe(lambda s: None, rate=1000.0, views={"v": view})
    lr.start()
    try:
        end = time.monotonic() + 60
        while not took and time.monotonic() < end:
            time.sleep(0.01)
        assert took and took[0] < 10.0, f"pause(wait=True) in the loop's thread took {took}"
        lr.pause(wait=True, timeout=30.0)  # from another thread: waits until it has
        assert lr.state == "paused"
    finally:
        lr.stop(timeout=60)
    assert lr.state == "stopped"


def test_an_observer_that_raises_is_reported_once_and_training_goes_on():
    """An observer's exceptions were kept in ``subscription.errors`` and shown nowhere: a
    notebook's broken callback (a metric name misspelt) failed unseen on every call."""
    lr = Learner(LeastSquares(), _data(), Grad(lrate=0.05), batch_size=10, n_passes=3)

    def show(snap):
        return snap.metrics["no such metric"]

    sub = lr.observe(show, rate=1000.0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lr.fit(progress=None)
        assert lr.observers.wait_idle(10.0)
    ours = [w for w in seen if "observer" in str(w.message)]
    assert lr.state == "done"
    assert len(sub.errors) > 1 and isinstance(sub.errors[0], KeyError)
    assert len(ours) == 1 and issubclass(ours[0].category, RuntimeWarning)
    text = str(ours[0].message)
    assert "show" in text and "KeyError" in text and "subscription.errors" in text
    assert __file__ in text  # where it raised


def test_two_learners_of_different_families_at_once_equal_one_after_the_other():
    """k-means and NMF learners trained side by side in two threads end with the very
    matrices they end with one after the other (no state shared between runs)."""
    from bidlab.models.kmeans import KMeans
    from bidlab.models.nmf import NMF

    X = np.random.default_rng(0).random((1500, 10)).astype(np.float32)

    def made():
        return [KMeans(n_clusters=4, random_state=0, n_init=1).learner(X, n_passes=15),
                NMF(n_components=3, random_state=0).learner(X, n_passes=15)]

    alone = made()
    for lr in alone:
        lr.fit(progress=None)
    together = made()
    for lr in together:
        lr.start()
    for lr in together:
        assert lr.join(120)
    for a, b in zip(alone, together, strict=True):
        assert (a.state, a.step) == (b.state, b.step)
        for ma, mb in zip(a.model.modelmats, b.model.modelmats, strict=True):
            np.testing.assert_array_equal(ma.numpy(), mb.numpy())
