"""The pump: the one thread that turns training snapshots into widget and chart updates.

Why: the training thread must never wait for the browser, and ipywidgets / bokeh state
must be touched by one thread at a bounded rate (unthrottled updates stall the kernel, and
bokeh documents are not thread-safe). So:

* the training thread only *produces* snapshots, through the learner's observer API
  (``learner.observe``); the observer's callback just stores the newest one in a slot;
* one :class:`Pump` per learner ticks at most ``rate`` (default 10) times a second and
  calls each attached view's ``render(snapshot)`` under :data:`DOC_LOCK`;
* a view is attached under a key (its kind): attaching a new view with the same key
  closes the old one, so re-running a notebook cell never leaves two loops behind;
* the pump thread is a daemon with a ``threading.Event``; :meth:`Pump.stop` joins it, and
  it stops by itself when its last view is closed;
* a view made with ``idle=True`` is also drawn from the model itself while the learner is
  not training (a trained model, or one edited or loaded since its last run sends no
  snapshot): whenever its step or the shapes of the asked-for views differ from the
  picture the view last drew, or when an edit was applied to the model since (an LDA
  model's topic edits; a model that never trained is left as the view drew it when it was
  made, until its shapes change or it is edited).

A render that raises does not stop the pump: the error is kept in the view's ``errors``
and the next frames are drawn; a :class:`PumpedView` shows the latest one (one line, each
distinct error once) under its widgets, so a view that cannot draw says why.
"""

from __future__ import annotations

import html
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn import Snapshot
from bidlab.learn.observers import _resolve_view, call_keeping_errors

from ._bokeh import DOC_LOCK
from ._iopub import batched_iopub

__all__ = ["MAX_RATE", "Pump", "PumpedView", "View", "close_widgets", "error_line", "pump_for",
           "state_text"]

MAX_RATE = 10.0  # updates per second: what a browser page renders without falling behind

_PUMPS: weakref.WeakKeyDictionary[Any, Pump] = weakref.WeakKeyDictionary()
_PUMPS_LOCK = threading.Lock()


def check_rate(rate: Any) -> float:
    """``rate`` as a float, or a ValueError when it is not in (0, :data:`MAX_RATE`]."""
    try:
        ok = not isinstance(rate, bool) and 0 < float(rate) <= MAX_RATE
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"the pump rate must be in (0, {MAX_RATE:g}] updates per second "
                         f"(the browser cannot use more); got {rate!r}")
    return float(rate)


def pump_for(learner: Any, rate: float = MAX_RATE) -> Pump:
    """The learner's pump (created on first use): one pump thread per learner.

    One pump renders every view of the learner, so ``rate`` is the learner's: asking for
    another rate (a view made with it) changes it from the pump's next tick on, for every
    view. A rate outside (0, :data:`MAX_RATE`] is refused with a ValueError.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import KMeans
    >>> lr = KMeans(n_clusters=2).learner(np.random.default_rng(0).random((20, 2)))
    >>> pump_for(lr, rate=2).rate, pump_for(lr, rate=5).rate
    (2.0, 5.0)
    >>> pump_for(lr, rate=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the pump rate must be in (0, 10] updates per second ...; got 0
    """
    rate = check_rate(rate)
    with _PUMPS_LOCK:
        pump = _PUMPS.get(learner)
        if pump is None or pump.closed:
            pump = _PUMPS[learner] = Pump(learner, rate)
        pump.rate = rate
        return pump


def _edit_stamp(model: Any) -> Any:
    """What changes with each edit applied to ``model`` (an LDA model's topic edits), so an
    idle model edited in place is drawn again; None for a model without edits."""
    log = getattr(model, "topic_edit_log", None)
    return (len(log), id(log[-1])) if log else None


def state_text(snap: Snapshot) -> str:
    """A snapshot's state for a view's status line (HTML): a failed run's state is followed
    by the last line of its error (``FloatingPointError: ...``), escaped.

    Examples
    --------
    >>> state_text(Snapshot({}, {}, "failed", 3, "Traceback (...)\\nValueError: x < 0"))
    "failed: <span style='color:#b00'>ValueError: x &lt; 0</span>"
    """
    text = html.escape(str(snap.state))
    lines = (snap.error or "").strip().splitlines()
    if snap.state == "failed" and lines:
        text += f": <span style='color:#b00'>{html.escape(lines[-1])}</span>"
    return text


def error_line(exc: BaseException) -> str:
    """The one line (HTML, escaped) that tells a view's user it could not draw a frame.

    Examples
    --------
    >>> error_line(ValueError("x < 0\\nmore"))  # doctest: +ELLIPSIS
    "<span style='color:#b00'>could not draw a frame: ValueError: x &lt; 0 (...)</span>"
    """
    lines = str(exc).strip().splitlines()
    text = type(exc).__name__ + (f": {lines[0]}" if lines else "")
    if len(text) > 300:
        text = text[:299] + "…"
    return (f"<span style='color:#b00'>could not draw a frame: {html.escape(text)} (the "
            "next frames are drawn; the errors are kept in .view.errors)</span>")


def _closed_render(snap: Snapshot | None) -> None:
    """What a closed view renders: nothing."""


def close_widgets(*widgets: Any) -> None:
    """Close ``widgets`` and every widget inside them (a box's children, recursively, and
    each widget's ``layout`` and ``style``, which ``close()`` leaves open).

    A widget left open stays in ipywidgets' registry for the life of the kernel, with its
    callbacks (a button's ``on_click``) and through them the view and its learner; a
    layout or style left open is one more comm per widget each time a cell is re-run.

    Examples
    --------
    >>> import ipywidgets as W
    >>> inner = W.Button()
    >>> box = W.VBox([W.HBox([inner])])
    >>> close_widgets(box)
    >>> inner.comm is None, inner.layout.comm is None, inner.style.comm is None
    (True, True, True)
    """
    import ipywidgets as W

    seen: set[int] = set()
    stack = [w for w in widgets if w is not None]
    while stack:
        w = stack.pop()
        if id(w) in seen:
            continue
        seen.add(id(w))
        stack.extend(getattr(w, "children", None) or ())
        stack.extend(part for part in (getattr(w, "layout", None), getattr(w, "style", None))
                     if isinstance(part, W.Widget))
        w.close()


@dataclass
class View:
    """One attached view: what it asks the observer for and how it renders.

    ``render(snapshot)`` runs in the pump thread with :data:`DOC_LOCK` held; it is called
    with the newest snapshot since the last tick (or None when no new one came, so views
    that poll the learner, e.g. for option changes, still tick). ``close()`` is called
    once when the view is detached. ``report(line)`` (set by :class:`PumpedView`) shows
    the latest error of a render as one line of HTML, once per distinct error.
    """

    key: str
    render: Callable[[Snapshot | None], Any]
    views: dict[str, Any] = field(default_factory=dict)
    close: Callable[[], Any] | None = None
    report: Callable[[str], Any] | None = None
    observer_rate: float = 2 * MAX_RATE
    idle: bool = False
    renders: int = 0
    errors: list[BaseException] = field(default_factory=list)
    _latest: Snapshot | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sub: Any = None
    _drawn: Any = None  # (step, view shapes) of the last snapshot rendered
    _idle_sig: Any = None  # (step, model matrix shapes) last looked at while idle
    _reported: BaseException | None = None  # the last error looked at by _report
    _shown: Any = None  # (type, message) of the error last reported

    def _key(self, snap: Snapshot) -> tuple[Any, ...]:
        return (snap.step, tuple(sorted((k, np.shape(v)) for k, v in snap.views.items())))

    def _store(self, snap: Snapshot) -> None:
        """Observer callback (publisher thread): keep a private copy of the newest snapshot."""
        copy = Snapshot(dict(snap.metrics), {k: v.copy() for k, v in snap.views.items()},
                        snap.state, snap.step, snap.error)
        with self._lock:
            self._latest = copy

    def _take(self) -> Snapshot | None:
        with self._lock:
            snap, self._latest = self._latest, None
            return snap


class Pump:
    """Ticks at most ``rate`` times a second; the only thread that renders views.

    Use :func:`pump_for` (one pump per learner) rather than building one directly.
    """

    def __init__(self, learner: Any, rate: float = MAX_RATE) -> None:
        self._learner = weakref.ref(learner)
        self.name = getattr(learner, "name", "learner")
        self.rate = check_rate(rate)  # read at every tick: a new rate applies at the next
        self.ticks = 0
        self.closed = False
        self._views: dict[str, View] = {}
        self._views_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- views ----------------------------------------------------------------------------
    def attach(self, view: View) -> View:
        """Attach ``view`` (closing one attached under the same key) and start ticking."""
        learner = self._learner()
        if learner is None:
            raise RuntimeError("the learner of this pump is gone")
        with self._views_lock:
            old = self._views.pop(view.key, None)
        if old is not None:
            self._close_view(old)
        view._sub = learner.observe(view._store, rate=view.observer_rate, views=view.views)
        with self._views_lock:
            self._views[view.key] = view
        self._ensure_thread()
        return view

    def detach(self, key: str) -> None:
        """Close the view attached under ``key``; stop the thread when none is left."""
        with self._views_lock:
            view = self._views.pop(key, None)
            empty = not self._views
        if view is not None:
            self._close_view(view)
        if empty:
            self.stop()

    def views(self) -> dict[str, View]:
        with self._views_lock:
            return dict(self._views)

    def _close_view(self, view: View) -> None:
        if view._sub is not None:
            view._sub.cancel()
            view._sub = None
        if view.close is not None:
            with DOC_LOCK:
                try:
                    view.close()
                except Exception as exc:  # closing must go on for the other views
                    view.errors.append(exc)
        # The observers' publisher thread may hold the cancelled subscription (whose
        # callback is view._store) until its next delivery: the view lets go of its owner,
        # so a closed view and its learner can be collected.
        view.render, view.close, view._latest = _closed_render, None, None
        view.report = view._reported = None

    # -- thread ---------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _ensure_thread(self) -> None:
        if self.alive:
            return
        self._stop.clear()
        self.closed = False
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"bidlab-pump-{self.name}")
        self._thread.start()

    def tick(self) -> None:
        """One round: render every view with its newest snapshot (pump thread only).

        The round's comm messages leave with one IOPub wake-up (see :mod:`._iopub`).
        """
        # DOC_LOCK is held until the tick's held messages are handed to IOPub (the inner
        # context exits first): another thread's document change (a reload's resync, a
        # selection) is then sent before or after the whole tick, in the order the
        # documents changed. Taken per view instead, a resync could go out between a
        # stream and the tick's send, and the page would apply that row twice.
        with DOC_LOCK, batched_iopub():
            for view in list(self.views().values()):
                snap = view._take()
                if snap is None and view.idle:
                    snap = self._idle_snapshot(view)
                if snap is not None:
                    view._drawn = view._key(snap)
                if call_keeping_errors(view.errors, view.render, snap):
                    view.renders += 1
                self._report(view)
        self.ticks += 1

    @staticmethod
    def _report(view: View) -> None:
        """Show the view's latest error through its ``report`` hook, unless it is the one
        shown last (a render failing at every tick says it once)."""
        last = view.errors[-1] if view.errors else None
        if last is None or last is view._reported or view.report is None:
            return
        view._reported = last
        sig = (type(last), str(last))
        if sig == view._shown:
            return
        try:
            view.report(error_line(last))
        except Exception:  # noqa: BLE001 - the error stays in view.errors
            return
        view._shown = sig

    def _idle_snapshot(self, view: View) -> Snapshot | None:
        """The model as it is now, for a view whose picture is not of it, while the learner
        is not training (else None: a running or paused learner sends snapshots)."""
        learner = self._learner()
        if learner is None or learner.state in ("running", "paused"):
            return None
        model = learner.model
        if not getattr(model, "initialised", bool(getattr(model, "modelmats", None))):
            return None
        # a cheap look first: the views are resolved (a k x V topic table, ...) only when
        # the step, a model matrix's shape or the model's edits moved since the last look,
        # not 10 times a second while the learner sits idle
        stamp = _edit_stamp(model)
        sig = (int(learner.step), tuple(np.shape(m.data) for m in model.modelmats), stamp)
        if sig == view._idle_sig:
            return None
        # an edit applied to the idle model (a word prior, a merge and a split) may leave
        # the step and the shapes as they were: drawn again all the same
        edited = view._idle_sig is not None and view._idle_sig[2] != stamp
        view._idle_sig = sig
        try:
            arrays = {name: _resolve_view(spec, model) for name, spec in view.views.items()}
        except Exception as exc:  # noqa: BLE001 - shown as the view's error, as a render's
            view.errors.append(exc)
            del view.errors[:-10]
            return None
        if any(a is None for a in arrays.values()):
            return None
        step = int(learner.step)
        shapes = tuple(sorted((k, np.shape(a)) for k, a in arrays.items()))
        if view._drawn is None and step == 0:  # never trained: as the view was made
            view._drawn = (step, shapes)
        if (step, shapes) == view._drawn and not edited:
            return None
        views = {k: np.array(backend.to_host(a)) for k, a in arrays.items()}
        return Snapshot(dict(learner.metrics), views, learner.state, step, None)

    def _loop(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            self.tick()
            interval = 1.0 / self.rate
            due += interval
            now = time.monotonic()
            # A tick up to one interval late keeps its place on the grid, so the ticks
            # still average ``rate`` a second (a busy machine delays a tick by tens of ms);
            # later than that, the grid moves on: lost ticks are never made up in a burst.
            if due < now - interval:
                due = now
            # at least half an interval between ticks, even right after a late one
            if self._stop.wait(max(due - now, interval / 2)):
                break

    def stop(self, timeout: float = 5.0) -> None:
        """Stop ticking and join the thread (views stay attached; see :meth:`close`)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def close(self) -> None:
        """Detach every view and stop the thread."""
        for key in list(self.views()):
            self.detach(key)
        self.stop()
        self.closed = True


class PumpedView:
    """What every live view shares: it displays ``self.widget`` and, when closed, detaches
    its :class:`View` from the learner's pump (the pump stops once nothing is attached and
    calls the view's ``close`` hook to close its widgets).

    Subclasses set ``widget``, ``pump``, ``view`` and ``_closed`` in their constructor.
    """

    widget: Any
    pump: Pump
    _closed: bool
    _view: View

    @property
    def view(self) -> View:
        """The :class:`View` attached to the pump; setting it hooks its ``report`` to
        :meth:`show_error`."""
        return self._view

    @view.setter
    def view(self, view: View) -> None:
        if view.report is None:
            view.report = self.show_error
        self._view = view

    def show_error(self, line: str) -> None:
        """Show ``line`` (HTML: a render's error) under the view's widgets, in place of the
        one shown before (pump thread, with :data:`DOC_LOCK` held)."""
        import ipywidgets as W

        shown = getattr(self, "error_line", None)
        if shown is None:
            shown = self.error_line = W.HTML()
            box = self.widget  # a row of columns: the line goes under its last column
            if not isinstance(box, W.VBox):
                box = next((c for c in reversed(box.children) if isinstance(c, W.VBox)), box)
            box.children = (*box.children, shown)
        shown.value = line

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def close(self) -> None:
        """Stop updating this view and close its widgets (idempotent)."""
        if not self._closed:
            self.pump.detach(self.view.key)
