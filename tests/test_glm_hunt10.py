"""GLM on data far from the unit scale: linear targets of large spread (prices, counts) and
dense features far below it train as well as the same data on the unit scale, and an L2
fit lands on scikit-learn's ``Ridge`` solution whatever the scale of the target."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

from bidlab.models.glm import GLM


def _regression(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    y = X @ np.array([1.5, -2.0, 0.5, 0.0, 1.0]) + 0.3 * rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("spread", [1e3, 1e5])
def test_a_linear_target_of_large_spread_fits_as_one_on_the_unit_scale(spread, tmp_path):
    X, y = _regression()
    unit = GLM("linear", random_state=0).fit(X, y).score(X, y)
    big = y * spread + 50 * spread  # e.g. prices
    m = GLM("linear", random_state=0, warm_start=True, n_passes=5).fit(X, big)
    assert m.score(X, big) > unit - 0.005  # was 0.22 (1e3) and 0.002 (1e5) for 0.99
    assert m.target_scale_ is not None and m.target_scale_[0] > 1.0
    # weights for the values as given; a warm start continues on the same scale
    first = m.score(X, big)
    m.save(tmp_path / "m.bid")
    again = GLM.load(tmp_path / "m.bid").fit(X, big)
    assert again.n_iter_ > m.n_iter_
    assert again.score(X, big) >= first - 1e-4
    m.partial_fit(X, big)  # continues the folded weights as given
    assert m.score(X, big) >= first - 1e-3


def test_an_l2_fit_of_a_target_of_large_spread_lands_on_ridges_solution():
    X, y = _regression()
    X = (X - X.mean(axis=0)) / X.std(axis=0)  # standardising the features changes nothing
    big = y * 1e4 + 5e5
    alpha = 4.0
    ridge = Ridge(alpha=alpha).fit(X, big)
    # Ridge: |y - Xw|^2 + alpha |w|^2; GLM: mean squared error / 2 + l2 / 2 |w|^2
    m = GLM("linear", l2=alpha / len(y), n_passes=60, tol=None, random_state=0).fit(X, big)
    assert np.abs(m.coef_[0] - ridge.coef_).max() < 2e-3 * np.abs(ridge.coef_).max()
    assert m.intercept_[0] == pytest.approx(ridge.intercept_, rel=1e-4)


def test_a_target_column_a_classifier_also_reads_keeps_its_labels():
    X, y = _regression()
    labels = (y > 0).astype(int) * 1000  # one column: a linear and a logistic target
    m = GLM(["linear", "logistic"], targmap=[0, 0], random_state=0).fit(X, labels)
    assert m.target_scale_ is None
    assert m.score_targets(X, labels)[1] > 0.9


@pytest.mark.parametrize("scale", [0.01, 1e-3])
def test_dense_features_far_below_the_unit_scale_are_standardised(scale):
    X, y = _regression()
    yb = (y > 0).astype(int)
    reg = GLM("linear", random_state=0).fit(X * scale, y)
    assert reg.scaling_ is not None
    assert reg.score(X * scale, y) > 0.98  # was 0.71 (0.01) and 0.01 (1e-3)
    clf = GLM(random_state=0).fit(X * scale, yb)
    ref = LogisticRegression().fit(X, yb).score(X, yb)
    assert clf.score(X * scale, yb) > ref - 0.02  # was 0.52 at 1e-3: chance
    # features on the unit scale already (one-hot columns) are still used as given
    onehot = np.eye(4)[np.arange(len(y)) % 4]
    assert GLM(random_state=0, n_passes=2).fit(onehot, yb).scaling_ is None
