"""Default settings on small standard data sets, against scikit-learn's estimators with
theirs: a user's first hour is breast cancer, iris, diabetes and digits, and a default that
under-trains them reads as a worse library."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.metrics import log_loss, r2_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from bidlab.models import GLM

SEEDS = (0, 1, 2)


def _standardised(X: np.ndarray, y: np.ndarray, stratify: bool
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A fixed 70 / 30 split of (X, y), the features standardised on the training rows."""
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=42,
                                          stratify=y if stratify else None)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


@pytest.mark.parametrize("offset", [0.0, 1000.0])
def test_a_linear_target_far_from_zero_fits_in_the_default_passes(offset: float) -> None:
    """Diabetes' targets have mean 152: from a zero bias, ADAGrad climbs about ``lrate``
    a step, and 10 passes ended at a held-out R^2 of 0.05 (LinearRegression: 0.477);
    1,000 added to the targets, below 0. A linear target's bias starts at the targets'
    mean, so the fit does not depend on where the targets sit."""
    X, y = load_diabetes(return_X_y=True)
    Xtr, Xte, ytr, yte = _standardised(X, y + offset, stratify=False)
    r2 = [r2_score(yte, GLM("linear", random_state=s).fit(Xtr, ytr).predict(Xte))
          for s in SEEDS]
    assert np.mean(r2) > 0.45, r2


def test_the_bias_start_is_the_linear_targets_mean_and_zero_for_the_others() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    Y = np.column_stack([100.0 + X[:, 0], (X[:, 1] > 0).astype(float)])
    est = GLM(["linear", "logistic"], n_passes=1, random_state=0)
    lrn = est.learner(X, Y)
    lrn.init()
    b = np.asarray(est.model_.modelmats[1].data).ravel()
    assert b[0] == pytest.approx(Y[:, 0].mean()) and b[1] == 0.0
    clf = GLM("logistic", n_passes=1, random_state=0).fit(X, Y[:, 1])
    assert clf.model_.bias_start is None  # no linear target: every bias starts at 0


def test_small_data_takes_16_steps_a_pass_by_default() -> None:
    """Breast cancer's 398 training rows in 8 minibatches a pass: 80 steps in fit's 10
    passes left held-out log loss at 0.265 on the raw features and 0.073 standardised
    (LogisticRegression: 0.128, 0.066); in 16 minibatches a pass, 0.234 and 0.069."""
    X, y = load_breast_cancer(return_X_y=True)
    raw = train_test_split(X, y, test_size=0.3, random_state=42, stratify=y)
    std = _standardised(X, y, stratify=True)
    losses = {}
    for name, (Xtr, Xte, ytr, yte) in (("raw", raw), ("std", std)):
        fits = [GLM("logistic", random_state=s).fit(Xtr, ytr) for s in SEEDS]
        losses[name] = np.mean([log_loss(yte, m.predict_proba(Xte)) for m in fits])
    assert losses["raw"] < 0.25 and losses["std"] < 0.071, losses
    assert fits[0].n_steps_ == fits[0].n_iter_ * 16  # 398 rows, 25 a minibatch
    assert GLM()._batch_rows(398) == 25 and GLM()._batch_rows(20_000) == 500
