"""k-means on sparse (CSR) rows and the state its Lloyd passes keep: what a fitted or saved
estimator holds, and the starting centres a CSR user gives."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets import sparse_blobs
from bidlab.models import KMeans


def _wide(dtype=np.float64) -> sp.csr_matrix:
    return sp.csr_matrix(sparse_blobs(1200, 3000, 5, nnz_per_row=12, spread=0.8, seed=0,
                                      support=200, dtype=dtype).X)


def test_a_fitted_lloyd_model_keeps_no_k_by_k_centre_bounds(tmp_path):
    # Hamerly's bounds on the centres' distances (k x k float64) serve the next pass's
    # rows only: a fitted estimator, its pickle and its file hold the k x d centres, not
    # 1,500 x 1,500 x 8 bytes (18 MB for 48 KB of centres)
    X = np.random.default_rng(0).standard_normal((6000, 2)).astype(np.float32)
    km = KMeans(1500, random_state=0, max_iter=3).fit(X)
    centres = km.cluster_centers_.nbytes
    assert len(pickle.dumps(km)) < 30 * centres + 200_000
    path = km.save(tmp_path / "km")
    assert path.stat().st_size < 30 * centres + 200_000
    again = pickle.loads(pickle.dumps(km))
    np.testing.assert_array_equal(again.predict(X), km.labels_)
    km2 = KMeans(1500, random_state=0, max_iter=2, warm_start=True)
    km2.fit(X)
    km2 = pickle.loads(pickle.dumps(km2)).fit(X)  # a reloaded estimator trains on
    assert km2.n_iter_ >= 3


def test_centre_bounds_are_kept_between_passes_only_where_they_are_carried():
    # dense rows, few centres: measuring the centres' distances is cheap beside a pass, so
    # each pass measures them and keeps no k x k matrix; wide sparse rows carry them
    X = np.random.default_rng(1).standard_normal((20000, 3))
    lrn = KMeans(40, random_state=0, tol=0).learner(X, n_passes=4, batch_size=5000)
    lrn.opts.max_steps = 1  # the first pass, started from the k-means++ assignment
    lrn.fit(progress=None)
    assert lrn.model._pass_bounds is not None and lrn.model._centre_lb is None
    lrn.opts.max_steps = None
    lrn.fit(progress=None)
    assert lrn.model._centre_lb is None
    S = _wide()
    lrn = KMeans(40, random_state=0, tol=0).learner(S, n_passes=4)
    lrn.fit(progress=None)
    assert lrn.model._centre_lb.shape == (40, 40)
    bounds = KMeans(40, random_state=0, tol=0, bounds=False).fit(S)
    km = KMeans(40, random_state=0, tol=0).fit(S)
    np.testing.assert_array_equal(km.labels_, bounds.labels_)
    assert km.model_._centre_lb is None  # dropped with the rows' bounds after the fit


@pytest.mark.parametrize("kind", ["csr_matrix", "csr_array", "coo_matrix"])
def test_sparse_starting_centres_are_taken_like_dense_ones(kind):
    X = _wide()
    init = getattr(sp, kind)(X[:6])
    km = KMeans(6, init=init, max_iter=20).fit(X)
    ref = KMeans(6, init=X[:6].toarray(), max_iter=20).fit(X)
    np.testing.assert_array_equal(km.labels_, ref.labels_)
    np.testing.assert_array_equal(km.cluster_centers_, ref.cluster_centers_)
    mb = KMeans(6, init=init, algorithm="minibatch", random_state=0).partial_fit(X)
    ref = KMeans(6, init=X[:6].toarray(), algorithm="minibatch", random_state=0).partial_fit(X)
    np.testing.assert_array_equal(mb.cluster_centers_, ref.cluster_centers_)
    with pytest.raises(ValueError, match=r"init has shape \(5, 3000\)"):
        KMeans(6, init=getattr(sp, kind)(X[:5])).fit(X)
