"""The live views of the newer model families as a notebook drives them: SFA's similar-items
list at its edges (n beyond the items, filtered or never-rated items, few items for p@10),
the k-means view's learner check and its first picture, the dashboard's failure text after
a new run, and the static picture of the Bayes-net view (no browser, no pump thread)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import (  # noqa: E402
    BayesNetView,
    Dashboard,
    KMeansView,
    SimilarItemsView,
    similar_titles,
)

from bidlab.learn import Learner, MemorySource, Snapshot  # noqa: E402
from bidlab.models import SFA, BayesNet, KMeans  # noqa: E402
from bidlab.models.bayesnet.network import Network  # noqa: E402
from bidlab.models.sfa.metrics import precision_at_k, top_k  # noqa: E402
from bidlab.models.sfa.model import SFAModel  # noqa: E402


def _ratings(n_users: int = 80, n_items: int = 30, unrated: tuple[int, ...] = (),
             seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    full = rng.standard_normal((n_users, 3)) @ rng.standard_normal((3, n_items)) + 3
    mask = rng.random(full.shape) < 0.4
    mask[:, 0] = True
    mask[:, list(unrated)] = False
    rows, cols = np.nonzero(mask)
    return sp.csr_matrix((full[rows, cols], (rows, cols)), shape=full.shape)


def _sfa_view(X: sp.csr_matrix, feedback: str = "explicit", **kw):
    est = SFA(3, max_iter=4, random_state=0, feedback=feedback)
    lrn = est.learner(abs(X) if feedback == "implicit" else X)
    titles = [f"m{j}" for j in range(X.shape[1])]
    view = SimilarItemsView(lrn, titles, **kw)
    # the renders below are the test's own: the pump stops before fit (the view of a
    # trained learner draws its model at the pump's first tick)
    view.pump.stop()
    lrn.fit(progress=None)
    return est, titles, view


def _items_snap(est, step: int = 5) -> Snapshot:
    m = est.model_
    return Snapshot({"train_score": -0.5}, {"items": m.item_factors(),
                                            "users": m.user_factors()}, "done", step)


# -- SimilarItemsView -------------------------------------------------------------------------


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_sfa_view_with_n_beyond_the_items_lists_every_other_item(feedback):
    X = _ratings()
    est, titles, view = _sfa_view(X, feedback, n=40, train=X, watch=2, min_ratings=0)
    try:
        view.render(_items_snap(est))  # was: numpy's "kth(=39) out of bounds" every tick
        for item, names in zip(view.items, view.lists, strict=True):
            assert len(names) == X.shape[1] - 1
            assert titles[item] not in names  # never the item itself
        assert view.view.errors == []
    finally:
        view.close()


def test_similar_titles_never_lists_left_out_items():
    V = np.random.default_rng(0).standard_normal((6, 2))
    keep = np.array([True, True, False, False, True, False])
    titles = list("abcdef")
    # items 0 and 1 are the only kept ones besides item 4: at most 2 per list
    assert sorted(similar_titles(V, [4], titles, 5, 2, keep)[0]) == ["a", "b"]
    assert similar_titles(V, [0], titles, 5, 2, np.eye(6, dtype=bool)[0]) == [[]]


def test_sfa_view_leaves_out_never_rated_items_as_similar_items_does():
    X = _ratings(unrated=(5, 6))
    n = X.shape[1] - 3  # every item but the watched one and the two never rated
    est, titles, view = _sfa_view(X, n=n, train=X, watch=2)
    try:
        view.render(_items_snap(est))
        for item, names in zip(view.items, view.lists, strict=True):
            want, _ = est.similar_items(item, n=n)  # min_ratings=1 by default
            assert names == [titles[j] for j in want]
            assert "m5" not in names and "m6" not in names
    finally:
        view.close()


def test_sfa_view_min_ratings_lists_only_kept_items_and_refuses_one_that_keeps_none():
    X = _ratings()
    counts = np.bincount(X.indices, minlength=X.shape[1])
    floor = int(np.sort(counts)[-4])  # about four items have this many ratings or more
    est, titles, view = _sfa_view(X, n=10, train=X, items=[0, 1], min_ratings=floor)
    try:
        view.render(_items_snap(est))
        kept = {titles[j] for j in np.flatnonzero(counts >= floor)}
        for item, names in zip(view.items, view.lists, strict=True):
            assert set(names) == kept - {titles[item]}
    finally:
        view.close()
    with pytest.raises(ValueError, match="no item has min_ratings=1000"):
        SimilarItemsView(est.learner(X), titles, train=X, min_ratings=1000)


def test_sfa_view_refuses_item_ids_out_of_range_and_n_below_one():
    X = _ratings()
    lrn = SFA(3, max_iter=1, random_state=0).learner(X)
    titles = [f"m{j}" for j in range(X.shape[1])]
    with pytest.raises(ValueError, match="item 30 is not an item id: the learner has 30"):
        SimilarItemsView(lrn, titles, items=[3, 30])
    with pytest.raises(ValueError, match="item -1 is not an item id"):
        SimilarItemsView(lrn, titles, items=[-1])
    for n in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="n is the number of similar items"):
            SimilarItemsView(lrn, titles, n=n)


def test_sfa_view_p_at_10_with_fewer_than_10_items():
    X = _ratings(n_users=60, n_items=6, seed=1)
    rng = np.random.default_rng(2)
    pick = rng.random(X.shape) < 0.3
    pick[:, 0] = False  # every user keeps a training rating
    held = X.multiply(sp.csr_matrix(pick)).tocsr()
    held.eliminate_zeros()
    train = (X - held).tocsr()
    train.eliminate_zeros()
    est, _, view = _sfa_view(train, n=3, train=train, test=held, watch=2)
    try:
        view.render(_items_snap(est, step=9))  # was: top_k's "k=10 is more than the 6 items"
        data = view.curves.data
        assert data["step"][-1] == 9.0 and data["train RMSE"][-1] == 0.5
        assert "step 9" in view.status.value
        U, V = est.model_.user_factors(), est.model_.item_factors()
        users = np.flatnonzero(np.diff(held.indptr))
        scores = U[users, :3] @ V[:, :3].T + V[:, -1]
        recs = top_k(scores, 6, train[users])
        rels = [held.indices[held.indptr[u]: held.indptr[u + 1]] for u in users]
        assert data["p@10"][-1] == pytest.approx(precision_at_k(list(recs), rels, 10))
    finally:
        view.close()


# -- KMeansView -------------------------------------------------------------------------------


def test_kmeans_view_refuses_an_sfa_learner_not_yet_initialised():
    lrn = Learner(SFAModel(k=2), MemorySource(_ratings(n_users=20, n_items=8), batch_size=20),
                  n_passes=1)
    with pytest.raises(TypeError, match="needs a k-means learner"):
        KMeansView(lrn)
    assert not lrn.model.initialised  # refused before anything was built


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_kmeans_view_of_a_trained_learner_shows_its_cluster_sizes(algorithm):
    X = np.random.default_rng(0).random((300, 3))
    lrn = KMeans(3, algorithm=algorithm, random_state=0, max_iter=5).learner(X)
    lrn.fit(progress=None)
    view = KMeansView(lrn)
    view.pump.stop()
    try:
        C, weights = lrn.model.host_modelmats()
        if lrn.model.origin is not None:  # centres measured from the rows' mean
            C = C + lrn.model.origin
        np.testing.assert_allclose(view.sizes.data["size"], weights[:, 0])
        np.testing.assert_allclose(view.centers.data["x"], C[:, 0])
        assert float(np.sum(view.sizes.data["size"])) > 0
    finally:
        view.close()


# -- Dashboard --------------------------------------------------------------------------------


def test_dashboard_clears_the_failure_when_the_next_run_ended_between_two_ticks():
    lrn = KMeans(2, random_state=0, max_iter=3).learner(
        np.random.default_rng(0).random((40, 2)))
    dash = Dashboard(lrn)
    dash.pump.stop()
    try:
        dash.render(Snapshot({"step": 3}, {}, "failed", 3, "RuntimeError: <first>"))
        assert "RuntimeError: &lt;first&gt;" in dash.error.value
        # a second run fails otherwise; the pump saw neither its start nor its progress
        dash.render(Snapshot({"step": 5}, {}, "failed", 5, "ValueError: second"))
        assert "ValueError: second" in dash.error.value
        assert "first" not in dash.error.value
        # a third run succeeds, also between two ticks: no failure is left on show
        dash.render(Snapshot({"step": 9}, {}, "done", 9))
        assert dash.error.value == "" and dash.state.value == "done"
    finally:
        dash.close()
        dash.close()


# -- static pictures --------------------------------------------------------------------------


def test_static_picture_of_the_bayesnet_view_draws_its_bars():
    pytest.importorskip("matplotlib")
    from bidlab.widgets.static import _draw
    from matplotlib.figure import Figure

    net = Network(["a", "b"], [["no", "yes"], ["lo", "hi"]], [[], [0]],
                  [np.array([[0.3, 0.7]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    lrn = BayesNet(net, n_chains=50, burn_in=2, n_samples=5, random_state=0).learner()
    view = BayesNetView(lrn)
    view.pump.stop()
    try:
        lrn.fit(progress=None)
        m = lrn.model.chains.marginals()
        view.render(Snapshot({}, {"marginals": m, "evidence": lrn.model.chains.ev.astype(
            np.float64)}, "done", 1))
        ax = Figure().subplots()
        _draw(ax, view.figure)
        widths = [p.get_width() for p in ax.patches]
        np.testing.assert_allclose(widths, m[view.index])  # one bar per state
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels == ["a = no", "a = yes", "b = lo", "b = hi"]
    finally:
        view.close()


def test_sfa_view_refuses_train_or_test_of_other_shapes():
    X = _ratings()
    with pytest.raises(ValueError, match="test has 31 items"):
        _sfa_view(X, test=sp.csr_matrix((80, 31)))
    with pytest.raises(ValueError, match="must have one shape"):
        _sfa_view(X, train=X, test=X[:40])
