"""``KMeansView(learner)``: live cluster sizes and centre movement of a k-means learner.

For ``bidlab.models.kmeans.KMeans(n_clusters).learner(X)`` (either algorithm): a bar per cluster
with its weight (``model.counts``: the rows it has absorbed with ``algorithm="minibatch"``,
its size in the last pass with Lloyd), a curve of how far the centres moved between two
updates of the view (mean and maximum Euclidean distance; it falls towards 0 as k-means
converges), and the centres' first two coordinates. Bars and centres are ``patch``-ed in
place; the movement curve is ``stream``-ed.
"""

from __future__ import annotations

import numbers
from typing import Any

import ipywidgets as W
import numpy as np
from bokeh.layouts import row
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from bidlab.learn import Snapshot
from bidlab.models.kmeans.model import KMeansModel

from ._bokeh import LiveBokeh
from ._charts import legend_html, palette, score_figure, stream_row
from ._pump import MAX_RATE, PumpedView, View, close_widgets, pump_for, state_text

__all__ = ["KMeansView"]


def _score_text(score: Any) -> str:
    """A score for the status line: ``"n/a"`` when there is none yet (None, NaN, or not a
    number: a distributed learner's metrics may hold None).

    Examples
    --------
    >>> _score_text(-1.234567), _score_text(None), _score_text(float("nan"))
    ('-1.2346', 'n/a', 'n/a')
    """
    if isinstance(score, (bool, np.bool_)) or not isinstance(score, numbers.Real):
        return "n/a"
    return f"{float(score):.5g}" if np.isfinite(score) else "n/a"


class KMeansView(PumpedView):
    """Live view of a k-means learner (display it as a cell's last value)."""

    def __init__(self, learner: Any, rate: float = MAX_RATE, key: str = "kmeans") -> None:
        if not isinstance(learner.model, KMeansModel):
            raise TypeError("KMeansView needs a k-means learner: "
                            "bidlab.models.kmeans.KMeans(n_clusters).learner(X)")
        if not learner.model.initialised:
            learner.init()
        self.learner = learner
        C, weights = learner.model.host_modelmats()
        C = self._in_data_coordinates(C)
        self.k = C.shape[0]
        self.points = 0
        self._prev = C.astype(np.float64)
        self._last_step = -1
        self._closed = False
        colors = palette(self.k)
        self.sizes = ColumnDataSource(name="bidlab-kmeans-sizes", data={
            "cluster": [str(i) for i in range(self.k)],
            "size": weights[:, 0].astype(np.float64),  # as now: a trained model's sizes
            "color": colors})
        bars = figure(x_range=[str(i) for i in range(self.k)], width=360, height=260,
                      title="cluster sizes (rows absorbed)", tools="")
        bars.vbar(x="cluster", top="size", width=0.8, color="color", source=self.sizes)
        self.centers = ColumnDataSource(name="bidlab-kmeans-centers", data={
            "x": C[:, 0].astype(np.float64), "y": (C[:, 1] if C.shape[1] > 1 else C[:, 0])
            .astype(np.float64), "color": colors})
        pos = figure(width=300, height=260, title="centres (first two coordinates)",
                     tools="pan,wheel_zoom,reset")
        pos.scatter("x", "y", size=12, color="color", source=self.centers)
        move, self.movement = score_figure("centre movement per update", "distance",
                                           ["mean", "max"], name="bidlab-kmeans-movement",
                                           width=360, height=260)
        self.chart = LiveBokeh(row(bars, pos, move))
        self.status = W.HTML(value="")
        self.legend = W.HTML(legend_html(["mean", "max"], "centre movement: "))
        self.widget = W.VBox([self.chart, self.legend, self.status])
        self.pump = pump_for(learner, rate)
        self.view = self.pump.attach(View(key, self.render, views={"centers": 0,
                                                                   "counts": 1},
                                          close=self._close_widgets))

    def render(self, snap: Snapshot | None) -> None:
        if snap is None or "centers" not in snap.views:
            return
        if snap.step != self._last_step:  # a run's last snapshot may repeat the step
            self._render_step(snap)
        self.status.value = (f"step {snap.step} · {state_text(snap)} · score "
                             f"{_score_text(snap.metrics.get('train_score'))}")

    def _render_step(self, snap: Snapshot) -> None:
        self._last_step = int(snap.step)
        C = self._in_data_coordinates(np.asarray(snap.views["centers"], dtype=np.float64))
        dist = np.sqrt(((C - self._prev) ** 2).sum(axis=1))
        self._prev = C
        full = slice(0, self.k)
        if "counts" in snap.views:
            counts = np.asarray(snap.views["counts"], dtype=np.float64).ravel()
            self.sizes.patch({"size": [(full, counts.tolist())]})
        self.centers.patch({"x": [(full, C[:, 0].tolist())],
                            "y": [(full, (C[:, 1] if C.shape[1] > 1 else C[:, 0]).tolist())]})
        stream_row(self.movement, {"step": snap.step, "mean": float(dist.mean()),
                                   "max": float(dist.max())})
        self.points += 1

    def _in_data_coordinates(self, C: np.ndarray) -> np.ndarray:
        """The centres as the data has them: a model trained on rows far from the origin
        measures its centres from its ``origin`` (:mod:`bidlab.models.kmeans.shift`)."""
        origin = self.learner.model.origin
        C = np.asarray(C, dtype=np.float64)
        return C if origin is None else C + np.asarray(origin, dtype=np.float64)

    def _close_widgets(self) -> None:
        self._closed = True
        close_widgets(self.widget, self.chart, self.legend, self.status)
