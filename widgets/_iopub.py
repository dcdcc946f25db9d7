"""One IOPub wake-up per pump tick instead of one per comm message: :func:`batched_iopub`.

Why: in ipykernel 7 every message a thread sends on IOPub wakes the kernel's IOPub thread,
and each wake-up takes the GIL from the training thread. A pump tick sends ~10 messages.
Inside :func:`batched_iopub` the messages the *current thread* sends are held and handed
to the IOPub thread as one event at the end: one wake-up per tick, the same messages in
the same order.

Outside an IPython kernel it does nothing; other threads' messages are never held. The
ipykernel hooks this needs are in :mod:`._compat_ipykernel`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ._compat_ipykernel import iopub_thread, route_schedule, stock_schedule

__all__ = ["HeldSends", "batched_iopub", "iopub_thread"]

_local = threading.local()


class HeldSends(list):
    """The sends one :func:`batched_iopub` held, in order; calling it sends them all (in
    the IOPub thread: this is the one event the IOPub thread is woken for)."""

    def __call__(self) -> None:
        for send in self:
            send()


def _hold(target: Any, send: Callable[[], Any]) -> bool:
    """Hold ``send`` when the calling thread batches for IOPub thread ``target``."""
    held = getattr(_local, "held", None)
    if held is None or getattr(_local, "target", None) is not target:
        return False
    held.append(send)
    return True


@contextmanager
def batched_iopub() -> Iterator[None]:
    """Hold this thread's IOPub messages and send them with one IOPub wake-up on exit.

    Nested uses join the outer batch. Set ``BIDLAB_IOPUB_BATCH=0`` to send each message
    as it comes (the stock behaviour; the benchmark's A/B switch).
    """
    if getattr(_local, "held", None) is not None or os.environ.get("BIDLAB_IOPUB_BATCH") == "0":
        yield
        return
    io_thread = iopub_thread()
    if io_thread is None:
        yield
        return
    route_schedule(io_thread, _hold)
    _local.held, _local.target = HeldSends(), io_thread
    try:
        yield
    finally:
        held, _local.held, _local.target = _local.held, None, None
        if held:
            stock_schedule(io_thread)(held)
