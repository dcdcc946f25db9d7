"""GLM(l1=...) trains sparse models: L1 is a proximal step (soft-thresholding by each
weight's step size) in the dense, touched-row and deferred steps, and an averaged model
takes one such step when it lands; measured against scikit-learn's saga."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.preprocessing import normalize

from bidlab.kern import arrays, steps
from bidlab.models.glm import GLM


def _dense() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 40))
    beta = np.zeros(40)
    beta[:6] = rng.standard_normal(6) * 1.5
    y = (rng.random(3000) < 1 / (1 + np.exp(-X @ beta))).astype(int)
    return X, y


def _tfidf() -> tuple[sp.csr_matrix, np.ndarray]:
    """Unit-norm rows of 600 features, ~12 nonzeros a row, 20 informative features."""
    rng = np.random.default_rng(1)
    X = sp.random(3000, 600, density=0.02, random_state=1, format="csr", dtype=np.float64)
    X.data[:] = rng.random(X.nnz)
    X = normalize(X)
    beta = np.zeros(600)
    beta[:20] = rng.standard_normal(20) * 25
    y = (rng.random(3000) < 1 / (1 + np.exp(-(X @ beta)))).astype(int)
    return X, y


def _objective(w: np.ndarray, b: float, X, y: np.ndarray, l1: float) -> float:
    """The L1 objective GLM documents: mean log loss + ``l1 * |w|_1``."""
    e = X @ w + b
    return float(np.mean(np.logaddexp(0.0, e) - y * e) + l1 * np.abs(w).sum())


def _compare(X, y, l1: float) -> dict[str, tuple[float, float]]:
    """GLM's and saga's (nonzero weights, held-out log loss, training objective)."""
    tr, te = slice(0, 2000), slice(2000, 3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's penalty= deprecation
        sk = LogisticRegression(penalty="l1", solver="saga", C=1 / (l1 * 2000), tol=1e-6,
                                max_iter=5000).fit(X[tr], y[tr])
    glm = GLM("logistic", l1=l1, l2=0.0, random_state=0).fit(X[tr], y[tr])
    out = {}
    for name, m in (("glm", glm), ("saga", sk)):
        out[name] = (int(np.count_nonzero(m.coef_)),
                     log_loss(y[te], m.predict_proba(X[te])),
                     _objective(m.coef_.ravel(), m.intercept_[0], X[tr], y[tr], l1))
    return out


def test_l1_zeroes_weights_on_dense_data() -> None:
    # a sign(w) subgradient oscillated around zero: all 40 weights nonzero (saga: 15),
    # objective 1.0e-2 above saga's; now 21 and 1.6e-3, held-out loss 0.309 (saga 0.312)
    got = _compare(*_dense(), l1=1e-2)
    (nnz, loss, obj), (nnz_sk, loss_sk, obj_sk) = got["glm"], got["saga"]
    assert nnz <= 2 * nnz_sk, got
    assert obj - obj_sk < 5e-3, got
    assert loss < loss_sk + 0.01, got


def test_l1_zeroes_weights_on_sparse_rows() -> None:
    # the touched-row steps: all 600 weights nonzero (saga: 23), objective 4.1e-2 above
    # saga's; now 224 and 1.0e-2 (the rest: small weights minibatch noise keeps moving),
    # held-out loss 0.643 (saga 0.624)
    got = _compare(*_tfidf(), l1=1e-3)
    (nnz, loss, obj), (nnz_sk, loss_sk, obj_sk) = got["glm"], got["saga"]
    assert nnz <= 15 * nnz_sk, got
    assert obj - obj_sk < 2e-2, got
    assert loss < loss_sk + 0.03, got


@pytest.mark.parametrize("order", ["C", "F"])
def test_fused_l1_step_matches_its_stand_in_and_zeroes(order: str) -> None:
    rng = np.random.default_rng(3)
    M0 = np.asarray(rng.standard_normal((5, 7)) * 0.01, order=order)
    U = np.asarray(rng.standard_normal((5, 7)), order=order)
    S0 = np.asarray(rng.random((5, 7)), order=order)
    lr, eps, l1 = (np.full((5, 1), v) for v in (0.5, 1e-5, 0.3))
    M, S = M0.copy(order=order), S0.copy(order=order)
    assert steps.adagrad(M, U, S, lr, eps, 0.25, 0.9, l1)
    Ms, Ss = M0.copy(), S0.copy()
    arrays.adagrad_l1_step(Ms.T if order == "F" else Ms, U.T if order == "F" else U,
                           Ss.T if order == "F" else Ss, lr[:, 0], eps[:, 0], l1[:, 0],
                           0.25, 0.9, order == "F")
    np.testing.assert_allclose(M, Ms, rtol=1e-12, atol=1e-15)
    assert (M == 0).sum() > 0  # exact zeros
    M = M0.copy(order=order)
    assert steps.grad(M, U, lr, 0.9, l1)
    expect = M0 + U * 0.45
    expect = np.sign(expect) * np.maximum(np.abs(expect) - 0.45 * 0.3, 0)
    np.testing.assert_allclose(M, expect, rtol=1e-12, atol=1e-15)
