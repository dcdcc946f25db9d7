"""KMeans: live learners and partial_fit on rows far from the origin, n_iter_ as
scikit-learn counts it, a callable init, and data too large for float32 distances."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans as SKKMeans

from bidlab.datasets import blobs
from bidlab.models import KMeans


def _far_blobs(offset: float = 1e4, n: int = 3000, seed: int = 0) -> np.ndarray:
    """Five blobs (spread 0.5, centres ~3 apart) in 4 features around ``offset``, float32."""
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((5, 4)) * 3
    X = C[rng.integers(0, 5, n)] + rng.standard_normal((n, 4)) * 0.5
    return (X + offset).astype(np.float32)


# -- rows far from the origin: the live paths train as fit does -----------------------------
@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_fit_learner_on_rows_far_from_the_origin_matches_fit(algorithm: str) -> None:
    # float32 rows around 10,000: the learner path trained on them as given (GEMM
    # cancellation), inertia 24,206 (lloyd) / 16,432 (minibatch) against fit's 2,982
    X = _far_blobs()
    kw = {"random_state": 0, "algorithm": algorithm, "batch_size": 256}
    fit = KMeans(5, **kw).fit(X)
    km = KMeans(5, **kw)
    lrn, finish = km.fit_learner(X)
    lrn.fit(progress=None)
    finish()
    assert km.inertia_ == pytest.approx(fit.inertia_, rel=1e-3)
    # centres in the data's coordinates, and predict / transform / score agree with them
    np.testing.assert_allclose(np.sort(km.cluster_centers_, axis=0),
                               np.sort(fit.cluster_centers_, axis=0), atol=0.05)
    assert float(km.cluster_centers_.mean()) == pytest.approx(1e4, abs=10)
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    np.testing.assert_array_equal(km.transform(X).argmin(axis=1), km.labels_)
    assert km.score(X) == -km.inertia_
    assert math.isfinite(lrn.metrics["train_score"]) and lrn.metrics["train_score"] > -1.5


def test_partial_fit_on_rows_far_from_the_origin_matches_fit() -> None:
    # was 19,325 against fit's 2,982 after five passes
    X = _far_blobs()
    fit = KMeans(5, random_state=0, algorithm="minibatch", batch_size=256).fit(X)
    km = KMeans(5, random_state=0, batch_size=256)
    for _ in range(5):
        km.partial_fit(X)
    assert km.inertia_ == pytest.approx(fit.inertia_, rel=1e-3)
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    assert float(km.cluster_centers_.mean()) == pytest.approx(1e4, abs=10)


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_partial_fit_after_fit_on_far_rows_keeps_the_fit(algorithm: str) -> None:
    # partial_fit continued fit's centres on the rows as given: 2,982 became 7,573 / 8,212
    X = _far_blobs()
    km = KMeans(5, random_state=0, algorithm=algorithm, batch_size=256).fit(X)
    before = km.inertia_
    for _ in range(3):
        km.partial_fit(X)
    assert km.inertia_ <= before * 1.001
    np.testing.assert_array_equal(km.predict(X), km.labels_)


def test_a_learner_on_far_rows_saves_and_loads_in_the_data_coordinates(tmp_path) -> None:
    from bidlab.models import load

    X = _far_blobs()
    km = KMeans(5, random_state=0)
    km.learner(X).fit(progress=None)
    back = load(km.save(tmp_path / "km"))
    np.testing.assert_array_equal(back.cluster_centers_, km.cluster_centers_)
    np.testing.assert_array_equal(back.predict(X), km.predict(X))


# -- n_iter_ --------------------------------------------------------------------------------
@pytest.mark.parametrize("bounds", [True, False])
def test_n_iter_counts_the_last_pass_that_changed_no_label(bounds: bool) -> None:
    # scikit-learn counts the iteration that finds the labels unchanged; ours stopped one
    # short (17 against 18 here) when the labels, not tol, ended the run
    X = blobs(2000, 3, 6, seed=0).X.astype(np.float64)
    X += np.random.default_rng(0).standard_normal(X.shape) * 2
    init = X[:6].copy()
    sk = SKKMeans(6, init=init, n_init=1, tol=0.0, max_iter=300).fit(X)
    km = KMeans(6, init=init, tol=0.0, max_iter=300, bounds=bounds).fit(X)
    np.testing.assert_allclose(km.cluster_centers_, sk.cluster_centers_, rtol=1e-10)
    assert km.n_iter_ == sk.n_iter_
    live = KMeans(6, init=init, tol=0.0, max_iter=300, bounds=bounds)
    lrn, finish = live.fit_learner(X)
    lrn.fit(progress=None)
    finish()
    assert live.n_iter_ == sk.n_iter_


# -- a callable init ------------------------------------------------------------------------
def test_callable_init_is_called_as_scikit_learn_calls_it() -> None:
    X = blobs(600, 3, 4, seed=1).X
    calls = []

    def first_rows(data, n_clusters, random_state):
        calls.append((data.shape, n_clusters, type(random_state)))
        return data[:n_clusters] * 1.0

    km = KMeans(4, init=first_rows, n_init=3, random_state=0).fit(X)
    assert calls == [(X.shape, 4, np.random.RandomState)] * 3  # once per run, as sklearn
    ref = KMeans(4, init=X[:4].copy()).fit(X)
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-12)
    assert clone(km).init is first_rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = SKKMeans(4, init=first_rows, n_init=1).fit(X)
    np.testing.assert_allclose(km.cluster_centers_, sk.cluster_centers_, rtol=1e-5)
    part = KMeans(4, init=first_rows, batch_size=100).partial_fit(X)
    assert part.cluster_centers_.shape == (4, 3)
    lrn = KMeans(4, init=first_rows, max_iter=3).learner(X)
    lrn.fit(progress=None)


def test_callable_init_sees_far_rows_as_given() -> None:
    X = _far_blobs()
    rows = [0, 1, 2, 3, 4]
    km = KMeans(5, init=lambda data, k, rs: data[rows], random_state=0).fit(X)
    ref = KMeans(5, init=X[rows].copy()).fit(X)
    np.testing.assert_array_equal(km.cluster_centers_, ref.cluster_centers_)
    assert km.inertia_ == ref.inertia_


def test_callable_init_returning_the_wrong_shape_is_named() -> None:
    X = blobs(200, 3, 4, seed=1).X
    with pytest.raises(ValueError, match=r"callable init .* returned has shape \(3, 3\).*"
                       r"\(4, 3\)"):
        KMeans(4, init=lambda data, k, rs: data[:3]).fit(X)
    with pytest.raises(ValueError, match="callable init .* NaN"):
        KMeans(4, init=lambda data, k, rs: np.full((k, 3), np.nan)).fit(X)


# -- values too large for float32 distances -------------------------------------------------
def test_finite_values_beyond_float32_are_not_called_nan() -> None:
    X = np.random.default_rng(0).standard_normal((200, 2)) * 1e39  # finite float64
    with pytest.raises(ValueError, match=r"beyond the range of float32.*squared distances "
                       r"overflow float32.*float64") as err:
        KMeans(3, dtype=np.float32).fit(X)
    assert "NaN" not in str(err.value)
    km = KMeans(3, random_state=0).fit((X / 1e39).astype(np.float32))
    with pytest.raises(ValueError, match=r"beyond the range of float32.*scale X") as err:
        km.predict(X)
    assert "NaN" not in str(err.value)
    with pytest.raises(ValueError, match="NaN or infinity"):  # a real infinity still is
        km.predict(np.full((2, 2), np.inf))


def test_init_centres_too_large_for_float32_are_refused() -> None:
    # they became infinite centres silently
    X = np.random.default_rng(0).standard_normal((200, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="init has values up to .* overflow|too large"):
        KMeans(3, dtype=np.float32, init=np.full((3, 2), 1e39)).fit(X)


def test_learner_score_of_large_float32_rows_is_finite() -> None:
    # the minibatch score averaged float32 distances in float32: -inf near the limit
    d = 2
    big = np.sqrt(np.finfo(np.float32).max / (4 * d))
    X = (np.random.default_rng(0).uniform(-1, 1, (5000, d)) * big * 0.95).astype(np.float32)
    lrn = KMeans(3, random_state=0, algorithm="minibatch").learner(X)
    lrn.fit(progress=None)
    assert math.isfinite(lrn.metrics["train_score"])


def test_the_live_view_shows_far_centres_where_the_data_is() -> None:
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.widgets import KMeansView

    X = _far_blobs()
    lrn = KMeans(n_clusters=3, random_state=0).learner(X, n_passes=3)
    view = KMeansView(lrn)
    try:
        xs = np.asarray(view.centers.data["x"])
        assert np.all(np.abs(xs - X[:, 0].mean()) < 50), xs
        lrn.fit(progress=None)
        want = KMeans(n_clusters=3, random_state=0).fit(X).cluster_centers_
        from bidlab.learn import Snapshot

        C = lrn.model.host_modelmats()[0]
        view.render(Snapshot({}, {"centers": C}, "finished", 10**6))
        got = np.sort(np.asarray(view.centers.data["x"]))
        np.testing.assert_allclose(got, np.sort(want[:, 0]), rtol=1e-3)
    finally:
        view.close()
