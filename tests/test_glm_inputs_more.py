"""GLM: counts after a learner run, ``lrate="auto"`` in a sweep and on data no rate
trains, and a DataFrame target mixing label types per column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bidlab.learn import DivergedError
from bidlab.models import GLM, best_config, glm_sweep


def _data(n: int = 600, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)


def test_learner_run_counts_passes_steps_and_losses():
    X, y = _data()
    est = GLM(random_state=0, n_passes=3, batch_size=100)
    lrn = est.learner(X, y)
    lrn.fit(progress=None)
    assert (est.n_iter_, est.n_steps_, len(est.loss_curve_)) == (3, lrn.step, 3)
    assert "n_iter_              3" in est.summary()
    # fit reports as before: every pass, its steps and its loss (the race's pass included)
    fitted = GLM(random_state=0, n_passes=3, batch_size=100, tol=None).fit(X, y)
    assert (fitted.n_iter_, fitted.n_steps_, len(fitted.loss_curve_)) == (3, 18, 3)
    fitted.partial_fit(X, y)
    assert (fitted.n_iter_, fitted.n_steps_, len(fitted.loss_curve_)) == (4, 24, 4)


def test_sweep_takes_auto_rate():
    X, y = _data()
    sweep = glm_sweep("logistic", lrate="auto", l2=[0.0, 1e-3], n_passes=2,
                      random_state=0).fit(X, y)
    best = best_config(sweep, X, y)
    rates = np.broadcast_to(np.ravel(sweep.lrate_), (2,))  # one pick, or one per config
    assert best.lrate == float(rates[best.index]) and best.score > 0.9
    with pytest.raises(ValueError, match="mixes 'auto' with rates"):
        glm_sweep("logistic", lrate=["auto", 0.1])


def test_mixed_dataframe_target_fits_each_column_as_its_own_type():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 4))
    Y = pd.DataFrame({"lab": np.where(X[:, 0] > 0, "p", "n"), "val": 2 * X[:, 1] + 1.0,
                      "cnt": (X[:, 2] > 0).astype(int)})
    est = GLM(["softmax", "linear", "logistic"], n_passes=5, random_state=0).fit(X, Y)
    assert est.classes_[2].tolist() == [0, 1]
    assert (est.score_targets(X, Y) > 0.7).all()
    with pytest.raises(ValueError, match="Y column 2 is not a set of class labels"):
        GLM(["softmax", "linear", "logistic"], n_passes=2).fit(X, Y.assign(cnt=X[:, 2]))


def test_auto_rate_drops_diverging_rates_and_says_when_none_trains():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 5)) * 3.0
    y = X[:, 3] + 0.1 * rng.standard_normal(4000)
    est = GLM("linear", updater="grad", random_state=0, n_passes=3,
              standardize=False).fit(X, y)
    assert est.score(X, y) > 0.9 and float(np.max(est.lrate_)) < 1.0
    X = X * np.array([1, 10, 100, 1000, 1e4])
    with pytest.raises(DivergedError, match="no learning rate in the grid.*StandardScaler"):
        GLM("linear", updater="grad", random_state=0, standardize=False).fit(X, X[:, 3])
    # fit's own standardisation (the default) trains the same features
    est = GLM("linear", updater="grad", random_state=0).fit(X, X[:, 3])
    assert est.score(X, X[:, 3]) > 0.99


def test_partial_fit_refuses_other_classes_than_the_first_calls():
    """As scikit-learn's SGD estimators: the targets were encoded with the first classes."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] > 0).astype(int)
    est = GLM(random_state=0).partial_fit(X, y, classes=[0, 1])
    est.partial_fit(X, y, classes=[1, 0])  # the same set
    est.partial_fit(X, y)
    with pytest.raises(ValueError, match=r"classes=\[0, 1, 2\] differs from the first "
                       r"partial_fit call's \[0, 1\]"):
        est.partial_fit(X, y, classes=[0, 1, 2])


def test_warm_start_after_a_link_change_fits_the_new_link():
    """The fitted weights cannot start a model of another link: fit starts over (the old
    engine was kept, and the new targets were refused as the old link's labels)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = rng.integers(0, 3, 300)
    est = GLM("softmax", warm_start=True, random_state=0).fit(X, y)
    assert est.coef_.shape == (3, 4)
    est.set_params(link="linear")
    est.fit(X, X @ np.array([1.0, -2.0, 0.5, 0.0]))
    assert est.coef_.shape == (1, 4) and est.score(X, X @ np.array([1.0, -2.0, 0.5, 0.0])) > 0.5


def test_partial_fit_picks_its_rate_from_several_pilot_steps_on_a_small_chunk():
    """One step could not tell the rates apart: a 500-row first chunk picked 0.1 and the
    stream trained to 0.75; a pilot of three smaller steps picks the rate of larger
    chunks."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 6))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.7, 0.7])
    picks, scores = [], []
    for chunk in (500, 2000):
        est = GLM("softmax", random_state=0)
        for i in range(0, 3200, chunk):
            est.partial_fit(X[i:i + chunk], y[i:i + chunk], classes=[0, 1, 2])
        picks.append(est.lrate_)
        scores.append(est.score(X[3200:], y[3200:]))
    assert picks[0] == picks[1]
    assert scores[0] > 0.85, scores
