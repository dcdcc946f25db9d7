"""GLM(standardize=...): fit trains on standardised features and folds the map into the
weights, so everything after fit takes the features as given."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from bidlab.models.glm import GLM


def _raw(n=1500, seed=0):
    """Features far from 0 and on scales from 0.01 to 1000; a linear boundary."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, 6))
    y = (Z @ np.array([1.0, -2.0, 0.5, 0.0, 1.5, -1.0]) + 0.3 * rng.standard_normal(n) > 0)
    scale = np.array([0.01, 1.0, 30.0, 5.0, 1000.0, 0.2])
    shift = np.array([5.0, -40.0, 300.0, 2.0, 1e4, 1.0])
    return Z * scale + shift, y.astype(int)


def test_fit_on_raw_features_equals_fit_on_standard_scaled_ones():
    X, y = _raw()
    a = GLM(random_state=0).fit(X, y)
    Xs = StandardScaler().fit_transform(X)
    b = GLM(random_state=0, standardize=False).fit(Xs, y)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(Xs), atol=1e-6)
    # the map is folded into the weights: coef_ and intercept_ take the raw features
    margin = X @ a.coef_.T + a.intercept_
    np.testing.assert_allclose(margin.ravel(), a.decision_function(X).ravel(), rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_allclose(a.scaling_["mean"], X.mean(axis=0))
    np.testing.assert_allclose(a.scaling_["scale"], 1 / X.std(axis=0))


@pytest.mark.parametrize("loader", [load_wine, load_iris])
def test_raw_features_train_as_well_as_logistic_regression(loader):
    X, y = loader(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    peer = log_loss(yte, LogisticRegression(max_iter=5000).fit(Xtr, ytr).predict_proba(Xte))
    ours = log_loss(yte, GLM("softmax", random_state=0).fit(Xtr, ytr).predict_proba(Xte))
    as_given = log_loss(yte, GLM("softmax", random_state=0, standardize=False)
                        .fit(Xtr, ytr).predict_proba(Xte))
    assert ours < peer + 0.02 and ours < 0.5 * as_given  # wine: 0.04 / 0.08 / 0.42


def test_sparse_input_is_used_as_given_unless_standardize_is_true():
    rng = np.random.default_rng(1)
    X = sp.random(600, 40, density=0.1, random_state=2, format="csr") * 50.0
    y = (X @ rng.standard_normal(40) > 0).astype(int)
    auto = GLM(random_state=0).fit(X, y)
    given = GLM(random_state=0, standardize=False).fit(X, y)
    assert auto.scaling_ is None
    np.testing.assert_array_equal(auto.coef_, given.coef_)
    scaled = GLM(random_state=0, standardize=True).fit(X, y)
    assert scaled.scaling_["mean"] is None  # sparse columns are scaled, never centred
    by_hand = GLM(random_state=0, standardize=False).fit(
        X @ sp.diags(scaled.scaling_["scale"]), y)
    np.testing.assert_allclose(scaled.decision_function(X), by_hand.decision_function(
        X @ sp.diags(scaled.scaling_["scale"])), rtol=1e-5, atol=1e-5)


def test_mostly_zero_dense_arrays_are_scaled_not_centred():
    rng = np.random.default_rng(3)
    X = rng.poisson(0.2, size=(800, 30)).astype(float)  # about 80 % zeros
    y = (X[:, :5].sum(axis=1) > 1).astype(int)
    est = GLM(random_state=0).fit(X, y)
    assert est.scaling_["mean"] is None and est.score(X, y) > 0.9
    assert GLM(random_state=0, standardize=True).fit(X, y).scaling_["mean"] is not None


def test_constant_features_keep_scale_one_and_weight_zero():
    X, y = _raw(400)
    X = np.column_stack([X, np.full(len(X), 7.0)])
    est = GLM(random_state=0).fit(X, y)
    assert est.scaling_["scale"][-1] == 1.0 and abs(est.coef_[0, -1]) < 1e-6
    assert np.isfinite(est.coef_).all() and est.score(X, y) > 0.9


def test_warm_start_continues_through_the_same_map():
    X, y = _raw()
    est = GLM(random_state=0, n_passes=3, warm_start=True).fit(X, y)
    kept = {k: v.copy() for k, v in est.scaling_.items()}
    before = log_loss(y, est.predict_proba(X))
    est.fit(X[:300], y[:300])  # other statistics: the first fit's map is kept
    np.testing.assert_array_equal(est.scaling_["mean"], kept["mean"])
    est.fit(X, y)
    assert log_loss(y, est.predict_proba(X)) < before + 0.01


def test_saved_and_pickled_estimators_keep_the_map(tmp_path):
    import pickle

    X, y = _raw(600)
    est = GLM(random_state=0).fit(X, y)
    est.save(tmp_path / "glm.bidlab")
    for back in (GLM.load(tmp_path / "glm.bidlab"), pickle.loads(pickle.dumps(est))):
        np.testing.assert_allclose(back.predict_proba(X), est.predict_proba(X), rtol=1e-6)
        np.testing.assert_array_equal(back.scaling_["scale"], est.scaling_["scale"])


def test_partial_fit_and_learner_train_on_the_features_as_given():
    X, y = _raw(600)
    assert GLM(random_state=0).partial_fit(X, y, classes=[0, 1]).__dict__.get(
        "scaling_") is None
    est = GLM(random_state=0)
    est.learner(X, y, n_passes=1).fit()
    assert est.__dict__.get("scaling_") is None


def test_fit_learner_trains_through_the_map_and_folds_it_at_the_end():
    X, y = _raw(900)
    est = GLM(random_state=0)
    lrn, finish = est.fit_learner(X, y, n_passes=4)
    lrn.fit(progress=None)
    Xs = StandardScaler().fit_transform(X)
    live = est.decision_function(Xs).ravel()  # until the end: the standardised features'
    finish()
    np.testing.assert_allclose(est.decision_function(X).ravel(), live, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(est.scaling_["scale"], 1 / X.std(axis=0))
    raw = GLM(random_state=0)
    raw.learner(X, y, n_passes=4).fit(progress=None)
    assert est.score(X, y) > raw.score(X, y) + 0.05


def test_fit_learner_reports_the_rate_the_run_ended_with(tmp_path):
    # a resumed run trains with its checkpoint's rate, not this process's pilot pick
    X, y = _raw(600)
    est = GLM(random_state=0)
    lrn, finish = est.fit_learner(X, y, n_passes=2, checkpoint=str(tmp_path / "ck"))
    lrn.set(lrate=0.0123)
    lrn.fit(progress=None)
    again = GLM(random_state=1)
    lrn2, finish2 = again.fit_learner(X, y, n_passes=3, checkpoint=str(tmp_path / "ck"))
    lrn2.load(str(tmp_path / "ck"))
    lrn2.fit(progress=None)
    finish2()
    assert lrn2.opts.lrate == 0.0123 and again.lrate_ == 0.0123


def test_bidlab_train_glm_on_raw_dense_features_trains_as_fit_does(tmp_path, capsys):
    from bidlab.cli import main

    X, y = _raw(1500, seed=3)
    np.savez(tmp_path / "raw.npz", X=X, y=y.astype(float))
    scores = {}
    for flag in ("auto", "False"):
        out = tmp_path / f"{flag}.bidlab"
        assert main(["train", "glm", "--data", str(tmp_path / "raw.npz"), "--progress",
                     "none", "--random_state", "0", "--standardize", flag, "--save",
                     str(out)]) == 0
        est = GLM.load(out)
        scores[flag] = (est.score(X, y), est.__dict__.get("scaling_"))
    capsys.readouterr()
    assert scores["auto"][1] is not None and scores["False"][1] is None
    assert scores["auto"][0] > 0.95 > scores["False"][0] + 0.03, scores


@pytest.mark.parametrize("bad", ["yes", 1, None, "true"])
def test_bad_standardize_values_are_refused(bad):
    X, y = _raw(100)
    with pytest.raises(ValueError, match="standardize"):
        GLM(standardize=bad).fit(X, y)


def test_dense_benchmark_reports_every_system_and_the_standardisation_pays():
    from bidlab.bench._glm_dense import bench_dense

    res = bench_dense(quick=True, peers=set())
    by = {(c["data"], c["system"]): c for c in res["cases"]}
    assert {d for d, _ in by} == {"breast_cancer", "wine", "iris", "digits",
                                  "diabetes x 100 + 5"}
    for data in ("breast_cancer", "wine", "iris", "digits"):
        ours = by[data, "bidlab GLM() defaults"]["log_loss"]
        assert ours < by[data, "bidlab GLM(standardize=False)"]["log_loss"]
        assert ours < by[data, "sklearn LogisticRegression()"]["log_loss"] + 0.02
    assert by["diabetes x 100 + 5", "bidlab GLM() defaults"]["r2"] > 0.4


def test_dense_features_on_the_unit_scale_are_used_as_given():
    rng = np.random.default_rng(5)
    X = (rng.random((600, 40)) < 0.1).astype(float)  # one-hot-like binary columns
    y = (X[:, :4].sum(axis=1) > 0).astype(int)
    auto = GLM(random_state=0).fit(X, y)
    given = GLM(random_state=0, standardize=False).fit(X, y)
    assert auto.scaling_ is None
    np.testing.assert_array_equal(auto.coef_, given.coef_)
    assert GLM(random_state=0, standardize=True).fit(X, y).scaling_ is not None
