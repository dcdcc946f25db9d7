"""The fused touched-rows steps (bidlab.kern.touched) against their numpy oracle (dense
U = X.T @ A), and the column listing they use."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.kern import adaptive
from bidlab.kern import touched as touched_mod
from bidlab.kern.columns import ColumnListing
from bidlab.kern.touched import TouchedStep


def _minibatch(n, d, density, seed, dtype):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng, dtype=np.float64)
    X.data = (X.data - 0.3).astype(dtype)  # negative values too
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    X.data[X.indptr[3] : X.indptr[4]] = 0  # an empty row
    X.eliminate_zeros()
    return X


def test_columns_list_every_nonzero_by_column_in_row_order():
    X = _minibatch(40, 300, 0.05, 0, np.float32)
    cols = ColumnListing(300)
    nu = cols.fill(X)
    C = X.tocsc()
    want = np.flatnonzero(np.diff(C.indptr))
    assert nu == want.size < 300  # some features untouched
    np.testing.assert_array_equal(cols.touched[:nu], want)
    np.testing.assert_array_equal(cols.pos[want], np.arange(nu))
    rows_of = np.repeat(np.arange(40), np.diff(X.indptr))
    for u, j in enumerate(want):
        nz = cols.perm[cols.colptr[u] : cols.colptr[u + 1]]
        np.testing.assert_array_equal(X.indices[nz], j)
        np.testing.assert_array_equal(rows_of[nz], C.indices[C.indptr[j] : C.indptr[j + 1]])
        np.testing.assert_array_equal(cols.row_of[nz], rows_of[nz])
    cols.clear()
    assert (cols.pos == -1).all()


def _oracle(X, A, W, S, lr, l1, l2, eps, inv_t, scale):
    """ADAGrad's / Grad's step with the L2 mixin's term, then L1's proximal step with
    each weight's step size, in float64."""
    W = W.astype(np.float64)
    u = X.T.astype(np.float64) @ A.astype(np.float64) - l2 * W
    if S is None:
        W, eta = W + u * lr * scale, lr * scale
    else:
        S = S.astype(np.float64) + u * u
        eta = lr / (np.sqrt(S * inv_t) + eps) * scale
        W = W + u * eta
    return np.sign(W) * np.maximum(np.abs(W) - l1 * eta, 0), S


def _deferred_oracle(W, S, lr, l1, l2, eps, inv_t, scale):
    """One deferred regulariser-only step: L2 decay, then L1 towards zero clipped at zero;
    ADAGrad's step size from the sum of squares grown by half the step's square."""
    W = W.astype(np.float64)
    eta = lr * scale
    if S is not None:
        u = l2 * W  # L1 is a proximal step: not in the sums of squares
        eta = eta / (np.sqrt((S.astype(np.float64) + 0.5 * u * u) * inv_t) + eps)
    W = W * np.maximum(1 - l2 * eta, 0)
    return np.sign(W) * np.maximum(np.abs(W) - l1 * eta, 0)


STEP = 2  # inv_t = 1/3 at step 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["adagrad", "grad"])
@pytest.mark.parametrize("regularised", [False, True])
@pytest.mark.parametrize("threads", ["serial", "parallel"])
@pytest.mark.parametrize("mode", ["deferred", "swept"])
def test_touched_step_matches_the_dense_oracle(dtype, kind, regularised, threads, mode,
                                               monkeypatch):
    """Touched rows take the dense step at once. Untouched rows: deferred, they are not
    visited and catch_up then gives them the dense step's regulariser terms (ADAGrad's sum
    of squares not grown by them); swept, they take the dense step itself."""
    monkeypatch.setattr(touched_mod, "DEFER_BELOW", 0 if mode == "deferred" else 10**9)
    n, d, T = 37, 211, 13
    rng = np.random.default_rng(1)
    X = _minibatch(n, d, 0.04, 2, dtype)
    A = rng.standard_normal((n, T)).astype(dtype) / n
    W = rng.standard_normal((d, T)).astype(dtype)
    W[5, :4] = 0  # sign(0) = 0 for L1
    S = rng.random((d, T)).astype(dtype) * 3 if kind == "adagrad" else None
    lr = rng.uniform(0.01, 0.5, T).astype(dtype)
    eps = rng.uniform(1e-6, 1e-3, T).astype(dtype)
    on = 1.0 if regularised else 0.0
    l1 = np.where(np.arange(T) % 3 == 0, 1e-2 * on, 0).astype(dtype)
    l2 = np.where(np.arange(T) % 2 == 0, 1e-1 * on, 0).astype(dtype)
    inv_t, scale = 1 / 3, 0.7
    want_W, want_S = _oracle(X, A, W, S, lr, l1, l2, eps, inv_t, scale)
    lazy_W = _deferred_oracle(W, S, lr, l1, l2, eps, inv_t, scale)
    untouched = np.flatnonzero(np.diff(X.tocsc().indptr) == 0)
    touched = np.setdiff1d(np.arange(d), untouched)
    assert untouched.size > 50
    W0, S0 = W.copy(), None if S is None else S.copy()
    step = TouchedStep(d, T, dtype)
    with adaptive.policy(threads):
        if S is None:
            step.grad(X, A, W, lr, l1, l2, scale, STEP)
        else:
            step.adagrad(X, A, W, S, lr, l1, l2, eps, inv_t, scale, STEP)
        tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(W[touched], want_W[touched], **tol)
        if S is not None:
            np.testing.assert_allclose(S[touched], want_S[touched], **tol)
        if mode == "swept":
            np.testing.assert_allclose(W, want_W, **tol)
            if S is not None:
                np.testing.assert_allclose(S, want_S, **tol)
            assert not step.deferring
            return
        np.testing.assert_array_equal(W[untouched], W0[untouched])  # not visited
        if S is not None:
            np.testing.assert_array_equal(S[untouched], S0[untouched])
        step.catch_up(STEP + 1)
    if not regularised:  # u = 0: the dense step leaves an untouched row exactly as it was
        np.testing.assert_array_equal(W[untouched], W0[untouched])
    else:
        np.testing.assert_allclose(W[untouched], lazy_W[untouched], **tol)
        plain = np.flatnonzero((l1 == 0) & (l2 == 0))
        assert plain.size and not np.array_equal(W[untouched], W0[untouched])
        np.testing.assert_array_equal(W[np.ix_(untouched, plain)], W0[np.ix_(untouched, plain)])
    np.testing.assert_allclose(W[touched], want_W[touched], **tol)  # catch_up left them


def _dense_run(batches, A_of, W, S, lr, l1, l2, eps, t0, texp):
    """The dense step-by-step oracle over a sequence of minibatches, in float64."""
    W = W.astype(np.float64).copy()
    S = None if S is None else S.astype(np.float64).copy()
    for t, X in enumerate(batches):
        scale = 1.0 if texp == 0 else (t0 / (t0 + t)) ** texp
        W, S = _oracle(X, A_of(t, W), W, S, lr, l1, l2, eps, 1.0 / (t + 1), scale)
    return W, S


@pytest.mark.parametrize("kind", ["grad", "adagrad"])
def test_deferred_regularisation_over_many_steps_stays_near_the_dense_update(kind,
                                                                          monkeypatch):
    """80 sparse minibatches (each touching ~12 % of the rows, so rows skip many steps in a
    row) with L1 and L2. Grad with L2, a constant rate and a data factor that does not
    depend on the weights equals the dense update to 3e-5 (relative). Otherwise (a factor
    computed from rows whose deferred terms are still to come, as a GLM's margins are; L1
    and a decaying rate; ADAGrad) no weight differs from the dense update's by more than
    5 % of the largest change the regularisation itself makes (measured: at most 2.8 %)."""
    monkeypatch.setattr(touched_mod, "DEFER_BELOW", 0)  # defer whatever the touched share
    d, T, n = 400, 5, 20
    rng = np.random.default_rng(3)
    batches = [_minibatch(n, d, 0.007, 100 + i, np.float64) for i in range(80)]
    G = rng.standard_normal((n, T)) / n

    dependent = [True]

    def A_of(t, W):  # a data factor that depends on the current weights, as a GLM's does
        return np.tanh(G + 0.1 * (batches[t] @ W)) if dependent[0] else np.tanh(G) * (t % 3 - 1)

    W0 = rng.standard_normal((d, T))
    S0 = rng.random((d, T)) + 0.5 if kind == "adagrad" else None
    lr, eps = np.full(T, 0.2), np.full(T, 1e-6)
    cases = [(np.zeros(T), np.full(T, 0.003), 0.0, False)] if kind == "grad" else []
    cases += [(np.zeros(T), np.full(T, 0.003), 0.0, True),
              (np.full(T, 2e-3), np.full(T, 0.003), 0.5, True)]
    for l1, l2, texp, dependent[0] in cases:
        want, _ = _dense_run(batches, A_of, W0, S0, lr, l1, l2, eps, 1.0, texp)
        free, _ = _dense_run(batches, A_of, W0, S0, lr, 0 * l1, 0 * l2, eps, 1.0, texp)
        effect = np.abs(want - free).max()  # what the regularisation itself changes
        assert effect > 0.01 * np.abs(want).max()
        W, S = W0.copy(), None if S0 is None else S0.copy()
        step = TouchedStep(d, T, np.float64)
        for t, X in enumerate(batches):
            scale = 1.0 if texp == 0 else (1.0 / (1.0 + t)) ** texp
            A = np.ascontiguousarray(A_of(t, W))
            if S is None:
                step.grad(X, A, W, lr, l1, l2, scale, t)
            else:
                step.adagrad(X, A, W, S, lr, l1, l2, eps, 1.0 / (t + 1), scale, t)
        step.catch_up(len(batches))
        if kind == "grad" and not dependent[0]:
            np.testing.assert_allclose(W, want, rtol=3e-5, atol=1e-9)
        else:
            err = np.abs(W - want).max() / effect
            assert err < 0.05, f"{kind}, l1={l1[0]}, texp={texp}: {err:.4f} of the terms' effect"
        assert np.abs(W - W0).max() > 0.01  # the run did move the weights


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("steps", [7, 300, 4097])
def test_deferred_large_decays_equal_the_repeated_dense_decay(dtype, steps, monkeypatch):
    """Grad with L2 alone, a constant rate and no data term: a row skipped for k steps
    owes exactly k dense decays, ``(1 - l2 * lr) ** k``. With decays far past the
    polynomial's range (l2 * lr up to 0.2, k up to 4,097) the catch-up's power (square
    and multiply across the row) must give that, and a zero row must stay zero."""
    monkeypatch.setattr(touched_mod, "DEFER_BELOW", 0)
    d, T = 40, 19
    rng = np.random.default_rng(7)
    W0 = rng.standard_normal((d, T)).astype(dtype)
    W0[3] = 0
    lr = np.full(T, 0.5, dtype)
    l2 = np.geomspace(1e-5, 0.4, T).astype(dtype)
    zeros = np.zeros(T, dtype)
    X = sp.csr_matrix((np.ones(1, dtype), ([0], [0])), shape=(1, d))  # touches row 0 only
    A = np.zeros((1, T), dtype)
    W = W0.copy()
    step = TouchedStep(d, T, dtype)
    for t in range(steps):
        step.grad(X, A, W, lr, zeros, l2, 1.0, t)
    assert step.deferring
    step.catch_up(steps)
    decay = (1.0 - l2.astype(np.float64) * 0.5) ** steps
    want = W0.astype(np.float64) * decay
    power = l2.astype(np.float64) * 0.5 * steps > touched_mod._SMALL  # else the polynomial
    assert power.any()
    f32 = dtype == np.float32
    np.testing.assert_allclose(W[1:, power], want[1:, power], rtol=2e-4 if f32 else 1e-9,
                               atol=1e-30)
    np.testing.assert_allclose(W[1:, ~power], want[1:, ~power], rtol=2e-4 if f32 else 3e-5)
    assert not W[3].any()


def test_steps_reuse_the_listing_buffers_and_grow_them_by_a_factor():
    d, T = 500, 4
    step = TouchedStep(d, T, np.float32)
    W = np.zeros((d, T), np.float32)
    z = np.zeros(T, np.float32)
    lr = np.full(T, 0.1, np.float32)
    small, big = _minibatch(50, d, 0.02, 3, np.float32), _minibatch(50, d, 0.05, 4, np.float32)
    E = np.ones((50, T), np.float32)
    step.grad(small, E, W, lr, z, z, 1.0)
    step.grad(big, E, W, lr, z, z, 1.0)
    assert step.columns.perm.shape[0] >= big.nnz
    before = backend.allocations.snapshot()
    for X in (small, big, small):
        step.grad(X, E, W, lr, z, z, 1.0)
    assert backend.allocations.snapshot() == before


def test_wrong_width_and_dtype_are_refused_with_the_numbers():
    step = TouchedStep(100, 2, np.float32)
    W = np.zeros((100, 2), np.float32)
    z = np.zeros(2, np.float32)
    X = _minibatch(5, 90, 0.2, 5, np.float32)
    with pytest.raises(ValueError, match="90 columns but the model has 100"):
        step.grad(X, np.ones((5, 2), np.float32), W, z, z, z, 1.0)
    X = _minibatch(5, 100, 0.2, 5, np.float64)
    with pytest.raises(TypeError, match="float64 and its factor float32 but the model is "
                                        "float32"):
        step.adagrad(X, np.ones((5, 2), np.float32), W, W.copy(), z, z, z, z + 1, 1.0, 1.0)
    assert (step.columns.pos == -1).all()  # a refused step leaves nothing for the next
