"""``IntertopicMap(learner, vocab)``: the live intertopic map of an LDA learner, with the
topic edits a click away.

The topics are placed by Jensen-Shannon distance and classical MDS
(:func:`bidlab.models.lda.export.intertopic_map`) when k changes, and otherwise moved from
their previous places by a few stress-majorisation steps towards the new distances
(``LAYOUT_STEPS``), so the map moves continuously rather than jumping; at most once a
second (``LAYOUT_EVERY``; less often when a placement takes over 0.1 s: it then costs at
most a tenth of the pump thread's time). Every tick updates the circles' sizes. A circle's
area is its topic's share of the counts and
its colour the topic's NPMI coherence on the learner's documents (recomputed every
``coherence_every`` seconds). Selecting a topic lists its most relevant words for the λ of
the slider (pyLDAvis's relevance). Box-select (or shift-click) two or more topics and press
*merge*, or select one and press *split* or *delete*: the edit goes to the learner, which
applies it at its next minibatch, and the map shows the new set of topics from the next
snapshot on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import ipywidgets as W
import numpy as np
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from bidlab.learn import Snapshot
from bidlab.models.lda import coherence as coh
from bidlab.models.lda import export

from ._bokeh import LiveBokeh
from ._pump import MAX_RATE, PumpedView, View, pump_for

__all__ = ["IntertopicMap"]

MAX_RADIUS = 0.25  # of the map's span, for the largest topic
#: seconds between placements of the topics (the Jensen-Shannon distances over the
#: vocabulary cost tens of ms); the circles' sizes follow every frame
LAYOUT_EVERY = 1.0
#: stress-majorisation steps from the previous placement per placement (k unchanged)
LAYOUT_STEPS = 10


class IntertopicMap(PumpedView):
    """Live intertopic map of an LDA learner (display it as a cell's last value).

    Args:
        learner: ``LDA(...).learner(X)`` or ``LDAGibbs(...).learner(X)``.
        vocab: the word of each column of X.
        rate: updates per second, at most 10.
        n_words: relevant words listed for the selected topic.
        coherence_every: seconds between recomputations of the topics' coherence.
        key: pump slot.

    Examples
    --------
    >>> lr = bidlab.models.LDAGibbs(20).learner(corpus)     # doctest: +SKIP
    >>> IntertopicMap(lr, corpus.vocab)                      # doctest: +SKIP
    """

    def __init__(self, learner: Any, vocab: Sequence[str], rate: float = MAX_RATE,
                 n_words: int = 15, coherence_every: float = 2.0,
                 key: str = "intertopic") -> None:
        self.learner = learner
        self.vocab = list(vocab)
        if not learner.model.modelmats:
            learner.init()
        V = learner.model.modelmats[0].shape[1]
        if len(self.vocab) != V:
            raise ValueError(f"vocab has {len(self.vocab)} words while the model has {V}: "
                             "pass the vocabulary of the matrix the learner trains on")
        self.n_words = int(n_words)
        self.coherence_every = float(coherence_every)
        self.selected: list[int] = []
        self.frames = 0
        self.requests: list[Any] = []  # the edit tickets sent, oldest first
        self._closed = False
        self._coords: np.ndarray | None = None
        self._topics: np.ndarray | None = None
        self._coherence: np.ndarray | None = None
        self._coherence_time = -np.inf
        self._layout_time = -np.inf
        self._layout_s = 0.0  # what the last placement took
        self.source = ColumnDataSource(name="bidlab-intertopic", data=self._empty())
        fig = figure(title="intertopic map (area ∝ tokens, colour: NPMI coherence)",
                     width=460, height=460, tools="tap,box_select,reset",
                     toolbar_location="above", match_aspect=True)
        r = fig.circle("x", "y", radius="radius", source=self.source, fill_color="color",
                       fill_alpha=0.55, line_color="#1f4e79")
        fig.text("x", "y", text="label", source=self.source, text_align="center",
                 text_baseline="middle", text_font_size="11px")
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("topic", "@label"),
                                                         ("share", "@weight{0.000}"),
                                                         ("npmi", "@coherence{0.000}")]))
        fig.xaxis.axis_label, fig.yaxis.axis_label = "PC1", "PC2"
        self.figure = fig
        self.source.selected.on_change("indices", self._on_select)
        self.chart = LiveBokeh(fig)
        self.lam = W.FloatSlider(value=0.6, min=0.0, max=1.0, step=0.05, description="λ",
                                 continuous_update=False)
        self.lam.observe(lambda _c: self._show_words(), names="value")
        self.words = W.HTML(value="<i>select a topic</i>")
        self.status = W.HTML(value="")
        self.buttons = {name: W.Button(description=name) for name in ("merge", "split",
                                                                         "delete")}
        for name, b in self.buttons.items():
            b.on_click(lambda _b, name=name: self.edit(name))
        side = W.VBox([W.HBox(list(self.buttons.values())), self.lam, self.words,
                       self.status], layout=W.Layout(width="420px"))
        self.widget = W.HBox([self.chart, side])
        self.pump = pump_for(learner, rate)
        self.view = self.pump.attach(View(key, self.render, views={"topics": 0},
                                          close=self._close_widgets))

    @staticmethod
    def _empty() -> dict[str, Any]:
        return {"x": [], "y": [], "radius": [], "color": [], "label": [], "weight": [],
                "coherence": []}

    # -- shell thread: selection and edits ----------------------------------------------
    def _on_select(self, _attr: str, _old: Any, new: list[int]) -> None:
        self.select([int(i) for i in new])

    def select(self, topics: Sequence[int]) -> None:
        """Select topics by id (what a click or a box selection does)."""
        self.selected = sorted({int(t) for t in topics})
        self._show_words()

    def edit(self, kind: str) -> Any:
        """Send ``"merge"``, ``"split"`` or ``"delete"`` of the selected topics to the
        learner; returns the edit's ticket (None when the selection does not fit)."""
        sel = self.selected
        try:
            if kind == "merge":
                ticket = self.learner.merge_topics(sel)
            elif len(sel) != 1:
                self.status.value = f"<i>{kind}: select exactly one topic</i>"
                return None
            elif kind == "split":
                ticket = self.learner.split_topic(sel[0])
            elif kind == "delete":
                ticket = self.learner.delete_topic(sel[0])
            else:
                raise ValueError(f"unknown edit {kind!r}: merge, split or delete")
        except (ValueError, IndexError, TypeError, RuntimeError) as exc:
            self.status.value = f"<span style='color:#b00'>{exc}</span>"
            return None
        self.requests.append(ticket)
        self.selected = []
        self.status.value = f"{kind} {sel}: sent (applied at the next minibatch)"
        return ticket

    # -- pump thread --------------------------------------------------------------------
    def render(self, snap: Snapshot | None) -> None:
        """Place the topics of the newest snapshot (nothing without one)."""
        if snap is None or "topics" not in snap.views:
            return
        self.render_topics(np.asarray(snap.views["topics"], np.float64))

    def render_topics(self, stat: np.ndarray) -> None:
        """One frame from the k x vocabulary topic statistics (counts or lambda)."""
        stat = np.maximum(stat, 0.0)
        k = stat.shape[0]
        weight = stat.sum(axis=1)
        P = stat + 1e-12
        P /= P.sum(axis=1, keepdims=True)
        prev = self._coords if self._coords is not None and len(self._coords) == k else None
        now = time.monotonic()
        if prev is None or now - self._layout_time >= max(LAYOUT_EVERY, 10 * self._layout_s):
            m = export.intertopic_map(P, weight, previous=prev, steps=LAYOUT_STEPS)
            self._coords = np.stack([m["x"], m["y"]], axis=1)
            self._layout_time = now
            self._layout_s = time.monotonic() - now  # a placement's share stays <= 10 %
        else:  # the placement stands; the sizes follow the weights
            m = {"x": prev[:, 0], "y": prev[:, 1],
                 "weight": weight / max(float(weight.sum()), 1e-300)}
        self._topics = P
        if (self._coherence is None or len(self._coherence) != k
                or now - self._coherence_time >= self.coherence_every):
            self._coherence = self._topic_coherence(P)
            self._coherence_time = now
        span = max(float(np.ptp(m["x"])), float(np.ptp(m["y"])), 1e-3)
        radius = MAX_RADIUS * span * np.sqrt(m["weight"] / max(float(m["weight"].max()),
                                                               1e-300))
        c = self._coherence
        lo, hi = float(np.nanmin(c)), float(np.nanmax(c))
        idx = np.clip(((c - lo) / max(hi - lo, 1e-12) * 255).astype(int), 0, 255)
        self.source.data = {"x": m["x"], "y": m["y"], "radius": radius,
                            "color": [Viridis256[i] for i in idx],
                            "label": [str(t) for t in range(k)], "weight": m["weight"],
                            "coherence": c}
        self.frames += 1
        if self.selected and max(self.selected) >= k:
            self.selected = [t for t in self.selected if t < k]
        self._show_words()

    def _topic_coherence(self, P: np.ndarray) -> np.ndarray:
        docs = self.learner._steer_docs() if hasattr(self.learner, "_steer_docs") else None
        if docs is None:
            return np.zeros(P.shape[0])
        docs = docs[: min(int(docs.shape[0]), 5000)]
        return np.asarray(coh.coherence(P, docs, "c_npmi", top_n=10, per_topic=True))

    def _show_words(self) -> None:
        P = self._topics
        if P is None or len(self.selected) != 1 or self.selected[0] >= P.shape[0]:
            return
        t = self.selected[0]
        share = P.sum(axis=0) / P.shape[0]
        rel = export.relevance(P[t : t + 1], share, float(self.lam.value))[0]
        best = np.argsort(-rel, kind="stable")[: self.n_words]
        self.words.value = (f"<b>topic {t}</b> (λ = {self.lam.value:.2f}): "
                            + ", ".join(self.vocab[j] for j in best))

    def _close_widgets(self) -> None:
        self._closed = True
        for w in (self.widget, self.chart, self.words, self.status, self.lam,
                  *self.buttons.values()):
            w.close()
