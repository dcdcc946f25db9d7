"""Ctrl-C (or a Jupyter kernel interrupt) while :meth:`Learner.fit` trains in the calling
thread: the first one asks the loop to stop at the next minibatch boundary, as
:meth:`Learner.stop` does, so the run ends cleanly -- the model between two steps, its
checkpoint written on stop -- and ``fit`` then raises :class:`KeyboardInterrupt`. A second
one interrupts at once (a minibatch that takes too long), as Python's own handler does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["stop_on_interrupt"]


@contextlib.contextmanager
def stop_on_interrupt(learner: Any) -> Iterator[Callable[[], bool]]:
    """Around a run of ``learner``'s loop in this thread: yield a function that says
    whether an interrupt asked it to stop. Only in the main thread while Python's default
    SIGINT handler is in place (another handler, or another thread, is left alone: its
    interrupt, if any, arrives as :class:`KeyboardInterrupt` wherever the loop is)."""
    asked: list[bool] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield lambda: False
        return

    def handler(signum: int, frame: Any) -> None:
        if asked:  # a second interrupt: at once
            raise KeyboardInterrupt
        asked.append(True)
        learner._stop_req = True  # read at the next boundary (no lock in a handler)

    signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
