"""What the live views send each tick (in-process: bokeh and ipywidgets need no frontend).

Every message a view sends costs the kernel's pump thread (which shares the GIL with the
training thread) and the browser's renderer, ten times a second; these tests pin down
that a tick sends what changed and nothing else.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import Dashboard, TopicBubbles  # noqa: E402
from bokeh.document.events import ColumnsPatchedEvent  # noqa: E402

from bidlab.datasets import synthetic_lda_corpus  # noqa: E402
from bidlab.models import LDAGibbs  # noqa: E402


@pytest.fixture
def bubbles():
    corpus = synthetic_lda_corpus(n_docs=60, n_words=40, k=3, seed=0)
    learner = LDAGibbs(n_components=3, nsamps=2, batch_size=20,
                       random_state=0).learner(corpus.X, n_passes=1)
    view = TopicBubbles(learner, corpus.vocab, n_top=2)
    sent: list[dict[str, Any]] = []

    def on_change(event: Any) -> None:
        if isinstance(event, ColumnsPatchedEvent) and event.model is view.source:
            sent.append(event.patches)

    view.figure.document.on_change(on_change)
    yield view, sent
    view.close()


def _stat(rng: np.random.Generator, k: int = 3, v: int = 40) -> np.ndarray:
    return rng.random((k, v)) + 0.01


def test_bubbles_send_sizes_every_tick_and_words_only_when_they_change(bubbles) -> None:
    view, sent = bubbles
    rng = np.random.default_rng(1)
    stat = _stat(rng)
    view._render_topics(stat)
    assert set(sent[-1]) == {"size", "weight", "word", "line", "width"}
    # same top words, weights moved by 1 %: no bubble's diameter moves by half a pixel,
    # nothing is sent
    stat1 = stat * rng.uniform(0.995, 1.005, stat.shape)
    view._render_topics(stat1)
    assert len(sent) == 1
    # same top words, one weight visibly larger: only the numbers travel, as float32 arrays
    stat2 = stat1.copy()
    best = int(stat2[0].argmax())
    stat2[0, best] *= 1.5
    view._render_topics(stat2)
    assert len(sent) == 2
    assert set(sent[-1]) == {"size", "weight"}
    (sl, size), = sent[-1]["size"]
    assert isinstance(size, np.ndarray) and size.dtype == np.float32
    assert sl == slice(0, view.rows * view.k)
    # the chart holds what was sent: words of the last full send, sizes of this one
    np.testing.assert_array_equal(np.asarray(view.source.data["size"], np.float32), size)
    words = view._row_words
    w = stat2 / stat2.sum(axis=1, keepdims=True)
    want = np.zeros((view.rows, view.k))
    want[words >= 0] = w[:, words[words >= 0]].T
    np.testing.assert_allclose(view.source.data["weight"], want.ravel(), rtol=1e-6)
    # a new top word changes the labels: they are sent again
    stat3 = stat2.copy()
    new = int(np.setdiff1d(np.arange(40), words)[0])
    stat3[0, new] = 100.0
    view._render_topics(stat3)
    assert "word" in sent[-1]
    assert view.vocab[new] in view.source.data["word"]
    # the row labels (a text glyph's own source) hold each row's word, "" for a free row
    assert view.labels.data["word"] == [view.vocab[j] if j >= 0 else ""
                                        for j in view._row_words]
    assert view.vocab[new] in view.labels.data["word"]
    # heating a parameter marks its bubble: line colours and widths are sent
    view.heated[(1, int(view._row_words[0]))] = 4.0
    view._render_topics(stat3)
    assert {"line", "width"} <= set(sent[-1]) and "word" not in sent[-1]
    assert "#d62728" in view.source.data["line"]


def test_bubble_rows_hold_words_near_the_top(bubbles) -> None:
    """A word that drops just below the top keeps its row (no label churn from sampling
    noise); it gives the row up when it falls well out, or when a new top word needs it."""
    view, sent = bubbles  # k = 3 topics, n_top = 2: 6 row slots; "near" is the top 4
    base = np.full((3, 40), 1.0)

    def stat(tops: dict[int, list[int]]) -> np.ndarray:
        s = base.copy()
        for t, words in tops.items():
            for rank, w in enumerate(words):
                s[t, w] = 100.0 - 10 * rank
        return s

    view._render_topics(stat({0: [0, 1, 2, 3], 1: [4, 5, 6, 7], 2: [8, 9, 10, 11]}))
    first = view._row_words.copy()
    assert set(first) == {0, 1, 4, 5, 8, 9}
    labels = len([e for e in sent if "word" in e])
    # words 1 and 2 swap ranks 2 and 3 in topic 0: word 2 needs a row; word 1 is near the top
    view._render_topics(stat({0: [0, 2, 1, 3], 1: [4, 5, 6, 7], 2: [8, 9, 10, 11]}))
    rows = view._row_words
    assert {0, 2, 4, 5, 8, 9} <= set(rows)
    assert 1 not in rows  # no free row: the worst-ranked spare word gave its row up
    assert rows[np.nonzero(first == 0)[0][0]] == 0  # the others stayed in their rows
    # swapping back: word 1 returns to the row word 2 took, nothing else moves
    view._render_topics(stat({0: [0, 1, 2, 3], 1: [4, 5, 6, 7], 2: [8, 9, 10, 11]}))
    np.testing.assert_array_equal(view._row_words, first)
    assert len([e for e in sent if "word" in e]) == labels + 2
    # the same top words again, same order: no labels sent
    view._render_topics(stat({0: [0, 1, 2, 3], 1: [4, 5, 6, 7], 2: [8, 9, 10, 11]}))
    assert len([e for e in sent if "word" in e]) == labels + 2


def test_bubble_rows_keep_near_words_while_rows_are_free() -> None:
    corpus = synthetic_lda_corpus(n_docs=60, n_words=40, k=3, seed=0)
    learner = LDAGibbs(n_components=3, nsamps=2, batch_size=20,
                       random_state=0).learner(corpus.X, n_passes=1)
    view = TopicBubbles(learner, corpus.vocab, n_top=2)
    try:
        s = np.full((3, 40), 1.0)
        s[:, 0], s[:, 1], s[:, 2] = 100.0, 90.0, 80.0  # every topic: 0, 1, then 2
        view._render_topics(s)
        assert sorted(view._row_words[view._row_words >= 0]) == [0, 1]
        s[:, 1], s[:, 2] = 80.0, 90.0  # 1 and 2 swap: 1 stays (free rows remain), 2 comes in
        view._render_topics(s)
        assert sorted(view._row_words[view._row_words >= 0]) == [0, 1, 2]
        s[:, 1] = 0.5  # word 1 falls out of the top 4: its row is freed
        s[:, 3] = 50.0
        view._render_topics(s)
        assert 1 not in view._row_words
    finally:
        view.close()


def test_top_words_list_follows_sets_at_once_and_order_at_most_every_second(bubbles) -> None:
    from widgets import topics

    view, _ = bubbles
    s = np.full((3, 40), 1.0)
    s[0, [0, 1]], s[1, [2, 3]], s[2, [4, 5]] = (100.0, 90.0), (100.0, 90.0), (100.0, 90.0)
    view._render_topics(s)
    first = view.top_words.value
    assert first.index(view.vocab[0]) < first.index(view.vocab[1])
    s[0, 1] = 110.0  # order only: not rewritten within a second
    view._render_topics(s)
    assert view.top_words.value == first
    view._list_time -= topics.LIST_REORDER_S  # a second later, it is
    view._render_topics(s)
    assert view.top_words.value.index(view.vocab[1]) < view.top_words.value.index(
        view.vocab[0])
    s[0, 6] = 200.0  # a new top word: rewritten at once
    view._render_topics(s)
    assert view.vocab[6] in view.top_words.value


@pytest.fixture
def dash():
    """A dashboard on a tiny LDAGibbs learner (not started), closed after the test."""
    corpus = synthetic_lda_corpus(n_docs=40, n_words=30, k=2, seed=0)
    learner = LDAGibbs(n_components=2, nsamps=2, batch_size=20,
                       random_state=0).learner(corpus.X, n_passes=1)
    board = Dashboard(learner)
    try:
        yield board
    finally:
        board.close()


def test_throughput_line_is_written_at_most_four_times_a_second(dash) -> None:
    dash.pump.stop()
    writes: list[str] = []
    dash.stats.observe(lambda c: writes.append(c["new"]), names="value")
    dash._stats_time = 0.0
    dash._render_metrics({"state": "running", "step": 1})  # long after: written
    dash._render_metrics({"state": "running", "step": 2})  # at once after: not yet
    assert len(writes) == 1 and "step 1 " in writes[0]
    dash._render_metrics({"state": "paused", "step": 3})  # a state change: at once
    assert len(writes) == 2 and "step 3 " in writes[1]
    dash._stats_time -= 0.3
    dash._render_metrics({"state": "paused", "step": 4})
    assert len(writes) == 3 and "step 4 " in writes[2]


def test_progress_bar_is_sent_per_mille(dash) -> None:
    changes: list[float] = []
    dash.progress.observe(lambda c: changes.append(c["new"]), names="value")
    base = {"state": "running", "step": 1}
    for p in (0.12341, 0.12344, 0.12349, 0.1236, 0.5):
        dash._render_metrics({**base, "progress": p})
    assert changes == [0.123, 0.124, 0.5]
    styles: list[str] = []
    dash.progress.observe(lambda c: styles.append(c["new"]), names="bar_style")
    for state in ("running", "running", "done", "done"):
        dash._render_metrics({**base, "state": state, "progress": 1.0})
    assert styles == ["success"]


def test_score_chart_has_a_static_legend_not_a_bokeh_one(dash) -> None:
    """BokehJS rebuilds a legend's elements on every paint; the dashboard's chart, streamed
    10 times a second, names its curves in a static HTML legend instead."""
    from bidlab.widgets._charts import palette
    from bokeh.models import HoverTool, Legend

    fig = next(iter(dash.source.document.roots))
    assert not list(fig.select({"type": Legend}))
    assert [r.name for r in fig.renderers] == ["train", "val"]
    hover = fig.select_one({"type": HoverTool})
    assert [name for name, _ in hover.tooltips] == ["step", "train", "val"]
    train, val = palette(2)
    html = dash.legend.value
    assert html.index(train) < html.index("train") < html.index(val) < html.index("val")


def test_sweep_curves_are_named_by_configuration_without_a_bokeh_legend() -> None:
    from bidlab.widgets import SweepView
    from bokeh.models import HoverTool, Legend

    from bidlab.models.glm import glm_sweep

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = (X[:, 0] > 0).astype(float)
    learner = glm_sweep("logistic", lrate=[0.1, 1.0], l2=[0.0], batch_size=50).learner(
        X, y, n_passes=1)
    labels = ["lrate=0.1", "lrate=1"]
    view = SweepView(learner, labels=labels)
    try:
        fig = next(iter(view.source.document.roots))
        assert not list(fig.select({"type": Legend}))
        assert [r.name for r in view.lines] == labels
        hover = fig.select_one({"type": HoverTool})
        assert [name for name, _ in hover.tooltips][1:] == labels
        assert all(lab in view.legend.value for lab in labels)
    finally:
        view.close()


def test_freezing_keeps_per_configuration_rates_of_the_winners() -> None:
    from bidlab.widgets import SweepView
    from bidlab.widgets.sweep import FROZEN_LRATE

    from bidlab.models.glm import glm_sweep

    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 4))
    y = rng.integers(0, 3, 120)
    learner = glm_sweep("softmax", lrate=[0.1, 1.0], l2=[0.0, 1e-3], batch_size=40).learner(
        X, y, n_passes=1)
    learner.init()
    learner.set(lrate=[0.1, 0.2, 0.3, 0.4])  # one per configuration (4 targets x 3 classes)
    view = SweepView(learner)
    try:
        view.scores[:] = [-1.0, -0.5, -2.0, -0.7]  # configurations 1 and 3 lead
        assert sorted(view.request_freeze(2)) == [0, 2]
        rows = np.asarray(learner.opts.lrate)
        lay = learner.model.layout
        for k, want in enumerate([FROZEN_LRATE, 0.2, FROZEN_LRATE, 0.4]):
            np.testing.assert_allclose(rows[lay.columns(k)], want)
    finally:
        view.close()
