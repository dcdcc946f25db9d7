"""``BayesNetView(learner)``: every variable's marginal as bars, live; a click sets evidence.

For ``bidlab.models.BayesNet(network).learner()`` (inference): one horizontal bar per
(variable, state), grouped by variable, its length the current Rao-Blackwellised marginal
(the last draws' frequencies during burn-in). Bars of a clamped variable are drawn in the
evidence colour. Clicking a bar clamps that variable to that state from the next sweep on;
clicking the clamped state again clears it (the sampler keeps running: no restart). The
bars are ``patch``-ed in place at most ten times a second by the pump thread.
"""

from __future__ import annotations

import html
import time
from typing import Any

import ipywidgets as W
import numpy as np
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, HoverTool, TapTool
from bokeh.plotting import figure

from bidlab.learn import Snapshot
from bidlab.models.bayesnet.network import BayesNetError

from ._bokeh import LiveBokeh
from ._pump import MAX_RATE, PumpedView, View, close_widgets, pump_for, state_text

__all__ = ["BayesNetView"]

FREE = "#1f77b4"
CLAMPED = "#d62728"
ROW_PX = 14
#: a tap on a bar reaches the kernel twice, as the bar's selection and as a Tap event (in
#: either order): the second within this many seconds is the same click
SAME_CLICK_S = 1.0


def _marginals(model: Any) -> np.ndarray:
    return model.chains.marginals()


def _evidence(model: Any) -> np.ndarray:
    return model.chains.ev.astype(np.float64)


class BayesNetView(PumpedView):
    """Live marginals of a Bayesian-network inference learner (display it as a cell's
    last value); ``variables`` limits the bars to those variables (default all)."""

    def __init__(self, learner: Any, variables: list[str] | None = None,
                 rate: float = MAX_RATE, key: str = "bayesnet") -> None:
        model = learner.model
        if not hasattr(model, "set_evidence") or getattr(model, "learn", True):
            raise TypeError("BayesNetView needs an inference learner: "
                            "bidlab.models.BayesNet(network).learner()")
        if not model.initialised:
            learner.init()
        self.learner = learner
        net = model.network
        self.net = net
        so = model.chains.t.state_off
        chosen = range(net.n_vars) if variables is None else [net.index(v) for v in variables]
        self.vars = np.array(list(chosen), dtype=np.int64)
        rows_var, rows_state, labels = [], [], []
        for v in self.vars:
            for s, st in enumerate(net.states[v]):
                rows_var.append(int(v))
                rows_state.append(s)
                labels.append(f"{net.names[v]} = {st}")
        self.row_var = np.array(rows_var, np.int64)
        self.row_state = np.array(rows_state, np.int64)
        self.index = so[self.row_var] + self.row_state  # into the marginals vector
        n = len(labels)
        self.source = ColumnDataSource(name="bidlab-bayesnet-marginals", data={
            "y": np.arange(n, dtype=np.float64), "p": np.zeros(n), "label": labels,
            "color": [FREE] * n})
        fig = figure(title="marginals (click a state: set or clear evidence)", width=520,
                     height=min(60 + ROW_PX * n, 2400), x_range=(0, 1),
                     y_range=(n - 0.5, -0.5), tools="tap,reset", toolbar_location="above")
        r = fig.hbar(y="y", right="p", height=0.8, color="color", source=self.source)
        r.nonselection_glyph = None
        fig.select_one(TapTool).renderers = [r]
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("", "@label"), ("p", "@p{0.000}")]))
        fig.yaxis.ticker = list(range(n))
        fig.yaxis.major_label_overrides = {i: lab for i, lab in enumerate(labels)}
        fig.yaxis.major_label_text_font_size = "10px"
        fig.ygrid.visible = False
        self.figure = fig
        self.source.selected.on_change("indices", self._on_select)
        fig.on_event(Tap, self._on_tap)
        self.chart = LiveBokeh(fig)
        self.status = W.HTML(value="")
        self.widget = W.VBox([self.chart, self.status])
        self.clicks = 0
        self._status_clicks = 0  # clicks the status line has shown
        self.refused = ""  # why the last click's evidence was refused (shown in the status)
        self._page_click: tuple[str, int, float] | None = None
        self._closed = False
        self._shown_ev: np.ndarray | None = None
        self.pump = pump_for(learner, rate)
        self.view = self.pump.attach(View(key, self.render, views={
            "marginals": _marginals, "evidence": _evidence}, idle=True,
            close=self._close_widgets))

    # -- shell thread: clicks -------------------------------------------------------------
    def _on_select(self, _attr: str, _old: Any, new: list[int]) -> None:
        if new:
            self._from_page("select", int(new[0]))

    def _on_tap(self, event: Any) -> None:
        i = int(round(event.y))
        if 0 <= i < self.row_var.shape[0] and 0 <= event.x <= 1:
            self._from_page("tap", i)

    def _from_page(self, channel: str, i: int) -> None:
        """One click on the page: its selection and its Tap event are one click, so the
        second of the pair (the other channel, the same bar, soon after) is dropped."""
        now = time.monotonic()
        last = self._page_click
        if (last is not None and last[0] != channel and last[1] == i
                and now - last[2] < SAME_CLICK_S):
            self._page_click = None
            return
        self._page_click = (channel, i, now)
        try:
            self.click(i)
        except BayesNetError as exc:  # evidence of probability zero: said, not raised
            self.refused = f"refused: {exc}"
            self.status.value = html.escape(self.refused)

    def click(self, i: int) -> None:
        """A click on bar ``i``: clamp its variable to its state at the next sweep, or clear
        the variable when that state is already the evidence."""
        self.clicks += 1
        v, s = int(self.row_var[i]), int(self.row_state[i])
        model = self.learner.model
        self.refused = ""
        ev = dict(model.chains.evidence)
        name, state = self.net.names[v], self.net.states[v][s]
        if ev.get(name) == state:
            del ev[name]
        else:
            ev[name] = state
        model.set_evidence(ev or None)

    # -- pump thread ----------------------------------------------------------------------
    def render(self, snap: Snapshot | None) -> None:
        if snap is None or "marginals" not in snap.views:
            if self._status_clicks != self.clicks:  # a click while no sweep runs: say it
                self._status_clicks = self.clicks
                lr = self.learner
                self._status(int(lr.step), html.escape(str(lr.state)))
            return
        m = np.asarray(snap.views["marginals"], dtype=np.float64)
        full = slice(0, self.row_var.shape[0])
        patch: dict[str, Any] = {"p": [(full, m[self.index].tolist())]}
        ev = np.asarray(snap.views.get("evidence", ()), dtype=np.float64)
        if ev.shape[0] and (self._shown_ev is None or not np.array_equal(ev, self._shown_ev)):
            self._shown_ev = ev.copy()
            colors = [CLAMPED if ev[v] >= 0 else FREE for v in self.row_var]
            patch["color"] = [(full, colors)]
        self.source.patch(patch)
        self._status_clicks = self.clicks
        self._status(int(snap.step), state_text(snap))

    def _status(self, step: int, state: str) -> None:
        """The status line: the sweep, the run's state (HTML), the chains' state and the
        evidence asked for (a click's evidence is listed at once; its bars turn red once a
        sweep clamps it)."""
        chains = self.learner.model.chains
        given = html.escape(", ".join(f"{k} = {v}" for k, v in chains.evidence.items())
                            or "none")
        pending = ""
        if self._shown_ev is not None:
            asked = {self.net.index(k) for k in chains.evidence}
            clamped = {int(v) for v in np.flatnonzero(self._shown_ev >= 0)}
            if asked != clamped:
                pending = " (from the next sweep)"
        self.status.value = (f"sweep {step} · {state} · kept {chains.kept} · "
                             f"max R-hat {chains.rhat():.3f} · evidence: {given}{pending}"
                             + (f" · {html.escape(self.refused)}" if self.refused else ""))

    def _close_widgets(self) -> None:
        self._closed = True
        close_widgets(self.widget, self.chart, self.status)
