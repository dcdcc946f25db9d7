"""``SweepView(learner, labels)``: a live GLM hyperparameter sweep, one curve per configuration.

A sweep (:func:`bidlab.models.glm.glm_sweep`) trains every configuration as one model
target of a single GLM learner, so one pass shares each sparse product among them all.
This view plots each target's score (minus its loss per sample on the latest minibatch,
smoothed by an exponential moving average) against the minibatch, highlights the current
best and can *freeze the losers*.

Limitation, stated plainly: the GLM learner's target map is fixed when it is built, so a
configuration cannot be dropped from a running sweep. "Freeze losers" therefore sets the
losers' per-row learning rate to ``FROZEN_LRATE`` (their weights stop moving; they still
cost their share of the shared products). Build a new sweep of the winners to save that.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import ipywidgets as W
import numpy as np

import bidlab as bl
from bidlab.learn import Snapshot
from bidlab.learn.hyper import expand_hyper

from ._bokeh import LiveBokeh
from ._charts import legend_html, score_figure, stream_row
from ._pump import MAX_RATE, PumpedView, View, close_widgets, pump_for

__all__ = ["SweepView", "FROZEN_LRATE"]

FROZEN_LRATE = 1e-12  # the smallest step the 'lrate > 0' option allows in practice


def _target_losses(model: Any) -> Any:
    """Per-target loss sums of the model's last minibatch (a training-thread view).

    Wrapped in a ``Mat``: the observer reads ``.data`` of what a view returns.
    """
    loss = getattr(model, "_loss", None)
    return None if loss is None else bl.Mat(loss)


class SweepView(PumpedView):
    """Live curves of a GLM sweep learner's configurations.

    Parameters
    ----------
    learner
        ``glm_sweep(...).learner(X, y)`` (any multi-target GLM learner).
    labels
        one name per model target, e.g. ``"lrate=0.1 l2=1e-5"`` (default
        ``"target i"``).
    smooth
        weight of the newest minibatch in the moving average (0 < smooth <= 1).
    rate
        updates per second, at most 10.
    """

    def __init__(self, learner: Any, labels: Sequence[str] | None = None, smooth: float = 0.1,
                 rate: float = MAX_RATE, key: str = "sweep") -> None:
        layout = getattr(learner.model, "layout", None)
        if layout is None:
            raise TypeError("SweepView needs a GLM learner (bidlab.models.glm.GLM(...)"
                            ".learner or glm_sweep(...).learner)")
        if not 0 < smooth <= 1:
            raise ValueError(f"smooth must be in (0, 1]; got {smooth!r}")
        self.learner = learner
        self.K = layout.K
        self.labels = list(labels) if labels is not None else [f"target {i}"
                                                              for i in range(self.K)]
        if len(self.labels) != self.K:
            raise ValueError(f"got {len(self.labels)} labels for {self.K} model targets")
        self.smooth = float(smooth)
        self.scores = np.full(self.K, np.nan)  # smoothed -loss per sample
        self.best: int | None = None
        self.frozen: set[int] = set()
        self.points = 0
        self._last_step = -1
        self._shown: tuple[int | None, frozenset[int]] = (None, frozenset())
        self._closed = False
        self._freeze_request: int | None = None

        cols = [f"c{i}" for i in range(self.K)]
        # a static legend: BokehJS would rebuild a bokeh legend's K items on every paint
        fig, self.source = score_figure("sweep: -loss/sample per configuration (EMA)",
                                        "-loss/sample", cols, name="bidlab-sweep",
                                        width=640, height=320, labels=self.labels)
        self.lines = fig.renderers
        self.legend = W.HTML(legend_html(self.labels))
        self.chart = LiveBokeh(fig)
        self.keep = W.BoundedIntText(value=max(1, math.ceil(self.K / 4)), min=1, max=self.K,
                                     description="keep best", layout=W.Layout(width="180px"))
        self.freeze = W.Button(description="freeze the others", button_style="warning")
        self.freeze.on_click(lambda _b: self.request_freeze(self.keep.value))
        self.status = W.HTML(value="")
        self.widget = W.VBox([self.legend, self.chart, W.HBox([self.keep, self.freeze]),
                              self.status])
        self.pump = pump_for(learner, rate)
        self.view = self.pump.attach(View(key, self.render, views={"loss": _target_losses},
                                          close=self._close_widgets))

    # -- freezing (shell thread calls; the learner does the work) ---------------------------
    def request_freeze(self, keep: int) -> list[int]:
        """Freeze every configuration but the ``keep`` best (by the smoothed score).

        Returns the frozen targets. The learner's per-row ``lrate`` becomes
        :data:`FROZEN_LRATE` on their rows from the next minibatch on.
        """
        if np.all(np.isnan(self.scores)):
            raise RuntimeError("no scores yet: start the learner and let it run a moment")
        order = np.argsort(-np.nan_to_num(self.scores, nan=-np.inf))
        losers = [int(i) for i in order[int(keep):]]
        model = self.learner.model
        lay = model.layout
        rows = expand_hyper("lrate", self.learner.opts.lrate, [lay.T] * len(model.modelmats),
                            model.row_groups)[0]
        for k in losers:
            rows[lay.columns(k)] = FROZEN_LRATE
        self.learner.set(lrate=rows.tolist())
        self.frozen |= set(losers)
        return losers

    # -- pump thread --------------------------------------------------------------------------
    def render(self, snap: Snapshot | None) -> None:
        if snap is None or "loss" not in snap.views:
            return
        step = int(snap.step)
        if step == self._last_step or step <= 0:
            return
        self._last_step = step
        last = self.learner.record.last()
        n = max(int(last["n"]) if last else 1, 1)
        score = -np.asarray(snap.views["loss"], dtype=np.float64).reshape(-1)[: self.K] / n
        new = np.isnan(self.scores)
        self.scores[new] = score[new]
        self.scores[~new] += self.smooth * (score[~new] - self.scores[~new])
        stream_row(self.source, {"step": step, **{f"c{i}": float(v)
                                                  for i, v in enumerate(self.scores)}})
        self.points += 1
        # no best while every score is NaN (a loss that overflowed): nanargmax would raise
        self.best = (int(np.nanargmax(self.scores)) if not np.isnan(self.scores).all()
                     else None)
        shown = (self.best, frozenset(self.frozen))
        if shown != self._shown:
            self._shown = shown
            for i, r in enumerate(self.lines):
                r.glyph.line_width = 4 if i == self.best else 1.5
                r.glyph.line_alpha = 1.0 if i == self.best else 0.45
                r.glyph.line_dash = "dashed" if i in self.frozen else "solid"
        best = ("none yet (no finite score)" if self.best is None else
                f"<b>{html.escape(str(self.labels[self.best]))}</b> "
                f"({self.scores[self.best]:.4g})")
        text = f"best: {best}" + (f" · frozen: {len(self.frozen)}" if self.frozen else "")
        if self.status.value != text:
            self.status.value = text

    def _close_widgets(self) -> None:
        self._closed = True
        close_widgets(self.widget, self.legend, self.chart, self.keep, self.freeze, self.status)
