"""``IntertopicMap(learner, vocab)``: the live intertopic map of an LDA learner, with the
topic edits a click away.

The topics are placed by Jensen-Shannon distance and classical MDS
(:func:`bidlab.models.lda.export.intertopic_map`) on the first frame, and otherwise moved
from their previous places by a few stress-majorisation steps towards the new distances
(``LAYOUT_STEPS``), so the map moves continuously rather than jumping; when an edit
changes k, each topic starts from the place of the previous topic nearest it (its own,
for the topics the edit renumbered but left alone). Placements run at most once a
second (``LAYOUT_EVERY``; less often when a placement takes over 0.1 s: it then costs at
most a tenth of the pump thread's time). A circle's area is its topic's share of the
counts and its colour the topic's NPMI coherence on the learner's documents (recomputed
every ``coherence_every`` seconds; grey when it cannot be computed). Selecting a topic
lists its most relevant words for the λ of the slider (pyLDAvis's relevance). Box-select
(or shift-click) two or more topics and press *merge*, or select one and press *split* or
*delete*: the edit goes to the learner, which applies it at its next minibatch (at once
when it is not training; the status line says which), and the map shows the new set of
topics from the next snapshot on.

The page is sent only what it shows differently, as ``patch``-es of the columns that
changed (a whole new data source only when k changes):
- the circles' radii and shares when a radius changed by :data:`MOVE_PX` or more (a
  smaller change does not show; it is sent once the changes add up to a pixel);
- the centres (and the topic labels with them) when a placement moved one by
  :data:`MOVE_PX` or more;
- colours and coherence values when the coherence was recomputed and a colour changed.
The axis ranges are fixed (a :class:`._map_frame.Viewport`, replaced only when the
centres leave it or shrink well inside it), so a frame does not re-lay out the plot, and
the circles sit on BokehJS's overlay layer: a frame of new radii repaints only them, not
the labels and grid. The plot has no axes, title or toolbar in the page, whose sizes
BokehJS would measure again on every repaint.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any

import ipywidgets as W
import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from bidlab.learn import Snapshot
from bidlab.models.lda import coherence as coh
from bidlab.models.lda import export

from . import _map_frame as mf
from ._bokeh import LiveBokeh
from ._pump import MAX_RATE, PumpedView, View, close_widgets, pump_for
from .topics import require_lda

__all__ = ["IntertopicMap"]

TITLE = "intertopic map (area ∝ tokens, colour: NPMI coherence)"
FRAME_PX = 380  # the plot area's side in pixels (square: the map's distances are isotropic)
#: seconds between placements of the topics (the Jensen-Shannon distances over the
#: vocabulary cost tens of ms); the circles' sizes follow every frame
LAYOUT_EVERY = 1.0
#: stress-majorisation steps from the previous placement per placement (k unchanged)
LAYOUT_STEPS = 10
#: a placement that moves no centre by this many pixels or more is not sent
MOVE_PX = 1.0
#: the colour of a topic without a coherence (none could be computed: NaN)
NO_COHERENCE = "#bdbdbd"
#: seconds between rewrites of the selected topic's word list while only the topics
#: change (a new selection or λ rewrites it at once)
WORDS_EVERY = 1.0


class IntertopicMap(PumpedView):
    """Live intertopic map of an LDA learner (display it as a cell's last value).

    Parameters
    ----------
    learner
        ``LDA(...).learner(X)`` or ``LDAGibbs(...).learner(X)``.
    vocab
        the word of each column of X.
    rate
        updates per second, at most 10.
    n_words
        relevant words listed for the selected topic.
    coherence_every
        seconds between recomputations of the topics' coherence.
    key
        pump slot.

    Examples
    --------
    >>> lr = bidlab.models.LDAGibbs(20).learner(corpus)     # doctest: +SKIP
    >>> IntertopicMap(lr, corpus.vocab)                      # doctest: +SKIP
    """

    def __init__(self, learner: Any, vocab: Sequence[str], rate: float = MAX_RATE,
                 n_words: int = 15, coherence_every: float = 2.0,
                 key: str = "intertopic") -> None:
        require_lda(learner, "IntertopicMap")
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
        self.coherence_error: str | None = None  # why the coherence is NaN (None: it is not)
        self._layout_time = -np.inf
        self._layout_s = 0.0  # what the last placement took
        self._words_time = -np.inf  # when the word list was last computed
        self._viewport: mf.Viewport | None = None
        self._sent: dict[str, Any] = {}  # the columns as the page has them
        self.source = ColumnDataSource(name="bidlab-intertopic", data=self._empty())
        # the labels' own source: patched only when the centres move
        self.labels = ColumnDataSource(name="bidlab-intertopic-labels",
                                       data={"x": [], "y": [], "label": []})
        fig = figure(title=TITLE, frame_width=FRAME_PX, frame_height=FRAME_PX,
                     x_range=Range1d(-1.0, 1.0), y_range=Range1d(-1.0, 1.0),
                     tools="tap,box_select", toolbar_location=None)
        # No side panels in the page: BokehJS re-measures every axis, title and toolbar
        # of a plot (text metrics, computed styles) on each repaint, which cost the page
        # more than the circles. The title is shown as HTML above the chart (and kept on
        # the figure for static pictures); principal coordinates have no unit to read off
        # axes; the tap and box-select tools are active without a toolbar.
        fig.title.visible = False
        fig.axis.visible = False
        r = fig.circle("x", "y", radius="radius", source=self.source, fill_color="color",
                       fill_alpha=0.55, line_color="#1f4e79", level="overlay")
        # the labels stay on the plot's main layer, under the circles: redrawn only with
        # the centres, not with every frame's radii (text paints cost the page most)
        fig.text("x", "y", text="label", source=self.labels, text_align="center",
                 text_baseline="middle", text_font_size="11px", text_font_style="bold")
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("topic", "@label"),
                                                         ("share", "@weight{0.000}"),
                                                         ("npmi", "@coherence{0.000}")]))
        self.figure = fig
        self.source.selected.on_change("indices", self._on_select)
        self.chart = LiveBokeh(fig)
        self.lam = W.FloatSlider(value=0.6, min=0.0, max=1.0, step=0.05, description="λ",
                                 continuous_update=False)
        self.lam.observe(lambda _c: self._show_words(force=True), names="value")
        self.words = W.HTML(value="<i>select a topic</i>")
        self.status = W.HTML(value="")
        self.buttons = {name: W.Button(description=name) for name in ("merge", "split",
                                                                         "delete")}
        for name, b in self.buttons.items():
            b.on_click(lambda _b, name=name: self.edit(name))
        side = W.VBox([W.HBox(list(self.buttons.values())), self.lam, self.words,
                       self.status], layout=W.Layout(width="420px"))
        self.header = W.HTML(f"<b>{TITLE}</b>")
        self.widget = W.VBox([self.header, W.HBox([self.chart, side])])
        self.pump = pump_for(learner, rate)
        self.view = self.pump.attach(View(key, self.render, views={"topics": 0}, idle=True,
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
        self._show_words(force=True)

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
            self.status.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
            return None
        self.requests.append(ticket)
        self.selected = []
        self.status.value = self._edit_status(kind, sel, ticket)
        return ticket

    def _edit_status(self, kind: str, sel: list[int], ticket: Any) -> str:
        """What became of an edit just asked for: applied at once (an idle learner's model),
        refused when applied, or queued for the next minibatch (running) or the resume
        (paused)."""
        if getattr(ticket, "done", False):
            if ticket.error is not None:
                return (f"<span style='color:#b00'>{kind} {sel}: not applied: "
                        f"{html.escape(str(ticket.error))}</span>")
            k = (ticket.entry or {}).get("k_after")
            return f"{kind} {sel}: applied" + (f" (now {k} topics)" if k is not None else "")
        if getattr(self.learner, "state", None) == "paused":
            return f"{kind} {sel}: sent (applied when the learner resumes)"
        return f"{kind} {sel}: sent (applied at the next minibatch)"

    # -- pump thread --------------------------------------------------------------------
    def render(self, snap: Snapshot | None) -> None:
        """Place the topics of the newest snapshot (nothing without one)."""
        if snap is None or "topics" not in snap.views:
            return
        self.render_topics(np.asarray(snap.views["topics"], np.float64))

    def render_topics(self, stat: np.ndarray) -> None:
        """One frame from the k x vocabulary topic statistics (counts or lambda)."""
        P = np.maximum(stat, 0.0)  # a copy: normalised in place below
        k = P.shape[0]
        weight = P.sum(axis=1)
        P += 1e-12
        P /= P.sum(axis=1, keepdims=True)
        fresh = self._coords is None or len(self._coords) != k
        prev = self._matched_start(P) if fresh else self._coords
        now = time.monotonic()
        if fresh or now - self._layout_time >= max(LAYOUT_EVERY, 10 * self._layout_s):
            m = export.intertopic_map(P, weight, previous=prev, steps=LAYOUT_STEPS)
            xy = np.stack([m["x"], m["y"]], axis=1)
            if prev is not None:  # the steps centre the placement on 0: keep it in place
                xy += prev.mean(axis=0) - xy.mean(axis=0)
            self._coords = xy
            self._layout_time = now
            self._layout_s = time.monotonic() - now  # a placement's share stays <= 10 %
        self._topics = P
        recolour = (self._coherence is None or len(self._coherence) != k
                    or now - self._coherence_time >= self.coherence_every)
        if recolour:
            self._coherence = self._topic_coherence(P)
            self._coherence_time = now
        self._draw(weight / max(float(weight.sum()), 1e-300), recolour)
        self.frames += 1
        if self.selected and max(self.selected) >= k:
            self.selected = [t for t in self.selected if t < k]
        self._show_words()

    def _matched_start(self, P: np.ndarray) -> np.ndarray | None:
        """Where the topics ``P`` start when k changed (an edit renumbered them): each at
        the place of the previous topic nearest it (Jensen-Shannon), so the topics an edit
        left alone stay put and a split's halves start at their topic's place; None (a
        fresh placement) without previous places or when they would all coincide."""
        old, coords = self._topics, self._coords
        if old is None or coords is None or old.shape != (len(coords), P.shape[1]):
            return None
        start = coords[np.argmin(export.js_distances(P, old), axis=1)]
        return start if len(np.unique(start, axis=0)) > 1 else None

    def _draw(self, share: np.ndarray, recolour: bool) -> None:
        """Send the page what changed: everything when k changed (or the viewport moved),
        else patches of the columns that changed visibly (see the module doc)."""
        assert self._coords is not None and self._coherence is not None
        k = len(share)
        x, y = self._coords[:, 0].copy(), self._coords[:, 1].copy()
        sent = self._sent
        whole = len(sent.get("x", ())) != k
        vp = mf.fit_viewport(x, y, None if whole else self._viewport)
        if vp is not None:  # new axis ranges (rare): everything is redrawn anyway
            self._viewport, whole = vp, True
            for rng, (lo, hi) in ((self.figure.x_range, vp.x_range),
                                  (self.figure.y_range, vp.y_range)):
                rng.update(start=lo, end=hi, reset_start=lo, reset_end=hi)  # reset: here
        assert self._viewport is not None
        radius = mf.radii(share, self._viewport.width)
        colour = self._colours() if recolour or whole else sent["color"]
        c = self._coherence
        if whole:
            label = [str(t) for t in range(k)]
            self.source.data = {"x": x, "y": y, "radius": radius, "color": colour,
                                "label": label, "weight": share, "coherence": c.copy()}
            self.labels.data = {"x": x.copy(), "y": y.copy(), "label": label}
            # copies: the source's own columns change in place when patched
            self._sent = {"x": x.copy(), "y": y.copy(), "color": colour,
                          "radius": radius.copy()}
            return
        full = slice(0, k)
        patch: dict[str, list[tuple[slice, Any]]] = {}
        ppu = FRAME_PX / self._viewport.width  # pixels per data unit
        if max(mf.moved_px(x, sent["x"], ppu), mf.moved_px(y, sent["y"], ppu)) >= MOVE_PX:
            xy = {"x": [(full, x.astype(np.float32))], "y": [(full, y.astype(np.float32))]}
            patch.update(xy)
            self.labels.patch(xy)
            sent["x"], sent["y"] = x, y
        if colour != sent["color"]:
            patch["color"], patch["coherence"] = [(full, colour)], [(full, c.astype(np.float32))]
            sent["color"] = colour
        if mf.moved_px(radius, sent["radius"], ppu) >= MOVE_PX:  # sizes: visible changes only
            patch["radius"] = [(full, radius.astype(np.float32))]
            patch["weight"] = [(full, share.astype(np.float32))]
            sent["radius"] = radius
        if patch:
            self.source.patch(patch)

    def _colours(self) -> list[str]:
        """Each topic's colour: its coherence on Viridis, from the lowest to the highest;
        :data:`NO_COHERENCE` for a topic without one (NaN)."""
        c = np.asarray(self._coherence, np.float64)
        ok = np.isfinite(c)
        if not ok.any():
            return [NO_COHERENCE] * len(c)
        lo, hi = float(c[ok].min()), float(c[ok].max())
        idx = np.clip(np.nan_to_num((c - lo) / max(hi - lo, 1e-12) * 255), 0, 255).astype(int)
        return [Viridis256[i] if f else NO_COHERENCE for i, f in zip(idx, ok, strict=True)]

    def _topic_coherence(self, P: np.ndarray) -> np.ndarray:
        """The topics' NPMI on the first 5,000 training documents; NaN for every topic
        when there is none to compute (those documents hold no word, or the vocabulary
        has fewer than two words): the map is drawn all the same, in :data:`NO_COHERENCE`,
        and the reason is kept in ``coherence_error``."""
        docs = self.learner._steer_docs() if hasattr(self.learner, "_steer_docs") else None
        if docs is None:
            return np.zeros(P.shape[0])
        docs = docs[: min(int(docs.shape[0]), 5000)]
        try:
            c = np.asarray(coh.coherence(P, docs, "c_npmi", top_n=10, per_topic=True))
        except ValueError as exc:
            self.coherence_error = str(exc)
            return np.full(P.shape[0], np.nan)
        self.coherence_error = None
        return c

    def _show_words(self, force: bool = False) -> None:
        """List the selected topic's most relevant words: at once when ``force`` (a new
        selection or λ), else at most every :data:`WORDS_EVERY` seconds."""
        P = self._topics
        if P is None or len(self.selected) != 1 or self.selected[0] >= P.shape[0]:
            return
        now = time.monotonic()
        if not force and now - self._words_time < WORDS_EVERY:
            return
        self._words_time = now
        t = self.selected[0]
        share = P.sum(axis=0) / P.shape[0]
        rel = export.relevance(P[t : t + 1], share, float(self.lam.value))[0]
        best = np.argsort(-rel, kind="stable")[: self.n_words]
        self.words.value = (f"<b>topic {t}</b> (λ = {self.lam.value:.2f}): "
                            + html.escape(", ".join(str(self.vocab[j]) for j in best)))

    def _close_widgets(self) -> None:
        self._closed = True
        close_widgets(self.widget, self.header, self.chart, self.words, self.status, self.lam,
                      *self.buttons.values())
