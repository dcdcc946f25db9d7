"""``Dashboard(learner)``: run, watch and steer a learner from one notebook cell.

Shows start / pause / resume / stop buttons, the state, a progress bar, live training and
validation score curves, throughput (samples/s, GFLOP/s, MB/s), cache bytes and free GPU
memory, and controls generated from the learner's live options. A control change goes to
``learner.set`` and applies at the next minibatch; the dashboard then says at which step
it took effect and how long after the change (read from the learner's per-minibatch
record).

All widget and chart updates come from the learner's pump thread (see :mod:`._pump`);
buttons and controls only call the learner. ``Dashboard(learner)`` again (a re-run cell)
replaces the previous dashboard of that learner, and :meth:`Dashboard.close` detaches it.
"""

from __future__ import annotations

import html
import math
import time
import warnings
from collections.abc import Iterable
from typing import Any

import ipywidgets as W

from bidlab.lab.snapshot import dashboard_class
from bidlab.learn import Snapshot

from ._bokeh import LiveBokeh
from ._charts import legend_html, score_figure, stream_row
from ._controls import OptionControls
from ._pump import MAX_RATE, PumpedView, View, check_rate, close_widgets, pump_for

__all__ = ["Dashboard"]

# The throughput line is rewritten at most this often (and at once on a state change): it
# is read, not watched, and the learner refreshes its rates every 0.25 s anyway. A line of
# page text rewritten at the pump's 10 Hz costs the browser noticeable work.
STATS_PERIOD_S = 0.25


def _fmt(x: Any, unit: str = "", digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{digits}g}{unit}"


def _bytes(n: Any) -> str:
    if n is None:
        return "–"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TB"


class Dashboard(PumpedView):
    """A live dashboard for ``learner`` (display it: it is the last expression of a cell).

    Parameters
    ----------
    learner
        a :class:`bidlab.learn.Learner`.
    controls
        the options to make controls for (default: every live scalar option).
    rate
        updates per second, in (0, 10]; a ValueError otherwise. One pump renders all
        the views of a learner, so this sets the rate of its other views too.
    key
        pump slot; a second ``Dashboard`` with the same learner and key replaces the
        first (so re-running a cell never leaves two update loops).
    """

    def __init__(self, learner: Any, controls: Iterable[str] | None = None,
                 rate: float = MAX_RATE, key: str = "dashboard") -> None:
        check_rate(rate)  # before any widget is made
        self.learner = learner
        self.controls = OptionControls(learner, controls)
        self.points = 0  # rows streamed into the score chart
        self._last_step = -1
        self._stats_time = -math.inf  # time.monotonic() of the throughput line's last write
        self._stats_state = ""  # the state when it was written
        self._closed = False
        self._start_said = ""  # what the last click on start warned (shown as the message)

        self.buttons = {name: W.Button(description=name, layout=W.Layout(width="80px"))
                        for name in ("start", "pause", "resume", "stop")}
        for name, b in self.buttons.items():
            b.on_click(self._click(name))
        self.state = W.Label(value=learner.state)
        self.progress = W.FloatProgress(value=learner.progress, min=0.0, max=1.0,
                                        description="progress", bar_style="info")
        self.stats = W.HTML(value="")
        self.message = W.HTML(value="")
        self.error = W.HTML(value="")
        score = learner.model.score_name
        fig, self.source = score_figure(f"{learner.name}: {score}", score, ["train", "val"],
                                        name="bidlab-scores")
        self.chart = LiveBokeh(fig)
        header = W.HBox([*self.buttons.values(), W.HTML("&nbsp;state:&nbsp;"), self.state])
        right = W.VBox([W.HTML("<b>controls</b> (apply at the next minibatch)"),
                        self.controls.box(), self.message])
        self.legend = W.HTML(legend_html(["train", "val"]))  # static: see score_figure
        chart = W.VBox([self.legend, self.chart])
        self.widget = W.VBox([header, self.progress, W.HBox([chart, right]), self.stats,
                              self.error])
        # the JupyterLab extension's "Learners" panel scrolls to the element with this class
        self.widget.add_class("bidlab-dashboard")
        self.widget.add_class(dashboard_class(learner.name))
        self._render_metrics(learner.metrics)
        self.pump = pump_for(learner, rate)
        self.view = self.pump.attach(View(key, self.render, close=self._close_widgets))

    # -- shell thread: buttons only call the learner ----------------------------------------
    def _click(self, name: str) -> Any:
        def act(_button: Any) -> None:
            lr = self.learner
            try:
                if name == "start":
                    # start() warns when the run would train nothing (its n_passes or
                    # max_steps reached): from a button that text would go to a log the
                    # notebook never shows, so it goes to the message area
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        lr.start()
                    said = " ".join(str(w.message) for w in caught)
                    if said or self.controls.message == self._start_said:
                        self.controls.message = said  # a run that trains clears the last
                    self._start_said = said
                elif name == "pause":
                    lr.pause()
                elif name == "resume":
                    lr.resume()
                else:
                    lr.stop(wait=False)
            except RuntimeError as exc:
                self.controls.message = str(exc)
        return act

    # -- pump thread ------------------------------------------------------------------------
    def render(self, snap: Snapshot | None) -> None:
        """One tick: state, progress, stats, a new chart row, control confirmations, and
        option values set outside the controls."""
        self.controls.poll()
        self.controls.sync_from_learner()
        metrics = snap.metrics if snap is not None else self.learner.metrics
        if snap is not None:
            metrics = {**metrics, "state": snap.state or metrics.get("state")}
        with self.widget.hold_sync():
            self._render_metrics(metrics)
            message = html.escape(self.controls.message)  # it quotes values and names
            if self.message.value != message:
                self.message.value = message
            self._render_error(snap.error if snap is not None else None, metrics)
        step = int(metrics.get("step", 0))
        if snap is not None and step != self._last_step and step > 0:
            self._last_step = step
            stream_row(self.source, {"step": step,
                                     "train": float(metrics.get("train_score", math.nan)),
                                     "val": float(metrics.get("val_score", math.nan))})
            self.points += 1

    def _render_error(self, error: str | None, m: dict[str, Any]) -> None:
        """Show how the run failed: from the final snapshot, or, for a learner that failed
        before this dashboard watched it, from ``learner.traceback``; a new run clears it
        (also one that ended between two ticks, so its ``running`` state was never seen)."""
        if m.get("state") != "failed":
            if self.error.value:
                self.error.value = ""
            return
        error = error or self.learner.traceback
        text = f"<pre style='color:#b00'>{html.escape(error)}</pre>" if error else ""
        if text and self.error.value != text:
            self.error.value = text

    def _render_metrics(self, m: dict[str, Any]) -> None:
        state = str(m.get("state", self.learner.state))
        if self.state.value != state:
            self.state.value = state
        # Per mille: a bar a few hundred pixels wide shows no finer step, and every value
        # sent makes the page rebuild the bar's classes and restyle it (4 DOM changes).
        progress = round(float(m.get("progress", 0.0)), 3)
        if self.progress.value != progress:
            self.progress.value = progress
        style = {"failed": "danger", "done": "success", "stopped": "warning"}.get(state, "info")
        if self.progress.bar_style != style:
            self.progress.bar_style = style
        buttons = self.buttons
        buttons["start"].disabled = state in ("running", "paused")
        buttons["pause"].disabled = state != "running"
        buttons["resume"].disabled = state != "paused"
        buttons["stop"].disabled = state not in ("running", "paused")
        now = time.monotonic()
        if now - self._stats_time < STATS_PERIOD_S and state == self._stats_state:
            return
        self._stats_time, self._stats_state = now, state
        gpu = m.get("gpu_free")
        self.stats.value = (
            f"step {m.get('step', 0)} · pass {m.get('pass', 0)} · "
            f"train {_fmt(m.get('train_score'), digits=5)} · "
            f"val {_fmt(m.get('val_score'), digits=5)} · "
            f"{_fmt(m.get('samples_per_s'))} samples/s · {_fmt(m.get('gflops'))} GFLOP/s · "
            f"{_fmt(m.get('mb_per_s'))} MB/s · cache {_bytes(m.get('cache_bytes'))} · "
            f"GPU free {_bytes(gpu) if gpu is not None else 'n/a (CPU)'}")

    def _close_widgets(self) -> None:
        self._closed = True
        close_widgets(self.widget, self.chart, self.legend, self.state, self.progress,
                      self.stats, self.message, self.error, *self.buttons.values(),
                      *self.controls.widgets.values())
