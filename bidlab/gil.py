"""GIL-free windows: a training thread says when a long GIL-free kernel starts, so that
another thread of the process can do its Python work inside that stretch.

Why: a learner runs in a background thread of the notebook's kernel, and a live dashboard's
pump thread renders the model in the same process ten times a second; both need the GIL
for their Python. A pump tick holds it for a few milliseconds. When the tick starts at a
random moment, the training thread soon comes back from a numba kernel, needs the GIL for
its next Python step and waits until the tick is done: measured on a 2-core machine,
that was a few per cent of training time. The training thread's longest GIL-free stretch
is a minibatch's E-step (:func:`bidlab.kern.lda_sampler.same_sample_sweeps`, one numba
call for all sweeps); announcing it lets the pump start its tick exactly then, so the two
threads' Python work does not overlap.

* :func:`announce_gil_free` -- called by the thread about to enter a long GIL-free call
  (a few microseconds: a lock and a notify);
* :func:`wait_gil_free` -- called by the helper thread: waits (bounded) for the next
  announcement of a given thread. It returns at once for a thread that never announced,
  so code that runs models without announcements is never delayed.
"""

from __future__ import annotations

import os
import threading

__all__ = ["ALIGN_WAIT", "announce_gil_free", "announcements", "align_wait", "forget",
           "wait_gil_free"]

#: Seconds a helper thread waits for the next announcement before it goes on anyway.
ALIGN_WAIT = 0.03

_cond = threading.Condition(threading.Lock())
_counts: dict[int, int] = {}  # thread ident -> announcements so far


def align_wait() -> float:
    """The default wait of helper threads that align with announcements: :data:`ALIGN_WAIT`,
    or 0 (do not wait) when the environment sets ``BIDLAB_GIL_ALIGN=0`` (an A/B switch)."""
    return 0.0 if os.environ.get("BIDLAB_GIL_ALIGN") == "0" else ALIGN_WAIT


def announce_gil_free() -> None:
    """Tell waiting threads that the calling thread starts a long GIL-free call now."""
    ident = threading.get_ident()
    with _cond:
        _counts[ident] = _counts.get(ident, 0) + 1
        _cond.notify_all()


def announcements(ident: int) -> int:
    """How many times thread ``ident`` announced a GIL-free call (0: never)."""
    with _cond:
        return _counts.get(ident, 0)


def wait_gil_free(ident: int | None, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for thread ``ident``'s next announcement.

    Returns True when one came, False on timeout or when ``ident`` is None or never
    announced (then without waiting).
    """
    if ident is None:
        return False
    with _cond:
        seen = _counts.get(ident)
        if seen is None:
            return False
        return _cond.wait_for(lambda: _counts.get(ident) != seen, timeout)


def forget(ident: int) -> None:
    """Drop thread ``ident``'s record (call when that thread ends)."""
    with _cond:
        _counts.pop(ident, None)
