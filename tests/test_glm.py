"""GLM: planted models recovered, many targets == separate runs, sweeps, sklearn, bad input."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, logsumexp, softmax

import bidlab as bl
from bidlab import backend
from bidlab.datasets import sparse_blobs, synthetic_glm
from bidlab.models.glm import GLM, best_config, glm_sweep
from bidlab.models.glm.links import Layout, LinkStep


@pytest.fixture(autouse=True)
def _fresh_cache():
    bl.clear_cache()
    yield
    bl.clear_cache()


def _split(X, Y, n_train):
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


# ----------------------------------------------------------------------------- link math


def _oracle(link, E, y, C=1):
    """(loss per target, dL/dE) in float64 from the textbook formulas."""
    E = E.astype(np.float64)
    if link == "linear":
        return (0.5 * (E - y) ** 2).sum(0), E - y
    if link == "logistic":
        return (np.logaddexp(0, E) - y * E).sum(0), expit(E) - y
    if link == "svm":
        m = y * E
        return np.maximum(0, 1 - m).sum(0), np.where(m < 1, -y, 0.0)
    n, K = y.shape
    V = E.reshape(n, K, C)
    onehot = np.eye(C)[y.astype(int)]
    loss = (logsumexp(V, axis=2) - np.take_along_axis(V, y.astype(int)[..., None], 2)[..., 0])
    return loss.sum(0), (softmax(V, axis=2) - onehot).reshape(n, K * C)


@pytest.mark.parametrize("link", ["linear", "logistic", "svm", "softmax"])
def test_link_step_matches_the_textbook_formulas(xp, link):
    rng = np.random.default_rng(0)
    n, K = 7, 3
    C = 4 if link == "softmax" else 1
    E = rng.standard_normal((n, K * C)) * 2
    y = {
        "linear": rng.standard_normal((n, K)),
        "logistic": rng.integers(0, 2, (n, K)).astype(float),
        "svm": rng.choice([-1.0, 1.0], (n, K)),
        "softmax": rng.integers(0, C, (n, K)).astype(float),
    }[link]
    want_loss, want_grad = _oracle(link, E, y, C)
    step = LinkStep(Layout([link] * K, [C] * K), n, np.float64, xp)
    got = xp.asarray(E.copy())
    loss = xp.zeros((1, K))
    step(got, xp.asarray(y), loss)
    np.testing.assert_allclose(backend.to_host(got), want_grad, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(backend.to_host(loss)[0], want_loss, rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_step_is_stable_for_huge_margins(dtype):
    """Margins of +-1000 (a diverging run) still give finite probabilities and losses."""
    n, K, C = 6, 2, 5
    rng = np.random.default_rng(4)
    E = (rng.standard_normal((n, K * C)) * 1000).astype(dtype)
    y = rng.integers(0, C, (n, K)).astype(dtype)
    want_loss, want_grad = _oracle("softmax", E.astype(np.float64), y, C)
    got, loss = E.copy(), np.zeros((1, K), dtype)
    LinkStep(Layout(["softmax"] * K, [C] * K), n, dtype, np)(got, y, loss)
    assert np.isfinite(got).all() and np.isfinite(loss).all()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want_grad, rtol=tol, atol=tol)
    np.testing.assert_allclose(loss[0], want_loss, rtol=tol)


def test_mixed_links_in_one_layout_each_get_their_own_formula():
    rng = np.random.default_rng(1)
    links, widths = ["logistic", "logistic", "softmax", "linear"], [1, 1, 3, 1]
    lay = Layout(links, widths)
    assert [b.link for b in lay.blocks] == ["logistic", "softmax", "linear"]
    n = 5
    E = rng.standard_normal((n, lay.T))
    y = np.column_stack(
        [rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 3, n), rng.random(n)]
    ).astype(float)
    got = E.copy()
    loss = np.zeros((1, 4))
    LinkStep(lay, n, np.float64, np)(got, y, loss)
    _, g_log = _oracle("logistic", E[:, :2], y[:, :2])
    _, g_soft = _oracle("softmax", E[:, 2:5], y[:, 2:3], 3)
    _, g_lin = _oracle("linear", E[:, 5:], y[:, 3:])
    np.testing.assert_allclose(got, np.hstack([g_log, g_soft, g_lin]), atol=1e-12)


# ----------------------------------------------------------------------------- recovery


def test_planted_linear_model_is_recovered():
    X, y, W = synthetic_glm(20000, 200, 10, link="linear", values="lognormal", noise=0.1, seed=0)
    m = GLM("linear", lrate=0.2, n_passes=10, batch_size=200, random_state=0).fit(X, y[:, 0])
    coef = m.coef_[0]
    assert np.corrcoef(coef, W[:, 0])[0, 1] > 0.99
    np.testing.assert_allclose(coef, W[:, 0], atol=0.1 * np.abs(W).max())
    oracle_r2 = 1 - 0.1**2 / y.var()
    assert m.score(X, y[:, 0]) > oracle_r2 - 0.01


def test_planted_logistic_targets_reach_oracle_accuracy():
    X, Y, W = synthetic_glm(40000, 500, 20, n_targets=3, seed=1)
    Xtr, Ytr, Xte, Yte = _split(X, Y, 30000)
    m = GLM("logistic", lrate=0.2, l2=1e-5, n_passes=3, random_state=0).fit(Xtr, Ytr)
    acc = m.score_targets(Xte, Yte)
    oracle = ((Xte @ W > 0) == Yte).mean(0)
    assert np.all(acc > oracle - 0.02), (acc, oracle)
    assert m.coef_.shape == (3, 500) and m.intercept_.shape == (3,)
    assert np.corrcoef(m.coef_[0], W[:, 0])[0, 1] > 0.9


def test_softmax_separates_separable_data_perfectly():
    X, labels, _ = sparse_blobs(3000, 400, 6, nnz_per_row=10, seed=0)
    m = GLM("softmax", lrate=0.5, n_passes=5, random_state=0).fit(X, labels)
    assert m.score(X, labels) == 1.0
    assert m.coef_.shape == (6, 400)
    P = m.predict_proba(X[:10])
    np.testing.assert_allclose(P.sum(1), 1, rtol=1e-5)
    np.testing.assert_array_equal(P.argmax(1), labels[:10])


def test_svm_link_learns_and_arbitrary_labels_map_back():
    X, Y, W = synthetic_glm(20000, 200, 10, seed=4)
    y = np.where(Y[:, 0] > 0, "spam", "ham")
    m = GLM("svm", lrate=0.1, l2=1e-4, n_passes=3, random_state=0).fit(X, y)
    assert list(m.classes_) == ["ham", "spam"]
    oracle = np.mean((X @ W[:, 0] > 0) == (Y[:, 0] > 0))
    assert m.score(X, y) > oracle - 0.03
    assert set(np.unique(m.predict(X))) == {"ham", "spam"}
    assert not hasattr(m, "predict_proba")
    with pytest.raises(AttributeError) as err:
        m.predict_proba(X)
    assert "predict_proba needs logistic or softmax links" in str(err.value.__cause__)


# ----------------------------------------------------------------------------- many targets


def test_multi_target_equals_separate_single_target_runs():
    X, Y, _ = synthetic_glm(6000, 300, 12, n_targets=3, seed=5)
    lrates, l2s = [0.05, 0.2, 0.5], [0.0, 1e-4, 1e-3]
    kw = dict(n_passes=2, batch_size=250, random_state=7)
    many = GLM("logistic", lrate=lrates, l2=l2s, **kw).fit(X, Y)
    for j in range(3):
        one = GLM("logistic", lrate=lrates[j], l2=l2s[j], **kw).fit(X, Y[:, j])
        np.testing.assert_allclose(many.coef_[j], one.coef_[0], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(many.intercept_[j], one.intercept_[0], rtol=1e-4, atol=1e-6)


def test_target_map_replicas_equal_single_runs_and_best_config_finds_the_winner():
    X, y, _ = synthetic_glm(8000, 300, 12, classes=4, seed=6)
    Xtr, ytr, Xva, yva = _split(X, y, 6000)
    kw = dict(n_passes=2, batch_size=200, random_state=3)
    sweep = glm_sweep("softmax", lrate=[0.01, 0.3], l2=[0.0, 0.1], **kw).fit(Xtr, ytr)
    assert sweep.targmap == [0, 0, 0, 0] and sweep.coef_.shape == (16, 300)
    single = GLM("softmax", lrate=0.3, l2=0.0, **kw).fit(Xtr, ytr)
    np.testing.assert_allclose(sweep.coef_[8:12], single.coef_, rtol=1e-4, atol=1e-6)
    best = best_config(sweep, Xva, yva)
    scores = sweep.score_targets(Xva, yva)
    assert best.index == int(np.argmax(scores)) and best.score == scores.max()
    assert best.lrate == 0.3 and best.l2 == 0.0  # a big L2 or a tiny rate both lose here
    assert best.model.score(Xva, yva) == pytest.approx(best.score)
    assert [r["index"] for r in best.table()][0] == best.index
    by_loss = best_config(sweep, Xva, yva, metric="loss")
    assert by_loss.score == pytest.approx(sweep.loss_targets(Xva, yva).min())


def test_different_targets_may_use_different_links():
    X, Y, _ = synthetic_glm(6000, 200, 10, n_targets=2, seed=8)
    Xl, yl, _ = synthetic_glm(6000, 200, 10, link="linear", seed=8)
    Xc, yc, _ = synthetic_glm(6000, 200, 10, classes=3, seed=8)
    assert (Xl != X).nnz == 0 and (Xc != X).nnz == 0  # one X, several kinds of target
    Ymix = np.column_stack([Y[:, 0], yl[:, 0], yc])
    # every row trains (tol=None: no held-out tenth), so the scores below do not move with
    # which rows an unseeded hold-out takes
    m = GLM(["logistic", "linear", "softmax"], lrate=[0.2, 0.1, 0.3], n_passes=3,
            average=0.0, tol=None).fit(X, Ymix)
    assert m.coef_.shape == (1 + 1 + 3, 200)
    pred = m.predict(X)
    assert pred.shape == (6000, 3)
    scores = m.score_targets(X, Ymix)
    assert scores[0] > 0.7 and scores[1] > 0.8 and scores[2] > 0.6, scores
    probs = GLM(["logistic", "softmax"], targmap=[0, 2], n_passes=1).fit(X, Ymix)
    P = probs.predict_proba(X[:5])
    assert [p.shape for p in P] == [(5, 2), (5, 3)]


def test_partial_fit_continues_training():
    X, y, W = synthetic_glm(12000, 300, 12, classes=5, seed=9)
    m = GLM("softmax", lrate=0.3)
    scores = []
    for a in range(0, 12000, 3000):
        m.partial_fit(X[a : a + 3000], y[a : a + 3000], classes=np.arange(5))
        scores.append(m.score(X, y))
    assert scores[-1] > scores[0]
    assert m.n_steps_ == 4 * 16  # batch_size="auto": 3,000-row chunks take 16 steps each


# ----------------------------------------------------------------------------- no allocations


@pytest.mark.parametrize("link", ["logistic", "softmax"])
def test_training_steps_allocate_nothing_after_warm_up(link):
    """Minibatch containers, products, links, the touched-rows step and the regularisers:
    after one pass (5 full minibatches and a short one) nothing is allocated, also not
    after a live learning-rate change, and the result cache does not grow."""
    X, Y, _ = synthetic_glm(3000, 500, 10, n_targets=5, seed=10)
    if link == "softmax":
        est = glm_sweep("softmax", lrate=[0.1, 0.3], l2=[0.0, 1e-4], batch_size=512,
                        shuffle=False)
        Y = Y @ [1, 2, 4, 0, 0]
    else:
        est = GLM("logistic", l1=1e-5, l2=1e-4, batch_size=512, random_state=0)
    lrn = est.learner(X, Y, val_every=0, n_passes=1)
    lrn.fit(progress=None)
    entries = bl.cache_stats()["entries"]
    before = backend.allocations.snapshot()
    lrn.set(n_passes=3, lrate=0.05)  # a live change rewrites the rates in place
    lrn.fit(progress=None)
    assert backend.allocations.snapshot() == before, "a step allocated after warm-up"
    assert bl.cache_stats()["entries"] == entries, "...and added no cache entry"
    assert lrn.step == 3 * 6


# ----------------------------------------------------------------------------- sklearn


def test_clone_pipeline_and_grid_search_work():
    from sklearn.base import clone, is_classifier, is_regressor
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    X, y, _ = synthetic_glm(3000, 100, 8, classes=3, seed=11)
    est = GLM("softmax", n_passes=2, random_state=0)
    assert is_classifier(est) and is_regressor(GLM("linear"))
    c = clone(est)
    assert c.get_params() == est.get_params() and not hasattr(c, "model_")
    pipe = make_pipeline(MaxAbsScaler(), GLM("softmax", n_passes=2, random_state=0))
    assert pipe.fit(X, y).score(X, y) > 0.5
    grid = GridSearchCV(est, {"lrate": [1e-4, 0.3], "l2": [0.0, 1e-5]}, cv=3).fit(X, y)
    assert grid.best_params_["lrate"] == 0.3
    assert grid.best_estimator_.score(X, y) > 0.5


@pytest.mark.parametrize("link", ["logistic", "linear"])
def test_float32_and_float64_agree(link):
    X, Y, _ = synthetic_glm(4000, 200, 10, link=link, seed=12)
    fits = [
        GLM(link, dtype=dt, n_passes=2, random_state=0, lrate=0.1).fit(X, Y[:, 0])
        for dt in (np.float32, np.float64)
    ]
    assert fits[0].coef_.dtype == np.float32 and fits[1].coef_.dtype == np.float64
    # ADAGrad divides by the gradient's own size, so rounding noise in a weight whose
    # gradient is ~0 is scaled up to the step size: compare on the weights' scale
    np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, atol=5e-3)
    p32, p64 = fits[0].predict(X), fits[1].predict(X)
    if link == "linear":
        np.testing.assert_allclose(p32, p64, atol=1e-2)
    else:
        assert np.mean(p32 == p64) > 0.995


def test_gpu_and_cpu_agree(xp):
    if xp is np:
        pytest.skip("compares a CuPy run with the numpy one; needs a GPU")
    X, y, _ = synthetic_glm(4000, 200, 10, classes=3, seed=13)
    fits = [
        GLM("softmax", device=dev, n_passes=2, random_state=0).fit(X, y) for dev in ("cpu", "gpu")
    ]
    np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(fits[0].predict(X), fits[1].predict(X))


def test_a9a_reaches_the_usual_accuracy(shared_data):
    from bidlab.datasets import load_a9a

    Xtr, ytr, Xte, yte = load_a9a(shared_data)
    m = GLM("logistic", lrate=0.1, l2=1e-5, n_passes=3, random_state=0).fit(Xtr, ytr)
    assert list(m.classes_) == [-1.0, 1.0]
    assert m.score(Xte, yte) > 0.84  # liblinear / saga reach ~0.85


# ----------------------------------------------------------------------------- bad input


def test_bad_parameters_list_the_valid_values():
    X, y = sp.random(10, 4, density=0.5, format="csr", random_state=0), np.arange(10) % 2
    with pytest.raises(
        ValueError,
        match=r"The 'link' parameter of GLM must be one of \['linear', 'logistic', 'softmax', "
        r"'svm'\].*\. Got 'foo' instead\.",
    ):
        GLM("foo").fit(X, y)
    with pytest.raises(ValueError, match=r"The 'lrate' parameter of GLM must be 'auto' or a "
                                         r"float > 0, or a list of them .*\. Got -1 instead\."):
        GLM(lrate=-1).fit(X, y)
    with pytest.raises(ValueError, match=r"The 'dtype' parameter of GLM must be None, 'auto', "
                                         r"float32 or float64\. Got 'int8' instead\."):
        GLM(dtype="int8").fit(X, y)
    with pytest.raises(ValueError, match=r"The 'n_passes' parameter of GLM must be an int "
                                         r"in \[1, 1000000000\]\. Got 0 instead\."):
        GLM(n_passes=0).fit(X, y)
    with pytest.raises(ValueError, match="The 'updater' parameter of GLM must be one of"):
        GLM(updater="adam").fit(X, y)
    with pytest.raises(ValueError, match="lrate has 3 values but the model has 1 targets"):
        GLM(lrate=[0.1, 0.2, 0.3]).fit(X, y)


def test_bad_targets_name_both_numbers_and_the_labels():
    X = sp.random(20, 5, density=0.5, format="csr", random_state=0)
    y = np.arange(20) % 3
    with pytest.raises(ValueError, match="Y has 19 rows but X has 20 samples"):
        GLM("softmax").fit(X, y[:19])
    m = GLM("softmax", n_passes=1).fit(X, y)
    with pytest.raises(ValueError, match=r"label\(s\) \[3, 7\] outside 0..2"):
        m.score(X[:3], np.array([0, 3, 7]))
    with pytest.raises(ValueError, match=r"label\(s\) \[3\] outside 0..2"):
        GLM("softmax").partial_fit(X, np.where(y == 2, 3, y), classes=[0, 1, 2])
    with pytest.raises(ValueError, match="needs classes= on the first call"):
        GLM("softmax").partial_fit(X, y)
    strings = GLM("logistic", n_passes=1).fit(X, np.where(y == 0, "a", "b"))
    with pytest.raises(ValueError, match=r"label\(s\) \['c'\] not among the classes \['a', 'b'\]"):
        strings.score(X[:2], np.array(["a", "c"]))
    with pytest.raises(ValueError, match=r"needs exactly 2 classes but y has 3 classes: "
                                         r"\[0, 1, 2\]\. Only binary classification is "
                                         r"supported by the logistic link: use link='softmax'"):
        GLM("logistic").fit(X, y)
    with pytest.raises(ValueError, match="X has 4 features, but GLM is expecting 5 features"):
        m.predict(X[:, :4])
    with pytest.raises(ValueError, match="targmap refers to data target column 2 but Y has 1"):
        GLM("softmax", targmap=[0, 2]).fit(X, y)


def test_nan_or_inf_features_are_refused_with_their_position():
    X = sp.random(20, 5, density=0.5, format="csr", random_state=0).tolil()
    X[4, 3] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity \(first at row 4, column 3\)"):
        GLM().fit(X.tocsr(), np.arange(20) % 2)
    D = np.ones((6, 3))
    D[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"row 2, column 1"):
        GLM().fit(D, np.arange(6) % 2)
    with pytest.raises(ValueError, match="Y contains NaN"):
        GLM("linear").fit(np.ones((3, 2)), np.array([1.0, np.nan, 2.0]))


def test_all_zero_rows_are_fine_and_predict_from_the_intercept():
    X, y, _ = synthetic_glm(2000, 100, 5, seed=14)
    X = sp.vstack([X, sp.csr_matrix((50, 100), dtype=np.float32)]).tocsr()
    y = np.concatenate([y[:, 0], np.ones(50, np.float32)])
    m = GLM("logistic", n_passes=2, random_state=0).fit(X, y)
    p = m.predict_proba(X[-50:])[:, 1]
    assert np.all(np.isfinite(m.coef_))
    np.testing.assert_allclose(p, expit(m.intercept_[0]), rtol=1e-5)


# ----------------------------------------------------------------------------- live learner


def test_learner_trains_the_estimator_in_place_and_takes_live_changes():
    X, y, _ = synthetic_glm(12000, 400, 15, classes=4, seed=15)
    Xtr, ytr, Xte, yte = _split(X, y, 9000)
    est = GLM("softmax", lrate=0.3, l2=1e-5, n_passes=3, batch_size=500, random_state=0)
    lrn = est.learner(Xtr, ytr, val_every=0)
    assert est.score(Xte, yte) < 0.5  # zero weights: chance level before training
    lrn.fit(progress=None)
    assert lrn.state == "done"
    assert lrn.model is est.model_ and lrn.updater is est.updater_
    fitted = GLM("softmax", lrate=0.3, l2=1e-5, n_passes=3, batch_size=500, random_state=0,
                 tol=None)  # every pass on every row, as the learner trains
    fitted.fit(Xtr, ytr)  # the same engine, data order and steps: the same weights
    np.testing.assert_array_equal(est.coef_, fitted.coef_)
    assert est.score(Xte, yte) == fitted.score(Xte, yte) > 0.65
    np.testing.assert_array_equal(est.coef_, lrn.model.modelmats[0].numpy())

    sweep = GLM("softmax", lrate=[0.05, 1.0], targmap=[0, 0], n_passes=1000, batch_size=500)
    live = sweep.learner(Xtr, ytr)
    live.start()
    try:
        deadline = time.monotonic() + 30
        while live.step < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        live.opts.lrate = [0.01] * 8  # one value per weight row: 2 replicas x 4 classes
        live.pause(wait=True)
        assert live.state == "paused" and live.step > 0
        live.resume()
    finally:
        live.stop()
    assert live.state == "stopped"
    assert sweep.predict(Xte).shape == (3000, 2)


def test_learner_takes_live_rates_one_per_configuration():
    """A 2-configuration softmax sweep: [a, b] means one rate per configuration (its 3
    class rows each), not one per model matrix."""
    rng = np.random.default_rng(2)
    X = sp.random(300, 40, density=0.2, format="csr", random_state=2, dtype=np.float32)
    y = rng.integers(0, 3, 300)
    lrn = glm_sweep("softmax", lrate=[0.1, 0.5], l2=[0.0], batch_size=100).learner(
        X, y, n_passes=1)
    lrn.init()
    lrn.set(lrate=[0.01, 0.7])
    lrn.fit(progress=None)  # applied at the first minibatch boundary
    cols = lrn.updater.lrate.cols
    lay = lrn.model.layout
    for col in cols:  # W's rows and b's rows alike
        np.testing.assert_allclose(col.data[lay.columns(0), 0], 0.01, rtol=1e-6)
        np.testing.assert_allclose(col.data[lay.columns(1), 0], 0.7, rtol=1e-6)
    with pytest.raises(ValueError, match=r"vector length among 2, 6 \(rows of the model "
                                         r"matrices, their row groups"):
        lrn.set(lrate=[0.1, 0.2, 0.3])

