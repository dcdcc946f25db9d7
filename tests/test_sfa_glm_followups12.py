"""SFA's fold-in beside a live learner and its similar-items counts; GLM's weighted losses
(``loss_targets`` and the ``lrate="auto"`` pilot's held-out score)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models import SFA
from bidlab.models.glm import GLM


def _ratings(n_users: int = 60, n_items: int = 40, density: float = 0.3,
             seed: int = 0) -> sp.csr_matrix:
    R = sp.random(n_users, n_items, density=density, random_state=seed, format="csr")
    R.data = np.ceil(R.data * 5)
    return R


# -- SFA: a learner made before a fold-in ------------------------------------------------------
@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
@pytest.mark.parametrize("side", ["items", "users"])
def test_learner_made_before_a_fold_in_refuses_to_train_on(feedback, side):
    R = _ratings()
    est = SFA(4, feedback=feedback, max_iter=2, random_state=0)
    lrn = est.learner(R)
    lrn.fit(progress=None)
    if side == "items":
        ids = est.partial_fit_items(_ratings(60, 5, density=0.5, seed=1))
    else:
        ids = est.partial_fit_users(_ratings(5, 40, density=0.5, seed=1))
    folded = est.item_factors_ if side == "items" else est.user_factors_
    before = folded[ids].copy()
    lrn.set(n_passes=4)
    with pytest.raises(ValueError, match=r"folded in .*est\.learner\(est\.train_\)"):
        lrn.fit(progress=None)
    assert lrn.state == "failed"
    after = est.item_factors_ if side == "items" else est.user_factors_
    np.testing.assert_array_equal(after[ids], before)  # the folded-in rows stand
    assert est.n_iter_ == 2
    # what the message says works: a new learner on every rating so far
    lrn2 = est.learner(est.train_, n_passes=2)
    lrn2.fit(progress=None)
    assert est.item_factors_.shape[0] == est.n_items_ == est.train_.shape[1]
    assert est.user_factors_.shape[0] == est.n_users_ == est.train_.shape[0]


def test_learner_resumed_within_a_pass_after_a_fold_in_refuses():
    """A run stopped between minibatches does not meet start_pass when it resumes: the
    item step at the pass's end checks too."""
    R = _ratings()
    est = SFA(4, max_iter=3, batch_size=20, random_state=0)
    lrn = est.learner(R, max_steps=4)  # a pass is 3 minibatches: stops inside the second
    lrn.fit(progress=None)
    est.partial_fit_items(_ratings(60, 5, density=0.5, seed=1))
    lrn.set(max_steps=None)
    with pytest.raises(ValueError, match="folded in"):
        lrn.fit(progress=None)


def test_fold_in_refused_while_a_learner_runs():
    est = SFA(4, max_iter=1, random_state=0)
    lrn = est.learner(_ratings(), n_passes=10**6)
    lrn.start()
    try:
        lrn.pause(wait=True)
        assert lrn.state == "paused"
        with pytest.raises(RuntimeError, match="partial_fit_items refused"):
            est.partial_fit_items(_ratings(60, 5, density=0.5, seed=1))
        with pytest.raises(RuntimeError, match="partial_fit_users refused"):
            est.partial_fit_users(_ratings(5, 40, density=0.5, seed=1))
    finally:
        lrn.stop()
    assert est.n_items_ == 40 and est.n_users_ == 60
    assert est.partial_fit_items(_ratings(60, 5, density=0.5, seed=1)).size == 5


# -- SFA: similar_items' rating counts ------------------------------------------------------
def test_similar_items_counts_once_per_training_ratings():
    R = _ratings()
    est = SFA(4, max_iter=3, random_state=0).fit(R)
    first = est._item_counts()
    est.similar_items(0, n=3)
    est.similar_items(1, n=3, min_ratings=2)
    assert est._item_counts() is first  # not counted again per call
    np.testing.assert_array_equal(first, np.bincount(R.indices, minlength=40))
    with pytest.raises(ValueError):
        first[0] = 1  # the kept counts are read-only

    new = sp.lil_matrix((60, 2))
    new[:9, 0] = 4.0  # item 40: 9 ratings
    new[:2, 1] = 3.0  # item 41: 2 ratings
    ids = est.partial_fit_items(new.tocsr())
    counts = est._item_counts()
    assert counts is not first and counts.shape == (42,)
    np.testing.assert_array_equal(counts[ids], [9, 2])
    items, _ = est.similar_items(int(ids[0]), n=39, min_ratings=3)
    assert 41 not in items and 40 not in items
    assert 41 in est.similar_items(int(ids[0]), n=41, min_ratings=1)[0]

    est.fit(R[:, :30])  # a new fit: counted again
    np.testing.assert_array_equal(est._item_counts(), np.bincount(R[:, :30].indices,
                                                                  minlength=30))
    est.similar_items(0, n=3)


def test_similar_items_reports_the_most_rated_other_item():
    R = sp.lil_matrix((6, 4))
    R[:, 0] = 5.0  # item 0: 6 ratings
    R[:3, 1] = 4.0  # item 1: 3 ratings
    R[0, 2] = R[1, 3] = 2.0
    est = SFA(2, max_iter=2, random_state=0).fit(R.tocsr())
    with pytest.raises(ValueError, match="most any has is 3"):
        est.similar_items(0, n=1, min_ratings=4)
    np.testing.assert_array_equal(est._item_counts(), [6, 3, 1, 1])  # left as counted


# -- GLM: weighted losses -------------------------------------------------------------------
def test_loss_targets_weighs_rows_as_sample_weight():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 5))
    y = (X[:, 0] > 0).astype(int)
    g = GLM(link="logistic", lrate=0.3, n_passes=3, random_state=0).fit(X, y)
    w = rng.integers(0, 4, size=300).astype(float)
    rows = np.array([g.loss_targets(X[i : i + 1], y[i : i + 1])[0] for i in range(300)])
    np.testing.assert_allclose(g.loss_targets(X, y, sample_weight=w),
                               [np.sum(w * rows) / np.sum(w)], rtol=1e-6)
    repeated = np.repeat(np.arange(300), w.astype(int))  # integer weights: repeated rows
    np.testing.assert_allclose(g.loss_targets(X, y, w), g.loss_targets(X[repeated],
                                                                        y[repeated]),
                               rtol=1e-6)
    np.testing.assert_allclose(g.loss_targets(X, y, np.ones(300)), g.loss_targets(X, y))
    with pytest.raises(ValueError):
        g.loss_targets(X, y, sample_weight=np.ones(299))


@pytest.mark.parametrize("link", ["logistic", "linear"])
def test_auto_rate_pilot_ignores_rows_of_weight_zero(link):
    """Rows of weight 0 neither train nor score the pilot's candidates: what their targets
    say cannot change the rate it picks."""
    rng = np.random.default_rng(0)
    n = 4000
    X = rng.standard_normal((n, 20))
    w = (rng.random(n) < 0.5).astype(float)
    if link == "logistic":
        y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(int)
        other = np.where(w == 0, 1 - y, y)  # the unweighted rows' labels flipped
    else:
        y = X[:, 0] + X[:, 1]
        other = np.where(w == 0, 50.0, y)
    a = GLM(link=link, random_state=0)
    a.learner(X, y, sample_weight=w)
    b = GLM(link=link, random_state=0)
    b.learner(X, other, sample_weight=w)
    assert a.lrate_ == b.lrate_


def test_auto_rate_pilot_scores_with_class_weight():
    """``class_weight`` weighs the pilot's held-out rows as ``sample_weight`` would."""
    rng = np.random.default_rng(0)
    n = 4000
    X = rng.standard_normal((n, 20))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(int)
    by_class = GLM(link="logistic", class_weight={0: 1.0, 1: 0.0}, random_state=0)
    by_class.learner(X, y)
    flipped = GLM(link="logistic", random_state=0)
    other = np.zeros(n, dtype=int)  # the rows of weight 0 (class 1) relabelled 0
    other[np.flatnonzero(y == 1)[:2]] = 1  # (but for two: both classes are seen)
    flipped.learner(X, other, sample_weight=(y == 0).astype(float))
    assert by_class.lrate_ == flipped.lrate_
