"""The kernel side of bidlab's JupyterLab extension: the learner registry over a comm.

Inside an IPython kernel, :func:`install` (called when ``bidlab`` is imported) starts one
daemon "pump" thread that looks at :func:`bidlab.learn.registry.learners` four times a
second. The first time a learner exists it opens a comm on target ``bidlab.learners``
(the extension registers that target on every kernel) and from then on sends a snapshot

* on every tick while some learner is ``running`` (so at most 4 Hz),
* once more when the last running learner stops, and
* once whenever the set of learners or their states changed (a learner was created,
  paused from Python, garbage collected).

Nothing is sent while nothing runs and nothing changes. Commands from the panel
(``{"action": "pause" | "resume" | "stop" | "refresh", "learner": name | None,
"request": id}``; ``None`` means every learner) arrive on the same comm, act on the
learner and are answered with a reply carrying the new states and a fresh snapshot. A
command for several learners asks them all at once and waits ``settle`` seconds in total
(:func:`bidlab.lab.snapshot.apply_all`). A malformed message (not an object, a missing or
wrongly typed field, a string over :data:`bidlab.lab.protocol.MAX_FIELD` characters) is
answered with an error reply (:mod:`bidlab.lab.protocol`); nothing raises inside the comm
callback.

The bridge never keeps a learner alive: it holds names, not learners, between ticks, so
the registry's weak references still let finished learners go. It imports ``comm``
lazily and never imports ipywidgets or bokeh; outside a kernel :func:`install` does
nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from bidlab.lab.protocol import MAX_FIELD, message_data, parse_command
from bidlab.lab.snapshot import ACTIONS, apply_all, describe

__all__ = ["TARGET", "LearnerBridge", "install", "in_kernel", "current"]

#: The comm target the JupyterLab extension registers on every kernel.
TARGET = "bidlab.learners"

log = logging.getLogger(__name__)


def in_kernel() -> bool:
    """True when running inside an IPython kernel (ipykernel), without importing it."""
    if "ipykernel" not in sys.modules or "IPython" not in sys.modules:
        return False
    shell = sys.modules["IPython"].get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _registry_learners() -> list[Any]:
    # No learner can exist before bidlab.learn.registry is imported; importing it here,
    # from the pump thread, could race the user's own imports in the main thread.
    registry = sys.modules.get("bidlab.learn.registry")
    return registry.learners() if registry is not None else []


def _open_comm(data: dict[str, Any]) -> Any:
    import comm

    return comm.create_comm(target_name=TARGET, data=data)


class LearnerBridge:
    """Publishes the learners of this process on a comm and runs the panel's commands.

    Parameters
    ----------
    learners
        returns the live learners (default: :func:`bidlab.learn.registry.learners`).
    open_comm
        opens the comm with its first message as data and returns it (an object
        with ``send(data)``, ``on_msg(callback)``, ``on_close(callback)``); tests pass a
        fake.
    interval
        seconds between ticks of the pump thread (0.25: at most 4 snapshots/s).
    settle
        seconds a command waits, in total, for the learners it asks to change state
        (they are asked at once, not one after another).
    """

    def __init__(
        self,
        learners: Callable[[], list[Any]] = _registry_learners,
        open_comm: Callable[[dict[str, Any]], Any] = _open_comm,
        interval: float = 0.25,
        settle: float = 2.0,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"the bridge interval must be > 0 seconds; got {interval!r}")
        if not settle > 0:
            raise ValueError(f"the bridge settle time must be > 0 seconds; got {settle!r}")
        self.interval = float(interval)
        self.settle = float(settle)
        self.sent = 0  # messages sent (snapshots and replies), for tests and diagnostics
        self._learners = learners
        self._open_comm = open_comm
        self._comm: Any = None
        self._lock = threading.RLock()
        self._was_running = False
        self._signature: tuple[tuple[str, str], ...] = ()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- snapshots ------------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, Any]]:
        """The panel's view of every live learner (a learner that fails to describe itself
        is reported as ``failed`` with its error instead of hiding the others)."""
        out = []
        for learner in self._learners():
            try:
                out.append(describe(learner))
            except Exception as exc:  # a broken learner must not blank the panel
                name = str(getattr(learner, "name", type(learner).__name__))
                out.append({"id": name, "name": name, "model": type(exc).__name__,
                            "state": "failed", "progress": None, "train_score": None,
                            "val_score": None, "samples_per_s": None, "dashboard": ""})
        return out

    def tick(self) -> bool:
        """Send a snapshot if the rules above say so; return whether one was sent."""
        with self._lock:
            infos = self.snapshot()
            running = any(i["state"] == "running" for i in infos)
            signature = tuple((i["id"], i["state"]) for i in infos)
            due = running or self._was_running or signature != self._signature
            self._was_running = running
            self._signature = signature
            if not due or (not infos and self._comm is None):
                return False  # never open a comm only to say "nothing here"
            self._send({"type": "snapshot", "learners": infos})
            return True

    # -- commands -------------------------------------------------------------------------
    def handle(self, data: Any) -> dict[str, Any]:
        """Run one panel command and return the reply (also sent on the comm).

        ``data`` may be anything: a malformed command is answered with ``ok: false`` and an
        error naming the problem (see :func:`bidlab.lab.protocol.parse_command`).
        """
        cmd = parse_command(data)
        if cmd.error is None and cmd.action == "refresh":
            reply: dict[str, Any] = {"type": "snapshot", "learners": self.snapshot()}
        else:
            if cmd.error is None:
                states, error = self._act(cmd.action, cmd.learner)
            else:
                states, error = {}, cmd.error
            reply = {"type": "reply", "request": cmd.request, "action": cmd.action,
                     "learner": cmd.learner, "ok": error is None, "states": states,
                     "error": error, "learners": self.snapshot()}
        with self._lock:
            self._signature = tuple((i["id"], i["state"]) for i in reply["learners"])
            self._send(reply)
        return reply

    def _act(self, action: Any, target: Any) -> tuple[dict[str, str], str | None]:
        if action not in ACTIONS:
            return {}, f"unknown command {action!r}; expected one of {ACTIONS} or 'refresh'"
        outcome = apply_all(self._learners(), action, target, timeout=self.settle)
        if target is not None and target not in outcome.found:
            found = outcome.found or "none"
            return {}, f"no live learner named {target!r}; live learners: {found}"
        return outcome.states, "; ".join(outcome.errors) or None

    # -- the comm -------------------------------------------------------------------------
    def _send(self, data: dict[str, Any]) -> None:
        with self._lock:
            if self._comm is None:
                c = self._open_comm(data)
                c.on_msg(self._on_msg)
                c.on_close(self._on_close)
                self._comm = c
            else:
                self._comm.send(data)
            self.sent += 1

    def _on_msg(self, msg: Any) -> None:
        # The comm's callback: whatever arrives, nothing raises into the kernel's handler.
        data = message_data(msg)
        try:
            self.handle(data)
        except Exception as exc:  # listing the learners or the comm itself failed
            log.exception("bidlab lab bridge: a panel command failed")
            error = f"the kernel failed to run the command: {type(exc).__name__}: {exc}"
            # no "learners": the panel keeps showing the last snapshot it had
            reply = {"type": "reply", "request": parse_command(data).request, "action": None,
                     "learner": None, "ok": False, "states": {}, "error": error[:MAX_FIELD]}
            try:
                with self._lock:
                    self._send(reply)
            except Exception:
                log.exception("bidlab lab bridge: the error reply could not be sent")

    def _on_close(self, msg: dict[str, Any]) -> None:
        # A frontend closed it (e.g. one without the extension): reopen on the next send.
        with self._lock:
            self._comm = None

    # -- the pump thread ------------------------------------------------------------------
    def start(self) -> None:
        """Start the pump thread (a daemon) if it is not running."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._pump, name="bidlab-lab-bridge",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the pump thread and wait for it (at most ``timeout`` seconds)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _pump(self) -> None:
        failures = 0
        while not self._stop.wait(self.interval):
            try:
                self.tick()
                failures = 0
            except Exception:  # keep publishing; log a failure streak once
                failures += 1
                if failures == 1:
                    log.exception("bidlab lab bridge: publishing learners failed")


_bridge: LearnerBridge | None = None
_bridge_lock = threading.Lock()


def current() -> LearnerBridge | None:
    """The bridge :func:`install` started in this process, if any."""
    return _bridge


def install() -> LearnerBridge | None:
    """Start the learner bridge when running inside an IPython kernel (idempotent).

    Called on ``import bidlab``; returns the bridge, or None outside a kernel (plain
    Python, pytest, a terminal), where it does nothing at all.
    """
    global _bridge
    if not in_kernel():
        return None
    with _bridge_lock:
        if _bridge is None:
            _bridge = LearnerBridge()
        _bridge.start()
        return _bridge
