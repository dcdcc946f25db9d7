"""NMF's online method and partial_fit: convergence on sparse counts, features absent at the
start, the live learner's fitted attributes, small first minibatches and ignored starts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models import NMF


def _counts(n: int = 120, d: int = 40, k: int = 4, seed: int = 0) -> sp.csr_matrix:
    """Sparse Poisson counts of a sparse nonnegative rank-k rate, every feature occurring."""
    rng = np.random.default_rng(seed)
    W = rng.gamma(0.3, 1.0, (n, k))
    H = rng.gamma(0.3, 3.0, (k, d))
    X = rng.poisson(W @ H).astype(np.float64)
    X[rng.integers(0, n, d), np.arange(d)] += 1.0  # each feature somewhere
    return sp.csr_matrix(X)


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
def test_online_reaches_the_batch_error_on_sparse_counts(loss):
    X = _counts()
    assert X.nnz < 0.5 * X.shape[0] * X.shape[1]  # sparse
    kw = {"loss": loss, "max_iter": 30, "tol": 0.0, "random_state": 0}
    batch = NMF(4, solver="mu", **kw).fit(X)
    online = NMF(4, method="online", batch_size=16, **kw).fit(X)
    # measured: frobenius 29.2 (batch) vs 29.0, kl 85.3 vs 82.9
    assert online.reconstruction_err_ < 1.1 * batch.reconstruction_err_, (
        online.reconstruction_err_, batch.reconstruction_err_)
    H = online.components_
    assert np.isfinite(H).all() and H.max() < 100 * X.max()
    assert (H.max(axis=0) > 0).all()  # every feature occurs: none is dropped


def test_partial_fit_on_sparse_counts_stays_bounded_and_fits():
    X = _counts(seed=1)
    est = NMF(4, loss="kl", random_state=0)
    for _ in range(10):
        for i in range(0, X.shape[0], 16):
            est.partial_fit(X[i:i + 16])
    batch = NMF(4, loss="kl", solver="mu", max_iter=30, tol=0.0, random_state=0).fit(X)
    assert np.isfinite(est.components_).all() and est.components_.max() < 100 * X.max()
    assert est.score(X) > 1.2 * batch.score(X), (est.score(X), batch.score(X))


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
def test_a_feature_absent_from_the_first_minibatch_is_learned(loss):
    rng = np.random.default_rng(3)
    X = rng.random((200, 8)) + 0.1
    first = X[:20].copy()
    first[:, 0] = 0.0  # feature 0 only appears later
    est = NMF(2, loss=loss, random_state=0).partial_fit(first)
    for _ in range(20):
        est.partial_fit(X[20:])
    assert (est.components_[:, 0] > 0).any()
    made = est.inverse_transform(est.transform(X[20:]))[:, 0].mean()
    assert made == pytest.approx(X[20:, 0].mean(), rel=0.1)


def test_online_fit_of_kos_like_counts_learns_every_occurring_feature():
    X = _counts(n=300, d=200, k=5, seed=4)
    est = NMF(5, method="online", batch_size=100, max_iter=5, random_state=0).fit(X)
    occurs = np.asarray(X.sum(axis=0)).ravel() > 0
    assert occurs.all()
    assert int((est.components_.max(axis=0)[occurs] == 0).sum()) == 0


def test_a_learner_trained_nmf_has_its_fitted_attributes_and_partial_fits():
    X = np.random.default_rng(5).random((100, 10))
    est = NMF(3, random_state=0, max_iter=7)
    lrn = est.learner(X)
    lrn.start()
    lrn.join(120)
    assert lrn.state == "done", lrn.state
    assert est.n_iter_ == 7
    assert np.isfinite(est.reconstruction_err_) and est.reconstruction_err_ > 0
    est.partial_fit(X[:20])
    assert est.n_iter_ == 8
    assert est.reconstruction_err_ == pytest.approx(est._error(est._data(X[:20], None, False),
                                                               est.model_.factors()))


def test_fit_n_iter_and_error_follow_partial_fit():
    X = np.random.default_rng(6).random((60, 8))
    est = NMF(2, max_iter=5, tol=0.0, random_state=0).fit(X)
    assert est.n_iter_ == 5
    fitted = est.reconstruction_err_
    est.partial_fit(X)
    assert est.n_iter_ == 6 and est.reconstruction_err_ != fitted


def test_partial_fit_takes_a_first_minibatch_smaller_than_k():
    X = np.random.default_rng(7).random((100, 20))
    est = NMF(5, random_state=0).partial_fit(X[:2])
    assert est.components_.shape == (5, 20)
    est.partial_fit(X[2:])
    assert est.transform(X[:3]).shape == (3, 5)
    with pytest.raises(ValueError, match=r"n_components <= 20"):
        NMF(21).partial_fit(X[:2])
    with pytest.raises(ValueError, match=r"at least 5 rows .* or use init='random'"):
        NMF(5, init="nndsvda").partial_fit(X[:2])
    with pytest.raises(ValueError, match=r"n_components <= 2"):
        NMF(5).fit(X[:2])  # a whole fit still needs k <= min(n, d)


def test_w_and_h_without_init_custom_warn():
    X = np.random.default_rng(8).random((30, 6))
    W, H = np.full((30, 2), 0.5), np.full((2, 6), 0.5)
    with pytest.warns(RuntimeWarning, match="init='custom'"):
        NMF(2, max_iter=3).fit(X, W=W, H=H)
    with pytest.warns(RuntimeWarning, match="init='custom'"):
        NMF(2, max_iter=3).fit_transform(X, H=H)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NMF(2, init="custom", max_iter=3).fit(X, W=W, H=H)
        NMF(2, max_iter=3).fit(X)
