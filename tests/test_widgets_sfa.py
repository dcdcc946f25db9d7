"""The SFA view's Python side: its "similar items to ..." list follows the factors (as
SFA.similar_items ranks them), its curves take the training RMSE and held-out p@10."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import SimilarItemsView, similar_titles  # noqa: E402

from bidlab.learn import Snapshot  # noqa: E402
from bidlab.models import SFA  # noqa: E402
from bidlab.models.sfa.metrics import ranking_metrics  # noqa: E402


def _data(seed=0):
    rng = np.random.default_rng(seed)
    full = rng.standard_normal((80, 3)) @ rng.standard_normal((3, 30)) + 3
    mask = rng.random(full.shape) < 0.4
    mask[:, 0] = True
    rows, cols = np.nonzero(mask)
    X = sp.csr_matrix((full[rows, cols], (rows, cols)), shape=full.shape)
    test = sp.csr_matrix((full[rows, cols] * (rng.random(rows.size) < 0.2), (rows, cols)),
                         shape=full.shape)
    test.eliminate_zeros()
    return X - X.multiply(test > 0), test


def test_similar_titles_rank_as_similar_items():
    X, _ = _data()
    est = SFA(3, max_iter=5, random_state=0).fit(X)
    titles = [f"movie {j}" for j in range(X.shape[1])]
    got = similar_titles(est.model_.item_factors(), [0, 7], titles, 4, 3)
    for item, names in zip([0, 7], got, strict=True):
        want, _ = est.similar_items(item, n=4)
        assert names == [titles[j] for j in want]


def test_view_lists_similar_items_and_streams_rmse_and_p_at_10():
    train, test = _data()
    titles = [f"<movie {j}>" for j in range(train.shape[1])]
    est = SFA(3, max_iter=4, random_state=0)
    lrn = est.learner(train)
    view = SimilarItemsView(lrn, titles, n=3, train=train, test=test, watch=2)
    view.pump.stop()  # renders below are the test's own, not the pump thread's
    try:
        assert view.items[0] == 0  # the most rated item
        lrn.fit(progress=None)
        m = est.model_
        snap = Snapshot({"train_score": -0.5}, {"items": m.item_factors(),
                                                "users": m.user_factors()}, "done", 7)
        before = len(view.curves.data["step"])
        view.render(snap)
        assert "&lt;movie 0&gt;" in view.table.value  # titles are escaped
        for name in view.lists[0]:
            assert name.replace("<", "&lt;").replace(">", "&gt;") in view.table.value
        want, _ = est.similar_items(0, n=3)
        assert view.lists[0] == [titles[j] for j in want]
        data = view.curves.data
        assert len(data["step"]) == before + 1
        assert data["step"][-1] == 7.0 and data["train RMSE"][-1] == 0.5
        U, V = est.user_factors_, est.item_factors_
        scores = lambda u: U[u] @ V.T + est.item_bias_  # noqa: E731
        assert data["p@10"][-1] == pytest.approx(ranking_metrics(scores, train, test,
                                                                10)["p@10"])
        view.render(snap)  # the same step again: nothing new sent
        assert len(view.curves.data["step"]) == before + 1
    finally:
        view.close()


def test_view_refuses_other_learners_and_wrong_titles():
    train, _ = _data()
    lrn = SFA(3, random_state=0).learner(train)
    with pytest.raises(ValueError, match="one title per column"):
        SimilarItemsView(lrn, ["a", "b"])
    from bidlab.models import KMeans

    km = KMeans(2, random_state=0).learner(np.random.default_rng(0).random((20, 2)))
    with pytest.raises(TypeError, match="needs an SFA learner"):
        SimilarItemsView(km, ["a"])
