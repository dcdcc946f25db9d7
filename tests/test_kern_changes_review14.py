"""The fused L1 proximal steps, the touched-row steps with L1, and the k-means, NMF KL and
PageRank kernels given stand-ins or made adaptive: the compiled kernels (serial and
parallel) against their numpy stand-ins at the edges the callers reach: float32 and
float64, C- and F-ordered matrices, no rows, one column or centre, no touched rows, L1
zero, one value for all targets or one per target, deferred records past 64 steps."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import both_paths

from bidlab.kern import adaptive, kmeans, kmeans_centres, nmf_kl, pagerank, steps
from bidlab.kern import touched as touched_mod
from bidlab.kern.scatter_sums import ScatterSums
from bidlab.kern.touched import TouchedStep

DTYPES = [np.float32, np.float64]
POLICIES = ["serial", "parallel"]


def _tol(dtype) -> dict[str, float]:
    return dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-13)


def _assert_pairs(got, want, dtype) -> None:
    for g, w in zip(got, want, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, **_tol(dtype))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (17, 1), (17, 5)])
def test_fused_l1_steps_match_their_stand_ins(policy, dtype, order, shape):
    rng = np.random.default_rng(sum(shape))
    n = shape[0]
    M0, U = (np.asarray(rng.standard_normal(shape) * 0.1, dtype, order=order) for _ in "ab")
    S0 = np.asarray(rng.random(shape), dtype, order=order)
    lr = rng.uniform(0.05, 0.5, (n, 1)).astype(dtype)
    eps = np.full((n, 1), 1e-3, dtype)
    l1 = rng.uniform(0.0, 0.3, (n, 1)).astype(dtype)

    def run():
        M, S = M0.copy(order=order), S0.copy(order=order)
        assert steps.adagrad(M, U, S, lr, eps, 1 / 3, 0.7, l1)
        G = M0.copy(order=order)
        assert steps.grad(G, U, lr, 0.7, l1)
        return M, S, G

    with adaptive.policy(policy):
        compiled, arrays = both_paths(run)
    _assert_pairs(compiled, arrays, dtype)
    if n > 1:
        assert (compiled[2] == 0).any()  # exact zeros from the proximal step


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["grad", "adagrad"])
@pytest.mark.parametrize("mode", ["deferred", "swept"])
@pytest.mark.parametrize("l1_kind", ["zero", "scalar", "per_target"])
@pytest.mark.parametrize("T", [1, 3])
def test_touched_steps_with_l1_match_their_stand_ins(policy, dtype, kind, mode, l1_kind, T,
                                                      monkeypatch):
    # 80 steps: past the 64-row step-size record; every 7th minibatch touches no row
    monkeypatch.setattr(touched_mod, "DEFER_BELOW", 0 if mode == "deferred" else 10**9)
    rng = np.random.default_rng(T)
    d, steps_n = 120, 80
    W0 = rng.standard_normal((d, T)).astype(dtype)
    S0 = rng.random((d, T)).astype(dtype)
    lr, eps = np.full(T, 0.05, dtype), np.full(T, 1e-3, dtype)
    l1 = {"zero": np.zeros(T), "scalar": np.full(T, 1e-2),
          "per_target": np.linspace(0.0, 2e-2, T)}[l1_kind].astype(dtype)
    l2 = np.full(T, 1e-3, dtype)
    batches = [sp.random(4, d, density=0.0 if i % 7 == 0 else 0.02, format="csr",
                         random_state=i, dtype=dtype) for i in range(steps_n)]
    As = [rng.standard_normal((4, T)).astype(dtype) / 4 for _ in range(steps_n)]

    def run():
        W, S = W0.copy(), S0.copy()
        step = TouchedStep(d, T, dtype)
        for t, (X, A) in enumerate(zip(batches, As, strict=True)):
            scale = (10 / (10 + t)) ** 0.5
            if kind == "grad":
                step.grad(X, A, W, lr, l1, l2, scale, t)
            else:
                step.adagrad(X, A, W, S, lr, l1, l2, eps, 1 / (t + 1), scale, t)
        step.catch_up(steps_n)
        return W, S

    with adaptive.policy(policy):
        compiled, arrays = both_paths(run)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    for g, w in zip(compiled, arrays, strict=True):
        np.testing.assert_allclose(g, w, **tol)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 40])
@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("layout", ["C", "F", "csr"])
def test_kmeans_kernels_match_their_stand_ins(policy, dtype, n, k, layout):
    rng = np.random.default_rng(n + k)
    X = rng.random((n, 6)).astype(dtype)
    if layout == "F":
        X = np.asfortranarray(X)
    elif layout == "csr":
        X = sp.csr_matrix(X * (X > 0.5))
    labels = rng.integers(0, k, n).astype(np.int64)
    w = rng.random(n).astype(dtype)
    C = rng.random((k, 6)).astype(dtype)
    cc = (C * C).sum(axis=1)
    N = np.arange(k, dtype=dtype)  # centre 0 has no weight: it keeps its previous place
    prev = rng.random((k, 6)).astype(dtype)

    def run():
        out = []
        for weights in (None, w):
            sums, counts = np.zeros((k, 6), dtype), np.zeros(k, dtype)
            kmeans.center_sums(X, labels, sums, counts, weights)
            out += [sums, counts]
        dist = np.full(n, np.nan, dtype)
        kmeans.assigned_sq_dist(X, labels, C, dist, cc)
        means = C.copy()
        drift = kmeans_centres.centre_means(means, N, prev)
        return [*out, dist, means, drift, kmeans_centres.centre_drift(means, prev)]

    with adaptive.policy(policy):
        compiled, arrays = both_paths(run)
    _assert_pairs(compiled, arrays, dtype)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [0, 1, 40])
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("density", [0.0, 0.2])
def test_nmf_kl_kernels_match_their_stand_ins(policy, dtype, m, k, density):
    rng = np.random.default_rng(m + k)
    X = sp.random(m, 30, density=density, format="csr", random_state=4, dtype=dtype)
    W = (rng.random((m, k)) + 0.1).astype(dtype)
    Ht = (rng.random((30, k)) + 0.1).astype(dtype)

    def run():
        out = np.full((m, k), np.nan, dtype)
        nmf_kl.kl_w_numerator(X, W, Ht, 1e-7, out)
        acc = ScatterSums(30, k, dtype, copies=2)
        losses = nmf_kl.kl_h_push(X, W, Ht, 1e-7, acc, np.empty((3, 2)))
        return out, acc.total().copy(), np.array(losses)

    with adaptive.policy(policy):
        compiled, arrays = both_paths(run)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    for g, a in zip(compiled, arrays, strict=True):
        np.testing.assert_allclose(g, a, **tol)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n", [0, 1, 6])
@pytest.mark.parametrize("weighted", [True, False])
def test_pagerank_pull_matches_its_stand_in_on_small_graphs(policy, n, weighted):
    rng = np.random.default_rng(n)
    A = sp.random(n, n, density=0.5, format="csc", random_state=1) if n else sp.csc_matrix(
        (0, 0))
    y, u = rng.random(n), np.full(n, 1 / max(n, 1))
    weights = A.data if weighted else np.empty(0)

    def run():
        return pagerank.pull_step(1.0, A.indptr, A.indices, weights, y, 0.85, 0.1, 0.05, u, u,
                                  np.empty(n)).copy()

    with adaptive.policy(policy):
        compiled, arrays = both_paths(run)
    np.testing.assert_allclose(compiled, arrays, rtol=1e-12, atol=1e-15)
