"""The JupyterLab panel's commands on a learner they cannot act on: answered at once, with
an error naming its state, or as done when the learner is already where it would go."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bidlab.lab.bridge import LearnerBridge
from bidlab.models import KMeans


class FakeComm:
    def __init__(self, data):
        self.messages = [data]

    def send(self, data):
        self.messages.append(data)

    def on_msg(self, cb):
        self.on_msg_cb = cb

    def on_close(self, cb):
        self.on_close_cb = cb


@pytest.fixture
def learners():
    X = np.random.default_rng(0).random((200, 4))
    done = KMeans(n_clusters=3).learner(X, n_passes=1, name="r3-done")
    done.fit(progress=None)
    fresh = KMeans(n_clusters=3).learner(X, n_passes=1, name="r3-fresh")
    return {"done": done, "fresh": fresh}


@pytest.mark.parametrize("action, which, ok, text", [
    ("pause", "done", False, "cannot pause it: it is done (pause applies to a running "
                             "learner)"),
    ("resume", "fresh", False, "cannot resume it: it is created"),
    ("stop", "fresh", False, "cannot stop it: it is created"),
    ("stop", "done", True, None),
])
def test_a_command_that_cannot_apply_is_answered_at_once(learners, action, which, ok,
                                                        text) -> None:
    bridge = LearnerBridge(learners=lambda: list(learners.values()), open_comm=FakeComm,
                           settle=2.0)
    target = learners[which].name
    t0 = time.monotonic()
    reply = bridge.handle({"action": action, "learner": target, "request": "q"})
    assert time.monotonic() - t0 < 1.0  # no wait for a state change that cannot come
    assert reply["ok"] is ok
    if ok:
        assert reply["states"] == {target: "done"}
    else:
        assert reply["error"].startswith(f"{target}: {text}") and reply["states"] == {}
