"""What the live views send each tick (in-process: bokeh and ipywidgets need no frontend).

Every message a view sends costs the kernel's pump thread (which shares the GIL with the
training thread) and the browser's renderer, ten times a second; these tests pin down
that a tick sends what changed and nothing else.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from bokeh.document.events import ColumnsPatchedEvent

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import Dashboard, TopicBubbles  # noqa: E402

from bidlab.datasets import synthetic_lda_corpus  # noqa: E402
from bidlab.models import LDAGibbs  # noqa: E402


@pytest.fixture
def bubbles():
    corpus = synthetic_lda_corpus(n_docs=60, n_words=40, k=3, seed=0)
    learner = LDAGibbs(k=3, nsamps=2, batch_size=20, seed=0).learner(corpus.X, npasses=1)
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
    # same top words, new weights: only the numbers travel, as float32 arrays
    stat2 = stat * rng.uniform(0.99, 1.01, stat.shape)
    view._render_topics(stat2)
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


def test_progress_bar_is_sent_per_mille() -> None:
    corpus = synthetic_lda_corpus(n_docs=40, n_words=30, k=2, seed=0)
    learner = LDAGibbs(k=2, nsamps=2, batch_size=20, seed=0).learner(corpus.X, npasses=1)
    dash = Dashboard(learner)
    try:
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
    finally:
        dash.close()


def test_score_chart_has_a_static_legend_not_a_bokeh_one() -> None:
    """BokehJS rebuilds a legend's elements on every paint; the dashboard's chart, streamed
    10 times a second, names its curves in a static HTML legend instead."""
    from bidlab.widgets._charts import palette
    from bokeh.models import HoverTool, Legend

    corpus = synthetic_lda_corpus(n_docs=40, n_words=30, k=2, seed=0)
    learner = LDAGibbs(k=2, nsamps=2, batch_size=20, seed=0).learner(corpus.X, npasses=1)
    dash = Dashboard(learner)
    try:
        fig = next(iter(dash.source.document.roots))
        assert not list(fig.select({"type": Legend}))
        assert [r.name for r in fig.renderers] == ["train", "val"]
        hover = fig.select_one({"type": HoverTool})
        assert [name for name, _ in hover.tooltips] == ["step", "train", "val"]
        train, val = palette(2)
        html = dash.legend.value
        assert html.index(train) < html.index("train") < html.index(val) < html.index("val")
    finally:
        dash.close()


def test_sweep_curves_are_named_by_configuration_without_a_bokeh_legend() -> None:
    from bidlab.widgets import SweepView
    from bokeh.models import HoverTool, Legend

    from bidlab.models.glm import glm_sweep

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = (X[:, 0] > 0).astype(float)
    learner = glm_sweep("logistic", lrate=[0.1, 1.0], l2=[0.0], batch_size=50).learner(
        X, y, npasses=1)
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
        X, y, npasses=1)
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
