"""Observers: host snapshots of a training run, delivered at a bounded rate, never stalling it.

``learner.observe(callback, rate=10, views={...})`` subscribes ``callback(snapshot)``.
At most ``rate`` times a second, at a minibatch boundary, the training thread copies the
metrics and the requested model views into the subscription's *back* host buffers and
marks them ready; a separate publisher thread swaps front and back under a lock and calls
the callback with the front ones. The training thread therefore never waits for a
callback: a slow callback just sees fewer, newer snapshots.

On a GPU the view is first copied device-to-device on the training stream (a consistent
picture of the model at that boundary), then to pinned host memory on a separate stream,
asynchronously; the publisher waits for that copy's event, not the training thread.

Views (``views={name: spec}``):

* ``i`` -- the whole model matrix ``i``;
* ``(i, rows)`` -- its first ``rows`` rows (e.g. the top of a topics x words matrix);
* ``(i, slice)`` -- a row slice;
* a callable ``f(model) -> Mat or array`` evaluated in the training thread (keep it cheap).

A snapshot's arrays belong to the subscription and are reused: copy what you keep.
When training ends (done, stopped or failed) every subscriber gets a final snapshot
with ``state`` set and, on failure, ``error`` holding the traceback text.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bidlab import backend

__all__ = ["Snapshot", "Subscription", "ObserverHub", "call_keeping_errors"]

#: a caller's last exceptions kept by :func:`call_keeping_errors`
ERRORS_KEPT = 10


def call_keeping_errors(errors: list[BaseException], fn: Callable[..., Any],
                        *args: Any) -> bool:
    """``fn(*args)``; an exception goes into ``errors`` (the last :data:`ERRORS_KEPT`
    kept) instead of up, so one broken callback or view does not stop the others that
    share its loop. True when ``fn`` returned.

    Examples
    --------
    >>> errors = []
    >>> call_keeping_errors(errors, int, "7"), call_keeping_errors(errors, int, "x")
    (True, False)
    >>> type(errors[0]).__name__
    'ValueError'
    """
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - kept for the caller to show
        errors.append(exc)
        del errors[:-ERRORS_KEPT]
        return False
    return True


@dataclass
class Snapshot:
    """What an observer receives: metrics (floats, strings) and host copies of model views."""

    metrics: dict[str, Any]
    views: dict[str, np.ndarray]
    state: str
    step: int
    error: str | None = None


@dataclass
class _Buffer:
    metrics: dict[str, Any] = field(default_factory=dict)
    views: dict[str, np.ndarray] = field(default_factory=dict)
    events: list[Any] = field(default_factory=list)
    state: str = ""
    step: int = 0
    error: str | None = None


class Subscription:
    """One observer: its callback, rate, views and double buffer.

    Attributes
    ----------
    delivered
        snapshots handed to the callback so far.
    errors
        exceptions the callback raised (the last 10); it stays subscribed. The first one
        is also shown as a RuntimeWarning.
    """

    def __init__(self, hub: ObserverHub, callback: Callable[[Snapshot], Any], rate: float,
                 views: dict[str, Any] | None) -> None:
        if not callable(callback):
            raise TypeError(f"observe() needs a callable; got {type(callback).__name__}")
        if not isinstance(rate, numbers.Real) or isinstance(rate, bool) or not rate > 0:
            raise ValueError(f"The 'rate' of an observer must be a float > 0 (calls per "
                             f"second); got {rate!r} instead.")
        self.hub = hub
        self.callback = callback
        self.rate = float(rate)
        self.interval = 1.0 / self.rate
        self.views = dict(views or {})
        for name, spec in self.views.items():
            _check_view(name, spec)
        self.next_due = 0.0
        self.sent_state = ""  # the state of the last snapshot captured for it
        self.delivered = 0
        self.errors: list[BaseException] = []
        self._warned = False  # its first exception was shown (a RuntimeWarning)
        self.active = True
        self._front = _Buffer()
        self._back = _Buffer()
        self._ready = False
        self._final = False
        self._dev: dict[str, Any] = {}  # device-side staging (GPU)
        self._copy_event: dict[str, Any] = {}
        self._spare: dict[str, Any] = {}  # the other buffer's host view, made beside the first

    def cancel(self) -> None:
        """Unsubscribe (no further calls)."""
        self.active = False
        self.hub._remove(self)

    # -- training thread ------------------------------------------------------------------
    def capture(self, metrics: dict[str, Any], model: Any, state: str, step: int,
                error: str | None = None, final: bool = False) -> None:
        """Copy metrics and views into the back buffer and mark it ready."""
        with self.hub._lock:
            back = self._back
            back.metrics = dict(metrics)
            back.state, back.step, back.error = state, step, error
            self.sent_state = state
            back.events = []
            for name, spec in self.views.items():
                try:
                    self._capture_view(back, name, spec, model)
                except Exception as exc:  # a bad view must not kill training
                    back.error = (back.error or "") + f"view {name!r}: {exc!r}"
            self._ready = True
            self._final = self._final or final
            self.hub._cond.notify_all()

    def _capture_view(self, back: _Buffer, name: str, spec: Any, model: Any) -> None:
        src = _resolve_view(spec, model)
        if src is None:
            return
        host = back.views.get(name)
        if host is None or host.shape != src.shape or host.dtype != src.dtype:
            # Front and back get their host buffers together, so that no later capture
            # (the first one into the other buffer) allocates.
            spare = self._spare.pop(name, None)
            if spare is None or spare.shape != src.shape or spare.dtype != src.dtype:
                spare = _host_buffer(src)
                self._spare[name] = _host_buffer(src)
            host = back.views[name] = spare
        if not backend.is_cupy_array(src):
            np.copyto(host, src)
            return
        cp = backend.cupy()
        prev = self._copy_event.get(name)
        if prev is not None and not prev.done:
            # the previous asynchronous copy is still running: wait for it (it is short)
            prev.synchronize()
        dev = self._dev.get(name)
        if dev is None or dev.shape != src.shape or dev.dtype != src.dtype:
            dev = self._dev[name] = backend.empty(src.shape, src.dtype, cp)
        cp.copyto(dev, src)  # a consistent device copy, on the training stream
        ready = cp.cuda.get_current_stream().record()
        stream = self.hub.copy_stream()
        stream.wait_event(ready)
        dev.get(stream=stream, out=host, blocking=False)
        ev = stream.record()
        self._copy_event[name] = ev
        back.events.append(ev)

    # -- publisher thread -----------------------------------------------------------------
    def _take(self) -> _Buffer | None:
        """Swap front and back when back is ready (caller holds the hub lock)."""
        if not self._ready:
            return None
        self._front, self._back = self._back, self._front
        self._ready = False
        return self._front

    def _deliver(self, buf: _Buffer) -> None:
        for ev in buf.events:
            ev.synchronize()
        snap = Snapshot(buf.metrics, buf.views, buf.state, buf.step, buf.error)
        try:
            self.callback(snap)
        except BaseException as exc:  # noqa: BLE001 - even SystemExit: the others go on
            if not self.errors and not self._warned:
                self._warned = True
                _warn_failed(self, exc)
            self.errors.append(exc)
            del self.errors[:-10]
        self.delivered += 1


def _warn_failed(sub: Subscription, exc: BaseException) -> None:
    """Say once per subscription that its callback raised (a RuntimeWarning naming where):
    else a broken observer failed unseen, in the publisher thread."""
    try:
        name = getattr(sub.callback, "__qualname__", None) or repr(sub.callback)
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        warnings.warn(
            f"observer {name} of learner {sub.hub.name!r} raised {what}{where}. Training "
            "goes on and the observer stays subscribed; its exceptions are kept in "
            "subscription.errors (the last 10). This is said once per observer.",
            RuntimeWarning, stacklevel=1)
    except Exception:  # noqa: BLE001 - warnings made errors, a str() that raises
        pass


def _check_view(name: str, spec: Any) -> None:
    if callable(spec) or isinstance(spec, int):
        return
    if (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], int)
            and isinstance(spec[1], (int, slice))):
        return
    raise ValueError(f"view {name!r}: give a model-matrix index i, (i, rows), (i, slice) or "
                     f"a callable(model); got {spec!r}")


def _resolve_view(spec: Any, model: Any) -> Any:
    if callable(spec):
        out = spec(model)
        if out is None or isinstance(out, np.ndarray) or backend.is_cupy_array(out):
            return out  # an array's own ``.data`` is its buffer, not a Mat's array
        return getattr(out, "data", out)
    if not model.modelmats:
        return None
    if isinstance(spec, int):
        return model.modelmats[spec].data
    i, rows = spec
    arr = model.modelmats[i].data
    return arr[:rows] if isinstance(rows, int) else arr[rows]


def _host_buffer(src: Any) -> np.ndarray:
    if backend.is_cupy_array(src):
        import cupyx

        buf = cupyx.empty_pinned(src.shape, dtype=src.dtype)
    else:
        buf = np.empty(src.shape, dtype=src.dtype)
    backend.allocations.record(buf.nbytes)
    return buf


class ObserverHub:
    """All subscriptions of one learner and the publisher thread that calls them."""

    def __init__(self, name: str = "learner") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._subs: list[Subscription] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self._delivering = False  # the publisher holds taken snapshots it has not delivered
        self._stream = None
        # the publisher holds the hub weakly between deliveries (a callback that refers to
        # its learner must not keep the learner, the hub and the thread alive for good):
        # once the hub is collected it is woken up to end
        weakref.finalize(self, _wake, self._cond)

    def copy_stream(self) -> Any:
        if self._stream is None:
            self._stream = backend.cupy().cuda.Stream(non_blocking=True)
        return self._stream

    def subscribe(self, callback: Callable[[Snapshot], Any], rate: float = 10.0,
                  views: dict[str, Any] | None = None) -> Subscription:
        sub = Subscription(self, callback, rate, views)
        with self._lock:
            self._subs.append(sub)
            self._ensure_thread()
        return sub

    def _remove(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    @property
    def subscriptions(self) -> list[Subscription]:
        with self._lock:
            return list(self._subs)

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._closed = False
            self._thread = threading.Thread(target=_publish_loop,
                                            args=(weakref.ref(self), self._cond), daemon=True,
                                            name=f"bidlab-observers-{self.name}")
            self._thread.start()

    # -- training thread ------------------------------------------------------------------
    def due(self, now: float) -> bool:
        """Cheap check: is any subscription due for a snapshot?"""
        for s in self._subs:
            if now >= s.next_due:
                return True
        return False

    def publish(self, now: float, metrics: dict[str, Any], model: Any, state: str,
                step: int) -> None:
        """Capture for every due subscription (the caller checked :meth:`due`)."""
        for s in list(self._subs):
            if s.active and now >= s.next_due:
                s.next_due = now + s.interval
                s.capture(metrics, model, state, step)

    def announce(self, now: float, metrics: dict[str, Any], model: Any, state: str,
                 step: int) -> float:
        """Capture for every subscription not yet sent ``state`` (a pause), each once it is
        due, so its rate holds; return when the next of those still waiting is due (inf:
        none waits)."""
        later = math.inf
        for s in list(self._subs):
            if not s.active or s.sent_state == state:
                continue
            if now >= s.next_due:
                s.next_due = now + s.interval
                s.capture(metrics, model, state, step)
            else:
                later = min(later, s.next_due)
        return later

    def final(self, metrics: dict[str, Any], model: Any, state: str, step: int,
              error: str | None) -> None:
        """Tell every subscriber how the run ended (done, stopped, failed)."""
        for s in list(self._subs):
            if s.active:
                s.capture(metrics, model, state, step, error, final=True)

    def close(self) -> None:
        """Stop the publisher thread (after it delivered what is ready)."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until every captured snapshot has been delivered (tests, final deliveries)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if not self._delivering and not any(s._ready for s in self._subs if s.active):
                    return True
            time.sleep(0.005)
        return False


def close_hub(ref: weakref.ref[ObserverHub]) -> None:
    """Close the hub ``ref`` refers to, if it is still there (a learner's finalizer: held
    weakly, as the hub's callbacks may refer to the learner)."""
    hub = ref()
    if hub is not None:
        hub._closed = True
        _wake(hub._cond)


def _wake(cond: threading.Condition) -> None:
    """Wake the publisher of a hub closed or collected, so that it ends. Never blocks: a
    finalizer runs in whatever thread collects, maybe one holding ``cond``; a publisher not
    woken sees it at the end of its wait (a second at most)."""
    if cond.acquire(blocking=False):
        try:
            cond.notify_all()
        finally:
            cond.release()


def _publish_loop(ref: weakref.ref[ObserverHub], cond: threading.Condition) -> None:
    """The publisher thread: deliver what is ready; end when the hub is closed or gone.

    It holds the hub (``ref``) only while it takes or delivers snapshots, never while it
    waits, so the hub, its subscriptions and what their callbacks refer to can be
    collected."""
    while True:
        with cond:
            work = []
            while True:
                hub = ref()
                if hub is None or hub._closed:
                    return
                work = [(s, s._take()) for s in hub._subs if s.active and s._ready]
                if work:
                    hub._delivering = True
                    break
                hub = None  # not held while waiting
                cond.wait(timeout=1.0)
        try:
            for sub, buf in work:
                if buf is not None and sub.active:
                    sub._deliver(buf)
        finally:
            # drop the delivered subscriptions: a cancelled one (a closed view) must
            # not stay reachable from this thread until the next delivery
            work = sub = buf = None  # type: ignore[assignment]
            with cond:
                hub._delivering = False
            hub = None


def format_error(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
