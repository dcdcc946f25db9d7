"""The SAME Gibbs sampler's array-level stand-ins draw what its numba kernels draw (the same
random streams, inversion and PTRS), and its bookkeeping kernels' stand-ins agree too.

The kernels are called with the argument types tests/test_lda_sampler.py compiles already
(float32 sweeps with a caller's heated-word mask, float64 bookkeeping), so this file adds
no specialization of its own to an empty numba cache."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bidlab.kern import lda_sampler, lda_sampler_arrays, standin


def _problem(dtype, D=50, V=40, k=5, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.random(D, V, density=0.3, format="csr", random_state=seed, dtype=np.float64)
    X.data = np.ceil(X.data * 5)
    theta = (rng.random((D, k)) + 0.1).astype(dtype)
    N = (rng.random((V, k)) * 20).astype(dtype)
    invden = (1.0 / (N.sum(0) + V * 0.01)).astype(dtype)
    temp = np.ones((V, k), dtype)
    temp[3] = 2.0  # a heated word, and one heated parameter
    temp[7, 1] = 0.5
    return X.astype(dtype), theta, N, invden, temp


def _sweeps(X, theta, N, invden, temp, m, parallel_min):
    """A single sweep (serial or parallel kernel) and a 3-sweep E-step; every output."""
    D, V = X.shape
    k = theta.shape[1]
    old = lda_sampler.PARALLEL_MIN_PAIRS
    lda_sampler.PARALLEL_MIN_PAIRS = parallel_min
    try:
        th, ph = np.zeros((D, k), theta.dtype), np.full((V, k), 9, theta.dtype)
        lda_sampler.same_sample(X, theta.copy(), N, m, 7, 3, th, ph, temp, scale=0.9,
                                beta=0.01, invden=invden)
        th2, ph2, t2 = np.zeros((D, k), theta.dtype), np.zeros((V, k), theta.dtype), theta.copy()
        lda_sampler.same_sample_sweeps(X, t2, N, m, 7, 3, 3, 0.1, th2, ph2, temp, scale=0.9,
                                       beta=0.01, invden=invden)
    finally:
        lda_sampler.PARALLEL_MIN_PAIRS = old
    return th, ph, th2, ph2, t2


def test_sampler_stand_ins_draw_the_kernels_counts(monkeypatch):
    """Rates from tiny (inversion) to large (PTRS), heated words, serial and parallel
    kernels, in LDAGibbs's float32: the stand-ins' outputs equal the kernels' to float
    rounding (the draws are the same integers). Unheated: temperatures all 1, whose
    mask of heated words is all 0, so no temperature is read (the kernels' path for
    ``temp=None``, with the mask's type the heated cases compile)."""
    monkeypatch.setattr(lda_sampler_arrays, "_BLOCK", 128)  # the stand-in's blocks: 5 or 6
    X, theta, N, invden, temp = _problem(np.float32)
    tol = 1e-6
    for m, heat, parallel_min in [(0.5, False, 1 << 40), (2000.0, True, 1 << 40),
                                  (40.0, True, 0)]:
        t = temp if heat else np.ones_like(temp)
        assert lda_sampler.heated_words(t).any() == heat
        compiled = _sweeps(X, theta, N, invden, t, m, parallel_min)
        runs = standin.runs()
        with standin.forced():
            arrays = _sweeps(X, theta, N, invden, t, m, parallel_min)
        assert standin.runs() > runs, "no stand-in ran"
        assert compiled[0].any() and compiled[1].any()
        for c, a in zip(compiled, arrays, strict=True):
            np.testing.assert_allclose(a, c, rtol=tol, atol=tol * np.abs(c).max())


def test_bookkeeping_stand_ins():
    """The heated-word mask, a minibatch's distinct words and the rows' moving-average step."""
    rng = np.random.default_rng(2)
    temp = np.ones((30, 4), np.float32)
    temp[[2, 17], [1, 3]] = 1.5
    X = sp.random(20, 30, density=0.2, format="csr", random_state=3, dtype=np.float32)
    counts = rng.random((30, 4))
    phi = rng.random((30, 4))

    def run():
        hot = lda_sampler.heated_words(temp)
        stamp = np.zeros(30, np.int64)
        stamp[X.indices[0]] = 5  # seen already this tick: left out
        rows = lda_sampler.unique_columns(X, stamp, 5, np.empty(30, np.int64)).copy()
        c, s, p = counts.copy(), np.zeros(4), phi.copy()
        lda_sampler.rows_step(c, s, p, rows, 0.3)
        return hot, rows, stamp, c, s, p

    compiled = run()
    with standin.forced():
        arrays = run()
    for c, a in zip(compiled, arrays, strict=True):
        assert a.dtype == c.dtype
        np.testing.assert_allclose(a, c, rtol=1e-6)
