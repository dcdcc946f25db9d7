"""Serving a factor model: SFA's predictions and recommendations read only what they need
from the live factors (and still follow training that continues), its id checks name huge
ids as given, and NMF's summary shows what was fitted."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models import NMF, SFA


def _ratings(n: int, d: int, density: float = 0.05, seed: int = 0) -> sp.csr_matrix:
    """n users x d items of 1-5 stars, every user and item with a rating."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, d)) < density
    mask[np.arange(n), rng.integers(0, d, n)] = True
    mask[rng.integers(0, n, d), np.arange(d)] = True
    rows, cols = np.nonzero(mask)
    stars = rng.integers(1, 6, rows.size).astype(np.float64)
    return sp.csr_matrix((stars, (rows, cols)), shape=(n, d))


def _peak_bytes(call) -> int:
    """The most memory ``call()`` held at once beyond what was there before (numpy's
    buffers included: numpy reports them to tracemalloc)."""
    call()  # anything made once (caches, imports) is not counted
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _reference_scores(est: SFA, u: int) -> np.ndarray:
    """User ``u``'s score of every item, from the copies the public properties give."""
    return (est.item_factors_ @ est.user_factors_[u] + est.item_bias_
            + (est.global_mean_ + est.user_bias_[u]))


def _check_serving(est: SFA, users: list[int]) -> None:
    """recommend, predict and similar_items agree with a fresh computation from the public
    properties (copies of the factors as they are now)."""
    for u in users:
        scores = _reference_scores(est, u)
        items, got = est.recommend(u, n=5, filter_seen=False)
        order = np.argsort(-scores, kind="stable")[:5]
        np.testing.assert_allclose(got, scores[order], rtol=1e-6)
        np.testing.assert_array_equal(np.sort(items), np.sort(order))
        np.testing.assert_allclose(est.predict([u, u], [0, est.n_items_ - 1]),
                                   scores[[0, est.n_items_ - 1]], rtol=1e-6)
    V = est.item_factors_.astype(np.float64)
    cos = V @ V[0] / (np.linalg.norm(V, axis=1) * np.linalg.norm(V[0]))
    cos[0] = -np.inf
    items, got = est.similar_items(0, n=3, min_ratings=0)
    np.testing.assert_allclose(got, np.sort(cos)[::-1][:3], rtol=1e-6)


# -- reading only what a call needs ------------------------------------------------------------
def test_recommend_and_predict_do_not_copy_the_user_factors():
    """A recommendation reads one user's row: its memory does not grow with the number of
    users (each call used to copy the whole user matrix twice)."""
    est = SFA(32, max_iter=1, random_state=0).fit(_ratings(6000, 40, density=0.1))
    U = est.model_.W.values.data
    assert U.nbytes > 1_500_000
    assert _peak_bytes(lambda: est.recommend(0, n=5)) < U.nbytes // 8
    assert _peak_bytes(lambda: est.predict([0, 1, 5999], [2, 3, 39])) < U.nbytes // 8


def test_serving_reads_the_item_factors_in_place():
    """recommend and predict do not copy the item matrix; similar_items of a float64 model
    reads it in place (each used to copy it two or more times a call)."""
    est = SFA(32, max_iter=1, random_state=0, dtype=np.float64).fit(
        _ratings(40, 6000, density=0.1))
    V = est.model_.modelmats[0].data
    assert V.nbytes > 1_500_000
    assert _peak_bytes(lambda: est.recommend(0, n=5)) < V.nbytes // 3
    assert _peak_bytes(lambda: est.predict([0, 1], [2, 5999])) < V.nbytes // 8
    assert _peak_bytes(lambda: est.similar_items(0, n=5)) < V.nbytes // 2


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_serving_follows_training_that_goes_on(feedback):
    """Reads see the factors as they are at the call: after more sweeps of a live learner,
    after folding in users and items; the properties stay copies the caller may change."""
    R = _ratings(80, 50, density=0.2)
    est = SFA(4, feedback=feedback, random_state=0, batch_size=32)
    lrn = est.learner(R, n_passes=2)
    lrn.fit(progress=None)
    _check_serving(est, [0, 79])
    first = est.recommend(3, n=5, filter_seen=False)[1]
    lrn.set(n_passes=5)
    lrn.fit(progress=None)
    assert not np.allclose(est.recommend(3, n=5, filter_seen=False)[1], first)
    _check_serving(est, [0, 3, 79])

    new_users = est.partial_fit_users(_ratings(5, 50, density=0.3, seed=1))
    _check_serving(est, [0, int(new_users[0]), int(new_users[-1])])
    new_items = est.partial_fit_items(_ratings(est.n_users_, 3, density=0.3, seed=2))
    assert est.n_items_ == 53 and list(new_items) == [50, 51, 52]
    _check_serving(est, [0, int(new_users[-1])])

    before = est.predict([0], [0])
    for name in ("user_factors_", "item_factors_", "user_bias_", "item_bias_"):
        getattr(est, name)[...] = 99.0  # the caller's copy
    np.testing.assert_array_equal(est.predict([0], [0]), before)


# -- id checks -------------------------------------------------------------------------------
@pytest.mark.parametrize("given, shown", [
    (2**63, "9223372036854775808"),
    ([0, 2**63 + 5], "9223372036854775813"),
    (np.array([2**64 - 1], dtype=np.uint64), "18446744073709551615"),
    (2**70, "1180591620717411303424"),
    (1e20, "100000000000000000000"),
    (-2, "-2"),
])
def test_out_of_range_ids_are_named_as_given(given, shown):
    est = SFA(2, max_iter=1, random_state=0).fit(_ratings(20, 10, density=0.3))
    n = np.size(given)
    with pytest.raises(ValueError, match=rf"user id {shown} is out of range: the model "
                                         r"has 20 users"):
        est.predict(given, [0] * n if np.ndim(given) else 0)
    with pytest.raises(ValueError, match=rf"item id {shown} is out of range"):
        est.predict([0] * n if np.ndim(given) else 0, given)


# -- NMF's summary ---------------------------------------------------------------------------
def test_nmf_summary_shows_the_fitted_state():
    X = np.random.default_rng(0).random((40, 6))
    est = NMF(2, loss="kl", max_iter=30, tol=0, random_state=0).fit(X)
    text = est.summary()
    assert "components_          2 components x 6 features" in text
    assert "loss                 kl" in text and "solver               mu (batch)" in text
    assert "observed entries     all\n" in text
    assert "n_iter_              30\n" in text
    assert f"reconstruction_err_  {est.reconstruction_err_:.6g}" in text

    X[0, 0] = np.nan
    text = NMF(2, random_state=0).fit(X).summary()
    assert "neither NaN nor masked out" in text and "(tol reached)" in text

    live = NMF(2, random_state=0)
    live.learner(X)
    assert "reconstruction_err_  - (no pass done yet)" in live.summary()
    assert "n_iter_              0" in live.summary()
