"""The live intertopic map: topics placed each frame, edits sent from the map reach the
learner, and the views follow k when it changes (in-process: no frontend needed)."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import IntertopicMap, TopicBubbles  # noqa: E402

from bidlab.datasets.synthetic_corpus import block_diagonal_corpus  # noqa: E402
from bidlab.models import LDAGibbs  # noqa: E402


@pytest.fixture
def learner():
    corpus = block_diagonal_corpus(k=4, words_per_topic=10, n_docs=400, doc_len=30, seed=1)
    est = LDAGibbs(n_components=4, random_state=0)
    lr = est.learner(corpus, n_passes=3, batch_size=50)
    lr.fit(progress=None)
    return lr, corpus


def test_map_edits_reach_the_learner_and_the_views_follow_k(learner):
    lr, corpus = learner
    view = IntertopicMap(lr, corpus.vocab)
    bubbles = TopicBubbles(lr, corpus.vocab, n_top=3)
    view.pump.stop()  # the renders below are the test's own, not the pump thread's
    bubbles.pump.stop()
    try:
        stat = lr.model.modelmats[0].numpy()
        view.render_topics(stat)
        data = view.source.data
        assert len(data["x"]) == 4 and len(data["color"]) == 4
        coherence = np.asarray(data["coherence"])
        assert np.isfinite(coherence).all() and (coherence > 0).all()  # planted blocks
        view.select([2])
        assert "topic 2" in view.words.value
        assert view.edit("split") is not None  # one topic selected: a split goes out
        view.select([0, 1])
        assert view.edit("split") is None and "exactly one" in view.status.value
        view.select([0, 1])
        ticket = view.edit("merge")
        ticket.wait(10)
        assert lr.model.opts.n_components == 4  # split then merge: 4 + 1 - 1
        stat = lr.model.modelmats[0].numpy()
        view.render_topics(stat)
        bubbles._render_topics(stat)
        assert len(view.source.data["x"]) == 4 and bubbles.k == 4
        view.select([0])
        view.edit("delete").wait(10)
        stat = lr.model.modelmats[0].numpy()
        view.render_topics(stat)
        bubbles._render_topics(stat)
        assert len(view.source.data["x"]) == 3
        assert bubbles.k == 3 and len(bubbles.source.data["topic"]) == 3 * 3 * 3
        view.select([0, 0])
        assert view.edit("merge") is None and "two or more" in view.status.value
    finally:
        view.close()
        bubbles.close()


def test_map_streams_while_the_learner_trains(learner):
    lr, corpus = learner
    lr.set(n_passes=10_000)
    view = IntertopicMap(lr, corpus.vocab, rate=10)
    lr.start()
    try:
        deadline = time.monotonic() + 20
        while view.frames < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert view.frames >= 3 and not view.view.errors
        view.select([1, 3])
        view.edit("merge").wait(10)
        while len(view.source.data["x"]) != 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(view.source.data["x"]) == 3 and lr.state == "running"
    finally:
        lr.stop()
        view.close()


def _events(view):
    """The bokeh document changes the map makes from now on (what the page is sent)."""
    seen = []
    view.chart.bokeh_document.on_change(lambda event: seen.append(event))
    return seen


def _patched(events, source):
    """The columns patched into ``source``, per patch event."""
    return [set(e.patches) for e in events
            if getattr(e, "model", None) is source and hasattr(e, "patches")]


def test_map_sends_only_what_changed(learner):
    lr, corpus = learner
    view = IntertopicMap(lr, corpus.vocab, coherence_every=1e9)
    view.pump.stop()  # the renders below are the test's own, not the pump thread's
    try:
        f0 = view.frames  # the pump may have drawn the trained model before it stopped
        stat = lr.model.modelmats[0].numpy().astype(np.float64)
        view.render_topics(stat)  # the first frame: everything
        seen = _events(view)
        view._layout_time = np.inf  # no placement due until said otherwise
        view.render_topics(stat)  # the same topics: nothing to send
        assert seen == [] and view.frames == f0 + 2
        nudged = stat.copy()
        nudged[1] *= 1.0001  # a size change far below a pixel: nothing to send either
        view.render_topics(nudged)
        assert seen == [] and view.frames == f0 + 3
        grown = stat.copy()
        grown[0] *= 1.5  # topic 0 gains tokens: only the circles' sizes change
        view.render_topics(grown)
        assert _patched(seen, view.source) == [{"radius", "weight"}], seen
        assert _patched(seen, view.labels) == []
        r = np.asarray(view.source.data["radius"])
        assert r[0] == r.max() and np.allclose(r[1:] / r[0], np.sqrt(
            grown[1:].sum(axis=1) / grown[0].sum()), rtol=1e-6)
        seen.clear()
        moved = grown.copy()
        moved[1] = 0.5 * (grown[1] + grown[2])  # topic 1 moves towards topic 2
        view._layout_time = -np.inf  # a placement is due
        view.render_topics(moved)
        cols = set().union(*_patched(seen, view.source)) if _patched(seen, view.source) else set()
        replaced = [e for e in seen if getattr(e, "attr", None) == "data"
                    and not hasattr(e, "patches")]  # a new viewport: all sent again
        assert replaced or {"x", "y"} <= cols, seen  # the centres went out...
        assert replaced or _patched(seen, view.labels) == [{"x", "y"}], seen  # ...labels too
        xy = np.stack([view.source.data["x"], view.source.data["y"]], axis=1)
        assert np.allclose(xy, view._coords, atol=1e-6)  # the page has the new centres
    finally:
        view.close()
