"""NMF and SFA as a new user meets them: a stream whose first rows are all zero, similar
items of an item never rated, and ranking metrics given sets or dicts of items."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models import NMF, SFA
from bidlab.models.sfa.metrics import map_at_k, ndcg_at_k, precision_at_k


def _low_rank(n: int = 60, d: int = 12, k: int = 3) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.random((n, k)) @ rng.random((k, d))


# -- NMF.partial_fit -----------------------------------------------------------------------
@pytest.mark.parametrize("sparse", [False, True])
def test_nmf_first_partial_fit_of_zero_rows_is_refused_not_left_at_zero_for_good(sparse):
    X = _low_rank()
    zeros = np.zeros((1, X.shape[1]))  # e.g. an empty document streamed one row at a time
    nmf = NMF(3, random_state=0)
    # was: accepted; the start sqrt(mean / k) was 0, so the components and every later
    # row's factors started at 0, which multiplicative steps never leave: the stream
    # learned nothing, silently (components_ all zero after any number of calls)
    with pytest.raises(ValueError, match="first partial_fit's observed entries are all "
                       "zero.*pass rows with a nonzero entry"):
        nmf.partial_fit(sp.csr_matrix(zeros) if sparse else zeros)
    assert getattr(nmf, "model_", None) is None  # nothing half-made was kept
    for _ in range(20):
        for i in range(0, 60, 10):
            nmf.partial_fit(X[i: i + 10])
    nmf.partial_fit(zeros)  # zero rows after the start are fine
    assert nmf.components_.max() > 0
    err = np.linalg.norm(X - nmf.transform(X) @ nmf.components_) / np.linalg.norm(X)
    assert err < 0.1


# -- SFA.similar_items ---------------------------------------------------------------------
def test_similar_items_refuses_an_item_never_rated_in_training():
    R = sp.random(40, 25, density=0.3, random_state=0, format="lil")
    R[:, 4] = 0
    R = sp.csr_matrix(R)
    R.eliminate_zeros()
    R.data = np.ceil(R.data * 5)
    est = SFA(3, max_iter=5, random_state=0).fit(R)
    # was: items 0, 1, 2 (the first ids) with cosine 0, as if they were its most similar
    with pytest.raises(ValueError, match="item 4 has no training rating.*min_ratings=0"):
        est.similar_items(4, n=3)
    items, cos = est.similar_items(4, n=3, min_ratings=0)  # asked for: compared anyway
    assert items.shape == (3,) and 4 not in items
    rated, _ = est.similar_items(3, n=3)  # a rated item is unchanged
    assert 4 not in rated and 3 not in rated


# -- ranking metrics -----------------------------------------------------------------------
def test_ranking_metrics_take_held_out_items_as_sets():
    recommended = [[1, 2, 3, 4], [5, 6, 7, 8]]
    as_lists = [[2, 4, 9], [8]]
    for as_sets in ([{2, 4, 9}, {8}], [frozenset({2, 4, 9}), frozenset({8})]):
        # was: a set raised "unhashable type: 'set'" and a frozenset counted no hit (0.0)
        for metric in (precision_at_k, map_at_k, ndcg_at_k):
            assert metric(recommended, as_sets, 4) == metric(recommended, as_lists, 4)
    # by hand: p@4 (2/4 + 1/4) / 2; AP@4 ((1/2 + 2/4) / 3 + (1/4) / 1) / 2
    assert precision_at_k(recommended, [{2, 4, 9}, {8}], 4) == pytest.approx(0.375)
    assert map_at_k(recommended, [{2, 4, 9}, {8}], 4) == pytest.approx((1 / 3 + 1 / 4) / 2)


def test_ranking_metrics_refuse_dicts_and_unordered_recommendations():
    # was: zip paired the dicts' keys, so user 5 with no hit scored 1.0 (its key, 5, "hit")
    with pytest.raises(ValueError, match=r"recommended is a mapping.*\[recommended\[u\] "
                       "for u in users\\]"):
        precision_at_k({5: [1]}, {5: [2]}, 1)
    with pytest.raises(ValueError, match="relevant is a mapping"):
        map_at_k([[1]], {0: [2]}, 1)
    # was: a set of recommended items, which has no order, was ranked in hash order
    with pytest.raises(ValueError, match="recommended list 0 is a set, which has no order"):
        ndcg_at_k([{1, 2}], [[2]], 2)
