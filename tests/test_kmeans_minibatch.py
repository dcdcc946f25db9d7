"""Minibatch KMeans stops early as scikit-learn's MiniBatchKMeans does: when the smoothed
minibatch inertia reaches no new low for ``max_no_improvement`` steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from bidlab.datasets import blobs
from bidlab.models.kmeans import KMeans


def _stop_step(inertia: np.ndarray, n: int, m: int, patience: int) -> int | None:
    """The step (counted from 1) after which scikit-learn's rule stops, or None."""
    a = min(1.0, 2.0 * m / (n + 1))
    ewa = low = None
    since = 0
    for step, value in enumerate(inertia, start=1):
        if step == 1:
            continue
        ewa = value if ewa is None else (1 - a) * ewa + a * value
        if low is None or ewa < low:
            low, since = ewa, 0
        else:
            since += 1
        if since >= patience:
            return step
    return None


def test_minibatch_fit_stops_well_before_the_cap_on_easy_data():
    X, labels, _ = blobs(20000, 5, 4, spread=0.3, seed=3)
    km = KMeans(4, algorithm="minibatch", batch_size=500, max_iter=100, random_state=0).fit(X)
    cap = 100 * 20000 // 500
    assert km.model_.converged and km.n_steps_ < cap // 20
    assert km.n_iter_ == math.ceil(km.n_steps_ * 500 / 20000)
    assert adjusted_rand_score(labels, km.labels_) == 1.0


def test_the_stop_follows_the_smoothed_inertia_rule():
    X, _, _ = blobs(8000, 6, 5, spread=1.5, seed=4)
    for patience in (3, 10):
        lrn = KMeans(5, algorithm="minibatch", batch_size=200, max_no_improvement=patience,
                     random_state=1).learner(X, n_passes=50)
        lrn.fit(progress=None)
        inertia = -lrn.history()["score"]
        assert lrn.model.converged and lrn.step == len(inertia)
        assert _stop_step(inertia, 8000, 200, patience) == lrn.step


def test_no_early_stop_without_max_no_improvement():
    X, _, _ = blobs(20000, 5, 4, spread=0.3, seed=3)
    km = KMeans(4, algorithm="minibatch", batch_size=500, max_iter=6,
                max_no_improvement=None, random_state=0).fit(X)
    assert km.n_steps_ == 6 * 40 and km.n_iter_ == 6 and not km.model_.converged


def test_partial_fit_takes_every_minibatch():
    X, _, _ = blobs(20000, 5, 4, spread=0.3, seed=3)
    km = KMeans(4, batch_size=100, max_no_improvement=1, random_state=0)
    km.partial_fit(X)
    km.partial_fit(X[:5000])
    assert km.n_steps_ == 200 + 50 and km.n_iter_ == 2
    fitted = KMeans(4, random_state=0).fit(X)  # Lloyd converged: partial_fit still steps
    assert fitted.model_.converged
    before = fitted.cluster_centers_.copy()
    fitted.partial_fit(X[:4096])
    assert fitted.model_.steps == 1  # one minibatch step of Sculley's update
    assert not np.array_equal(fitted.cluster_centers_, before)


def test_max_no_improvement_is_checked():
    X = np.random.default_rng(0).random((50, 2))
    for bad in (0, 2.5, "10"):
        with pytest.raises(ValueError, match="'max_no_improvement' parameter of KMeans must "
                                             "be an int >= 1 or None"):
            KMeans(2, algorithm="minibatch", max_no_improvement=bad).fit(X)
