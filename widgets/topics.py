"""``TopicBubbles(learner, vocab)``: the live word x topic bubble chart of an LDA learner.

Rows are the union of the topics' top words, columns are topics, and a bubble's *area* is
proportional to the word's weight in the topic (thesis fig. 3.3). The chart has a fixed
number of row slots (``k * n_top``): each tick, new top words take free rows, and the
sizes, labels and marks are ``patch``-ed in place.

Only visible changes are sent, so the page stays cheap to update:
- a word keeps its row while it stays within ``2 * n_top`` of some topic's top (sampler
  noise around rank ``n_top`` would otherwise churn the rows every few minibatches);
- sizes go out when some bubble's diameter moved by :data:`SIZE_STEP_PX` or more;
- the top-words list is rewritten when a topic's top-word set changes, and at most once a
  second for a change of order alone.

The bubbles sit on BokehJS's overlay layer and the words are a text glyph, so a tick that
changes only sizes repaints only the bubbles.

Clicking a bubble selects its (topic, word) parameter and shows its temperature control
(SAME Gibbs learners, :class:`bidlab.models.LDAGibbs`): a new value goes to
``learner.set_temperature(value, topic, word)`` and takes effect at the sampler's next
minibatch; bubbles whose temperature is not 1 get a red outline once the learner's
temperature log confirms it. For variational LDA the chart works without temperatures.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any

import ipywidgets as W
import numpy as np
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, TapTool
from bokeh.plotting import figure

from bidlab.learn import Snapshot
from bidlab.models.lda.core import LDACore

from ._bokeh import LiveBokeh
from ._charts import palette
from ._pump import MAX_RATE, PumpedView, View, close_widgets, pump_for

__all__ = ["TopicBubbles", "supports_temperature"]

MAX_DIAMETER = 28.0  # px of the largest bubble
COLUMN_PX = 48  # px per topic column
LABEL_PX = 110  # px left of the first column for the row's word
SIZE_STEP_PX = 0.5  # a bubble diameter change below this is not sent
LIST_REORDER_S = 1.0  # the top-words list shows a new order at most this often


def require_lda(learner: Any, view: str) -> None:
    """Refuse a learner that does not train an LDA model: ``view`` shows topics."""
    model = getattr(learner, "model", None)
    if not isinstance(model, LDACore):
        raise TypeError(f"{view} needs an LDA learner: bidlab.models.LDA(n_components)"
                        f".learner(X) or LDAGibbs(n_components).learner(X); got one training "
                        f"a {type(model).__name__}")


def supports_temperature(learner: Any) -> bool:
    """True when the learner's model has per-parameter temperatures (SAME Gibbs LDA)."""
    return bool(getattr(learner, "has_temperature", False))


class TopicBubbles(PumpedView):
    """Live bubble chart of an LDA learner's topics (display it as a cell's last value).

    Parameters
    ----------
    learner
        ``LDA(...).learner(X)`` or ``LDAGibbs(...).learner(X)``.
    vocab
        the word of each column of X.
    n_top
        top words per topic (rows are their union).
    rate
        updates per second, at most 10.
    key
        pump slot (a second view with the same key replaces the first).
    """

    def __init__(self, learner: Any, vocab: Sequence[str], n_top: int = 6,
                 rate: float = MAX_RATE, key: str = "topics") -> None:
        require_lda(learner, "TopicBubbles")
        self.learner = learner
        self.vocab = list(vocab)
        mats = learner.model.modelmats
        if not mats:
            learner.init()
            mats = learner.model.modelmats
        self.k, V = mats[0].shape
        if len(self.vocab) != V:
            raise ValueError(f"vocab has {len(self.vocab)} words while the model has {V}: "
                             "pass the vocabulary of the matrix the learner trains on")
        self.n_top = max(1, min(int(n_top), V))
        self.rows = self.k * self.n_top  # row slots
        self.temperatures = supports_temperature(learner)
        self.selected: tuple[int, int] | None = None  # (topic, word), set by clicks
        self.heated: dict[tuple[int, int], float] = {}
        self.patches = 0
        self.selections = 0  # selection events applied (one per click)
        self._row_words = np.full(self.rows, -1, np.int64)  # word in each row slot
        self._log_seen = 0
        self._shown_selection: tuple[int, int] | None = None
        self._syncing = False
        self._closed = False
        self._sent: dict[str, list[Any]] = {}  # the text columns as last patched
        self._sent_size: np.ndarray | None = None  # the diameters as last sent
        self._marks_key: tuple[bytes, tuple[Any, ...]] | None = None  # rows and heat, as sent
        self._rows_key = b""  # each topic's top and near word sets at the last row assignment
        self._list_sets = b""  # each topic's top words (sorted, as bytes), as listed
        self._list_time = 0.0  # time.monotonic() of the list's last rewrite

        self.source = ColumnDataSource(name="bidlab-topic-bubbles", data=self._bubble_data())
        # The words' own data source: patched only when a row gets a new word.
        self.labels = ColumnDataSource(name="bidlab-topic-words", data=self._label_data())
        left = -0.5 - LABEL_PX / COLUMN_PX  # the words' column, in topic units
        fig = figure(title="word x topic (area ∝ weight; click a bubble)",
                     width=LABEL_PX + COLUMN_PX * self.k + 20,
                     height=min(60 + 16 * self.rows, 900), tools="tap,reset",
                     x_range=(left, self.k - 0.4), y_range=(self.rows - 0.5, -0.5),
                     x_axis_label="topic", toolbar_location="above")
        fig.text("x", "row", text="word", source=self.labels, text_align="right",
                 text_baseline="middle", text_font_size="11px", text_color="#444444")
        r = fig.scatter("topic", "row", size="size", source=self.source, fill_color="color",
                        fill_alpha=0.6, line_color="line", line_width="width", level="overlay")
        r.nonselection_glyph = None  # every bubble stays visible after a click
        fig.select_one(TapTool).renderers = [r]
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("word", "@word"),
                                                         ("topic", "@topic"),
                                                         ("weight", "@weight{0.0000}")]))
        fig.xaxis.ticker = FixedTicker(ticks=list(range(self.k)))
        fig.yaxis.visible = False  # the text glyph labels the rows
        fig.xgrid.visible = fig.ygrid.visible = False
        self.figure = fig
        self.source.selected.on_change("indices", self._on_select)
        fig.on_event(Tap, self._on_tap)
        self.chart = LiveBokeh(fig)

        self.top_words = W.HTML(value="")
        self.selection = W.HTML(value="<i>click a bubble to select a (topic, word)</i>")
        self.temperature = W.FloatLogSlider(value=1.0, base=10, min=-1, max=2, step=0.05,
                                            description="temperature", disabled=True,
                                            continuous_update=False, readout_format=".3g")
        self.temperature.observe(self._on_temperature, names="value")
        side = [self.selection]
        if self.temperatures:
            side.append(self.temperature)
        else:
            side.append(W.HTML("<i>variational LDA: no per-parameter temperatures</i>"))
        side.append(self.top_words)
        self.widget = W.HBox([self.chart, W.VBox(side, layout=W.Layout(width="420px"))])
        self.pump = pump_for(learner, rate)
        self.view = self.pump.attach(View(key, self.render, views={"topics": 0}, idle=True,
                                          close=self._close_widgets))

    def _bubble_data(self) -> dict[str, Any]:
        n = self.rows * self.k
        return {"topic": np.tile(np.arange(self.k, dtype=np.float64), self.rows),
                "row": np.repeat(np.arange(self.rows, dtype=np.float64), self.k),
                "size": np.zeros(n), "weight": np.zeros(n), "word": [""] * n,
                "line": ["#00000000"] * n, "width": np.zeros(n),
                "color": palette(self.k) * self.rows}

    def _label_data(self) -> dict[str, Any]:
        return {"x": np.full(self.rows, -0.6), "row": np.arange(self.rows, dtype=np.float64),
                "word": [""] * self.rows}

    def _resize(self, k: int) -> None:
        """The learner's topics were merged, split, deleted or added: k columns now."""
        self.k = int(k)
        self.rows = self.k * self.n_top
        self._row_words = np.full(self.rows, -1, np.int64)
        self._sent, self._sent_size, self._marks_key = {}, None, None
        self._rows_key, self._list_sets = b"", b""
        self.heated.clear()
        if self.temperatures:  # the log's topic ids are the old ones: read the matrix
            self._log_seen = len(self.learner.temperature_log)
            T = self.learner.temperature
            tt, ww = np.nonzero(T != 1.0)
            self.heated = {(int(a), int(b)): float(T[a, b])
                           for a, b in zip(tt, ww, strict=True)}
        self.selected = self._shown_selection = None
        self.source.data = self._bubble_data()
        self.labels.data = self._label_data()
        fig = self.figure
        fig.x_range.end = self.k - 0.4
        fig.y_range.start = self.rows - 0.5
        fig.width = LABEL_PX + COLUMN_PX * self.k + 20
        fig.height = min(60 + 16 * self.rows, 900)
        fig.xaxis.ticker = FixedTicker(ticks=list(range(self.k)))

    # -- shell thread: clicks and the temperature control -----------------------------------
    def _on_select(self, _attr: str, _old: Any, new: list[int]) -> None:
        if new:
            self.selections += 1
            self.select_index(int(new[0]))

    def _on_tap(self, event: Any) -> None:
        topic, row = int(round(event.x)), int(round(event.y))
        if 0 <= topic < self.k and 0 <= row < self.rows:
            self.select_index(row * self.k + topic)

    def select_index(self, i: int) -> None:
        """Select the bubble at data index ``i`` (row slot * k + topic)."""
        row, topic = divmod(int(i), self.k)
        word = int(self._row_words[row]) if 0 <= row < self.rows else -1
        if word >= 0:
            self.selected = (topic, word)

    def _on_temperature(self, change: dict[str, Any]) -> None:
        if self._syncing or self.selected is None or not self.temperatures:
            return
        topic, word = self.selected
        self.learner.set_temperature(float(change["new"]), topic=topic, word=word)

    # -- pump thread ------------------------------------------------------------------------
    def render(self, snap: Snapshot | None) -> None:
        """Update the heated marks, the selection panel and (with a snapshot) the bubbles."""
        self._read_temperature_log()
        if snap is not None and "topics" in snap.views:
            self._render_topics(snap.views["topics"])
        if self.selected != self._shown_selection:
            self._show_selection()

    def _read_temperature_log(self) -> None:
        if not self.temperatures:
            return
        log = self.learner.temperature_log
        if len(log) == self._log_seen:
            return
        for e in log[self._log_seen:]:
            t, w, v = e["topic"], e["word"], float(e["value"])
            if t is not None and w is not None:
                if v == 1.0:
                    self.heated.pop((t, w), None)
                else:
                    self.heated[(t, w)] = v
            else:  # a row, column or everything: read the matrix once
                T = self.learner.temperature
                tt, ww = np.nonzero(T != 1.0)
                self.heated = {(int(a), int(b)): float(T[a, b]) for a, b in zip(tt, ww,
                                                                                  strict=True)}
        self._log_seen = len(log)

    def _render_topics(self, stat: np.ndarray) -> None:
        s = np.asarray(stat)
        if s.dtype.kind != "f":
            s = s.astype(np.float64)
        if s.shape[0] != self.k:
            self._resize(s.shape[0])
        totals = np.maximum(s.sum(axis=1, dtype=np.float64), 1e-300)  # per topic
        V = s.shape[1]
        near_n = min(2 * self.n_top, V)
        # A topic's ranking does not depend on its normalisation: select on the statistics
        # as they come (no normalised, negated copies of the k x V matrix: those made up
        # half of this view's ~3 ms a tick on UCI KOS, k = 20).
        near = np.argpartition(s, V - near_n, axis=1)[:, V - near_n:]
        order = np.argsort(-np.take_along_axis(s, near, axis=1), axis=1, kind="stable")
        near = np.take_along_axis(near, order, axis=1)  # each topic's top 2 * n_top, best first
        top = near[:, : self.n_top]
        # rows move only when some topic's top or near words change as sets
        rows_key = np.sort(top, axis=1).tobytes() + np.sort(near, axis=1).tobytes()
        if rows_key != self._rows_key:
            self._assign_rows(top, near)
            self._rows_key = rows_key
        words = self._row_words
        used = words >= 0
        weight = np.zeros((self.rows, self.k))
        weight[used] = (s[:, words[used]] / totals[:, None]).T
        wmax = max(float(weight.max()), 1e-300)
        size = MAX_DIAMETER * np.sqrt(weight / wmax)  # area ∝ weight
        full = slice(0, self.rows * self.k)
        # Words and marks change only when a word enters the top or a parameter is heated:
        # they are built, compared and sent only then.
        patch: dict[str, list[tuple[slice, Any]]] = {}
        marks_key = (words.tobytes(), tuple(sorted(self.heated.items())))
        if marks_key != self._marks_key:
            self._marks_key = marks_key
            line = np.full((self.rows, self.k), "#00000000", dtype=object)
            width = np.zeros((self.rows, self.k))
            for (t, wd), _v in self.heated.items():
                hit = np.nonzero(words == wd)[0]
                if hit.size:
                    line[hit[0], t], width[hit[0], t] = "#d62728", 3.0
            labels = [self.vocab[j] if j >= 0 else "" for j in words]
            for column, values in (("word", [lab for lab in labels for _ in range(self.k)]),
                                   ("line", line.ravel().tolist()),
                                   ("width", width.ravel().tolist())):
                if values != self._sent.get(column):
                    patch[column] = [(full, values)]
                    self._sent[column] = values
            if labels != self._sent.get("labels"):
                self.labels.patch({"word": [(slice(0, self.rows), labels)]})
                self._sent["labels"] = labels
        # Sizes and weights as float32 arrays (one base64 string each in the patch; bokeh's
        # serializer walks a list element by element), when some change is visible.
        size = size.ravel()
        sent = self._sent_size
        if patch or sent is None or float(np.abs(size - sent).max()) >= SIZE_STEP_PX:
            patch["size"] = [(full, size.astype(np.float32))]
            patch["weight"] = [(full, weight.ravel().astype(np.float32))]
            self._sent_size = size
        if patch:
            self.source.patch(patch)
            self.patches += 1
        self._render_list(top)

    def _render_list(self, top: np.ndarray) -> None:
        """The companion list of each topic's top words (best first)."""
        sets = np.sort(top, axis=1).tobytes()  # each topic's set of top words
        now = time.monotonic()
        if sets == self._list_sets and now - self._list_time < LIST_REORDER_S:
            return
        text = "".join(f"<div><b style='color:{c}'>topic {t}</b>: "
                       f"{html.escape(', '.join(str(self.vocab[j]) for j in top[t]))}</div>"
                       for t, c in zip(range(self.k), palette(self.k), strict=True))
        self._list_sets, self._list_time = sets, now
        if self.top_words.value != text:
            self.top_words.value = text

    def _assign_rows(self, top: np.ndarray, near: np.ndarray) -> None:
        """Give every word of ``top`` (topics x n_top) a row; a word already shown keeps its
        row while it is in ``near`` (each topic's best words, best first, a superset of
        ``top``), and rows are taken back, worst-ranked word first, only for new top words."""
        words = self._row_words
        wanted = np.unique(top)
        shown = words >= 0
        words[shown & ~np.isin(words, near)] = -1  # fell well out of the top: row is free
        new = wanted[~np.isin(wanted, words)]
        free = np.nonzero(words < 0)[0]
        if new.size > free.size:  # take rows from words that are near but not in the top
            rank = np.full(int(near.max()) + 1, near.shape[1], np.int64)
            np.minimum.at(rank, near, np.broadcast_to(np.arange(near.shape[1]), near.shape))
            spare = np.nonzero((words >= 0) & ~np.isin(words, wanted))[0]
            spare = spare[np.argsort(-rank[words[spare]], kind="stable")]
            words[spare[: new.size - free.size]] = -1
            free = np.nonzero(words < 0)[0]
        words[free[: new.size]] = new[: free.size]

    def _show_selection(self) -> None:
        self._shown_selection = sel = self.selected
        if sel is None:
            return
        topic, word = sel
        text = (f"selected: topic <b>{topic}</b>, word <b>{html.escape(str(self.vocab[word]))}</b> "
                f"(#{word})")
        if self.temperatures:
            value = self.heated.get(sel, 1.0)
            self._syncing = True
            try:
                self.temperature.disabled = False
                self.temperature.value = value
            finally:
                self._syncing = False
            text += f" · temperature {value:.3g}"
        self.selection.value = text

    def _close_widgets(self) -> None:
        self._closed = True
        close_widgets(self.widget, self.chart, self.top_words, self.selection, self.temperature)
