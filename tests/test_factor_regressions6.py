"""NMF and SFA as users meet them: transform and score of rows that leave a column
unobserved, ``set_output`` on ``transform``, continuing a coordinate-descent fit on data
with missing entries, similar items that were never rated, ``n`` and ``k`` that are not
whole numbers, the metrics' ``exclude`` and ``users``, a sparse pandas DataFrame of
ratings, and negative implicit counts in a fold-in."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from bidlab.models import NMF, SFA
from bidlab.models.sfa.metrics import (
    map_at_k,
    ndcg_at_k,
    precision_at_k,
    ranking_metrics,
    top_k,
)


def _nan_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((30, 8))
    M = rng.random((30, 8)) > 0.3
    return X, M, np.where(M, X, np.nan)


def _ratings(users: int = 30, items: int = 20, empty: int = 0) -> sp.csr_matrix:
    R = sp.random(users, items, density=0.3, random_state=0, format="lil")
    R[np.arange(users), np.arange(users) % items] = 0.5
    R = sp.csr_matrix(R)
    R.data = np.ceil(R.data * 5)
    return sp.hstack([R, sp.csr_matrix((users, empty))], format="csr") if empty else R


# -- NMF ------------------------------------------------------------------------------------
def test_nmf_transform_and_score_take_a_row_with_a_missing_entry():
    X, M, Xn = _nan_data()
    est = NMF(3, max_iter=30, random_state=0).fit(Xn)
    row = Xn[:1].copy()
    row[0, 0] = np.nan  # this one row leaves column 0 unobserved
    want = est.transform(np.vstack([row, Xn]))[:1]
    np.testing.assert_allclose(est.transform(row), want, rtol=1e-6)
    assert np.isfinite(est.score(row))
    # the same row as a CSR with a mask
    mask = ~np.isnan(row)
    np.testing.assert_allclose(est.transform(sp.csr_matrix(np.nan_to_num(row)), mask=mask),
                               want, rtol=1e-6)
    # a row with nothing observed still says so; fit still wants every column observed
    with pytest.raises(ValueError, match="rows of X have no observed entry"):
        est.transform(np.full((1, 8), np.nan))
    col = Xn.copy()
    col[:, 0] = np.nan
    with pytest.raises(ValueError, match="columns of X have no observed entry"):
        NMF(3).fit(col)


def test_nmf_set_output_pandas_wraps_transform_as_fit_transform():
    X = np.random.default_rng(1).random((20, 5))
    frame = pd.DataFrame(X, index=[f"r{i}" for i in range(20)])
    est = NMF(2, max_iter=20, random_state=0).set_output(transform="pandas")
    out = est.fit_transform(frame)
    assert isinstance(out, pd.DataFrame)
    got = est.transform(frame)
    assert isinstance(got, pd.DataFrame)
    assert list(got.columns) == ["nmf0", "nmf1"] and list(got.index) == list(frame.index)
    np.testing.assert_allclose(got.to_numpy(), NMF(2, max_iter=20, random_state=0)
                               .fit(X).transform(X), rtol=1e-10)
    assert type(NMF(2, max_iter=5, random_state=0).fit(X).transform(X)) is np.ndarray


def test_nmf_partial_fit_refuses_missing_entries_after_a_coordinate_descent_fit():
    X, M, Xn = _nan_data(2)
    est = NMF(3, max_iter=20, random_state=0).fit(X)  # solver='auto': coordinate descent
    assert est.model_.opts.solver == "cd"
    H = est.components_
    for args, kw in (((Xn,), {}), ((X,), {"mask": M}), ((sp.csr_matrix(X),), {"mask": M})):
        with pytest.raises(ValueError, match="solver='cd'.*missing entries.*solver='mu'"):
            est.partial_fit(*args, **kw)
        np.testing.assert_array_equal(est.components_, H)
    est.partial_fit(X)  # every entry observed: still fine
    assert est.n_iter_ == 21
    # fitted by multiplicative updates, missing entries are taken (not read as zeros)
    mu = NMF(3, solver="mu", max_iter=20, random_state=0).fit(X)
    a, b = mu.partial_fit(Xn).components_, mu.fit(X).partial_fit(np.nan_to_num(Xn)).components_
    assert not np.allclose(a, b)


# -- SFA ------------------------------------------------------------------------------------
@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_similar_items_leaves_out_items_never_rated(feedback):
    R = _ratings(empty=2)  # items 20 and 21 have no rating
    est = SFA(3, feedback=feedback, max_iter=5, random_state=0).fit(R)
    items, cos = est.similar_items(0, n=19)
    assert 20 not in items and 21 not in items and np.all(np.isfinite(cos))
    with pytest.raises(ValueError, match="only 19 items other than item 0 have "
                       "min_ratings=1"):
        est.similar_items(0, n=20)
    everything, _ = est.similar_items(0, n=21, min_ratings=0)  # 0 keeps every item
    assert {20, 21} <= set(everything.tolist())


def test_recommend_and_similar_items_refuse_a_fractional_n():
    est = SFA(3, max_iter=3, random_state=0).fit(_ratings())
    for bad in (2.5, True, "3", float("nan")):
        with pytest.raises(ValueError, match="takes n, the number of items, as an integer"):
            est.recommend(0, n=bad)
        with pytest.raises(ValueError, match="takes n, the number of items, as an integer"):
            est.similar_items(0, n=bad)
    np.testing.assert_array_equal(est.recommend(0, n=2.0)[0], est.recommend(0, n=2)[0])
    np.testing.assert_array_equal(est.similar_items(0, n=np.int64(2))[0],
                                  est.similar_items(0, n=2)[0])


def test_sparse_dataframe_ratings_are_its_stored_entries():
    R = _ratings()
    want = SFA(3, max_iter=4, random_state=0).fit(R)
    got = SFA(3, max_iter=4, random_state=0).fit(pd.DataFrame.sparse.from_spmatrix(R))
    assert got.train_.nnz == R.nnz
    np.testing.assert_allclose(got.user_factors_, want.user_factors_, rtol=1e-10)
    # a NaN-filled sparse frame reads as dense with NaN where missing: the same ratings
    D = np.where(R.toarray() > 0, R.toarray(), np.nan)
    frame = pd.DataFrame(D).astype(pd.SparseDtype(float, np.nan))
    nan_filled = SFA(3, max_iter=4, random_state=0).fit(frame)
    np.testing.assert_allclose(nan_filled.user_factors_, want.user_factors_, rtol=1e-10)
    new = pd.DataFrame.sparse.from_spmatrix(R[:2])
    np.testing.assert_array_equal(got.partial_fit_users(new), [30, 31])


def test_implicit_fold_in_refuses_negative_counts_as_fit_does():
    R = _ratings()
    est = SFA(3, feedback="implicit", max_iter=3, random_state=0).fit(R)
    neg = R[:2].copy()
    neg.data[:] = -5.0
    with pytest.raises(ValueError, match="implicit feedback needs counts >= 0"):
        SFA(2, feedback="implicit").fit(neg)
    with pytest.raises(ValueError, match="implicit feedback needs counts >= 0"):
        est.partial_fit_users(neg)
    column = sp.csr_matrix(([-3.0], ([0], [0])), shape=(30, 1))
    with pytest.raises(ValueError, match="implicit feedback needs counts >= 0"):
        est.partial_fit_items(column)
    assert (est.n_users_, est.n_items_) == (30, 20)  # nothing folded in
    explicit = SFA(3, max_iter=3, random_state=0).fit(R)
    np.testing.assert_array_equal(explicit.partial_fit_users(neg), [30, 31])


# -- metrics --------------------------------------------------------------------------------
@pytest.mark.parametrize("metric", [precision_at_k, map_at_k, ndcg_at_k])
def test_ranking_metrics_take_a_whole_float_k_and_refuse_a_fractional_one(metric):
    rec, rel = [[1, 2, 3], [4, 5, 6]], [[2], [6, 9]]
    assert metric(rec, rel, k=3.0) == metric(rec, rel, k=3)
    for bad in (2.5, True, 0, "2"):
        with pytest.raises(ValueError, match="k must be >= 1 and a whole number"):
            metric(rec, rel, k=bad)


def test_top_k_exclude_takes_any_sparse_format_of_the_scores_shape():
    scores = np.array([[1.0, 3.0, 2.0], [3.0, 2.0, 1.0]])
    seen = np.array([[0, 1, 0], [1, 0, 0]])
    want = top_k(scores, 2, sp.csr_matrix(seen))
    np.testing.assert_array_equal(want, [[2, 0], [1, 2]])
    for fmt in (sp.coo_matrix, sp.csc_matrix, sp.csr_array):
        np.testing.assert_array_equal(top_k(scores, 2, fmt(seen)), want)
    with pytest.raises(ValueError, match=r"exclude has shape \(2, 4\) but the scores have "
                       r"shape \(2, 3\)"):
        top_k(scores, 2, sp.csr_matrix(np.zeros((2, 4))))


def test_ranking_metrics_name_a_user_out_of_range():
    train = sp.csr_matrix(np.array([[1.0, 0, 0, 0], [0, 1, 0, 0]]))
    test = sp.csr_matrix(np.array([[0.0, 1, 0, 0], [0, 0, 1, 0]]))

    def score(u):
        return np.tile(np.arange(4.0), (len(u), 1))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = ranking_metrics(score, train, test, k=2, users=[0, 1])
    assert m == ranking_metrics(score, train, test, k=2)
    with pytest.raises(ValueError, match=r"user 5 is out of range: train and test have 2 "
                       r"users \(rows 0..1\)"):
        ranking_metrics(score, train, test, k=2, users=[0, 5])
    with pytest.raises(ValueError, match="users must be integer row ids"):
        ranking_metrics(score, train, test, k=2, users=[0.5])


def test_sfa_fits_a_ratings_object_as_load_movielens_returns_it():
    from bidlab.datasets.movielens import Ratings

    rng = np.random.default_rng(0)
    R = sp.random(30, 20, density=0.3, random_state=1, format="csr")
    R.data = np.ceil(R.data * 5)
    R = R[np.diff(R.indptr) > 0]
    ratings = Ratings(R, np.arange(R.shape[0]) + 100, rng.permutation(20) + 1000)
    a = SFA(3, max_iter=3, random_state=0).fit(ratings)
    b = SFA(3, max_iter=3, random_state=0).fit(R)
    np.testing.assert_array_equal(a.item_factors_, b.item_factors_)
    assert a.partial_fit_users(Ratings(R[:2], np.array([7, 8]), ratings.item_ids)).size == 2


@pytest.mark.parametrize("chunk", [0, -3, 2.5, True])
def test_ranking_metrics_refuses_a_chunk_that_is_not_a_positive_whole_number(chunk):
    from bidlab.models.sfa.metrics import ranking_metrics

    R = sp.csr_matrix(np.eye(4))
    with pytest.raises(ValueError, match="chunk must be a whole number"):
        ranking_metrics(lambda u: np.ones((len(u), 4)), R, R, k=2, chunk=chunk)
