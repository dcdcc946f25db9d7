"""NMF with missing values: known answers against scikit-learn's multiplicative updates,
recovery of hidden entries, the scikit-learn surface, the live learner, files, bad input,
allocation and two ranks."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import NMF as SkNMF
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import check_estimator

import bidlab.models
from bidlab.learn import Learner
from bidlab.learn.comm import ThreadGroup
from bidlab.learn.model import MODELS
from bidlab.models import NMF

SK_LOSS = {"frobenius": "frobenius", "kl": "kullback-leibler"}


def _problem(n=30, d=20, k=3, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.random((n, k)) @ rng.random((k, d)) + 0.05 * rng.random((n, d))
    return X, rng.random((n, k)) + 0.1, rng.random((k, d)) + 0.1


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
@pytest.mark.parametrize("sparse", [False, True])
def test_batch_passes_are_sklearn_multiplicative_updates(loss, sparse):
    X, W0, H0 = _problem()
    if sparse:  # unstored entries are observed zeros, as for scikit-learn
        X = sp.csr_matrix(X * (np.random.default_rng(4).random(X.shape) > 0.3))
    ref = SkNMF(3, init="custom", solver="mu", beta_loss=SK_LOSS[loss], max_iter=40, tol=0.0)
    Wr = ref.fit_transform(X, W=W0.copy(), H=H0.copy())
    est = NMF(3, init="custom", loss=loss, solver="mu", max_iter=40, tol=0.0, batch_size=7)
    W = est.fit_transform(X, W=W0, H=H0)
    np.testing.assert_allclose(est.components_, ref.components_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(W, Wr, rtol=1e-9, atol=1e-12)
    assert est.reconstruction_err_ == pytest.approx(ref.reconstruction_err_, rel=1e-9)
    assert est.n_iter_ == ref.n_iter_ == 40
    if not sparse:  # low rank: from the same start, the error fell a lot
        start = NMF(3, init="custom", loss=loss, solver="mu", max_iter=1,
                    tol=0.0).fit(X, W=W0, H=H0)
        assert est.reconstruction_err_ < 0.6 * start.reconstruction_err_  # measured 0.57


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("penalties", [False, True])
def test_cd_passes_are_sklearns_coordinate_descent(sparse, penalties):
    """solver="cd" (the default for the Frobenius loss): W's columns per minibatch, then
    H's rows from the pass's W^T X and W^T W (BatchCD) are scikit-learn's solver="cd"
    iterates, penalties included; it errs clearly where it does not apply."""
    X, W0, H0 = _problem(seed=23)
    if sparse:
        X = sp.csr_matrix(X * (np.random.default_rng(24).random(X.shape) > 0.3))
    kw = {"alpha_W": 0.01, "alpha_H": 0.02, "l1_ratio": 0.3} if penalties else {}
    ref = SkNMF(3, init="custom", solver="cd", max_iter=25, tol=0.0, **kw)
    Wr = ref.fit_transform(X, W=W0.copy(), H=H0.copy())
    est = NMF(3, init="custom", max_iter=25, tol=0.0, batch_size=7, **kw)
    W = est.fit_transform(X, W=W0, H=H0)
    assert est.model_.opts.solver == "cd" and type(est.updater_).__name__ == "BatchCD"
    np.testing.assert_allclose(est.components_, ref.components_, rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(W, Wr, rtol=1e-8, atol=1e-11)
    assert est.reconstruction_err_ == pytest.approx(ref.reconstruction_err_, rel=1e-9)
    mu = NMF(3, init="custom", solver="mu", max_iter=25, tol=0.0).fit(X, W=W0, H=H0)
    assert est.reconstruction_err_ < mu.reconstruction_err_  # further in as many passes
    # transform: coordinate descent from the same start (scikit-learn's stopping rule
    # differs: the rows agree to ~1e-5, not to the last bit)
    np.testing.assert_allclose(est.transform(X[:5]), ref.transform(X[:5]), rtol=2e-3,
                               atol=1e-6)
    for bad, why in [({"loss": "kl", "solver": "cd"}, "loss='kl'"),
                     ({"method": "online", "solver": "cd"}, "method='online'")]:
        with pytest.raises(ValueError, match=f"solver='cd' needs the Frobenius loss.*{why}"):
            NMF(3, max_iter=2, **bad).fit(X)
    with pytest.raises(ValueError, match="partial_fit"):
        NMF(3, solver="cd").partial_fit(X)
    hidden = np.asarray(X.todense() if sparse else X, dtype=float)
    hidden[0, 0] = np.nan
    with pytest.raises(ValueError, match="missing entries: use solver='mu'"):
        NMF(3, solver="cd", max_iter=2).fit(hidden)
    assert NMF(3, max_iter=2).fit(hidden).model_.opts.solver == "mu"  # auto
    assert NMF(3, loss="kl", max_iter=2).fit(X).model_.opts.solver == "mu"


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
def test_random_init_and_tol_stop_and_transform_match_sklearn(loss):
    X, _, _ = _problem(40, 25, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarning
        ref = SkNMF(3, init="random", solver="mu", beta_loss=SK_LOSS[loss], max_iter=300,
                    random_state=0, tol=1e-3).fit(X)
    est = NMF(3, loss=loss, solver="mu", max_iter=300, random_state=0, tol=1e-3).fit(X)
    assert est.n_iter_ % 10 == 0 and est.n_iter_ < 300  # stopped by tol, checked every 10
    n = min(est.n_iter_, ref.n_iter_)
    same = NMF(3, loss=loss, solver="mu", max_iter=n, random_state=0, tol=0.0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_n = SkNMF(3, init="random", solver="mu", beta_loss=SK_LOSS[loss], max_iter=n,
                      random_state=0, tol=0.0).fit(X)
    np.testing.assert_allclose(same.components_, ref_n.components_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(same.transform(X[:6]), ref_n.transform(X[:6]), rtol=1e-7,
                               atol=1e-10)


def _low_rank(n=150, d=40, k=4, seed=0, zero_cols=0):
    rng = np.random.default_rng(seed)
    H = rng.gamma(2.0, 1.0, (k, d))
    H[:, :zero_cols] = 0.0  # observed zeros, still of rank k
    return rng.gamma(2.0, 1.0, (n, k)) @ H


def _hide(X, frac=0.2, seed=1):
    return np.random.default_rng(seed).random(X.shape) < frac


def test_masked_nmf_recovers_hidden_entries_dense_nan():
    X = _low_rank()
    hidden = _hide(X)
    Xn = X.copy()
    Xn[hidden] = np.nan
    est = NMF(4, max_iter=400, tol=0.0, random_state=0)
    Xhat = est.inverse_transform(est.fit_transform(Xn))
    rmse = np.sqrt(np.mean((Xhat[hidden] - X[hidden]) ** 2))
    col_means = np.nanmean(Xn, axis=0)
    baseline = np.sqrt(np.mean((np.broadcast_to(col_means, X.shape)[hidden] - X[hidden]) ** 2))
    assert rmse < 0.1 * baseline, (rmse, baseline)  # measured: 0.059 against 6.26
    # the hidden entries took no part: the same fit with other values there
    Xo = np.where(hidden, 1e3, X)
    other = NMF(4, max_iter=400, tol=0.0, random_state=0).fit(Xo, mask=~hidden)
    np.testing.assert_allclose(other.components_, est.components_, rtol=1e-9)


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
def test_sparse_masked_nmf_recovers_hidden_entries_via_sddmm(loss):
    X = _low_rank(seed=2, zero_cols=3)
    hidden = _hide(X, seed=4)
    Xs = sp.csr_matrix(np.where(hidden, 0.0, X))
    est = NMF(4, loss=loss, max_iter=400, tol=0.0, random_state=0, batch_size=64)
    Xhat = est.inverse_transform(est.fit_transform(Xs, mask=sp.csr_matrix(~hidden)))
    rmse = np.sqrt(np.mean((Xhat[hidden] - X[hidden]) ** 2))
    baseline = np.sqrt(np.mean((X[~hidden].mean() - X[hidden]) ** 2))
    assert rmse < 0.1 * baseline, (rmse, baseline)  # measured: 0.025 (KL 0.015) of it
    # a dense X with NaN at the hidden entries is the same problem
    dense = NMF(4, loss=loss, max_iter=400, tol=0.0, random_state=0).fit(
        np.where(hidden, np.nan, X))
    np.testing.assert_allclose(est.components_, dense.components_, rtol=1e-6, atol=1e-9)
    # score: minus the mean loss per observed entry, the hidden ones not among them
    assert est.score(Xs, mask=~hidden) == pytest.approx(dense.score(np.where(hidden, np.nan,
                                                                             X)), rel=1e-3)


def test_score_picks_the_rank_in_a_grid_search():
    X = _low_rank(120, 30, 3, seed=6) + 0.05 * np.random.default_rng(7).random((120, 30))
    X[_hide(X, 0.2, seed=8)] = np.nan
    grid = GridSearchCV(NMF(max_iter=200, tol=0.0, random_state=0),
                        {"n_components": [1, 3]}, cv=3).fit(X)
    assert grid.best_params_ == {"n_components": 3}
    s = grid.best_estimator_.score(X)
    assert s < 0 and np.isfinite(s)


def test_sklearn_surface_and_partial_fit():
    X = _low_rank(200, 30, 3, seed=9)
    est = NMF(3, max_iter=50, random_state=0).fit(X)
    assert est.components_.shape == (3, 30) and est.n_components_ == 3
    assert est.transform(X[:7]).shape == (7, 3)
    assert est.inverse_transform(est.transform(X[:7])).shape == (7, 30)
    assert (est.components_ >= 0).all() and est.n_features_in_ == 30
    assert list(est.get_feature_names_out()) == ["nmf0", "nmf1", "nmf2"]
    with pytest.raises(ValueError, match="n x 3 factors"):
        est.inverse_transform(np.ones((2, 4)))
    online = NMF(3, batch_size=50, random_state=0)
    online.partial_fit(X[:100])
    first = online.reconstruction_err_
    errors = [first]
    for _ in range(15):
        online.partial_fit(X[:100])
        errors.append(online.reconstruction_err_)
    assert all(b < a for a, b in zip(errors, errors[1:], strict=False)), errors
    # measured: 112 -> 85 (the first call's step is damped by the start it remembers)
    assert errors[-1] < 0.8 * first, errors
    assert online.n_iter_ == 16
    held = online.score(X[100:])
    assert held > NMF(3, batch_size=50, random_state=0).partial_fit(X[:100]).score(X[100:])


def test_online_method_fits_too():
    X = _low_rank(400, 30, 3, seed=10)
    batch = NMF(3, max_iter=30, tol=0.0, random_state=0).fit(X)
    online = NMF(3, method="online", batch_size=50, max_iter=30, tol=0.0,
                 random_state=0).fit(X)
    # measured: 256 (batch), 25 (online): 8 steps of the components per pass, not one
    assert online.reconstruction_err_ < 0.5 * batch.reconstruction_err_, (
        online.reconstruction_err_, batch.reconstruction_err_)


def test_live_learner_trains_the_estimators_model():
    X = _low_rank(300, 25, 3, seed=11)
    est = NMF(3, random_state=0)
    lrn = est.learner(X, n_passes=20, batch_size=64)
    assert isinstance(lrn, Learner) and est.model_ is lrn.model
    before = est.components_.copy()
    lrn.start()
    lrn.join(120)
    assert lrn.state == "done", lrn.state
    assert not np.allclose(est.components_, before)
    assert lrn.model.n_passes_done == 20
    assert est.score(X) > -0.05 * np.mean(X**2)  # fits to a few percent
    assert "nmf" in MODELS and MODELS["nmf"] is NMF


@pytest.mark.parametrize("sparse", [False, True])
def test_save_load_and_pickle_round_trip(tmp_path, sparse):
    X = _low_rank(80, 20, 3, seed=12)
    hidden = _hide(X, seed=13)
    if sparse:
        est = NMF(3, loss="kl", max_iter=20, random_state=0).fit(sp.csr_matrix(X),
                                                                   mask=~hidden)
    else:
        est = NMF(3, max_iter=20, random_state=0).fit(np.where(hidden, np.nan, X))
    want = est.transform(X[:5])
    path = est.save(tmp_path / "nmf.bidlab")
    for back in (NMF.load(path), bidlab.models.load(path), pickle.loads(pickle.dumps(est))):
        assert isinstance(back, NMF) and back.get_params() == est.get_params()
        np.testing.assert_array_equal(back.components_, est.components_)
        np.testing.assert_allclose(back.transform(X[:5]), want, rtol=1e-12)
        assert back.reconstruction_err_ == est.reconstruction_err_
        np.testing.assert_array_equal(back.model_.factors(), est.model_.factors())
        back.partial_fit(X)  # trains on after loading


def _error(fn, match):
    with pytest.raises(ValueError, match=match) as info:
        fn()
    return str(info.value)


def test_bad_input_gets_clear_errors():
    X = _low_rank(20, 10, 2, seed=14)
    neg = X.copy()
    neg[3, 4] = -1.0
    neg[7, 1] = -2.0
    msg = _error(lambda: NMF(2).fit(neg), "Negative values")
    assert "2 negative entries" in msg and "row 3, column 4" in msg
    row = X.copy()
    row[5] = np.nan
    msg = _error(lambda: NMF(2).fit(row), "no observed entry")
    assert "row 5" in msg and "1 rows" in msg
    col = X.copy()
    col[:, 8] = np.nan
    assert "column 8" in _error(lambda: NMF(2).fit(col), "no observed entry")
    msg = _error(lambda: NMF(11).fit(X), "n_components=11 is larger")
    assert "n_components <= 10" in msg
    Xs = sp.csr_matrix(X)
    Xs.data[4] = np.nan
    mask = np.ones(X.shape, bool)
    msg = _error(lambda: NMF(2).fit(Xs, mask=mask), "NaN entries outside the mask")
    assert "row 0, column 4" in msg
    mask[0, 4] = False  # marked missing: fine
    NMF(2, max_iter=2).fit(Xs, mask=mask)
    assert "mask=" in _error(lambda: NMF(2).fit(Xs), "NaN entries")
    msg = _error(lambda: NMF(2).fit(X, mask=np.ones((20, 9), bool)), "mask has shape")
    assert "(20, 9)" in msg and "(20, 10)" in msg
    assert "infinite" in _error(lambda: NMF(2).fit(np.where(X > 1, np.inf, X)), "infinite")
    _error(lambda: NMF(2, loss="l1").fit(X), "'loss' parameter of NMF")
    _error(lambda: NMF(2, init="custom").fit(X), "init='custom' needs")
    _error(lambda: NMF(2, init=np.ones((3, 10))).fit(X), r"init has shape \(3, 10\)")


def test_minibatch_steps_grow_no_traced_memory(traced_allocations):
    X = _low_rank(2048, 200, 4, seed=15)
    hidden = _hide(X, seed=16)
    for data, mask in ((np.where(hidden, np.nan, X), None),
                       (sp.csr_matrix(np.where(hidden, 0.0, X)), ~hidden)):
        lrn = NMF(8, method="online", loss="kl", random_state=0).learner(
            data, mask=mask, n_passes=1, batch_size=256)
        lrn.fit(progress=None)
        lrn.set(n_passes=3)
        with traced_allocations() as trace:
            lrn.fit(progress=None)
        # one minibatch of X is 400 KB: a copy of it (or of the k x n statistics per
        # step) would show; the 25-60 KB seen are Python objects of the loop and its
        # records, left to the cyclic collector at varying moments
        minibatch = 256 * 200 * 8
        assert trace.peak_bytes < minibatch // 4, trace


def test_two_ranks_give_the_components_of_one_learner(train_together):
    X, W0, H0 = _problem(80, 20, 3, seed=17)
    X[np.random.default_rng(18).random(X.shape) < 0.2] = np.nan
    kw = {"init": "custom", "max_iter": 15, "tol": 0.0}
    one = NMF(3, **kw)
    one.learner(X, W=W0, H=H0, batch_size=10).fit(progress=None)
    group = ThreadGroup(2)
    halves = [NMF(3, **kw) for _ in range(2)]
    parts = (slice(0, 40), slice(40, 80))
    learners = [h.learner(X[p], W=W0[p], H=H0, batch_size=10, comm=group.comm(r))
                for r, (h, p) in enumerate(zip(halves, parts, strict=True))]
    train_together(learners)
    for h in halves:
        np.testing.assert_allclose(h.components_, one.components_, rtol=1e-10, atol=1e-13)
    W = np.vstack([h.model_.factors() for h in halves])
    np.testing.assert_allclose(W, one.model_.factors(), rtol=1e-10, atol=1e-13)


def test_sklearn_estimator_checks_fail_only_the_declared_ones():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(NMF(max_iter=50), on_fail=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    assert failed == {"check_transformer_general", "check_transformer_data_not_an_array"}
    assert sum(r["status"] == "passed" for r in results) > 30


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
def test_penalties_are_sklearns(loss):
    X, W0, H0 = _problem(seed=19)
    kw = {"alpha_W": 0.01, "alpha_H": 0.02, "l1_ratio": 0.3}
    ref = SkNMF(3, init="custom", solver="mu", beta_loss=SK_LOSS[loss], max_iter=30, tol=0.0,
                **kw)
    Wr = ref.fit_transform(X, W=W0.copy(), H=H0.copy())
    est = NMF(3, init="custom", loss=loss, solver="mu", max_iter=30, tol=0.0, batch_size=7,
              **kw)
    W = est.fit_transform(X, W=W0, H=H0)
    np.testing.assert_allclose(est.components_, ref.components_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(W, Wr, rtol=1e-9, atol=1e-12)
    if loss == "frobenius":  # scikit-learn's KL transform adds the L1 term into its
        # cached H_sum in place (denominator = H_sum[np.newaxis, :]; denominator += l1),
        # so its L1 penalty grows by one term per iteration there
        np.testing.assert_allclose(est.transform(X[:4]), ref.transform(X[:4]), rtol=1e-7,
                                   atol=1e-10)
    plain = NMF(3, init="custom", loss=loss, solver="mu", max_iter=30,
                tol=0.0).fit(X, W=W0, H=H0)
    assert est.components_.sum() < plain.components_.sum()  # the penalties shrink


@pytest.mark.parametrize("sparse", [False, True])
def test_nndsvda_start_is_sklearns(sparse):
    X = _low_rank(60, 25, 3, seed=20)
    if sparse:
        X = sp.csr_matrix(X * (np.random.default_rng(21).random(X.shape) > 0.4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = SkNMF(4, init="nndsvda", solver="mu", max_iter=20, tol=0.0,
                    random_state=0).fit(X)
    est = NMF(4, init="nndsvda", solver="mu", max_iter=20, tol=0.0, random_state=0).fit(X)
    np.testing.assert_allclose(est.components_, ref.components_, rtol=1e-8, atol=1e-11)
    assert est.reconstruction_err_ == pytest.approx(ref.reconstruction_err_, rel=1e-9)
    dense = X.toarray() if sparse else X.copy()
    dense[_hide(dense, seed=22)] = np.nan  # missing entries: the start fills them
    masked = NMF(4, init="nndsvda", max_iter=20, tol=0.0, random_state=0).fit(dense)
    assert np.isfinite(masked.components_).all() and masked.reconstruction_err_ > 0


def test_bidlab_train_nmf_on_a_docword_file(tmp_path, capsys):
    from bidlab.cli import main

    X = sp.coo_matrix(np.round(_low_rank(50, 30, 3, seed=23)))
    lines = [f"{X.shape[0]}", f"{X.shape[1]}", f"{X.nnz}"]
    lines += [f"{i + 1} {j + 1} {int(v)}" for i, j, v in zip(X.row, X.col, X.data, strict=True)]
    (tmp_path / "docword.tiny.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "vocab.tiny.txt").write_text("\n".join(f"w{j}" for j in range(30)) + "\n")
    assert main(["train", "nmf", "--data", str(tmp_path / "docword.tiny.txt"),
                 "--n_components", "3", "--loss", "kl", "--max_iter", "30", "--random_state",
                 "0", "--save", str(tmp_path / "m"), "--progress", "none"]) == 0
    assert "NMF.score" in capsys.readouterr().out
    est = bidlab.models.load(tmp_path / "m")
    assert isinstance(est, NMF) and est.components_.shape == (3, 30)
    assert est.score(X.tocsr()) > -0.22  # measured -0.185; -0.25 after one pass


@pytest.mark.parametrize("method", ["batch", "online"])
def test_a_checkpoint_resumes_the_run_exactly(tmp_path, method):
    X = _low_rank(90, 20, 3, seed=24)
    X[_hide(X, seed=25)] = np.nan
    kw = {"method": method, "max_iter": 8, "tol": 0.0, "random_state": 0}
    whole = NMF(3, **kw)
    whole.learner(X, batch_size=20).fit(progress=None)
    first = NMF(3, **kw)
    lrn = first.learner(X, batch_size=20, n_passes=3, checkpoint=str(tmp_path / "ck"))
    lrn.fit(progress=None)
    again = NMF(3, **kw)
    resumed = again.learner(X, batch_size=20).load(str(tmp_path / "ck"))
    resumed.set(n_passes=8)
    resumed.fit(progress=None)
    np.testing.assert_array_equal(again.components_, whole.components_)
    np.testing.assert_array_equal(again.model_.factors(), whole.model_.factors())
