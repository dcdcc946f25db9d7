"""Ranking metrics against their textbook definitions, and the factor models' numeric
edges: values whose arithmetic overflows, NMF masks, complex DataFrame columns."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import ndcg_score

from bidlab.models import NMF, SFA
from bidlab.models.sfa.metrics import (
    map_at_k,
    ndcg_at_k,
    precision_at_k,
    ranking_metrics,
    rmse,
    top_k,
)


# -- textbook definitions, written out independently ----------------------------------------
def _p(rec, rel, k):
    return sum(1 for x in list(rec)[:k] if x in rel) / k


def _ap(rec, rel, k):
    hits, total = 0, 0.0
    for i, x in enumerate(list(rec)[:k], start=1):
        if x in rel:
            hits += 1
            total += hits / i
    return total / min(len(rel), k)


def _ndcg(rec, rel, k):
    dcg = sum(1 / math.log2(i + 1) for i, x in enumerate(list(rec)[:k], start=1) if x in rel)
    idcg = sum(1 / math.log2(i + 1) for i in range(1, min(len(rel), k) + 1))
    return dcg / idcg


def _mean_over_users_with_items(f, recs, rels, k):
    vals = [f(r, set(t), k) for r, t in zip(recs, rels, strict=True) if len(t)]
    return sum(vals) / len(vals)


def _random_case(rng, n_users=40, n_items=25, list_len=None):
    recs, rels = [], []
    for _ in range(n_users):
        m = list_len or int(rng.integers(1, n_items + 1))
        recs.append(rng.permutation(n_items)[:m].tolist())
        rels.append(rng.choice(n_items, int(rng.integers(0, 8)), replace=False).tolist())
    return recs, rels


@pytest.mark.parametrize("k", [1, 3, 10, 30])
def test_metrics_equal_textbook_definitions(k):
    rng = np.random.default_rng(k)
    recs, rels = _random_case(rng)
    assert any(len(t) == 0 for t in rels) and (k == 1 or any(0 < len(t) < k for t in rels))
    assert precision_at_k(recs, rels, k) == pytest.approx(
        _mean_over_users_with_items(_p, recs, rels, k))
    assert map_at_k(recs, rels, k) == pytest.approx(
        _mean_over_users_with_items(_ap, recs, rels, k))
    assert ndcg_at_k(recs, rels, k) == pytest.approx(
        _mean_over_users_with_items(_ndcg, recs, rels, k))


@pytest.mark.parametrize("k", [1, 5, 12])
def test_ndcg_of_top_k_equals_sklearn_for_binary_relevance(k):
    rng = np.random.default_rng(k)
    scores = rng.standard_normal((30, 12))  # no ties
    truth = (rng.random((30, 12)) < 0.3).astype(float)
    truth[truth.sum(axis=1) == 0, 0] = 1.0  # sklearn counts a user with none as 0
    recs = top_k(scores, k)
    rels = [np.flatnonzero(t) for t in truth]
    assert ndcg_at_k(recs, rels, k) == pytest.approx(ndcg_score(truth, scores, k=k))


def test_ranking_metrics_leave_training_items_out_and_match_the_list_metrics():
    rng = np.random.default_rng(0)
    n, d, k = 20, 15, 5
    train = sp.csr_matrix((rng.random((n, d)) < 0.3).astype(float))
    test = sp.csr_matrix(((rng.random((n, d)) < 0.2) & (train.toarray() == 0)).astype(float))
    scores = rng.standard_normal((n, d))
    got = ranking_metrics(lambda u: scores[u], train, test, k=k)
    recs, rels = [], []
    for u in range(n):
        t = set(np.flatnonzero(test[u].toarray()))
        if not t:
            continue
        seen = set(np.flatnonzero(train[u].toarray()))
        order = [j for j in np.argsort(-scores[u], kind="stable") if j not in seen]
        recs.append(order + [j for j in range(d) if j in seen])
        rels.append(t)
        assert not seen & set(order[:k])
    assert got[f"p@{k}"] == pytest.approx(_mean_over_users_with_items(_p, recs, rels, k))
    assert got[f"map@{k}"] == pytest.approx(_mean_over_users_with_items(_ap, recs, rels, k))
    assert got[f"ndcg@{k}"] == pytest.approx(_mean_over_users_with_items(_ndcg, recs, rels, k))


def test_rmse_and_sfa_score_agree():
    R = sp.random(40, 30, density=0.3, random_state=0, format="csr")
    R.data = np.ceil(R.data * 5)
    sfa = SFA(3, max_iter=4, random_state=0).fit(R)
    users = np.repeat(np.arange(40), np.diff(R.indptr))
    pred = sfa.predict(users, R.indices)
    assert sfa.score(R) == pytest.approx(-rmse(R.data, pred))
    assert rmse([1.0, 2.0, 3.0], [1.0, 4.0, 3.0]) == pytest.approx(math.sqrt(4 / 3))


# -- values whose arithmetic overflows -------------------------------------------------------
def _ratings(dtype, scale, seed=0):
    R = sp.random(30, 20, density=0.4, random_state=seed, format="csr", dtype=dtype)
    R.data = (R.data * scale).astype(dtype)
    return R[np.diff(R.indptr) > 0]


@pytest.mark.parametrize("dtype, scale", [(np.float32, 1e30), (np.float32, 1e19),
                                          (np.float64, 1e200)])
def test_sfa_refuses_ratings_whose_arithmetic_overflows(dtype, scale):
    # before: float32 ratings ~1e30 gave NaN user factors and predictions, silently
    with pytest.raises(ValueError, match="rescale X"):
        SFA(3, max_iter=3, random_state=0).fit(_ratings(dtype, scale))


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_sfa_fits_large_ratings_within_the_limit(feedback):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sfa = SFA(3, max_iter=3, random_state=0, feedback=feedback).fit(
            _ratings(np.float32, 4e9))
    assert np.isfinite(sfa.user_factors_).all() and np.isfinite(sfa.user_bias_).all()


def test_sfa_fold_in_refuses_overflowing_ratings():
    sfa = SFA(3, max_iter=3, random_state=0).fit(_ratings(np.float32, 5.0))
    with pytest.raises(ValueError, match="rescale X"):
        sfa.partial_fit_users(_ratings(np.float32, 1e30, seed=1)[:2])


@pytest.mark.parametrize("dtype, scale", [(np.float32, 1e30), (np.float32, 1e19),
                                          (np.float64, 1e200)])
@pytest.mark.parametrize("sparse", [False, True])
def test_nmf_refuses_values_whose_arithmetic_overflows(dtype, scale, sparse):
    # before: a nan or inf reconstruction_err_ (zero components at 1e30) and ~200 warnings
    X = (np.random.default_rng(0).random((20, 10)) * scale).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="rescale X"):
            NMF(3, max_iter=20, random_state=0).fit(sp.csr_matrix(X) if sparse else X)


def test_nmf_fits_large_values_within_the_limit():
    X = (np.random.default_rng(0).random((200, 100)) * 1e17).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nmf = NMF(5, max_iter=20, random_state=0).fit(X)
    assert np.isfinite(nmf.reconstruction_err_) and np.isfinite(nmf.components_).all()


def test_nmf_kl_loss_keeps_fitting_large_values():
    # the KL loss's arithmetic stays within the values' scale: no refusal there
    base = np.random.default_rng(0).random((30, 10))
    ref = NMF(3, max_iter=20, random_state=0, loss="kl", solver="mu").fit(base)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = NMF(3, max_iter=20, random_state=0, loss="kl", solver="mu").fit(
            (base * 1e30).astype(np.float32))
    unit = lambda c: c / np.linalg.norm(c, axis=1, keepdims=True)  # noqa: E731
    assert np.allclose(unit(big.components_), unit(ref.components_), atol=1e-4)


def test_ranking_metrics_leave_out_users_without_held_out_items():
    assert precision_at_k([[1, 2], [3, 4]], [[2], []], 2) == pytest.approx(0.5)
    assert ndcg_at_k([[1, 2], [3, 4]], [[], []], 2) == 0.0  # no user to average over


# -- NMF masks, SFA DataFrames ---------------------------------------------------------------
@pytest.mark.parametrize("value", [2, -1.0, 0.5])
def test_nmf_sparse_mask_refuses_values_other_than_0_and_1_as_a_dense_one(value):
    X = sp.csr_matrix(np.random.default_rng(0).random((6, 4)))
    full = np.full((6, 4), value)
    for mask in (full, sp.csr_matrix(full)):  # before: the sparse one was read as True
        with pytest.raises(ValueError, match="mask must be boolean"):
            NMF(2, max_iter=3, random_state=0).fit(X, mask=mask)


def test_nmf_sparse_mask_of_0_and_1_still_counts():
    X = sp.csr_matrix(np.random.default_rng(0).random((6, 4)))
    mask = np.ones((6, 4))
    mask[0, 1] = 0
    a = NMF(2, max_iter=5, random_state=0).fit(X, mask=sp.csr_matrix(mask))
    b = NMF(2, max_iter=5, random_state=0).fit(X, mask=mask.astype(bool))
    assert np.allclose(a.components_, b.components_)


def test_sfa_refuses_a_dataframe_with_a_complex_column():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1 + 1j, 2.0, np.nan], "b": [3.0, np.nan, 4.0],
                       "c": [np.nan, 5.0, 1.0]})
    with pytest.raises(ValueError, match="complex"):  # before: the imaginary part dropped
        SFA(1, max_iter=2, random_state=0).fit(df)
    with pytest.raises(ValueError, match="complex"):
        SFA(1, max_iter=2, random_state=0).fit(df.astype({"b": "float32"}))


def test_read_ratings_csv_refuses_a_rating_beyond_its_dtype(tmp_path):
    from bidlab.datasets import read_ratings_csv

    path = tmp_path / "ratings.csv"
    path.write_text("userId,movieId,rating\n1,10,4\n1,11,1e39\n2,10,3\n")
    # before: the float32 cast made it inf, with only a RuntimeWarning
    with pytest.raises(ValueError, match="row 3 .*float64"):
        read_ratings_csv(path)
    assert read_ratings_csv(path, dtype=np.float64).X[0, 1] == 1e39
