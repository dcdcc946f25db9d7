"""The kernel side of the JupyterLab extension: bidlab.lab.snapshot and bidlab.lab.bridge.

In-process tests drive a :class:`LearnerBridge` with a recording fake comm and real
learners (least squares on synthetic data, slowed to a modest step rate);
tests/test_labextension_kernel.py plays the extension's part in a real IPython kernel.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

import numpy as np
import pytest

from bidlab.lab import bridge as bridge_mod
from bidlab.lab.bridge import LearnerBridge
from bidlab.lab.snapshot import applies_to, apply, dashboard_class, describe
from bidlab.learn import Learner, registry
from bidlab.models.lsq import LeastSquares


class PacedLeastSquares(LeastSquares):
    """Least squares that sleeps 5 ms per minibatch: a learner that keeps running."""

    def update(self, batch):
        time.sleep(0.005)
        return super().update(batch)


@pytest.fixture
def make():
    """make(name) -> a fresh learner on 2,000 x 10 synthetic least squares; all stopped after."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 10)).astype(np.float32)
    y = X @ rng.standard_normal((10, 1)).astype(np.float32)
    made: list[Learner] = []

    def make(name: str) -> Learner:
        lr = Learner(PacedLeastSquares(), (X, y), batch_size=100, n_passes=10_000, name=name)
        made.append(lr)
        return lr

    yield make
    for lr in made:
        lr.stop(wait=True, timeout=5)


class FakeComm:
    """Records what the bridge sends; ``opened`` holds the data of comm_open."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.messages = [data]
        self.on_msg_cb = None
        self.on_close_cb = None

    def send(self, data: dict[str, Any]) -> None:
        self.messages.append(data)

    def on_msg(self, cb) -> None:
        self.on_msg_cb = cb

    def on_close(self, cb) -> None:
        self.on_close_cb = cb


@pytest.fixture
def comms() -> list[FakeComm]:
    return []


@pytest.fixture
def bridge(comms) -> LearnerBridge:
    """A bridge that sees only the learners made in this test (names start with 't-')."""

    gc.collect()  # learners of earlier tests go away

    def mine() -> list[Any]:
        return [lr for lr in registry.learners() if lr.name.startswith("t-")]

    def open_comm(data):
        comms.append(FakeComm(data))
        return comms[-1]

    b = LearnerBridge(learners=mine, open_comm=open_comm, interval=0.05)
    yield b
    b.stop()


def names(msg: dict[str, Any]) -> list[str]:
    return [i["name"] for i in msg["learners"]]


def wait_state(lr: Learner, state: str, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while lr.state != state and time.monotonic() < end:
        time.sleep(0.01)
    assert lr.state == state


# ---------------------------------------------------------------------------- snapshot
def test_dashboard_class_is_a_css_safe_class_name():
    assert dashboard_class("lda") == "bidlab-dashboard-lda"
    assert dashboard_class("lda run/1.5") == "bidlab-dashboard-lda-run-1-5"


def test_describe_reports_what_the_panel_shows_and_no_nan(make):
    lr = make("t-describe")
    info = describe(lr)
    assert info == {"id": "t-describe", "name": "t-describe", "model": "PacedLeastSquares",
                    "state": "created", "progress": 0.0, "train_score": None,
                    "val_score": None, "samples_per_s": None,
                    "dashboard": "bidlab-dashboard-t-describe"}
    lr.start()
    end = time.monotonic() + 10
    while describe(lr)["val_score"] is None and time.monotonic() < end:
        time.sleep(0.02)
    info = describe(lr)
    assert info["state"] == "running"
    assert info["samples_per_s"] > 0 and info["train_score"] <= 0 and info["val_score"] <= 0
    assert 0 <= info["progress"] < 1


def test_apply_changes_state_and_refuses_unknown_commands(make):
    lr = make("t-apply").start()
    assert apply(lr, "pause") == "paused" and lr.state == "paused"
    assert apply(lr, "resume") == "running"
    assert apply(lr, "stop") == "stopped"
    with pytest.raises(ValueError, match="unknown learner command 'explode'"):
        apply(lr, "explode")
    assert applies_to("pause", "running") and not applies_to("pause", "paused")
    assert applies_to("stop", "paused") and not applies_to("stop", "done")


# ------------------------------------------------------------------------------ bridge
def test_no_comm_until_a_learner_exists(bridge, comms, make):
    assert bridge.tick() is False and comms == []
    make("t-first")
    assert bridge.tick() is True
    assert len(comms) == 1 and comms[0].messages[0]["type"] == "snapshot"
    assert names(comms[0].messages[0]) == ["t-first"]
    assert bridge.tick() is False, "nothing runs and nothing changed: nothing is sent"


def test_publishes_while_running_then_once_after_the_last_stops(bridge, comms, make):
    lr = make("t-run")
    bridge.tick()
    lr.start()
    ticks = [bridge.tick() for _ in range(5)]
    assert ticks == [True] * 5, "a snapshot on every tick while a learner runs"
    lr.stop(wait=True)
    assert bridge.tick() is True, "one final snapshot when the last learner stops"
    assert comms[0].messages[-1]["learners"][0]["state"] == "stopped"
    assert [bridge.tick() for _ in range(3)] == [False] * 3


def test_pump_thread_sends_at_most_its_rate(comms, make):
    lr = make("t-rate").start()
    b = LearnerBridge(learners=lambda: [lr], open_comm=lambda d: comms.append(FakeComm(d))
                      or comms[-1])  # default interval: 0.25 s
    b.start()
    time.sleep(1.6)
    b.stop()
    sent = len(comms[0].messages)
    assert 4 <= sent <= 7, f"{sent} snapshots in 1.6 s: expected ~6 at 4 Hz"


def test_commands_act_on_the_learner_and_reply_with_the_new_state(bridge, comms, make):
    a, b = make("t-a").start(), make("t-b").start()
    bridge.tick()
    comm = comms[0]
    comm.on_msg_cb({"content": {"data": {"action": "pause", "learner": "t-a", "request": "r1"}}})
    reply = comm.messages[-1]
    assert reply["type"] == "reply" and reply["request"] == "r1" and reply["ok"]
    assert reply["states"] == {"t-a": "paused"} and a.state == "paused"
    assert {i["name"]: i["state"] for i in reply["learners"]} == {"t-a": "paused",
                                                                  "t-b": "running"}
    # "every learner": pause all pauses the running one and leaves the paused one alone
    reply = bridge.handle({"action": "pause", "learner": None, "request": "r2"})
    assert reply["states"] == {"t-b": "paused"} and b.state == "paused"
    reply = bridge.handle({"action": "stop", "learner": None, "request": "r3"})
    assert reply["states"] == {"t-a": "stopped", "t-b": "stopped"}
    assert a.state == b.state == "stopped"


def test_bad_commands_answer_with_an_error_that_names_the_fix(bridge, comms, make):
    make("t-only")
    reply = bridge.handle({"action": "pause", "learner": "nope", "request": "x"})
    assert not reply["ok"]
    assert reply["error"] == "no live learner named 'nope'; live learners: ['t-only']"
    reply = bridge.handle({"action": "explode", "learner": None, "request": "y"})
    assert not reply["ok"] and "unknown command 'explode'" in reply["error"]
    assert bridge.handle({"action": "refresh"})["type"] == "snapshot"


def test_garbage_collected_learners_disappear_and_are_not_kept_alive(bridge, comms, make):
    lr = Learner(PacedLeastSquares(), (np.ones((50, 2), np.float32),
                                       np.ones((50, 1), np.float32)), batch_size=50, name="t-gc")
    make("t-keep")
    bridge.tick()
    assert names(comms[0].messages[-1]) == ["t-gc", "t-keep"]
    ref = weakref.ref(lr)
    del lr
    gc.collect()
    assert ref() is None, "the bridge (or its snapshot) kept a learner alive"
    assert bridge.tick() is True
    assert names(comms[0].messages[-1]) == ["t-keep"]


def test_a_closed_comm_is_reopened_on_the_next_send(bridge, comms, make):
    lr = make("t-reopen").start()
    bridge.tick()
    comms[0].on_close_cb({})
    bridge.tick()
    assert len(comms) == 2 and names(comms[1].messages[0]) == ["t-reopen"]
    lr.stop()


def test_install_is_a_no_op_outside_a_kernel():
    assert bridge_mod.in_kernel() is False
    assert bridge_mod.install() is None
    assert bridge_mod.current() is None


def test_importing_bidlab_lab_stays_headless():
    code = ("import sys, bidlab, bidlab.lab, bidlab.lab.bridge; "
            "bad = [m for m in ('ipywidgets', 'bokeh', 'comm', 'ipykernel', 'jupyter_server')"
            " if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", f"importing bidlab.lab pulled in {out}"


# ---------------------------------------------------------- malformed and large messages
MALFORMED = [  # (comm message, words the error must contain)
    (None, "must be a JSON object"),
    ([1, 2], "must be a JSON object"),
    ({"content": None}, "got null"),
    ({"content": {"data": None}}, "got null"),
    ({"content": {"data": ["pause", "t-m"]}}, "got list"),
    ({"content": {"data": {"learner": "t-m", "request": "r"}}}, "'action' is missing"),
    ({"content": {"data": {"action": 7, "learner": "t-m", "request": "r"}}},
     "'action' must be a string"),
    ({"content": {"data": {"action": "pause", "request": "r"}}}, "'learner' is missing"),
    ({"content": {"data": {"action": "pause", "learner": ["t-m"], "request": "r"}}},
     "'learner' must be a string of at most 1024 characters or null; got list"),
    ({"content": {"data": {"action": "stop", "learner": None}}}, "'request' is missing"),
    ({"content": {"data": {"action": "stop", "learner": None, "request": {"id": 1}}}},
     "'request' must be a string"),
]


def test_malformed_messages_get_an_error_reply_and_never_raise(bridge, comms, make):
    lr = make("t-m").start()
    bridge.tick()
    comm = comms[0]
    for msg, words in MALFORMED:
        before = len(comm.messages)
        comm.on_msg_cb(msg)  # the comm callback itself: it must not raise
        assert len(comm.messages) == before + 1, f"no reply to {msg!r}"
        reply = comm.messages[-1]
        assert reply["type"] == "reply" and reply["ok"] is False, msg
        assert words in reply["error"], (msg, reply["error"])
        assert reply["states"] == {} and names(reply) == ["t-m"]
    assert lr.state == "running", "a malformed command must not act on any learner"
    # a valid request id is echoed even when another field is wrong
    reply = bridge.handle({"action": "pause", "learner": 3, "request": "q9"})
    assert reply["request"] == "q9" and reply["learner"] is None and not reply["ok"]


def test_a_failing_learner_listing_is_answered_not_raised(comms, make):
    calls = []

    def learners():
        calls.append(1)
        if len(calls) > 1:
            raise OSError("x" * 5000)
        return [make("t-once")]

    b = LearnerBridge(learners=learners, open_comm=lambda d: comms.append(FakeComm(d))
                      or comms[-1])
    b.tick()
    comm = comms[0]
    comm.on_msg_cb({"content": {"data": {"action": "pause", "learner": None,
                                         "request": "r7"}}})
    reply = comm.messages[-1]
    assert reply["type"] == "reply" and reply["request"] == "r7" and not reply["ok"]
    assert reply["error"].startswith("the kernel failed to run the command: OSError: xxx")
    assert len(reply["error"]) <= 1024
    assert "learners" not in reply, "the panel keeps its last snapshot"


def test_large_fields_are_refused_with_the_cap_and_not_echoed(bridge, comms, make):
    make("t-big")
    big = "x" * 50_000_000  # 50 MB
    for data in ({"action": "pause", "learner": big, "request": "r"},
                 {"action": "pause", "learner": "t-big", "request": big},
                 {"action": big, "learner": None, "request": "r"},
                 {"action": "refresh", "request": big}):
        reply = bridge.handle(data)
        size = len(json.dumps(reply))
        assert size < 5_000, f"a {size}-byte reply to a 50 MB field"
        assert not reply["ok"] and "at most 1024 characters" in reply["error"]
        assert "a string of 50000000 characters" in reply["error"]
    # unknown extra fields are ignored, not echoed
    reply = bridge.handle({"action": "refresh", "junk": big})
    assert reply["type"] == "snapshot" and len(json.dumps(reply)) < 5_000
    # at the cap, still accepted
    reply = bridge.handle({"action": "pause", "learner": "t-big", "request": "r" * 1024})
    assert reply["request"] == "r" * 1024  # answered: t-big has not started, so no pause
    assert reply["error"] == "t-big: cannot pause it: it is created (pause applies to a " \
                             "running learner)"


# --------------------------------------------------------- learners that do not answer
class GatedLeastSquares(LeastSquares):
    """Least squares whose minibatch waits for ``gate`` (at most 10 s): its learner runs but
    reaches no minibatch boundary, so it cannot pause until the gate opens."""

    gate = threading.Event()
    inside: set[int] = set()  # ids of the models waiting at the gate

    def update(self, batch):
        self.inside.add(id(self))
        self.gate.wait(10)
        return super().update(batch)


@pytest.fixture
def gate():
    """The gate of GatedLeastSquares, opened after the test (before its learners stop)."""
    GatedLeastSquares.gate = threading.Event()
    GatedLeastSquares.inside = set()
    yield GatedLeastSquares.gate
    GatedLeastSquares.gate.set()


def gated(name: str) -> Learner:
    X = np.ones((400, 3), np.float32)
    return Learner(GatedLeastSquares(), (X, X[:, :1]), batch_size=100, n_passes=10_000,
                   name=name)


def test_pause_all_waits_one_timeout_in_total_not_one_per_learner(bridge, comms, make, gate):
    learners = [gated(f"t-slow{i}").start() for i in range(4)]
    try:
        end = time.monotonic() + 10
        while len(GatedLeastSquares.inside) < 4 and time.monotonic() < end:
            time.sleep(0.01)  # every learner is inside a minibatch: none can pause yet
        assert len(GatedLeastSquares.inside) == 4
        assert bridge.settle == 2.0  # the default
        t0 = time.monotonic()
        reply = bridge.handle({"action": "pause", "learner": None, "request": "all"})
        took = time.monotonic() - t0
        # one after another, as before, this took 4 x 2 s = 8 s
        assert 1.9 <= took < 5.0, f"pausing 4 slow learners took {took:.2f} s"
        assert reply["ok"] and reply["states"] == {f"t-slow{i}": "running" for i in range(4)}
        gate.set()  # their minibatches end: the pause requests take effect
        for lr in learners:
            wait_state(lr, "paused")
    finally:
        for lr in learners:
            lr.stop(wait=False)


class StuckPauseLearner(Learner):
    """A learner whose pause() blocks until ``gate`` opens (at most 10 s)."""

    gate = threading.Event()

    def pause(self, wait: bool = False, timeout: float | None = 10.0) -> None:
        self.gate.wait(10)
        super().pause(wait, timeout)


def test_a_learner_that_never_answers_is_reported_and_delays_no_other(comms, make):
    StuckPauseLearner.gate = threading.Event()
    stuck = StuckPauseLearner(PacedLeastSquares(), (np.ones((200, 2), np.float32),
                                                    np.ones((200, 1), np.float32)),
                              batch_size=50, n_passes=10_000, name="t-stuck").start()
    ok = make("t-ok").start()
    b = LearnerBridge(learners=lambda: [stuck, ok],
                      open_comm=lambda d: comms.append(FakeComm(d)) or comms[-1], settle=0.3)
    try:
        t0 = time.monotonic()
        reply = b.handle({"action": "pause", "learner": None, "request": "r"})
        took = time.monotonic() - t0
        assert took < 1.5, f"a stuck learner held the command for {took:.2f} s"
        assert reply["states"] == {"t-ok": "paused"} and ok.state == "paused"
        assert not reply["ok"] and reply["error"] == "t-stuck: no answer within 0.3 s"
    finally:
        StuckPauseLearner.gate.set()
        stuck.stop(wait=True, timeout=5)
    with pytest.raises(ValueError, match="settle time must be > 0"):
        LearnerBridge(settle=0)
