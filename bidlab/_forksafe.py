"""Locks that a child made by ``os.fork()`` gets fresh.

A child process starts with one thread, but with every lock in the state it had in its
parent at the moment of the fork: a lock that one of the parent's other threads held then
(a training thread allocating, caching a result, registering a learner) stays held in
the child for good, and the child hangs at its first use. :func:`lock` makes a lock and
registers it, so that a handler run in every forked child (``os.register_at_fork``)
replaces it with a new, free one. It is for process-wide locks (a module's, a
singleton's); the child pays one attribute assignment per lock, a lock's users nothing.

Examples
--------
>>> import threading
>>> from bidlab import _forksafe
>>> class Store:
...     def __init__(self):
...         self._lock = _forksafe.lock(self, "_lock", threading.RLock)
>>> with Store()._lock:
...     pass
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["lock"]

# (the owning module's name, or a weak reference to the owning object), attribute, factory
_LOCKS: list[tuple[str | weakref.ref[Any], str, Callable[[], Any]]] = []


def lock(owner: str | object, attr: str, factory: Callable[[], Any] = threading.Lock) -> Any:
    """A new ``factory()`` lock, stored by the caller as ``owner.attr``, that a forked
    child replaces with a new one.

    Parameters
    ----------
    owner
        the module's name (``__name__``) for a module-level lock, else the object that
        holds the lock (held weakly: a collected owner is forgotten).
    attr
        the attribute the lock is stored under.
    factory
        ``threading.Lock`` (default), ``threading.RLock`` or ``threading.Condition``.
    """
    key = owner if isinstance(owner, str) else weakref.ref(owner)
    if not isinstance(owner, str):
        _LOCKS[:] = [e for e in _LOCKS if isinstance(e[0], str) or e[0]() is not None]
    _LOCKS.append((key, attr, factory))
    return factory()


def _after_fork_in_child() -> None:
    """Give every registered lock a new one (the child has this one thread only)."""
    for key, attr, factory in _LOCKS:
        owner = sys.modules.get(key) if isinstance(key, str) else key()
        if owner is not None:
            setattr(owner, attr, factory())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
