"""Controls generated from a learner's live options, and when each change took effect.

Each live scalar option becomes a widget: a log-scale slider for positive rates and
strengths (learning rate, regularization, priors, sample counts), a linear slider for a
bounded float, an int box or slider, a checkbox or a dropdown. A change calls
``learner.set(name=value)`` in the shell thread (validated there; an invalid value is
shown, not raised into the void) and remembers the option-set version it produced. The
pump later finds, in the learner's per-minibatch record, the first minibatch that ran
with that version and reports its step and the delay since the change.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import ipywidgets as W
import numpy as np

from bidlab.learn import Option

__all__ = ["OptionControls", "Applied", "ignored", "make_control", "refusal"]

#: Options shown by default only when asked for (file paths, record sizes, limits).
HIDDEN = frozenset({"checkpoint", "checkpoint_every", "record_size", "max_steps"})
#: Positive options that vary over decades: log-scale sliders.
LOG_NAMES = frozenset({"lrate", "l1", "l2", "alpha", "beta", "nsamps", "epsilon", "tau0",
                       "temperature", "t0"})


def _is_log(spec: Option, value: float) -> bool:
    if spec.name in LOG_NAMES and value > 0:
        return True
    return spec.low == 0 and spec.low_open and spec.high is None and value > 0


def _trial_values(spec: Option, value: Any) -> list[Any]:
    """A few values other than ``value`` that ``spec`` could take (to probe the learner)."""
    if value is None or isinstance(value, (tuple, list, np.ndarray)):
        return []  # no widget for these anyway
    if spec.type is bool:
        return [not value]
    if spec.choices is not None:
        return [c for c in spec.choices if c != value]
    if spec.type is int:
        return [int(value) + 1, int(value) - 1]
    if spec.type is float:
        v = float(value)
        return [v * 1.01, v * 0.99, v + 1, v - 1]
    return []


def refusal(learner: Any, name: str) -> str | None:
    """Why ``learner`` refuses every new value of option ``name`` (a full-batch model's
    ``val_every``), or None when it takes some: a control for it would only show errors.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import KMeans
    >>> lr = KMeans(n_clusters=2).learner(np.random.default_rng(0).random((20, 2)))
    >>> refusal(lr, "tol") is None
    True
    >>> print(refusal(lr, "val_every"))  # doctest: +ELLIPSIS
    LloydKMeansModel is full-batch: ... so val_every must stay 0
    """
    check = getattr(learner.opts, "check", None)
    if check is None:  # options that cannot be tried here (ranks' proxy): offer the control
        return None
    spec, value = learner.opts.specs[name], learner.opts.get(name)
    trials = _trial_values(spec, value)
    reason = None
    for trial in trials:
        try:
            check(**{name: trial})
            return None
        except ValueError as exc:  # OptionError, a bound or a validator
            reason = reason or str(exc)
    return reason


def ignored(learner: Any, name: str) -> str | None:
    """Why ``learner`` ignores option ``name`` as it is set up (the ``lrate`` of an updater
    that replaces the model by each pass's result), or None when the option acts.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import KMeans
    >>> X = np.random.default_rng(0).random((20, 2))
    >>> print(ignored(KMeans(n_clusters=2).learner(X), "lrate"))  # doctest: +ELLIPSIS
    the pass's result replaces the model (batch_mode='replace'); lrate is the step of ...
    >>> ignored(KMeans(n_clusters=2, algorithm="minibatch").learner(X), "lrate") is None
    True
    """
    parts = getattr(learner, "_components", None)  # the ranks' proxy: offer the control
    for part in parts() if parts is not None else ():
        why = part.inert_options().get(name)
        if why is not None:
            return why
    return None


def make_control(spec: Option, value: Any) -> W.ValueWidget | None:
    """The widget for one option (None when it has no sensible widget, e.g. a vector)."""
    desc = spec.name
    style = {"description_width": "90px"}
    if isinstance(value, tuple) or spec.type in ("path",):
        return None
    if spec.type is bool:
        return W.Checkbox(value=bool(value), description=desc, indent=False)
    if spec.type is str:
        if spec.choices is None:
            return None
        return W.Dropdown(options=list(spec.choices), value=value, description=desc,
                          style=style)
    if value is None:
        return None

    def slider(cls: type[W.ValueWidget], **kw: Any) -> W.ValueWidget:
        # its own Layout, made here: a Layout is a widget (a comm) of its own, so one made
        # for a text box that does not use it would stay open for the life of the kernel
        return cls(description=desc, style=style, layout=W.Layout(width="360px"),
                   continuous_update=False, **kw)

    if spec.type is int:
        lo = int(spec.low) if spec.low is not None else None
        hi = int(spec.high) if spec.high is not None else None
        if lo is not None and hi is not None and hi - lo <= 1000:
            return slider(W.IntSlider, value=int(value), min=lo, max=hi)
        # a box takes any value typed into it: the bounds are the option's own, else the
        # widest a box holds (a bounded box clamps what is typed, silently)
        lo = lo if lo is not None else -(2**31)
        hi = hi if hi is not None else 2**31 - 1
        return W.BoundedIntText(value=int(value), min=lo, max=hi, description=desc,
                                style=style, layout=W.Layout(width="220px"))
    value = float(value)
    if _is_log(spec, value):
        lo_e = math.floor(math.log10(value)) - 3
        hi_e = math.ceil(math.log10(value)) + 2
        if spec.low is not None and spec.low > 0:
            lo_e = max(lo_e, math.ceil(math.log10(spec.low)))
        if spec.high is not None and spec.high > 0:
            hi_e = min(hi_e, math.floor(math.log10(spec.high)))
        return slider(W.FloatLogSlider, value=value, base=10, min=lo_e, max=hi_e, step=0.05,
                      readout_format=".3g")
    if spec.low is not None and spec.high is not None:
        return slider(W.FloatSlider, value=value, min=float(spec.low), max=float(spec.high),
                      step=(spec.high - spec.low) / 200, readout_format=".3g")
    return W.FloatText(value=value, description=desc, style=style,
                       layout=W.Layout(width="220px"))


@dataclass
class Applied:
    """One accepted control change and, once found in the record, where it took effect."""

    name: str
    value: Any
    version: int
    t_set: float  # perf_counter() when learner.set() returned
    step: int | None = None  # first minibatch that ran with it
    delay_s: float | None = None  # from the change to that minibatch's start


class OptionControls:
    """Widgets for a learner's live options; changes go to ``learner.set``.

    Parameters
    ----------
    learner
        a :class:`bidlab.learn.Learner`.
    names
        the options to show (default: every live scalar option but :data:`HIDDEN`
        and those the learner refuses to change, see :func:`refusal`; naming one of
        those is a ValueError that gives the learner's reason).
    """

    def __init__(self, learner: Any, names: Iterable[str] | None = None) -> None:
        self.learner = learner
        specs = learner.opts.specs
        if names is None:
            names = [n for n, s in specs.items()
                     if s.live and n not in HIDDEN and ignored(learner, n) is None
                     and refusal(learner, n) is None]
        else:
            names = list(names)
            unknown = [n for n in names if n not in specs]
            if unknown:
                raise ValueError(f"unknown option(s) {unknown}: the learner's options are "
                                 f"{sorted(specs)}")
            for name in names:
                reason = refusal(learner, name)
                if reason is not None:
                    raise ValueError(f"no control for {name!r}: the learner refuses to "
                                     f"change it ({reason})")
                reason = ignored(learner, name)
                if reason is not None:
                    raise ValueError(f"no control for {name!r}: the learner ignores it "
                                     f"({reason})")
        self.widgets: dict[str, W.ValueWidget] = {}
        for name in names:
            w = make_control(specs[name], learner.opts.get(name))
            if w is None:
                continue
            w.observe(self._changed, names="value")
            self.widgets[name] = w
        self.pending: list[Applied] = []
        self.applied: list[Applied] = []
        self.message = ""  # the last error or confirmation, shown by the dashboard
        self._lock = threading.Lock()
        self._quiet = threading.local()  # set while this thread shows a learner's value
        self._synced_version = learner.opts.version

    # -- shell thread -------------------------------------------------------------------
    def _changed(self, change: dict[str, Any]) -> None:
        if getattr(self._quiet, "on", False):  # this thread is showing the learner's value
            return
        w = change["owner"]
        name = w.description
        try:
            version = self.learner.set(**{name: change["new"]})
        except ValueError as exc:  # OptionError: tell the user why, keep the old value
            self.message = f"{exc}"
            self._show(w, self.learner.opts.get(name))  # ... in the control too
            return
        with self._lock:
            self.pending.append(Applied(name, change["new"], version, time.perf_counter()))
        self.message = f"{name} = {change['new']:.4g} queued" if isinstance(
            change["new"], float) else f"{name} = {change['new']} queued"

    # -- pump thread --------------------------------------------------------------------
    def poll(self) -> list[Applied]:
        """Move pending changes whose first minibatch is in the record to ``applied``."""
        with self._lock:
            if not self.pending:
                return []
            pending = list(self.pending)
        last = self.learner.record.last()
        if last is None or last["opts_version"] < min(a.version for a in pending):
            return []
        rec = self.learner.record.as_dict()
        done = []
        for a in pending:
            hit = np.nonzero(rec["opts_version"] >= a.version)[0]
            if hit.size == 0:
                continue
            i = int(hit[0])
            start = rec["time"][i - 1] if i > 0 else rec["time"][i]
            a.step = int(rec["step"][i])
            a.delay_s = max(0.0, float(start) - a.t_set)
            done.append(a)
        with self._lock:
            self.pending = [a for a in self.pending if a not in done]
            self.applied.extend(done)
            del self.applied[:-200]
        if done:
            a = done[-1]
            self.message = (f"{a.name} = {a.value:.4g} took effect at step {a.step} "
                            f"({a.delay_s * 1e3:.0f} ms after the change)"
                            if isinstance(a.value, float) else
                            f"{a.name} = {a.value} took effect at step {a.step}")
        return done

    def sync_from_learner(self) -> None:
        """Show values set elsewhere (``learner.opts.x = ...`` or ``learner.set`` in a
        cell); cheap when no option changed since the last call (the pump calls it every
        tick). A value outside a control's range widens the range; a vector (one value per
        row: no scalar control can show it) disables the control until a scalar is set
        again; None, or a value a log slider cannot show (<= 0), leaves it as it is."""
        version = self.learner.opts.version
        if version == self._synced_version:
            return
        self._synced_version = version
        for name, w in self.widgets.items():
            self._show(w, self.learner.opts.get(name))

    def _show(self, w: W.ValueWidget, value: Any) -> None:
        """Put the learner's ``value`` in control ``w`` without sending it back to the
        learner (only this thread's change is held back: a user's change made meanwhile in
        the shell thread still reaches the learner, and the next sync shows it)."""
        vector = isinstance(value, (tuple, list, np.ndarray))
        if w.disabled != vector:
            w.disabled = vector
        if value is None or vector:
            return
        if isinstance(w, W.FloatLogSlider):
            if not value > 0:
                return
            e = math.log10(value)
            bounds = {"min": min(w.min, math.floor(e)), "max": max(w.max, math.ceil(e))}
        elif hasattr(w, "min") and hasattr(w, "max") and not isinstance(value, bool):
            bounds = {"min": min(w.min, value), "max": max(w.max, value)}
        else:
            bounds = {}
        if w.value == value and all(getattr(w, k) == v for k, v in bounds.items()):
            return
        self._quiet.on = True
        try:
            with w.hold_sync():
                for k, v in bounds.items():  # widen first: a bounded widget clamps
                    if getattr(w, k) != v:
                        setattr(w, k, v)
                w.value = value
        except Exception:  # a value this widget cannot hold (e.g. not a dropdown choice)
            pass
        finally:
            self._quiet.on = False

    def box(self) -> W.Box:
        return W.VBox(list(self.widgets.values()))
