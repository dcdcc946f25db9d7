"""Live views headless: a closed view lets its learner (and the learner's observer thread)
go, a dashboard shows how a run that failed before it was built ended, and the topic views
refuse a learner that trains no topics."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

import ipywidgets as W  # noqa: E402
from bidlab.widgets import Dashboard, IntertopicMap, KMeansView, TopicBubbles  # noqa: E402
from ipywidgets.widgets.widget import _instances  # noqa: E402

from bidlab.datasets import synthetic_lda_corpus  # noqa: E402
from bidlab.models import LDA, KMeans  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    return synthetic_lda_corpus(n_docs=120, n_words=40, k=3, seed=0)


def _gone(ref: weakref.ref, timeout: float = 3.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        gc.collect()
        if ref() is None:
            return True
        time.sleep(0.05)
    return False


def test_a_closed_dashboard_closes_its_boxes_and_lets_the_learner_go(corpus) -> None:
    lr = LDA(n_components=3, batch_size=20).learner(corpus.X, n_passes=2)
    before = set(_instances)
    dash = Dashboard(lr)
    made = set(_instances) - before
    lr.fit(progress=None)
    time.sleep(0.3)  # the observers deliver the last snapshots to the dashboard
    dash.close()
    # every widget but the plain Layout / Style objects is closed: none keeps a callback
    left = [type(_instances[k]).__name__ for k in set(_instances) & made
            if not isinstance(_instances[k], (W.Layout, W.Style))]
    assert left == []
    name = f"bidlab-observers-{lr.name}"
    ref = weakref.ref(lr)
    del lr, dash
    assert _gone(ref)
    end = time.monotonic() + 3.0  # the observers' thread ends with its learner
    while time.monotonic() < end and any(t.name == name for t in threading.enumerate()):
        time.sleep(0.05)
    assert not any(t.name == name for t in threading.enumerate())


def test_a_closed_view_is_not_held_by_the_observer_thread() -> None:
    X = np.random.default_rng(0).random((200, 4))
    lr = KMeans(n_clusters=3, batch_size=30).learner(X, n_passes=3)
    view = KMeansView(lr)
    lr.fit(progress=None)
    time.sleep(0.3)
    view.close()
    ref = weakref.ref(lr)
    del lr, view
    assert _gone(ref)


def test_a_dashboard_shows_how_an_earlier_run_failed(corpus) -> None:
    lr = LDA(n_components=3, batch_size=20).learner(corpus.X, n_passes=5)
    update = lr.model.update

    def failing(batch):
        if lr.step >= 2:
            raise FloatingPointError("the model <diverged>")
        return update(batch)

    lr.model.update = failing
    with pytest.raises(FloatingPointError):
        lr.fit(progress=None)
    assert lr.state == "failed"
    dash = Dashboard(lr)
    try:
        end = time.monotonic() + 3.0
        while time.monotonic() < end and not dash.error.value:
            time.sleep(0.05)
        assert "FloatingPointError" in dash.error.value
        assert "the model &lt;diverged&gt;" in dash.error.value  # escaped: shown as text
        assert dash.state.value == "failed"
    finally:
        dash.close()


@pytest.mark.parametrize("view", [TopicBubbles, IntertopicMap])
def test_topic_views_refuse_a_learner_that_trains_no_topics(view) -> None:
    lr = KMeans(n_clusters=3, batch_size=20).learner(np.random.default_rng(0).random((60, 5)))
    with pytest.raises(TypeError, match=f"{view.__name__} needs an LDA learner"):
        view(lr, list("abcde"))
