""""Allocates nothing after warm-up", measured from outside bidlab.

The other allocation tests read bidlab's own counter, which only ``backend.empty``
increments. These trace the heap with :mod:`tracemalloc` (numpy reports every array buffer
to it) and, on a GPU, count CuPy's memory-pool allocations with its memory hooks. Each
workload's containers are sized so that one of them is several times the bound: a step that
allocated a temporary of that size would fail. A control with caching off shows that the
measurement sees such temporaries.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl
from bidlab.datasets import synthetic_glm
from bidlab.learn import Grad, Learner
from bidlab.models import GLM, LDA, KMeans
from bidlab.models.lsq import LeastSquares

ROWS, INNER, COLS = 2000, 64, 32
CONTAINER = ROWS * COLS * 8  # one float64 result of the loop below: 512 KB


def _loop_step(x, w, alpha):
    y = bl.exp(x @ w) * alpha + 1.0
    return (y / y.sum(axis=1)).sum(axis=0)


def _loop(xp, cached, traced_allocations):
    rng = np.random.default_rng(5)
    x = bl.Mat(xp.asarray(rng.random((ROWS, INNER))))
    w = bl.Mat(xp.asarray(rng.random((INNER, COLS))))
    alpha = bl.scalar(0.5, device="gpu" if xp is not np else "cpu")
    with bl.caching(cached):
        _loop_step(x, w, alpha)
        _loop_step(x, w, alpha)  # CuPy's reductions take their scratch on a second call too
        with traced_allocations() as trace:
            for step in range(10):
                alpha.set(0.1 * step)
                _loop_step(x, w, alpha)
    return trace


def test_a_cached_loop_grows_no_traced_memory(xp, traced_allocations):
    cached = _loop(xp, True, traced_allocations)
    uncached = _loop(xp, False, traced_allocations)
    if xp is np:
        assert cached.peak_bytes < CONTAINER // 4, cached
        assert uncached.peak_bytes > CONTAINER, uncached  # the measurement sees temporaries
    else:  # CuPy: no device memory taken; pool blocks (library scratch) fewer than uncached
        assert cached.gpu_device_allocs == 0, cached
        assert cached.gpu_mallocs < uncached.gpu_mallocs, (cached, uncached)


def test_learner_steps_grow_no_traced_memory(traced_allocations):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 400)).astype(np.float32)
    Y = rng.standard_normal((4000, 2)).astype(np.float32)
    lr = Learner(LeastSquares(), (X, Y), Grad(lrate=0.01), batch_size=256, n_passes=1)
    lr.fit(progress=None)
    lr.set(n_passes=3, lrate=0.005)
    with traced_allocations() as trace:
        lr.fit(progress=None)
    minibatch = 256 * 400 * 4
    assert trace.peak_bytes < minibatch // 4, trace


def test_lda_passes_grow_no_traced_memory(traced_allocations):
    rng = np.random.default_rng(1)
    X = sp.csr_matrix(rng.poisson(0.05, (1000, 5000)).astype(np.float64))
    passes = LDA(50, n_passes=3, batch_size=250, random_state=0).fit_passes(X)
    next(passes)
    with traced_allocations() as trace:
        for _ in passes:
            pass
    topics = 50 * 5000 * 8  # the topic matrix: 2 MB
    assert trace.peak_bytes < topics // 8, trace


def test_glm_steps_grow_no_traced_memory(traced_allocations):
    X, Y, _ = synthetic_glm(3000, 20000, 10, n_targets=5, seed=3)
    lrn = GLM("logistic", l2=1e-4, batch_size=512, random_state=0).learner(
        X, Y, val_every=0, n_passes=1)
    lrn.fit(progress=None)
    lrn.set(n_passes=3, lrate=0.05)
    with traced_allocations() as trace:
        lrn.fit(progress=None)
    weights = 20000 * 5 * 8  # the weight matrix: 800 KB
    assert trace.peak_bytes < weights // 4, trace


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_kmeans_steps_grow_no_traced_memory(algorithm, traced_allocations):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((8192, 16))
    lrn = KMeans(64, algorithm=algorithm, random_state=0, tol=0.0).learner(
        X, batch_size=4096, n_passes=1)
    lrn.fit(progress=None)
    lrn.set(n_passes=4)
    with traced_allocations() as trace:
        lrn.fit(progress=None)
    block = 4096 * 64 * 8  # one block's distances to the centres: 2 MB
    assert trace.peak_bytes < block // 8, trace


@pytest.mark.parametrize("tol", [None, 1e-9])
def test_bayesnet_inference_sweeps_grow_no_traced_memory(tol, traced_allocations):
    from bidlab.models import BayesNet
    from bidlab.models.bayesnet.network import Network

    two = ["no", "yes"]
    net = Network(["a", "b", "c"], [two] * 3, [[], [0], [0, 1]],
                  [np.array([[0.4, 0.6]]), np.array([[0.7, 0.3], [0.2, 0.8]]),
                   np.array([[0.9, 0.1], [0.5, 0.5], [0.3, 0.7], [0.05, 0.95]])])
    lrn = BayesNet(net, n_chains=8000, burn_in=2, n_samples=5, tol=tol,
                   random_state=0).learner(evidence={"c": "yes"})
    lrn.fit(progress=None)
    lrn.set(n_passes=40)  # with tol, the standard error is checked after every sweep
    with traced_allocations() as trace:
        lrn.fit(progress=None)
    sums = lrn.model.chains.rb.nbytes  # the chains' marginal sums: 384 KB
    assert trace.peak_bytes < sums // 4, trace
