"""The fused SAME sampling kernel against its numpy oracle (mean) and Poisson variance."""

from __future__ import annotations

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.kern import lda_sampler


def _problem(D=40, V=30, k=4, density=0.3, max_count=5, seed=1, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = sp.random(D, V, density=density, format="csr", random_state=seed, dtype=np.float64)
    X.data = np.ceil(X.data * max_count)
    X = X.astype(dtype)
    theta = (rng.random((D, k)) + 0.1).astype(dtype)
    phiT = rng.random((V, k))
    phiT = (phiT / phiT.sum(0)).astype(dtype)
    return X, theta, phiT


def _oracle(X, theta, phiT):
    """E[theta_hat], E[phi_hat]: theta o ((X / mu) @ phiT), phiT o ((X / mu).T @ theta)."""
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    mu = np.einsum("ik,ik->i", theta[rows], phiT[X.indices])
    R = sp.csr_matrix((X.data / mu, X.indices, X.indptr), shape=X.shape)
    return theta * (R @ phiT), phiT * (R.T @ theta)


def _moments(X, theta, phiT, m, reps, temp=None, xp=np):
    D, k = theta.shape
    V = phiT.shape[0]
    if xp is not np:
        X, theta, phiT = backend.to_device(X), xp.asarray(theta), xp.asarray(phiT)
        temp = None if temp is None else xp.asarray(temp)
    th = xp.empty((D, k), theta.dtype)
    ph = xp.empty((V, k), theta.dtype)
    s1, s2, p1 = np.zeros((D, k)), np.zeros((D, k)), np.zeros((V, k))
    for step in range(reps):
        lda_sampler.same_sample(X, theta, phiT, m, 7, step, th, ph, temp=temp)
        t = np.asarray(backend.to_host(th), dtype=np.float64)
        s1 += t
        s2 += t * t
        p1 += np.asarray(backend.to_host(ph), dtype=np.float64)
    mean = s1 / reps
    return mean, s2 / reps - mean**2, p1 / reps


@pytest.mark.parametrize("m", [0.5, 3.0, 40.0, 2000.0])
def test_mean_matches_the_oracle_and_variance_is_poisson(m):
    """Small rates (inversion), large ones (PTRS) and fractional m: unbiased, Var = mean/m."""
    X, theta, phiT = _problem()
    Eth, Eph = _oracle(X, theta, phiT)
    reps = 300
    mean, var, pmean = _moments(X, theta, phiT, m, reps)
    # standard error of each mean is sqrt(Eth / m / reps); allow 5 of them plus rounding
    se = np.sqrt(Eth / m / reps) + 1e-9
    assert np.max(np.abs(mean - Eth) / se) < 5.5
    assert abs(pmean.sum() - Eph.sum()) / Eph.sum() < 0.01
    ratio = var.sum() / (Eth / m).sum()
    assert 0.93 < ratio < 1.07, f"variance / (mean / m) = {ratio}, Poisson gives 1"


def test_temperature_scales_variance_and_keeps_the_mean():
    X, theta, phiT = _problem(k=4)
    T = np.ones_like(phiT)
    T[:, 0] = 6.0  # heat topic 0 for every word
    Eth, _ = _oracle(X, theta, phiT)
    m = 20.0
    mean, var, _ = _moments(X, theta, phiT, m, 400, temp=T)
    hot = var[:, 0].sum() / (Eth[:, 0] / m).sum()
    cold = var[:, 1:].sum() / (Eth[:, 1:] / m).sum()
    assert 5.0 < hot < 7.0, hot
    assert 0.9 < cold < 1.1, cold
    se = np.sqrt(6.0 * Eth / m / 400) + 1e-9
    assert np.max(np.abs(mean - Eth) / se) < 5.5


def test_one_heated_word_changes_only_that_words_draws():
    """The sampler skips temperatures of words that have none (the usual case: a notebook
    heats a few parameters); the heated word still gets its temperature, the others' draws
    are exactly those of an unheated sweep (same streams)."""
    X, theta, phiT = _problem(D=200, V=30, k=4)
    T = np.ones_like(phiT)
    T[7, 2] = 5.0
    D, k = theta.shape
    plain_th, plain_ph = np.empty((D, k)), np.empty(phiT.shape)
    hot_th, hot_ph = np.empty((D, k)), np.empty(phiT.shape)
    lda_sampler.same_sample(X, theta, phiT, 10.0, 3, 4, plain_th, plain_ph)
    lda_sampler.same_sample(X, theta, phiT, 10.0, 3, 4, hot_th, hot_ph, temp=T)
    others = np.arange(phiT.shape[0]) != 7
    np.testing.assert_array_equal(hot_ph[others], plain_ph[others])
    np.testing.assert_array_equal(hot_ph[7, [0, 1, 3]], plain_ph[7, [0, 1, 3]])
    assert hot_ph[7, 2] != plain_ph[7, 2]
    mask = lda_sampler.heated_words(T)
    assert mask.dtype == np.uint8 and mask.tolist() == [int(w == 7) for w in range(len(mask))]
    again_th, again_ph = np.empty((D, k)), np.empty(phiT.shape)  # the caller's mask: same draws
    lda_sampler.same_sample(X, theta, phiT, 10.0, 3, 4, again_th, again_ph, temp=T, hot=mask)
    np.testing.assert_array_equal(again_ph, hot_ph)
    with pytest.raises(ValueError, match="hot must be uint8"):
        lda_sampler.same_sample(X, theta, phiT, 10.0, 3, 4, again_th, again_ph, temp=T,
                                hot=mask.astype(bool))
    docs = X[:, 7].nonzero()[0]
    assert 0 < docs.size < D
    untouched = np.setdiff1d(np.arange(D), docs)
    np.testing.assert_array_equal(hot_th[untouched], plain_th[untouched])
    # over many sweeps the heated entry's variance is ~T times the plain one, the mean kept
    draws = {}
    for name, temp in (("plain", None), ("hot", T)):
        ph = np.empty(phiT.shape)
        vals = []
        for step in range(400):
            lda_sampler.same_sample(X, theta, phiT, 10.0, 3, step, hot_th, ph, temp=temp)
            vals.append(ph[7, 2])
        draws[name] = np.array(vals)
    ratio = draws["hot"].var() / draws["plain"].var()
    assert 3.5 < ratio < 7.0, ratio
    se = np.sqrt(draws["hot"].var() / 400)
    assert abs(draws["hot"].mean() - draws["plain"].mean()) < 5 * se


def test_draws_depend_only_on_seed_and_step_not_on_threads(monkeypatch):
    X, theta, phiT = _problem(D=200, V=50, k=8)
    D, k = theta.shape
    outs = []
    before = numba.get_num_threads()
    monkeypatch.setattr(lda_sampler, "PARALLEL_MIN_PAIRS", 0)  # the threaded kernel too
    try:
        for threads in (1, max(before, 2)):
            numba.set_num_threads(threads)
            th, ph = np.empty((D, k)), np.empty((50, k))
            work = lda_sampler.workspace(50, k, np.float64)
            lda_sampler.same_sample(X, theta, phiT, 10.0, 3, 5, th, ph, work=work)
            outs.append((th.copy(), ph.copy()))
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-12)
    th2, ph2 = np.empty((D, k)), np.empty((50, k))
    lda_sampler.same_sample(X, theta, phiT, 10.0, 3, 6, th2, ph2)
    assert not np.array_equal(th2, outs[0][0]), "a new step draws new numbers"


def test_float32_runs_and_workspace_is_reused():
    X, theta, phiT = _problem(dtype=np.float32)
    D, k = theta.shape
    th, ph = np.empty((D, k), np.float32), np.empty(phiT.shape, np.float32)
    work = lda_sampler.workspace(phiT.shape[0], k, np.float32)
    count = backend.allocations.snapshot()[0]
    lda_sampler.same_sample(X, theta, phiT, 5.0, 0, 0, th, ph, work=work)
    assert backend.allocations.snapshot()[0] == count
    assert np.isfinite(th).all() and abs(th.sum() - X.sum()) / X.sum() < 0.05
    np.testing.assert_allclose(th.sum(), ph.sum(), rtol=1e-4)


def test_counts_form_equals_normalised_topics_and_rows_limit_the_writes():
    """phi formed on the fly from counts (scale a, beta, invden) draws exactly as phi."""
    X, theta, phiT = _problem(D=60, V=40, k=6)
    rng = np.random.default_rng(4)
    counts = rng.random(phiT.shape) * 50
    a, beta = 0.37, 0.01
    invden = 1.0 / (a * counts.sum(0) + 40 * beta)
    phi = (a * counts + beta) * invden
    D, k = theta.shape
    th1, ph1 = np.empty((D, k)), np.empty((40, k))
    th2, ph2 = np.empty((D, k)), np.full((40, k), 7.0)
    lda_sampler.same_sample(X, theta, phi, 20.0, 1, 1, th1, ph1)
    rows = lda_sampler.unique_columns(X, np.zeros(40, np.int64), 1, np.empty(40, np.int64))
    assert sorted(rows) == sorted(set(X.indices))
    lda_sampler.same_sample(X, theta, counts, 20.0, 1, 1, th2, ph2, scale=a, beta=beta,
                            invden=invden, rows=rows)
    np.testing.assert_allclose(th2, th1, rtol=1e-12)
    np.testing.assert_allclose(ph2[rows], ph1[rows], rtol=1e-12)
    untouched = np.setdiff1d(np.arange(40), rows)
    assert (ph2[untouched] == 7.0).all(), "rows outside the minibatch are left alone"
    # the sparse moving-average step: counts[rows] += s * phi_hat[rows], phi_hat zeroed
    colsum = counts.sum(0)
    before = counts.copy()
    lda_sampler.rows_step(counts, colsum, ph2, rows, 0.5)
    np.testing.assert_allclose(counts[rows], before[rows] + 0.5 * ph1[rows])
    np.testing.assert_allclose(colsum, counts.sum(0))
    assert (ph2[rows] == 0).all()


def test_bad_arguments_name_the_problem():
    X, theta, phiT = _problem()
    D, k = theta.shape
    th, ph = np.empty((D, k)), np.empty(phiT.shape)
    with pytest.raises(ValueError, match=r"phiT has shape \(29, 4\).*must be 30 x 4"):
        lda_sampler.same_sample(X, theta, phiT[:29], 5.0, 0, 0, th, ph)
    with pytest.raises(ValueError, match="nsamps"):
        lda_sampler.same_sample(X, theta, phiT, 0.0, 0, 0, th, ph)
    with pytest.raises(TypeError, match="one float dtype"):
        lda_sampler.same_sample(X, theta.astype(np.float32), phiT, 5.0, 0, 0, th, ph)
    with pytest.raises(ValueError, match="C-ordered"):
        lda_sampler.same_sample(X, np.asfortranarray(theta), phiT, 5.0, 0, 0, th, ph)


@pytest.mark.gpu
def test_gpu_kernel_agrees_with_the_cpu_kernel(xp):
    """Same random streams on both devices: the draws agree up to float summation order."""
    if xp is np:
        pytest.skip("GPU comparison only")
    X, theta, phiT = _problem(D=300, V=80, k=40, dtype=np.float64)
    T = np.ones_like(phiT)
    T[3, 5] = 4.0
    D, k = theta.shape
    th, ph = np.empty((D, k)), np.empty(phiT.shape)
    lda_sampler.same_sample(X, theta, phiT, 30.0, 1, 2, th, ph, temp=T)
    gth, gph = xp.empty((D, k)), xp.empty(phiT.shape)
    lda_sampler.same_sample(
        backend.to_device(X), xp.asarray(theta), xp.asarray(phiT), 30.0, 1, 2, gth, gph,
        temp=xp.asarray(T),
    )
    gth, gph = backend.to_host(gth), backend.to_host(gph)
    same = np.isclose(th, gth, rtol=1e-9, atol=1e-12).mean()
    assert same > 0.999, f"only {same:.4f} of theta_hat entries agree"
    np.testing.assert_allclose(ph.sum(), gph.sum(), rtol=1e-3)
    for dtype in (np.float32, np.float64):
        Xd, thd, phd = _problem(D=200, V=60, k=33, dtype=dtype)
        Eth, _ = _oracle(Xd.astype(np.float64), thd.astype(np.float64), phd.astype(np.float64))
        mean, var, _ = _moments(Xd, thd, phd, 10.0, 150, xp=xp)
        se = np.sqrt(Eth / 10.0 / 150) + 1e-6
        assert np.max(np.abs(mean - Eth) / se) < 6
        assert 0.9 < var.sum() / (Eth / 10.0).sum() < 1.1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("threaded", [False, True])
def test_sweeps_in_one_call_equal_the_loop_of_sweeps(monkeypatch, dtype, threaded):
    """same_sample_sweeps == same_sample per sweep (steps step, step+1, ...; phi on the
    last) with theta = theta_hat + alpha between them, bit for bit, on the one-thread
    (single GIL-free call) and the threaded path."""
    if threaded:
        monkeypatch.setattr(lda_sampler, "PARALLEL_MIN_PAIRS", 0)
    X, theta0, phiT = _problem(D=60, V=40, k=5, dtype=dtype)
    D, k = theta0.shape
    V = phiT.shape[0]
    T = np.ones((V, k), dtype)
    T[3, 1] = 4.0
    work = lda_sampler.workspace(V, k, dtype)
    alpha, sweeps = 0.1, 3
    theta = theta0.copy()
    th, ph = np.empty((D, k), dtype), np.full((V, k), -1.0, dtype)
    for i in range(sweeps):
        lda_sampler.same_sample(X, theta, phiT, 10.0, 9, 4 + i, th, ph, temp=T, work=work,
                                with_phi=i == sweeps - 1)
        theta[:] = th + dtype(alpha)
    fused = theta0.copy()
    th2, ph2 = np.empty((D, k), dtype), np.full((V, k), -1.0, dtype)
    lda_sampler.same_sample_sweeps(X, fused, phiT, 10.0, 9, 4, sweeps, alpha, th2, ph2,
                                   temp=T, work=work)
    np.testing.assert_array_equal(fused, theta)
    np.testing.assert_array_equal(th2, th)
    np.testing.assert_array_equal(ph2, ph)
    with pytest.raises(ValueError, match="sweeps must be >= 1"):
        lda_sampler.same_sample_sweeps(X, fused, phiT, 10.0, 9, 4, 0, alpha, th2, ph2)
    with pytest.raises(ValueError, match="whole number; got 2.5"):  # not silently 2
        lda_sampler.same_sample_sweeps(X, fused, phiT, 10.0, 9, 4, 2.5, alpha, th2, ph2)


@pytest.mark.gpu
def test_gpu_sweeps_in_one_call_equal_the_loop_of_sweeps(xp):
    """On the GPU same_sample_sweeps loops over same_sample: the same draws as the loop."""
    if xp is np:
        pytest.skip("GPU variant only")
    X, theta0, phiT = _problem(D=120, V=50, k=16, dtype=np.float32)
    gX, gphi = backend.to_device(X), xp.asarray(phiT)
    D, k = theta0.shape
    theta, th, ph = xp.asarray(theta0), xp.empty((D, k), xp.float32), xp.empty(phiT.shape,
                                                                                 xp.float32)
    for i in range(3):
        lda_sampler.same_sample(gX, theta, gphi, 10.0, 2, 7 + i, th, ph, with_phi=i == 2)
        theta[...] = th + np.float32(0.1)
    fused, th2, ph2 = xp.asarray(theta0), xp.empty_like(th), xp.empty_like(ph)
    lda_sampler.same_sample_sweeps(gX, fused, gphi, 10.0, 2, 7, 3, 0.1, th2, ph2)
    np.testing.assert_array_equal(backend.to_host(fused), backend.to_host(theta))
    # phi_hat is summed with atomic adds, whose order (and so float rounding) varies by run
    np.testing.assert_allclose(backend.to_host(ph2), backend.to_host(ph), rtol=2e-6)
