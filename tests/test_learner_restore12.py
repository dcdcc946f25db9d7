"""A checkpoint refused after the learner rebuilt its model for it (the file was made with
other fixed options, and its shapes then do not fit) leaves the trained model as it was."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.learn import CheckpointError
from bidlab.models import NMF, SFA


def _ratings(users: int, items: int, seed: int) -> sp.csr_matrix:
    R = sp.random(users, items, density=0.3, random_state=seed, format="csr")
    R.data = np.ceil(R.data * 5)
    return R


def test_a_refused_checkpoint_of_another_seed_keeps_the_trained_sfa(tmp_path) -> None:
    other = SFA(4, max_iter=2, random_state=1).learner(_ratings(60, 41, 2))
    other.fit(progress=None)
    ck = other.save(str(tmp_path / "other.npz"))
    R = _ratings(60, 40, 0)
    est = SFA(4, max_iter=5, random_state=0)
    lrn = est.learner(R)
    lrn.fit(progress=None)
    items, users, score = est.item_factors_.copy(), est.user_factors_.copy(), est.score(R)
    with pytest.raises(CheckpointError, match="shapes"):
        lrn.load(ck)
    np.testing.assert_array_equal(est.item_factors_, items)
    np.testing.assert_array_equal(est.user_factors_, users)
    assert est.score(R) == score and est.n_iter_ == 5
    lrn.set(n_passes=6)
    lrn.fit(progress=None)  # trains on from where it was
    assert est.n_iter_ == 6


def test_a_refused_checkpoint_of_another_seed_keeps_the_trained_nmf(tmp_path) -> None:
    rng = np.random.default_rng(0)
    other = NMF(3, max_iter=2, random_state=1).learner(rng.random((30, 21)))
    other.fit(progress=None)
    ck = other.save(str(tmp_path / "other.npz"))
    X = rng.random((30, 20))
    est = NMF(3, max_iter=4, random_state=0)
    lrn = est.learner(X)
    lrn.fit(progress=None)
    H = est.components_.copy()
    with pytest.raises(CheckpointError):
        lrn.load(ck)
    np.testing.assert_array_equal(est.components_, H)
