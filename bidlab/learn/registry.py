"""The process-wide registry of live learners (weak: collected learners disappear).

Dashboards and the JupyterLab extension list what is training in this kernel::

    from bidlab.learn import registry
    registry.info()          # [{name, model, state, progress, train_score, ...}, ...]
    registry.get("lda-2").pause()  # the second LDA learner (the first is "lda")
    registry.stop_all()

Every :class:`~bidlab.learn.learner.Learner` registers itself under a unique name (a
suffix ``-2``, ``-3`` ... is added on a clash). The registry holds weak references only;
a running learner is kept alive by its training thread, a finished one goes away once
nobody refers to it.
"""

from __future__ import annotations

import weakref
from typing import Any

from bidlab import _forksafe

__all__ = ["register", "learners", "names", "get", "info", "pause", "resume", "stop",
           "stop_all"]

_lock = _forksafe.lock(__name__, "_lock")
_learners: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def register(learner: Any, name: str) -> str:
    """Add ``learner`` under ``name`` (made unique); return the name it got."""
    with _lock:
        unique, k = name, 1
        while unique in _learners:
            k += 1
            unique = f"{name}-{k}"
        _learners[unique] = learner
        return unique


def learners() -> list[Any]:
    """Live learners, oldest name first."""
    with _lock:
        return [v for _, v in sorted(_learners.items())]


def names() -> list[str]:
    with _lock:
        return sorted(_learners.keys())


def get(name: str) -> Any:
    """The learner called ``name`` (KeyError listing the known names otherwise)."""
    with _lock:
        found = _learners.get(name)
        if found is None:
            raise KeyError(f"no live learner named {name!r}; live learners: "
                           f"{sorted(_learners.keys()) or 'none'}")
        return found


def info() -> list[dict[str, Any]]:
    """One dict per live learner: name, model, state, progress, scores, samples/s."""
    return [lr.summary() for lr in learners()]


def pause(name: str) -> None:
    get(name).pause()


def resume(name: str) -> None:
    get(name).resume()


def stop(name: str) -> None:
    get(name).stop(wait=False)


def stop_all(wait: bool = True) -> None:
    """Stop every running learner (e.g. before a kernel shuts down)."""
    for lr in learners():
        lr.stop(wait=wait)
