"""What the JupyterLab panel shows about a learner, and the commands it may send.

This module is the one adapter between :mod:`bidlab.learn` learners and the wire format of
the ``bidlab.learners`` comm (``labextension/src/protocol.ts``): :func:`describe` turns a
learner into a JSON-safe dict; :func:`apply` runs a panel command on it. It needs only
what :class:`bidlab.learn.Learner` offers: ``summary()``, ``state``, ``pause()``,
``resume()`` and ``stop(wait=False)``. States: ``created``, ``running``, ``paused``,
``stopped``, ``done``, ``failed``.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

__all__ = ["ACTIONS", "dashboard_class", "describe", "apply", "applies_to"]

#: Commands the panel may send for a learner.
ACTIONS = ("pause", "resume", "stop")

_APPLIES = {
    "pause": frozenset({"running"}),
    "resume": frozenset({"paused"}),
    "stop": frozenset({"running", "paused"}),
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
    except (TypeError, ValueError):
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
