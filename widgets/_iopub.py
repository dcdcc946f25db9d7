"""One IOPub wake-up per pump tick instead of one per comm message: :func:`batched_iopub`.

Why: in ipykernel 7 every message a thread sends on IOPub (every comm message of a widget
or a bokeh patch) is queued for the kernel's IOPub thread and wakes it through an inproc
zmq socket. A pump tick of a dashboard and a bubble chart sends ~10 messages (a bokeh
patch alone is 5, see :mod:`._bokeh`), so at 10 ticks a second the IOPub thread woke ~100
times a second, and each wake-up takes the GIL from the training thread, which then
waits to get it back after its next GIL-releasing call (measured: ~120 voluntary context
switches a second on the training thread with a dashboard, ~10 without). Inside
:func:`batched_iopub` the messages the *current thread* sends are held and handed to the
IOPub thread as one event at the end: one wake-up per tick, the same messages in the same
order on the wire, a few milliseconds later.

Outside an IPython kernel (plain Python, tests, a kernel without an IOPub thread) it does
nothing. Other threads' messages (the shell's replies, ``print`` from a cell) are never
held.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["HeldSends", "batched_iopub", "iopub_thread"]

_local = threading.local()
_install_lock = threading.Lock()


def iopub_thread() -> Any | None:
    """The running kernel's ``IOPubThread`` (None outside an ipykernel kernel)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    socket = getattr(getattr(shell, "kernel", None), "iopub_socket", None)
    thread = getattr(socket, "io_thread", None)
    if thread is None or not callable(getattr(thread, "schedule", None)):
        return None
    return thread


class HeldSends(list):
    """The sends one :func:`batched_iopub` held, in order; calling it sends them all (in
    the IOPub thread: this is the one event the IOPub thread is woken for)."""

    def __call__(self) -> None:
        for send in self:
            send()


def _install(io_thread: Any) -> None:
    """Give ``io_thread`` a ``schedule`` that holds a batching thread's sends (once).

    The stock method is kept as ``io_thread._bidlab_stock_schedule``; everything not held
    goes through it unchanged.
    """
    with _install_lock:
        if getattr(io_thread, "_bidlab_stock_schedule", None) is not None:
            return
        io_thread._bidlab_stock_schedule = io_thread.schedule

        def schedule(f: Callable[[], Any]) -> None:
            held = getattr(_local, "held", None)
            if held is not None and getattr(_local, "io_thread", None) is io_thread:
                held.append(f)
            else:
                io_thread._bidlab_stock_schedule(f)

        io_thread.schedule = schedule  # an instance attribute: send_multipart calls it


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
    _install(io_thread)
    _local.held, _local.io_thread = HeldSends(), io_thread
    try:
        yield
    finally:
        held, _local.held, _local.io_thread = _local.held, None, None
        if held:
            io_thread._bidlab_stock_schedule(held)
