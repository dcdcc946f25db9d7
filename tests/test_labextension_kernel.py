"""The JupyterLab extension's kernel side in a real IPython kernel: ``import bidlab`` starts
the learner bridge, which publishes over a comm and obeys the extension's commands (the
extension's part played over the real comm protocol)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from bidlab.lab.bridge import TARGET

KERNEL_SETUP = """
import time
import numpy as np
import bidlab
import bidlab.lab
from bidlab.learn import Learner
from bidlab.models.lsq import LeastSquares

class Paced(LeastSquares):
    def update(self, batch):
        time.sleep(0.005)
        return super().update(batch)

rng = np.random.default_rng(0)
X = rng.standard_normal((2000, 10)).astype(np.float32)
y = X @ rng.standard_normal((10, 1)).astype(np.float32)
"""


@pytest.fixture(scope="module")
def kernel():
    pytest.importorskip("ipykernel")
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def run(kc, code: str) -> dict[str, Any]:
    reply = kc.execute_interactive(code, timeout=30, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok", reply["content"]
    return reply


def comm_messages(kc, seconds: float) -> list[dict[str, Any]]:
    """Every bidlab comm message on iopub during ``seconds``."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.01, end - time.monotonic()))
        except Exception:
            break
        t = msg["header"]["msg_type"]
        if t == "comm_open" and msg["content"]["target_name"] == TARGET or t == "comm_msg":
            out.append(msg)
    return out


def test_importing_bidlab_in_a_kernel_starts_the_bridge(kernel):
    run(kernel, "import sys, bidlab")
    bridge = "sys.modules.get('bidlab.lab.bridge')"
    reply = kernel.execute_interactive(
        "", user_expressions={"v": f"{bridge} is not None and {bridge}.current() is not None "
                                   f"and {bridge}.current().running"},
        timeout=10, output_hook=lambda msg: None)
    value = reply["content"]["user_expressions"]["v"]
    assert value.get("data", {}).get("text/plain") == "True", (
        "`import bidlab` inside a kernel must start the learner bridge: bidlab/__init__.py "
        "should call bidlab.lab.bridge.install()")


def test_kernel_publishes_over_a_comm_and_obeys_commands(kernel):
    run(kernel, KERNEL_SETUP)
    run(kernel, "bidlab.lab.install()")  # idempotent; the test above checks the import hook
    comm_messages(kernel, 0.3)  # drain
    # Not through run(): execute_interactive drops the iopub messages of other parents, and
    # the bridge may open its comm (at its next 0.25 s tick after the learner registers)
    # before the execution's idle status arrives (one fresh-clone CI run lost it that way).
    msg_id = kernel.execute('lr = Learner(Paced(), (X, y), batch_size=100, n_passes=10_000, '
                            'name="k-lsq").start()')
    msgs: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
            m["header"]["msg_type"] == "comm_open" for m in msgs):
        msgs += comm_messages(kernel, 0.25)
    reply = kernel.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "ok", reply["content"]
    opened = [m for m in msgs if m["header"]["msg_type"] == "comm_open"]
    assert len(opened) == 1, "the bridge opens one comm on target bidlab.learners"
    comm_id = opened[0]["content"]["comm_id"]
    window = comm_messages(kernel, 2.0)
    data = [m["content"]["data"] for m in msgs + window]
    assert all(d["type"] == "snapshot" for d in data)
    assert 5 <= len(window) <= 10, f"{len(window)} snapshots in 2 s: expected at most ~4 Hz"
    assert data[-1]["learners"][0]["name"] == "k-lsq"
    assert data[-1]["learners"][0]["state"] == "running"

    # the extension's Pause button: a comm_msg on the shell channel
    msg = kernel.session.msg("comm_msg", {"comm_id": comm_id, "data": {
        "action": "pause", "learner": "k-lsq", "request": "q1"}})
    kernel.shell_channel.send(msg)
    replies = [m["content"]["data"] for m in comm_messages(kernel, 1.5)
               if m["content"]["data"].get("type") == "reply"]
    assert replies and replies[0]["request"] == "q1" and replies[0]["states"] == {
        "k-lsq": "paused"}
    value = kernel.execute_interactive("", user_expressions={"s": "lr.state"}, timeout=10,
                                       output_hook=lambda m: None)
    assert value["content"]["user_expressions"]["s"]["data"]["text/plain"] == "'paused'"
    assert comm_messages(kernel, 1.0) == [], "nothing runs: nothing is published"

    # malformed commands over the real comm: an error reply each, the kernel carries on
    for data, words in ((None, "got null"), ([1, 2], "got list"),
                        ({"action": "resume", "learner": "k-lsq", "request": "x" * 200_000},
                         "at most 1024 characters")):
        kernel.shell_channel.send(kernel.session.msg("comm_msg", {"comm_id": comm_id,
                                                                  "data": data}))
        replies = [m["content"]["data"] for m in comm_messages(kernel, 1.5)
                   if m["content"]["data"].get("type") == "reply"]
        assert len(replies) == 1 and not replies[0]["ok"], (data, replies)
        assert words in replies[0]["error"] and len(json.dumps(replies[0])) < 5_000
    value = kernel.execute_interactive("", user_expressions={"s": "lr.state"}, timeout=10,
                                       output_hook=lambda m: None)
    assert value["content"]["user_expressions"]["s"]["data"]["text/plain"] == "'paused'"
    run(kernel, "lr.stop()")
