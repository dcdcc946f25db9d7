"""The SFA and k-means views and the pump's error line, driven without a browser: each test
is a notebook user's step that went wrong."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import KMeansView, SimilarItemsView  # noqa: E402

from bidlab.learn import Snapshot  # noqa: E402
from bidlab.models import SFA, KMeans  # noqa: E402


def _ratings(users: int, items: int, seed: int) -> sp.csr_matrix:
    """Ratings 1..5, about half of them given, every user and item rated at least once."""
    rng = np.random.default_rng(seed)
    R = rng.integers(1, 6, (users, items)) * (rng.random((users, items)) < 0.5)
    R[np.arange(users), np.arange(users) % items] = 3
    R[np.arange(items) % users, np.arange(items)] = 4
    return sp.csr_matrix(R.astype(np.float64))


def test_sfa_view_follows_items_folded_in_while_it_is_shown():
    # the idle redraw was skipped (same step), so the folded-in items never showed; drawn,
    # the titles, the min_ratings filter and the p@10 training mask were one item count
    # short of the model's and the drawing failed
    R = _ratings(30, 12, seed=0)
    est = SFA(2, max_iter=3, random_state=0)
    lr = est.learner(R)
    lr.fit(progress=None)
    view = SimilarItemsView(lr, [f"t{j}" for j in range(12)], items=[0], n=20, train=R,
                            test=R)
    try:
        view.pump.stop()  # the ticks below are the test's own
        view.pump.tick()
        assert len(view.lists[0]) == 11 and "item 12" not in view.lists[0]
        ids = est.partial_fit_items(_ratings(30, 3, seed=1))
        np.testing.assert_array_equal(ids, [12, 13, 14])
        view.pump.tick()
        assert view.view.errors == []
        assert len(view.lists[0]) == 14
        assert {"item 12", "item 13", "item 14"} <= set(view.lists[0])
        assert "item 13" in view.table.value
        U, V = lr.model.W.values.data, lr.model.modelmats[0].data
        assert 0.0 <= view.p_at_10(U, V) <= 1.0  # the training mask has the new items
        # titles for the new items: shown at the next tick, with no change to the model
        view.set_titles([f"t{j}" for j in range(12)] + ["<new> a", "new b", "new c"])
        view.pump.tick()
        assert {"<new> a", "new b", "new c"} <= set(view.lists[0])
        assert "&lt;new&gt; a" in view.table.value and "item 13" not in view.table.value
        with pytest.raises(ValueError, match="one title per item"):
            view.set_titles(["t0"])
        est.partial_fit_users(_ratings(4, 15, seed=2))  # new users: the view goes on
        view.pump.tick()
        assert view.view.errors == [] and "step 3 · done" in view.status.value
    finally:
        view.close()


def test_a_view_that_cannot_draw_says_why_once_and_keeps_drawing():
    # an error in a view's drawing was kept in view.errors only: the view froze silently
    X = np.random.default_rng(0).random((40, 2))
    lr = KMeans(n_clusters=2, max_iter=3).learner(X)
    view = KMeansView(lr)
    try:
        view.pump.stop()
        good = {"centers": np.array(lr.model.modelmats[0].data, np.float64)}
        bad = {"centers": np.array([["a", "b"], ["c", "d"]])}
        view.view._store(Snapshot({"train_score": -1.0}, bad, "running", 1))
        view.pump.tick()
        assert len(view.view.errors) == 1
        line = view.error_line
        assert line in view.widget.children
        assert "could not draw a frame: ValueError: could not convert string to float" \
            in line.value
        assert "&#x27;a&#x27;" in line.value  # escaped
        assert "\n" not in line.value
        line.value = ""  # the same error again is not shown again
        view.view._store(Snapshot({"train_score": -1.0}, bad, "running", 2))
        view.pump.tick()
        assert len(view.view.errors) == 2 and line.value == ""
        view.view._store(Snapshot({"train_score": -2.0}, good, "running", 3))
        view.pump.tick()  # the next frames are drawn
        assert view.points == 1 and "step 3 · running · score -2" in view.status.value
        view.view._store(Snapshot({"train_score": -2.0}, {"centers": np.zeros(2)}, "running",
                                  4))
        view.pump.tick()  # another error replaces the line
        assert "IndexError" in line.value and "ValueError" not in line.value
    finally:
        view.close()
    assert view.view.report is None  # a closed view lets go of its widgets


def test_kmeans_view_status_without_a_score():
    # a distributed learner's metrics may hold train_score=None: the status' format raised
    X = np.random.default_rng(0).random((40, 2))
    lr = KMeans(n_clusters=2, max_iter=3).learner(X)
    view = KMeansView(lr)
    try:
        view.pump.stop()
        views = {"centers": np.array(lr.model.modelmats[0].data, np.float64)}
        view.render(Snapshot({"train_score": None}, views, "running", 1))
        assert view.status.value.endswith("· score n/a")
        view.render(Snapshot({"train_score": float("nan")}, views, "running", 2))
        assert view.status.value.endswith("· score n/a")
        view.render(Snapshot({"train_score": -0.5}, views, "running", 3))
        assert view.status.value.endswith("· score -0.5")
    finally:
        view.close()
