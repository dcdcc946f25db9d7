"""NMF and SFA as users meet them: a learner resumed from a checkpoint (its pass count, its
stopping rule, its history), a ``bidlab.datasets`` Ratings object given to NMF, and the
float type SFA picks for a float32 Ratings object or data frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from bidlab.datasets.movielens import Ratings
from bidlab.models import NMF, SFA
from bidlab.models.pass_history import history_counters, history_from_counters


def _ratings(users: int = 40, items: int = 25, dtype: type = np.float64) -> sp.csr_matrix:
    R = sp.random(users, items, density=0.3, random_state=0, format="csr", dtype=dtype)
    R.data = np.ceil(R.data * 5)
    return R[np.diff(R.indptr) > 0]


# -- checkpoints ----------------------------------------------------------------------------
def test_nmf_resumed_from_a_checkpoint_counts_and_stops_as_the_whole_run(tmp_path):
    X = np.random.default_rng(0).random((60, 12))
    kw = {"max_iter": 200, "tol": 1e-3, "random_state": 0}
    whole = NMF(3, **kw)
    whole.learner(X, batch_size=20).fit(progress=None)
    assert 10 < whole.n_iter_ < 200  # the stopping rule ended it
    first = NMF(3, **kw)
    first.learner(X, batch_size=20, n_passes=5, checkpoint=str(tmp_path / "ck")).fit(
        progress=None)
    again = NMF(3, **kw)
    resumed = again.learner(X, batch_size=20).load(str(tmp_path / "ck"))
    assert again.n_iter_ == 5 and again.model_.errors == first.model_.errors
    resumed.set(n_passes=200)
    resumed.fit(progress=None)
    # was: the pass count restarted at 0 and the stopping rule compared errors from the
    # resume on, so the run stopped 5 passes later than the run it resumes
    assert again.n_iter_ == whole.n_iter_ == resumed.step // 3
    np.testing.assert_array_equal(again.components_, whole.components_)
    assert again.reconstruction_err_ == whole.reconstruction_err_


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_sfa_resumed_from_a_checkpoint_keeps_its_sweeps_and_rmse_history(tmp_path, feedback):
    R = _ratings()
    kw = {"feedback": feedback, "max_iter": 8, "random_state": 0}
    whole = SFA(3, **kw)
    whole.learner(R, batch_size=10).fit(progress=None)
    first = SFA(3, **kw)
    first.learner(R, batch_size=10, n_passes=3, checkpoint=str(tmp_path / "ck")).fit(
        progress=None)
    again = SFA(3, **kw)
    resumed = again.learner(R, batch_size=10).load(str(tmp_path / "ck"))
    assert again.n_iter_ == 3 and again.rmse_ == first.rmse_  # was: 0 and []
    resumed.set(n_passes=8)
    resumed.fit(progress=None)
    assert again.n_iter_ == 8 and again.rmse_ == whole.rmse_
    np.testing.assert_array_equal(again.item_factors_, whole.item_factors_)


def test_sfa_learner_loading_another_runs_checkpoint_forms_its_gram_matrix_again(tmp_path):
    """A learner stopped in the middle of a sweep holds the Gram matrix of its own item
    factors; a checkpoint of another run (another seed) loaded into it brings other item
    factors at the same sweep, whose Gram matrix the implicit user step must use."""
    R = _ratings()
    other = SFA(3, feedback="implicit", random_state=1, init_scale=0.5)
    lrn_other = other.learner(R, batch_size=10, n_passes=4, max_steps=4)
    lrn_other.fit(progress=None)  # one sweep
    lrn_other.save(str(tmp_path / "ck"))
    lrn_other.set(max_steps=None)
    lrn_other.fit(progress=None)
    est = SFA(3, feedback="implicit", random_state=0)
    lrn = est.learner(R, batch_size=10, n_passes=4, max_steps=6)
    lrn.fit(progress=None)  # a sweep and a half
    lrn.load(str(tmp_path / "ck"))
    lrn.set(max_steps=None)
    lrn.fit(progress=None)
    # was: off by 0.6, the first user step after the load used this run's Gram matrix
    np.testing.assert_allclose(est.item_factors_, other.item_factors_, rtol=1e-12, atol=1e-14)


def test_pass_history_round_trips_every_float_exactly():
    values = [0.0, 1e-300, 2.0, 6.044734302360218, 1e300, float("inf")]
    counters = history_counters("errors", values)
    assert all(0 <= v < 2**62 for v in counters.values())
    assert history_from_counters("errors", counters, []) == values
    assert history_from_counters("errors", {}, [1.5]) == [1.5]  # an older checkpoint
    with pytest.raises(ValueError, match="history lacks counter"):
        history_from_counters("errors", {"errors_n": 1}, [])


# -- Ratings objects and float types --------------------------------------------------------
def test_nmf_fits_a_ratings_object_with_its_ratings_as_the_observed_entries():
    R = _ratings(dtype=np.float32)
    ratings = Ratings(R, np.arange(R.shape[0]) + 100, np.arange(R.shape[1]) + 1000)
    observed = sp.csr_matrix((np.ones(R.nnz, bool), R.indices, R.indptr), shape=R.shape)
    # was: "float() argument must be a string or a real number, not 'Ratings'"
    got = NMF(3, max_iter=20, random_state=0).fit(ratings)
    want = NMF(3, max_iter=20, random_state=0).fit(R, mask=observed)
    assert got.model_.dtype == np.float32
    np.testing.assert_array_equal(got.components_, want.components_)
    np.testing.assert_array_equal(got.transform(ratings), want.transform(R, mask=observed))
    assert got.score(ratings) == want.score(R, mask=observed)
    # a mask given with it still decides
    half = observed.copy()
    half.data[::2] = False
    np.testing.assert_array_equal(
        NMF(3, max_iter=5, random_state=0).fit(ratings, mask=half).components_,
        NMF(3, max_iter=5, random_state=0).fit(R, mask=half).components_)


def test_sfa_follows_the_float32_of_a_ratings_object_or_a_frame():
    R = _ratings(dtype=np.float32)
    want = SFA(3, max_iter=3, random_state=0).fit(R)
    assert want.model_.dtype == np.float32
    ratings = Ratings(R, np.arange(R.shape[0]), np.arange(R.shape[1]))
    dense = np.where(R.toarray() > 0, R.toarray(), np.nan).astype(np.float32)
    for X in (ratings, pd.DataFrame.sparse.from_spmatrix(R), pd.DataFrame(dense)):
        got = SFA(3, max_iter=3, random_state=0).fit(X)
        assert got.model_.dtype == np.float32  # was: float64 for all three
        np.testing.assert_array_equal(got.item_factors_, want.item_factors_)
    assert SFA(3, max_iter=3, random_state=0).fit(R.astype(np.float64)).model_.dtype \
        == np.float64


# -- the live view --------------------------------------------------------------------------
def test_similar_items_view_refuses_held_out_ratings_of_other_users():
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.widgets import SimilarItemsView

    R = _ratings()
    lrn = SFA(3, max_iter=2, random_state=0).learner(R)
    titles = [f"t{j}" for j in range(R.shape[1])]
    more = sp.vstack([R, R[:5]], format="csr")  # 45 users' held-out ratings for 40
    # was: accepted, then every p@10 evaluation failed with "index 40 is out of bounds"
    with pytest.raises(ValueError, match="test has 45 users .* but the learner has 40"):
        SimilarItemsView(lrn, titles, test=more)
    view = SimilarItemsView(lrn, titles, test=R)
    view.close()


# -- the ratings loader and inverse_transform -----------------------------------------------
def test_ratings_split_holds_out_the_share_asked_for():
    R = sp.csr_matrix(np.arange(1.0, 201.0).reshape(2, 100))
    parts = Ratings(R, np.arange(2), np.arange(100)).split(0.29, seed=0)
    # was: 28 a user, 0.29 * 100 being 28.999999999999996 in floating point
    np.testing.assert_array_equal(np.diff(parts.test.indptr), [29, 29])
    assert parts.train.nnz + parts.test.nnz == R.nnz


def test_nmf_inverse_transform_takes_sparse_factors():
    X = np.random.default_rng(0).random((20, 5))
    est = NMF(2, max_iter=5, random_state=0).fit(X)
    W = est.transform(X)
    # was: "setting an array element with a sequence"
    for fmt in (sp.csr_matrix, sp.csr_array, sp.coo_matrix):
        np.testing.assert_array_equal(est.inverse_transform(fmt(W)), est.inverse_transform(W))
