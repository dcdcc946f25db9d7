"""SFA's input and id checks and the ranking metrics' list checks: duplicate ratings in any
sparse format, new items with no rating, float ids in recommend and similar_items,
min_ratings that leaves nothing, and top-k lists with repeats or a k above the items."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models import SFA
from bidlab.models.sfa.metrics import (
    map_at_k,
    ndcg_at_k,
    precision_at_k,
    ranking_metrics,
    top_k,
)

USERS = np.array([0, 0, 1, 1, 2])
ITEMS = np.array([0, 0, 1, 0, 1])  # (0, 0) rated twice: a 4, then a 5
STARS = np.array([4.0, 5.0, 3.0, 2.0, 1.0])


def _small():
    R = sp.csr_matrix(np.array([[5.0, 3, 0], [4, 0, 1], [0, 2, 5], [1, 1, 4]]))
    return R, SFA(2, max_iter=3, random_state=0).fit(R)


@pytest.mark.parametrize("make", [sp.coo_matrix, sp.coo_array])
def test_coo_duplicates_are_refused_not_summed(make):
    coo = make((STARS, (USERS, ITEMS)), shape=(3, 2))
    with pytest.raises(ValueError, match="1 duplicate \\(user, item\\) entries; keep one"):
        SFA(1, max_iter=2, random_state=0).fit(coo)
    # without the duplicate the COO is taken, its explicit zero rating kept
    data = np.array([4.0, 0.0, 3.0, 2.0, 1.0])
    rows, cols = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 1, 0, 1])
    ok = make((data, (rows, cols)), shape=(3, 2))
    a = SFA(1, max_iter=2, random_state=0).fit(ok)
    b = SFA(1, max_iter=2, random_state=0).fit(sp.csr_matrix(ok))
    assert a.train_.nnz == 5
    np.testing.assert_array_equal(a.user_factors_, b.user_factors_)


def test_coo_duplicates_are_refused_by_fold_in_and_score():
    _, est = _small()
    new_users = sp.coo_matrix((np.array([4.0, 5.0]), (np.array([0, 0]), np.array([1, 1]))),
                              shape=(1, 3))
    with pytest.raises(ValueError, match="duplicate"):
        est.partial_fit_users(new_users)
    with pytest.raises(ValueError, match="duplicate"):
        est.score(new_users)


def test_a_new_item_with_no_rating_is_named_as_an_item():
    _, est = _small()
    new = sp.csr_matrix(np.array([[4.0, 0], [5, 0], [0, 0], [0, 0]]))
    with pytest.raises(ValueError, match=r"1 new items \(columns\) of X have no rating "
                       r"\(the first is column 1, which would be item 4\)") as err:
        est.partial_fit_items(new)
    assert "users" not in str(err.value)
    assert est.n_items_ == 3  # nothing folded in


def test_recommend_and_similar_items_take_the_ids_predict_takes():
    _, est = _small()
    est.predict(1.0, 2.0)
    items, scores = est.recommend(1.0, n=1)
    np.testing.assert_array_equal(items, est.recommend(1, n=1)[0])
    np.testing.assert_array_equal(scores, est.recommend(1, n=1)[1])
    assert 0 not in items and 2 not in items  # user 1's rated items left out
    np.testing.assert_array_equal(est.similar_items(2.0, n=2)[0],
                                  est.similar_items(2, n=2)[0])
    with pytest.raises(ValueError, match="user ids must be integers; got float64 1.5"):
        est.recommend(1.5)
    with pytest.raises(ValueError, match="recommend takes one user id; got 2"):
        est.recommend([1, 2])
    with pytest.raises(ValueError, match="item ids must be integers"):
        est.similar_items("a")


def test_similar_items_says_min_ratings_leaves_no_item():
    _, est = _small()
    with pytest.raises(ValueError, match="no item other than item 0 has min_ratings=1000 or "
                       "more training ratings \\(the most any has is 3\\): lower "
                       "min_ratings to 3 or less") as err:
        est.similar_items(0, n=1, min_ratings=1000)
    assert "<= 0" not in str(err.value)


def test_recommend_says_filter_seen_leaves_no_item():
    est = SFA(1, max_iter=2, random_state=0).fit(sp.csr_matrix(np.array([[5.0, 3],
                                                                          [4, 0]])))
    with pytest.raises(ValueError, match="user 0 rated all 2 items in training, so "
                       "filter_seen=True leaves none"):
        est.recommend(0, n=1)
    assert est.recommend(0, n=1, filter_seen=False)[0].shape == (1,)


@pytest.mark.parametrize("metric", [precision_at_k, map_at_k, ndcg_at_k])
def test_ranking_metrics_refuse_a_list_that_repeats_an_item(metric):
    with pytest.raises(ValueError, match="recommended list 1 repeats item 2 \\(at places 0 "
                       "and 2\\)"):
        metric([[1, 3, 4], [2, 5, 2]], [[1], [2]], k=3)
    assert metric([[1, 3, 4], [2, 5, 6]], [[1], [2]], k=3) <= 1.0


def test_ranking_metrics_refuse_k_above_the_items():
    train = sp.csr_matrix(np.array([[1.0, 0, 0], [0, 1, 0]]))
    test = sp.csr_matrix(np.array([[0.0, 1, 0], [0, 0, 1]]))
    with pytest.raises(ValueError, match="k=5 is more than the 3 items.*use k <= 3"):
        ranking_metrics(lambda u: np.ones((len(u), 3)), train, test, k=5)
    with pytest.raises(ValueError, match="k=4 is more than the 3 items"):
        top_k(np.ones((2, 3)), 4)
    m = ranking_metrics(lambda u: np.ones((len(u), 3)), train, test, k=3)
    assert sorted(m) == ["map@3", "ndcg@3", "p@3"]
    assert all(0.0 <= v <= 1.0 for v in m.values())
