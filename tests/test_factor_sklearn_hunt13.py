"""NMF and SFA as scikit-learn users use them: inputs, fold-ins and partial fits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models import NMF, SFA


def _counts(n: int = 40, d: int = 25, seed: int = 0) -> np.ndarray:
    """A dense users x items count matrix, zero where a user never touched an item."""
    rng = np.random.default_rng(seed)
    C = (rng.random((n, d)) < 0.2) * rng.integers(1, 5, (n, d))
    C[:, 0] = 1  # every user has an interaction
    return C.astype(np.float64)


def test_implicit_zero_counts_are_no_interaction_dense_or_stored():
    """A dense count matrix (zeros where nothing happened) and one with stored zeros give
    the factors of its sparse form: a zero count is preference 0, not 1."""
    C = _counts()
    want = SFA(3, feedback="implicit", max_iter=5, random_state=0).fit(sp.csr_matrix(C))
    dense = SFA(3, feedback="implicit", max_iter=5, random_state=0).fit(C)
    stored = sp.csr_matrix(np.ones_like(C))  # every entry stored, zeros among them
    stored.data[:] = C.ravel()
    assert stored.nnz == C.size
    kept = SFA(3, feedback="implicit", max_iter=5, random_state=0).fit(stored)
    for got in (dense, kept):
        assert got.train_.nnz == want.train_.nnz
        np.testing.assert_allclose(got.user_factors_, want.user_factors_, rtol=1e-10)
        np.testing.assert_array_equal(got.recommend(1, n=5)[0], want.recommend(1, n=5)[0])
    # a fold-in of zero-filled rows and columns too
    ids = dense.partial_fit_users(C[:2])
    ref = want.partial_fit_users(sp.csr_matrix(C[:2]))
    np.testing.assert_allclose(dense.predict(ids, [3, 4]), want.predict(ref, [3, 4]))
    cols = np.zeros((dense.n_users_, 2))
    cols[::3, 0] = 2.0
    cols[1::4, 1] = 1.0
    new = dense.partial_fit_items(cols)
    ref = want.partial_fit_items(sp.csr_matrix(cols))
    np.testing.assert_allclose(dense.item_factors_[new], want.item_factors_[ref])


def test_implicit_user_with_only_zero_counts_is_refused_by_name():
    C = _counts()
    C[4] = 0.0
    with pytest.raises(ValueError, match="no nonzero count .the first is row 4"):
        SFA(3, feedback="implicit").fit(C)
    # explicit ratings keep a zero as a rating
    assert SFA(3, max_iter=2, random_state=0).fit(C).train_.nnz == C.size


def test_nmf_partial_fit_takes_a_custom_start_as_minibatchnmf():
    """``init="custom"`` with ``partial_fit(X, W=..., H=...)``, as scikit-learn's
    ``MiniBatchNMF.partial_fit`` takes it: ``H`` starts the components."""
    rng = np.random.default_rng(0)
    X = rng.random((30, 6))
    W0, H0 = rng.random((30, 2)) + 0.1, rng.random((2, 6)) + 0.1
    est = NMF(2, init="custom", random_state=0).partial_fit(X, W=W0, H=H0)
    # the same first step as an array start of the same components
    ref = NMF(2, init=H0, random_state=0).partial_fit(X)
    np.testing.assert_allclose(est.components_, ref.components_)
    est.partial_fit(X)  # later calls need no start
    assert est.n_iter_ == 2
    with pytest.raises(ValueError, match=r"partial_fit\(X, W=\.\.\., H=\.\.\.\)"):
        NMF(2, init="custom").partial_fit(X)
    with pytest.raises(ValueError, match=r"initial H has shape \(2, 5\)"):
        NMF(2, init="custom").partial_fit(X, W=W0, H=H0[:, :5])


def test_implicit_score_compares_with_the_preference_not_the_count():
    # A count's size is its confidence; the model predicts the preference (1 where a count
    # is above 0), as rmse_ measures it: scaling the held-out counts must not change the
    # score, and the score is minus the RMSE against 1.
    C = sp.random(40, 25, density=0.25, format="csr", random_state=5, dtype=np.float64)
    C.data = np.ceil(C.data * 5)
    m = SFA(4, feedback="implicit", max_iter=5, random_state=0).fit(C)
    users = np.repeat(np.arange(40), np.diff(C.indptr))
    want = -np.sqrt(np.mean((m.predict(users, C.indices) - 1.0) ** 2))
    assert m.score(C) == pytest.approx(want, rel=1e-12)
    assert m.score(C * 7.0) == pytest.approx(m.score(C), rel=1e-12)
