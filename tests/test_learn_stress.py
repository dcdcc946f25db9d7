"""Stress: another thread hammers a training learner with random control calls."""

from __future__ import annotations

import random
import threading
import time

import numpy as np

from bidlab.learn import ADAGrad, L2Regularizer, Learner, MemorySource
from bidlab.learn.options import OptionError
from bidlab.models.lsq import LeastSquares


def test_random_control_calls_never_deadlock_and_leave_a_finite_model(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 10)).astype(np.float32)
    Y = (X @ rng.standard_normal((10, 2)) + 0.1).astype(np.float32)
    lr = Learner(LeastSquares(), MemorySource(X, Y, batch_size=50, shuffle=True),
                 ADAGrad(lrate=0.01), [L2Regularizer(l2=1e-4)], n_passes=1_000_000)
    delivered = []
    lr.start()
    counts: dict[str, int] = {}
    failures: list[BaseException] = []

    def controller():
        r = random.Random(1)
        subs = []
        try:
            for i in range(2500):
                op = "save" if i % 100 == 50 else r.choice(
                    ["pause", "resume", "set", "bad_set", "stop", "start", "observe", "cancel",
                     "metrics", "join"])
                counts[op] = counts.get(op, 0) + 1
                if op == "pause":
                    lr.pause()
                elif op == "resume":
                    lr.resume()
                elif op == "set":
                    lr.set(lrate=r.uniform(1e-3, 0.05), l2=r.choice([0.0, 1e-4]),
                           val_every=r.choice([0, 5, 11]))
                elif op == "bad_set":
                    try:
                        lr.set(lrate=-r.random())
                    except OptionError:
                        pass
                    else:
                        raise AssertionError("a negative lrate was accepted")
                elif op == "stop":
                    lr.stop(wait=r.random() < 0.3, timeout=5)
                elif op == "start":
                    try:
                        lr.start()
                    except RuntimeError as exc:
                        assert "already" in str(exc)
                elif op == "observe":
                    subs.append(lr.observe(lambda s: delivered.append(s.step),
                                           rate=r.choice([5, 10, 100, 1000]),
                                           views={"w": (0, 1)}))
                elif op == "cancel" and subs:
                    subs.pop(r.randrange(len(subs))).cancel()
                elif op == "metrics":
                    m = lr.metrics
                    assert m["state"] in ("running", "paused", "stopped", "done")
                elif op == "join":
                    lr.join(timeout=0.001)
                elif op == "save":
                    lr.save(str(tmp_path / "ck.npz"), timeout=10)
                if r.random() < 0.02:
                    time.sleep(0.002)
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    t0 = time.monotonic()
    th = threading.Thread(target=controller)
    th.start()
    th.join(timeout=60)
    assert not th.is_alive(), "the controller deadlocked"
    assert not failures, failures
    lr.resume()
    lr.stop(timeout=10)
    assert lr.join(timeout=10)
    elapsed = time.monotonic() - t0
    assert elapsed < 60
    assert sum(counts.values()) == 2500, counts
    assert lr.state in ("stopped", "done")
    assert lr._thread is None or not lr._thread.is_alive()
    assert lr.step > 0
    for m in lr.model.modelmats:
        assert np.isfinite(m.data).all()
    assert np.isfinite(lr.history()["score"]).all()
    assert delivered  # observers were served along the way
    # a final consistent run still works
    lr.set(max_steps=lr.step + 10)
    lr.start().join(10)
    assert lr.state == "done"
