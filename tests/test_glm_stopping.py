"""GLM's fit stops when the held-out loss stops improving (``tol``): where it stops, that the
model it keeps is the best held-out candidate, and when every pass still trains."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from bidlab.datasets import synthetic_glm
from bidlab.models.glm import GLM
from bidlab.models.glm.stopping import MIN_ROWS, split_rows


@pytest.fixture(scope="module")
def rows():
    X, Y, _ = synthetic_glm(6000, 600, 20, n_targets=4, seed=11)
    return sp.csr_matrix(normalize(X), dtype=np.float32), Y


def _held_out(X, Y, seed: int, fraction: float = 0.1):
    _, ho = split_rows(X.shape[0], fraction, seed)
    return X[ho], Y[ho]


@pytest.mark.parametrize("lrate", ["auto", 1.0])
def test_fit_stops_at_the_first_pass_that_improves_less_than_tol(rows, lrate):
    X, Y = rows
    tol = 1e-3
    m = GLM(lrate=lrate, l2=1e-3, n_passes=60, tol=tol, random_state=0).fit(X, Y)
    curve, K = m.validation_loss_curve_, Y.shape[1]
    race = int(lrate == "auto")  # the first-pass race is not scored
    assert m.n_iter_ < 60 and len(curve) == m.n_iter_ - race == len(m.loss_curve_) - race
    for i in range(1, len(curve) - 1):  # every pass before the last improved by > tol
        assert curve[i] < min(curve[:i]) - tol * K, (i, curve)  # (a target)
    assert curve[-1] >= min(curve[:-1]) - tol * K  # the last one did not
    # the model kept is the best candidate: its held-out loss is the curve's least
    Xh, Yh = _held_out(X, Y, 0)
    assert float(m.loss_targets(Xh, Yh).sum()) == pytest.approx(min(curve), rel=1e-5)


def test_a_looser_tol_stops_sooner_and_none_trains_every_pass_on_every_row(rows):
    X, Y = rows
    tight = GLM(l2=1e-5, n_passes=30, tol=1e-5, random_state=0).fit(X, Y)
    loose = GLM(l2=1e-5, n_passes=30, tol=1e-2, random_state=0).fit(X, Y)
    assert loose.n_iter_ < tight.n_iter_
    every = GLM(l2=1e-5, n_passes=4, tol=None, batch_size=1000, random_state=0).fit(X, Y)
    assert every.n_iter_ == 4 and every.validation_loss_curve_ == []
    assert every.n_steps_ == 4 * 6  # all 6,000 rows train (none held out)


def test_too_few_rows_or_passes_hold_nothing_out():
    X, Y, _ = synthetic_glm(400, 50, 5, n_targets=1, seed=2)
    assert split_rows(400, 0.1, 0) is None and split_rows(10 * MIN_ROWS, 0.1, 0) is not None
    small = GLM(n_passes=5, batch_size=100, random_state=0).fit(X, Y[:, 0])
    assert small.n_iter_ == 5 and small.n_steps_ == 5 * 4
    X2, Y2, _ = synthetic_glm(3000, 50, 5, n_targets=1, seed=2)
    two = GLM(n_passes=2, batch_size=1000, random_state=0).fit(X2, Y2[:, 0])
    assert two.n_iter_ == 2 and two.n_steps_ == 6 and two.validation_loss_curve_ == []


def test_bad_tol_and_fraction_name_the_parameter():
    X, Y, _ = synthetic_glm(200, 20, 5, n_targets=1, seed=3)
    with pytest.raises(ValueError, match="'tol'"):
        GLM(tol=-1.0).fit(X, Y[:, 0])
    with pytest.raises(ValueError, match="'validation_fraction'"):
        GLM(validation_fraction=1.0).fit(X, Y[:, 0])
