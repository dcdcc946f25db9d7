"""Every use of ipykernel's private API, in one place: the kernel's IOPub thread.

:mod:`._iopub` holds a thread's IOPub sends and hands them over as one event. For that
it gives the kernel's ``IOPubThread`` an instance ``schedule`` (:func:`route_schedule`),
relying on ipykernel 7:

* ``kernel.iopub_socket`` is a ``BackgroundSocket`` whose ``io_thread`` is the
  ``IOPubThread``;
* ``IOPubThread.schedule(f)`` queues ``f`` to run in the IOPub thread, and
  ``IOPubThread.send_multipart`` sends through ``self.schedule``.

The ``viz`` extra pins ipykernel below its next major version; :func:`missing_hooks`
says what a newer release changed (the test suite runs it).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["LIBRARY", "iopub_thread", "missing_hooks", "route_schedule", "stock_schedule"]

LIBRARY = "ipykernel"

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


def route_schedule(io_thread: Any, hold: Callable[[Any, Callable[[], Any]], bool]) -> None:
    """Give ``io_thread`` a ``schedule`` that first offers each send to
    ``hold(io_thread, f)``; a send it does not take (False) is scheduled as before.

    Done once per thread; the stock method is kept as ``io_thread._bidlab_stock_schedule``
    (see :func:`stock_schedule`).
    """
    with _install_lock:
        if getattr(io_thread, "_bidlab_stock_schedule", None) is not None:
            return
        io_thread._bidlab_stock_schedule = io_thread.schedule

        def schedule(f: Callable[[], Any]) -> None:
            if not hold(io_thread, f):
                io_thread._bidlab_stock_schedule(f)

        io_thread.schedule = schedule  # an instance attribute: send_multipart calls it


def stock_schedule(io_thread: Any) -> Callable[[Callable[[], Any]], None]:
    """``io_thread``'s own ``schedule`` (the one :func:`route_schedule` replaced)."""
    return getattr(io_thread, "_bidlab_stock_schedule", None) or io_thread.schedule


def _params(func: Any) -> list[str] | None:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


def missing_hooks() -> list[str]:
    """What this module relies on that the installed ipykernel lacks or changed, one line
    each naming the library, its version and the hook (empty: everything is in place)."""
    from importlib.metadata import version

    try:
        from ipykernel import iostream
        from ipykernel.kernelbase import Kernel
    except ImportError as exc:
        return [f"{LIBRARY} is not importable: {exc}"]
    where = f"{LIBRARY} {version(LIBRARY)}"
    problems = []
    if not hasattr(Kernel, "iopub_socket"):
        problems.append(f"{where}: hook Kernel.iopub_socket is gone")
    sock = getattr(iostream, "BackgroundSocket", None)
    if sock is None or "io_thread" not in (_params(sock.__init__) or []):
        problems.append(f"{where}: hook BackgroundSocket(io_thread) is gone or changed: "
                        f"{_params(getattr(sock, '__init__', None))}")
    thread = getattr(iostream, "IOPubThread", None)
    if thread is None:
        return [*problems, f"{where}: hook ipykernel.iostream.IOPubThread is gone"]
    found = _params(getattr(thread, "schedule", None))
    if found != ["self", "f"]:
        problems.append(f"{where}: hook IOPubThread.schedule(self, f) changed: parameters "
                        f"{found}")
    send = getattr(thread, "send_multipart", None)
    try:
        source = inspect.getsource(send) if send is not None else ""
    except (OSError, TypeError):
        source = ""
    if "self.schedule(" not in source:
        problems.append(f"{where}: hook IOPubThread.send_multipart no longer sends through "
                        f"self.schedule")
    return problems
