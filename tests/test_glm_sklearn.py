"""GLM as a scikit-learn estimator: every estimator check per link, input handling,
sample weights, pickling and the safe save format."""

from __future__ import annotations

import pickle

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks

import bidlab as bl
from bidlab.datasets import synthetic_glm
from bidlab.learn.model import MODELS
from bidlab.models.glm import GLM, best_config, glm_sweep

# The estimator checks fit tiny data sets: one minibatch per pass (the whole data), so a
# sample weight of 2 means exactly what repeating the row means, and enough passes that
# plain blobs are learned. Everything here is a parameter, nothing is special-cased.
CHECKED = {link: GLM(link, lrate=0.5, batch_size=10_000, n_passes=40) for link in
           ("linear", "logistic", "softmax", "svm")}

@parametrize_with_checks(list(CHECKED.values()))
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ------------------------------------------------------------------------------ tags & API


def test_tags_follow_the_link():
    for link, kind in (("linear", "regressor"), ("logistic", "classifier"),
                       ("softmax", "classifier"), ("svm", "classifier")):
        tags = get_tags(GLM(link))
        assert tags.estimator_type == kind
        assert tags.input_tags.sparse and tags.target_tags.multi_output
        if kind == "classifier":
            assert tags.classifier_tags.multi_class is (link == "softmax")
    assert get_tags(GLM(["logistic", "linear"])).estimator_type is None


def test_methods_exist_only_where_they_work():
    X, y, _ = synthetic_glm(500, 40, 5, seed=0)
    fitted = {link: GLM(link, n_passes=1, random_state=0).fit(
        X, y[:, 0] if link != "softmax" else (np.arange(500) % 3)) for link in
        ("linear", "logistic", "softmax", "svm")}
    assert hasattr(fitted["logistic"], "predict_proba")
    assert hasattr(fitted["softmax"], "predict_proba")
    assert not hasattr(fitted["svm"], "predict_proba")
    assert not hasattr(fitted["linear"], "predict_proba")
    assert not hasattr(fitted["linear"], "decision_function")
    assert fitted["svm"].decision_function(X).shape == (500,)
    assert fitted["softmax"].decision_function(X).shape == (500, 3)


def test_binary_targets_with_shared_labels_are_multilabel():
    X, Y, _ = synthetic_glm(2000, 60, 8, n_targets=3, seed=1)
    Y = (Y > 0).astype(np.int64)
    for link in ("logistic", "softmax"):
        m = GLM(link, lrate=0.3, n_passes=3, random_state=0).fit(X, Y)
        assert m.multilabel_ and m.classes_.tolist() == [0, 1]
        D, P = m.decision_function(X[:50]), m.predict_proba(X[:50])
        assert D.shape == P.shape == (50, 3)
        np.testing.assert_array_equal(m.classes_[(D > 0).astype(int)], m.predict(X[:50]))
        np.testing.assert_array_equal((P > 0.5).astype(int), m.predict(X[:50]))
    # different label sets: one array of labels and of probabilities per target
    Ymix = np.column_stack([Y[:, 0], np.where(Y[:, 1] > 0, 5, 7)])
    m = GLM("logistic", n_passes=1, random_state=0).fit(X, Ymix)
    assert not m.multilabel_ and [c.tolist() for c in m.classes_] == [[0, 1], [5, 7]]
    assert [p.shape for p in m.predict_proba(X[:4])] == [(4, 2), (4, 2)]


def test_not_fitted_raises_not_fitted_error():
    X = np.ones((4, 3))
    est = GLM("logistic")
    for call in (est.predict, est.predict_proba, est.decision_function):
        with pytest.raises(NotFittedError):
            call(X)
    with pytest.raises(NotFittedError):
        est.coef_  # noqa: B018


def test_registered_for_bidlab_train():
    assert MODELS["glm"] is GLM
    assert {o.name for o in GLM.PARAMS} == set(GLM().get_params())


def test_learner_needs_targets_and_takes_learner_options():
    X, y, _ = synthetic_glm(1000, 50, 5, seed=1)
    with pytest.raises(ValueError, match="requires y to be passed"):
        GLM().learner(X)
    est = GLM("logistic", random_state=0)
    lrn = est.learner(X, y[:, 0], n_passes=2, batch_size=100, val_every=0)
    assert lrn.source.batch_size == 100 and lrn.opts.n_passes == 2
    lrn.fit(progress=None)
    # the estimator's counts follow the model its learner trained
    assert lrn.step == 20 and est.n_steps_ == 20 and est.n_iter_ == 2
    assert len(est.loss_curve_) == 2
    assert est.score(X, y[:, 0]) > 0.6


# ------------------------------------------------------------------------------ inputs


def test_dataframes_give_feature_names_and_the_same_model():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((300, 4))
    y = (A[:, 0] - A[:, 2] > 0).astype(int)
    df = pd.DataFrame(A, columns=["a", "b", "c", "d"])
    from_df = GLM("logistic", random_state=0).fit(df, y)
    from_arr = GLM("logistic", random_state=0).fit(A, y)
    assert list(from_df.feature_names_in_) == ["a", "b", "c", "d"]
    assert not hasattr(from_arr, "feature_names_in_")
    np.testing.assert_array_equal(from_df.coef_, from_arr.coef_)
    np.testing.assert_array_equal(from_df.predict_proba(df), from_arr.predict_proba(A))
    with pytest.raises(ValueError, match="feature names"):
        from_df.predict(df[["b", "a", "c", "d"]])


@pytest.mark.parametrize("given, want", [(np.float64, np.float64), (np.float32, np.float32),
                                         (np.int64, np.float32)])
def test_the_model_dtype_follows_the_data(given, want):
    rng = np.random.default_rng(1)
    A = (rng.standard_normal((200, 5)) * 3).astype(given)
    y = A[:, 0].astype(np.float64) * 2 + 1
    est = GLM("linear", n_passes=2, random_state=0).fit(A, y)
    assert est.coef_.dtype == want and est.predict(A).dtype == want
    assert GLM("linear", dtype="float32", n_passes=1).fit(A, y).predict(A).dtype == np.float32
    clf = GLM("logistic", n_passes=1).fit(sp.csr_matrix(A), (y > 1).astype(int))
    assert clf.decision_function(A).dtype == want and clf.predict_proba(A).dtype == want


# ------------------------------------------------------------------------------ weights


def _weighted_problem():
    rng = np.random.default_rng(2)
    A = np.abs(rng.standard_normal((60, 8)))
    y = (A[:, 0] > A[:, 1]).astype(int)
    w = rng.integers(0, 4, 60)
    return A, y, w


def test_integer_sample_weights_equal_repeated_rows():
    A, y, w = _weighted_problem()
    kw = dict(lrate=0.3, n_passes=7, batch_size=1000, random_state=0)
    weighted = GLM("logistic", **kw).fit(A, y, sample_weight=w)
    repeated = GLM("logistic", **kw).fit(np.repeat(A, w, axis=0), np.repeat(y, w))
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weighted.predict_proba(A), repeated.predict_proba(A),
                               rtol=1e-10)
    plain = GLM("logistic", **kw).fit(A, y)
    assert not np.allclose(plain.coef_, weighted.coef_)  # the weights matter


def test_sample_weights_weight_each_minibatch_gradient():
    """Minibatches of 10 rows: each step's gradient is its rows' weighted mean, so
    scaling every weight by 3 changes nothing, and partial_fit takes weights too."""
    A, y, w = _weighted_problem()
    w = w + 1.0
    kw = dict(lrate=0.3, n_passes=3, batch_size=10, random_state=0)
    a = GLM("logistic", updater="grad", **kw).fit(A, y, sample_weight=w)
    b = GLM("logistic", updater="grad", **kw).fit(A, y, sample_weight=3 * w)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10)
    p = GLM("logistic", **kw).partial_fit(A, y, classes=[0, 1], sample_weight=w)
    q = GLM("logistic", **kw).partial_fit(A, y, classes=[0, 1])
    assert p.n_steps_ == 6 and not np.allclose(p.coef_, q.coef_)
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        GLM().fit(A, y, sample_weight=-w)


# ------------------------------------------------------------------------------ saving


def _fitted_models():
    X, Y, _ = synthetic_glm(1200, 60, 6, n_targets=2, seed=3)
    Xl, yl, _ = synthetic_glm(1200, 60, 6, link="linear", seed=3)
    labels = np.where(Y[:, 0] > 0, "yes", "no")
    common = dict(n_passes=2, batch_size=200, random_state=0)
    return X, {
        "logistic": GLM("logistic", l1=1e-4, l2=1e-3, **common).fit(X, Y),
        "svm": GLM("svm", **common).fit(X, labels),
        "linear": GLM("linear", updater="grad", **common).fit(Xl, yl[:, 0]),
        "softmax-sweep": glm_sweep("softmax", lrate=[0.1, 0.5], l2=[0.0, 1e-3],
                                   **common).fit(X, (Y @ [1, 2]).astype(int)),
    }


def _outputs(est, X):
    outs = [est.predict(X)]
    for name in ("predict_proba", "decision_function"):
        if hasattr(est, name):
            got = getattr(est, name)(X)
            outs += got if isinstance(got, list) else [got]
    return outs


def test_pickle_joblib_and_save_load_give_identical_predictions(tmp_path):
    X, models = _fitted_models()
    for name, est in models.items():
        want = _outputs(est, X)
        blob = pickle.dumps(est)
        assert b"numba" not in blob and b"_thread" not in blob
        joblib.dump(est, tmp_path / f"{name}.joblib")
        path = est.save(tmp_path / f"{name}.bidlab")
        for back in (pickle.loads(blob), joblib.load(tmp_path / f"{name}.joblib"),
                     GLM.load(path)):
            assert type(back) is GLM and back.get_params() == est.get_params()
            for a, b in zip(_outputs(back, X), want, strict=True):
                np.testing.assert_array_equal(a, b)


def test_a_loaded_model_keeps_training_where_it_stopped(tmp_path):
    """partial_fit after pickling or loading continues the same run: same weights as the
    model that was never saved (ADAGrad's sums of squares and step count came along)."""
    X, models = _fitted_models()
    est = models["logistic"]
    Y = (est.predict(X) + 1) % 2  # different targets: the next pass moves the weights
    back = [pickle.loads(pickle.dumps(est)), GLM.load(est.save(tmp_path / "m.bidlab"))]
    est.partial_fit(X, Y)
    for other in back:
        other.partial_fit(X, Y)
        np.testing.assert_allclose(other.coef_, est.coef_, rtol=1e-6, atol=1e-7)
        assert other.n_steps_ == est.n_steps_


def test_best_config_of_a_loaded_sweep():
    X, models = _fitted_models()
    sweep = pickle.loads(pickle.dumps(models["softmax-sweep"]))
    y = models["softmax-sweep"].predict(X)[:, 0]
    best = best_config(sweep, X, y)
    assert best.model.predict(X).shape == (X.shape[0],)
    assert 0 <= best.index < 4 and best.score > 0.5


def test_a_selected_configuration_predicts_as_its_sweep_column():
    """``select(k)`` of a logistic sweep is an ordinary fitted binary classifier whose
    margins, probabilities and labels are model target k's."""
    X, Y, _ = synthetic_glm(600, 40, 6, seed=5)
    y = Y[:, 0]
    sweep = glm_sweep("logistic", lrate=[0.1, 1.0], l2=[0.0, 1e-3], n_passes=2,
                      random_state=0).fit(X, y)
    margins = sweep.decision_function(X)
    for k in range(4):
        one = sweep.select(k)
        np.testing.assert_allclose(one.decision_function(X), margins[:, k], rtol=1e-6)
        P = one.predict_proba(X)
        assert P.shape == (X.shape[0], 2)
        np.testing.assert_allclose(P[:, 1], 1.0 / (1.0 + np.exp(-margins[:, k])), rtol=1e-5)
        np.testing.assert_array_equal(one.predict(X), (margins[:, k] > 0).astype(y.dtype))


def test_inputs_wrapped_by_bidlab_are_accepted():
    X, Y, _ = synthetic_glm(400, 30, 5, seed=4)
    a = GLM("logistic", random_state=0, n_passes=1).fit(bl.SMat(X), Y[:, 0])
    b = GLM("logistic", random_state=0, n_passes=1).fit(X, Y[:, 0])
    np.testing.assert_array_equal(a.coef_, b.coef_)


# -- scikit-learn's names and habits ------------------------------------------------------
def _imbalanced(n=800, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 1.2).astype(np.int64)  # about 15% ones
    return X, y


def test_scikit_learn_parameters_are_accepted():
    est = GLM(verbose=1, n_jobs=2, warm_start=True, class_weight="balanced")
    assert est.get_params()["n_jobs"] == 2 and est.get_params()["class_weight"] == "balanced"
    for bad, msg in (({"class_weight": "even"}, "class_weight"),
                     ({"n_jobs": 0}, "n_jobs"), ({"verbose": -1}, "verbose")):
        with pytest.raises(ValueError, match=msg):
            GLM(**bad).fit(*_imbalanced(50))


def test_n_iter_loss_curve_and_warm_start():
    X, y = _imbalanced()
    est = GLM(n_passes=4, random_state=0).fit(X, y)
    assert est.n_iter_ == 4 and len(est.loss_curve_) == 4
    assert est.loss_curve_[-1] < est.loss_curve_[0]  # the training loss falls
    assert est.loss_curve_[-1] < np.log(2)  # a mean log loss per sample, below a coin's
    cold = GLM(n_passes=4, random_state=0).fit(X, y)
    cold.fit(X, y)
    assert cold.n_iter_ == 4  # starts again
    np.testing.assert_array_equal(cold.coef_, est.coef_)
    est.set_params(warm_start=True).fit(X, y)
    assert est.n_iter_ == 8 and len(est.loss_curve_) == 8
    assert est.loss_curve_[4] < est.loss_curve_[0]  # went on from the trained weights
    est.partial_fit(X, y)
    assert est.n_iter_ == 9
    assert "n_iter_" in est.summary() and "final training loss" in est.summary()


def test_predict_log_proba():
    X, y = _imbalanced()
    est = GLM("softmax", n_passes=2, random_state=0).fit(X, y)
    np.testing.assert_allclose(np.exp(est.predict_log_proba(X[:50])), est.predict_proba(X[:50]),
                               rtol=1e-5)
    assert not hasattr(GLM("svm").fit(X, y), "predict_log_proba")


def test_class_weight_balanced_and_dict_act_as_sample_weights():
    X, y = _imbalanced()
    plain = GLM(n_passes=3, random_state=0, shuffle=False).fit(X, y)
    balanced = GLM(n_passes=3, random_state=0, shuffle=False, class_weight="balanced").fit(X, y)
    assert balanced.predict(X).mean() > plain.predict(X).mean()  # the rare class gains
    n, n1 = len(y), int(y.sum())
    w = np.where(y == 1, n / (2 * n1), n / (2 * (n - n1)))
    by_weight = GLM(n_passes=3, random_state=0, shuffle=False).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(balanced.coef_, by_weight.coef_, rtol=1e-5)
    as_dict = GLM(n_passes=3, random_state=0, shuffle=False, class_weight={1: 3.0}).fit(
        X, y, sample_weight=np.full(n, 2.0))
    by_weight = GLM(n_passes=3, random_state=0, shuffle=False).fit(
        X, y, sample_weight=np.where(y == 1, 6.0, 2.0))
    np.testing.assert_allclose(as_dict.coef_, by_weight.coef_, rtol=1e-5)
    with pytest.raises(ValueError, match="not classes of y"):
        GLM(class_weight={7: 2.0}).fit(X, y)
    with pytest.raises(ValueError, match="classifier links"):
        GLM("linear", class_weight="balanced").fit(X, y.astype(float))
    with pytest.raises(ValueError, match="partial_fit"):
        GLM(class_weight="balanced").partial_fit(X, y, classes=[0, 1])


def test_verbose_lines_go_to_stderr_never_stdout(capsys):
    X, y = _imbalanced(200)
    GLM(n_passes=3, verbose=2).fit(X, y)
    out, err = capsys.readouterr()
    assert out == "" and len([ln for ln in err.splitlines() if "pass " in ln]) == 3
