"""Interpreter exit while learners train in the background.

:meth:`Learner.start` runs the loop in a daemon thread, so a script that ends (or a kernel
that shuts down) without ``join()`` does not wait for the training to finish. Python used
to drop that thread wherever it was: the progress made since the last checkpoint was lost
and the ``checkpoint`` file, which the learner writes on stop, kept an older state.

At exit (:mod:`atexit`, which runs after Python has waited for its non-daemon threads)
every run still going in a thread of its own is asked to stop, as :meth:`Learner.stop`
does: it ends at the next minibatch boundary, writes its checkpoint when one is set and
tells its observers. Python waits for them at most :data:`EXIT_WAIT_S` seconds in all
(a minibatch that takes longer is left to be dropped, as before), so exit stays prompt.
A forked child, whose copies of the training threads are not running, waits for none.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from bidlab import _forksafe
from bidlab.learn import registry

__all__ = ["training_thread", "stop_running", "EXIT_WAIT_S"]

#: the longest interpreter exit waits for the learners it stops, in seconds, all together
EXIT_WAIT_S = 10.0

_installed = False
_install_lock = _forksafe.lock(__name__, "_install_lock")


def training_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """The daemon thread that runs a learner's loop (not started); the first one made
    registers :func:`stop_running` to run at interpreter exit."""
    global _installed
    if not _installed:
        with _install_lock:
            if not _installed:
                atexit.register(stop_running)
                _installed = True
    return threading.Thread(target=target, name=name, daemon=True)


def _own_thread(learner: Any) -> threading.Thread | None:
    """The learner's training thread when it runs in this process, else None."""
    thread = getattr(learner, "_thread", None)
    if (isinstance(thread, threading.Thread) and thread.is_alive()
            and thread is not threading.current_thread()
            and thread.name.startswith("bidlab-learner-")):
        return thread
    return None


def stop_running(timeout: float | None = None) -> list[str]:
    """Ask every learner training in a thread of its own to stop, then wait for them (at
    most ``timeout`` seconds in all, default :data:`EXIT_WAIT_S`); return their names.
    Never raises: it runs at interpreter exit."""
    limit = EXIT_WAIT_S if timeout is None else timeout
    running = []
    try:
        for lr in registry.learners():
            thread = _own_thread(lr)
            if thread is not None and lr.state in ("running", "paused"):
                lr.stop(wait=False)
                running.append((lr, thread))
        end = time.monotonic() + limit
        for lr, thread in running:
            thread.join(max(0.0, end - time.monotonic()))
            if not thread.is_alive() and lr.state == "failed":  # nobody joins it now: say it
                err = lr.error  # (its checkpoint, when one is set, was not written)
                sys.stderr.write(f"bidlab: learner {lr.name!r}, stopped at interpreter "
                                 f"exit, failed: {type(err).__name__}: {err}\n")
    except Exception:  # noqa: BLE001 - exit goes on whatever a learner does
        pass
    return [lr.name for lr, _ in running]
