"""What the JupyterLab panel shows about a learner, and the commands it may send.

This module is the one adapter between :mod:`bidlab.learn` learners and the wire format of
the ``bidlab.learners`` comm (``labextension/src/protocol.ts``): :func:`describe` turns a
learner into a JSON-safe dict; :func:`apply` runs a panel command on it. It needs only
what :class:`bidlab.learn.Learner` offers: ``summary()``, ``state``, ``pause()``,
``resume()`` and ``stop(wait=False)``. States: ``created``, ``running``, ``paused``,
``stopped``, ``done``, ``failed``. :func:`apply_all` asks several learners at once, each in
its own thread, under one deadline for them all.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ACTIONS", "dashboard_class", "describe", "apply", "applies_to", "apply_all",
           "Outcome"]

#: Commands the panel may send for a learner.
ACTIONS = ("pause", "resume", "stop")

_APPLIES = {
    "pause": frozenset({"running"}),
    "resume": frozenset({"paused"}),
    "stop": frozenset({"running", "paused"}),
}
#: States in which a learner already is where a command would take it: the command is
#: answered at once with that state instead of waiting for a change that cannot come.
_ALREADY = {
    "pause": frozenset({"paused"}),
    "resume": frozenset({"running"}),
    "stop": frozenset({"stopped", "done", "failed"}),
}


def dashboard_class(name: str) -> str:
    """DOM class a learner's dashboard carries, so the panel can scroll to it.

    ``"lda run 1"`` -> ``"bidlab-dashboard-lda-run-1"``: characters other than letters,
    digits, ``_`` and ``-`` become ``-``. Dashboards (``bidlab.widgets``) add this class to
    their outermost widget; the panel's "dashboard" link appears when it finds one.
    """
    return "bidlab-dashboard-" + re.sub(r"[^A-Za-z0-9_-]", "-", str(name))


def _number(value: Any) -> float | None:
    """A finite float, or None (JSON has no NaN/inf and the kernel session rejects them)."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):  # an int past 1e308 too
        return None
    return x if math.isfinite(x) else None


def describe(learner: Any) -> dict[str, Any]:
    """The panel's view of one learner: id, name, model, state, progress, scores, rate.

    Reads ``learner.summary()`` (see :mod:`bidlab.learn.registry`); numbers that are
    missing, NaN or infinite become None.
    """
    s = learner.summary()
    name = str(s.get("name", getattr(learner, "name", "learner")))
    return {
        "id": name,  # registry names are unique among live learners
        "name": name,
        "model": str(s.get("model", "")),
        "state": str(s.get("state", "created")),
        "progress": _number(s.get("progress")),
        "train_score": _number(s.get("train_score")),
        "val_score": _number(s.get("val_score")),
        "samples_per_s": _number(s.get("samples_per_s")),
        "dashboard": dashboard_class(name),
    }


def applies_to(action: str, state: str) -> bool:
    """Whether ``action`` makes sense for a learner in ``state`` (for "all learners")."""
    return state in _APPLIES.get(action, frozenset())


def _state(learner: Any) -> str:
    return str(learner.state)


def apply(learner: Any, action: str, settle: float = 2.0) -> str:
    """Run ``action`` ("pause", "resume", "stop") on ``learner``; return its new state.

    Pause and stop take effect at the next minibatch boundary, so this waits up to
    ``settle`` seconds for the state to change (never blocking on the training thread
    itself) and returns whatever state the learner is in then.
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown learner command {action!r}; expected one of {ACTIONS}")
    before = _state(learner)
    if action == "stop":
        learner.stop(wait=False)
    else:
        getattr(learner, action)()
    deadline = time.monotonic() + settle
    state = _state(learner)
    while state == before and time.monotonic() < deadline:
        time.sleep(0.01)
        state = _state(learner)
    return state


#: Seconds :func:`apply_all` waits, past its timeout, for a learner's own ``apply`` to
#: return the state it saw at the deadline.
GRACE = 0.25


@dataclass
class Outcome:
    """What :func:`apply_all` did: the ids of the live learners it saw, the new state of
    each learner it acted on (by id), and one ``"name: problem"`` line per failure."""

    found: list[str] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _apply_one(learner: Any, action: str, target: str | None, deadline: float,
               out: dict[str, Any]) -> None:
    try:
        info = describe(learner)
        out["id"] = info["id"]
        if target is not None and info["id"] != target:
            return
        state = info["state"]
        if not applies_to(action, state):
            if target is None:
                return  # "pause all" leaves paused or finished learners alone
            if state in _ALREADY[action]:
                out["state"] = state
            else:  # e.g. pausing a learner that has not started: nothing would happen
                wants = " or ".join(sorted(_APPLIES[action]))
                out["error"] = f"cannot {action} it: it is {state} ({action} applies to a " \
                               f"{wants} learner)"
            return
        out["state"] = apply(learner, action, settle=max(0.0, deadline - time.monotonic()))
    except Exception as exc:  # reported in the reply, next to the others' states
        out["error"] = f"{type(exc).__name__}: {exc}"


def apply_all(learners: Sequence[Any], action: str, target: str | None = None,
              timeout: float = 2.0) -> Outcome:
    """Run ``action`` on the learner named ``target`` (None: on every learner it applies to,
    see :func:`applies_to`), all learners at once, waiting ``timeout`` seconds in total.

    Each learner is asked in its own daemon thread, so one that does not answer (a
    minibatch that takes long, a ``pause()`` that blocks) delays the answer by at most
    ``timeout`` (plus :data:`GRACE`) however many learners there are. A learner whose state
    has not changed by then is reported in the state it is in; one whose thread has not
    returned is reported as an error ("no answer within ...").
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown learner command {action!r}; expected one of {ACTIONS}")
    if not timeout > 0:
        raise ValueError(f"the command timeout must be > 0 seconds; got {timeout!r}")
    deadline = time.monotonic() + timeout
    jobs = []
    for learner in learners:
        out: dict[str, Any] = {}
        name = str(getattr(learner, "name", type(learner).__name__))
        thread = threading.Thread(target=_apply_one, args=(learner, action, target, deadline,
                                                           out),
                                  name=f"bidlab-lab-{action}-{name}", daemon=True)
        thread.start()
        jobs.append((name, thread, out))
    outcome = Outcome()
    for name, thread, out in jobs:
        thread.join(max(0.0, deadline + GRACE - time.monotonic()))
        if thread.is_alive():
            outcome.found.append(name)  # registry names are the ids
            if target is None or target == name:
                outcome.errors.append(f"{name}: no answer within {timeout:g} s")
            continue
        if "id" in out:
            outcome.found.append(out["id"])
        if "state" in out:
            outcome.states[out["id"]] = out["state"]
        if "error" in out:
            outcome.errors.append(f"{out.get('id', name)}: {out['error']}")
    return outcome
