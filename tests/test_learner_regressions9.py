"""Regressions of the learner under concurrent use: observers that refer to their learner,
start() beside a load, a save or an init done in another thread."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest
from conftest import in_thread

from bidlab.learn import Grad, Learner, registry
from bidlab.models.lsq import LeastSquares


def _data(n=1000, f=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, f)).astype(np.float32)
    return X, X @ np.arange(1, f + 1, dtype=np.float32)[:, None]


def _observer_threads(name):
    return [t for t in threading.enumerate() if t.name == f"bidlab-observers-{name}"]


@pytest.mark.parametrize("background", [False, True])
def test_a_learner_whose_observer_refers_to_it_is_collected(background):
    """The publisher thread held the hub (and the learner's finalizer held it too), the hub
    its callbacks: ``lr.observe(lambda s: print(lr.step))`` kept the learner, its model and
    a thread alive for good, and its name in the registry."""
    lr = Learner(LeastSquares(), _data(), Grad(lrate=0.05), batch_size=100, n_passes=1,
                 name="refers-to-itself")
    seen = []
    lr.observe(lambda s, lr=lr: seen.append(lr.step), rate=1000.0)
    lr.fit(progress=None, background=background)
    assert lr.observers.wait_idle(5.0) and seen
    name, ref = lr.name, weakref.ref(lr)
    del lr
    end = time.monotonic() + 5.0
    while time.monotonic() < end and (ref() is not None or _observer_threads(name)):
        gc.collect()
        time.sleep(0.05)
    assert ref() is None, "the learner was kept alive by its observer's thread"
    assert name not in registry.names()
    assert not _observer_threads(name)


def test_the_hub_of_a_collected_learner_still_held_ends_its_thread():
    """A hub someone still holds (``lr.observers``) is closed once the learner goes."""
    lr = Learner(LeastSquares(), _data(), Grad(lrate=0.05), batch_size=100, n_passes=1)
    lr.observe(lambda s: None)
    lr.fit(progress=None)
    hub, name = lr.observers, lr.name
    del lr
    gc.collect()
    end = time.monotonic() + 5.0
    while time.monotonic() < end and _observer_threads(name):
        time.sleep(0.05)
    assert not _observer_threads(name) and hub._closed


class _Gated(LeastSquares):
    """Blocks in a hook of a load (``restored``) or a save (``counters``) until released,
    and notes any minibatch trained meanwhile."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.hold = False
        self.entered, self.gate = threading.Event(), threading.Event()
        self.overlap = 0

    def _wait(self):
        if self.hold:
            self.entered.set()
            self.gate.wait(10)

    def restored(self, earlier):
        self._wait()
        super().restored(earlier)

    def counters(self):
        self._wait()
        return super().counters()

    def update(self, batch):
        if self.entered.is_set() and not self.gate.is_set():
            self.overlap += 1
        return super().update(batch)


def _gated_learner(tmp_path):
    model = _Gated()
    lr = Learner(model, _data(), Grad(lrate=0.01), batch_size=50, n_passes=10**6)
    lr.init()
    lr.save(str(tmp_path / "ck.npz"))
    model.hold = True
    return lr, model


def _start_beside(lr, model, call):
    """``call`` in a thread, held inside its hook; start() meanwhile, then release it."""
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    assert model.entered.wait(5)
    starter = threading.Thread(target=lr.start, daemon=True)
    starter.start()
    time.sleep(0.3)  # a start() that does not wait trains now
    model.gate.set()
    worker.join(10)
    starter.join(10)
    assert not worker.is_alive() and not starter.is_alive()


def test_start_waits_for_a_load_in_another_thread(tmp_path):
    """load() checked the state, then restored without holding the learner: a start()
    meanwhile trained on a half-restored model, and load() then set the state to
    ``stopped`` under the running thread, so a second start() was let in and hung joining
    a training thread that never ends."""
    lr, model = _gated_learner(tmp_path)
    try:
        _start_beside(lr, model, lambda: lr.load(str(tmp_path / "ck.npz")))
        assert model.overlap == 0, "the loop trained while the checkpoint was loading"
        assert lr.state == "running"
        finished, got = in_thread(lr.start, 5.0)
        assert finished, "a second start() hung"
        assert isinstance(got, RuntimeError) and "already running" in str(got)
    finally:
        assert lr.stop(timeout=10) == "stopped"


def test_start_waits_for_a_save_of_the_idle_learner_in_another_thread(tmp_path):
    """save() of a learner that is not running writes in the caller's thread; a start()
    meanwhile moved the matrices (and the updater's deferred terms) under the copy."""
    lr, model = _gated_learner(tmp_path)
    path = str(tmp_path / "b.npz")
    try:
        _start_beside(lr, model, lambda: lr.save(path))
        assert model.overlap == 0, "the loop trained while the checkpoint was written"
        assert lr.state == "running"
    finally:
        assert lr.stop(timeout=10) == "stopped"
    fresh = Learner(_Gated(), _data(), Grad(lrate=0.01), batch_size=50)
    assert fresh.load(path).step == 0


class _SavesAtPassEnd(LeastSquares):
    """Saves its learner's checkpoint from its own ``end_pass`` (the training thread)."""

    def end_pass(self, pass_):
        super().end_pass(pass_)
        if pass_ == 0:
            self.saved = self.learner_ref.save(self.path, timeout=3.0)


@pytest.mark.parametrize("background", [False, True])
def test_save_from_the_training_thread_writes_at_once(tmp_path, background):
    """save() from the loop's own thread queued a request for that very thread and waited
    for it: the run stalled for the whole timeout (two minutes by default), then failed
    with a TimeoutError."""
    model = _SavesAtPassEnd()
    model.path = str(tmp_path / "from-loop.npz")
    lr = Learner(model, _data(400), Grad(lrate=0.05), batch_size=100, n_passes=2)
    model.learner_ref = lr
    t0 = time.monotonic()
    finished, got = in_thread(lambda: lr.fit(progress=None, background=background), 20.0)
    assert finished and got is lr, got
    assert time.monotonic() - t0 < 2.5, "the run waited on itself"
    assert model.saved == model.path
    fresh = Learner(_SavesAtPassEnd(), _data(400), Grad(), batch_size=100)
    assert fresh.load(model.path).step == 4
