"""Every model family trained on the GPU agrees with the same model trained on the CPU.

These run only where CuPy sees a CUDA device (marked ``gpu``; skipped with the reason
elsewhere). Each fits the CPU and the GPU engine on the same small problem with the same
seed and compares what a user would look at: scores, predictions, centres, topics.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from bidlab import backend
from bidlab.datasets import blobs

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_gpu():
    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: GPU model tests skipped (install bidlab[gpu])")


def _classification(n: int = 3000, d: int = 200, k: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.05, format="csr", random_state=seed, dtype=np.float64)
    W = rng.standard_normal((d, k)) * 3
    y = np.asarray(X @ W).argmax(1)
    return X, y


@pytest.mark.parametrize("link", ["logistic", "softmax", "linear"])
def test_glm_on_the_gpu_scores_like_the_cpu(link):
    from bidlab.models.glm import GLM

    X, y = _classification()
    if link == "logistic":
        y = (y == 0).astype(int)
    target = y.astype(float) if link == "linear" else y
    cpu = GLM(link, n_passes=4, random_state=0).fit(X[:2500], target[:2500])
    gpu = GLM(link, n_passes=4, random_state=0, device="gpu").fit(X[:2500], target[:2500])
    s_cpu, s_gpu = cpu.score(X[2500:], target[2500:]), gpu.score(X[2500:], target[2500:])
    assert abs(s_cpu - s_gpu) < 0.03, (s_cpu, s_gpu)
    pred = gpu.predict(X[2500:])
    assert isinstance(pred, np.ndarray), "predict of host data returns host arrays"


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_kmeans_on_the_gpu_finds_the_cpu_centres(algorithm):
    from bidlab.models.kmeans import KMeans

    X = blobs(4000, 16, 8, spread=2.0, seed=1).X
    kw = {"algorithm": algorithm, "random_state": 0}
    cpu = KMeans(8, **kw).fit(X)
    gpu = KMeans(8, device="gpu", **kw).fit(X)
    C, G = cpu.cluster_centers_, backend.to_host(gpu.cluster_centers_)
    dist = ((C[:, None, :] - G[None]) ** 2).sum(2)
    assert np.sqrt(dist.min(1)).max() < 0.2 * np.sqrt((C ** 2).sum(1)).mean()
    assert gpu.inertia_ == pytest.approx(cpu.inertia_, rel=0.02)
    agree = adjusted_rand_score(cpu.predict(X), backend.to_host(gpu.predict(X)))
    assert agree > 0.98, agree


def test_lda_gibbs_on_the_gpu_matches_the_cpu_topics():
    from bidlab.models import LDAGibbs

    rng = np.random.default_rng(0)
    topics = rng.dirichlet(np.full(300, 0.05), 5)
    theta = rng.dirichlet(np.full(5, 0.2), 800)
    counts = np.stack([rng.multinomial(60, t @ topics) for t in theta])
    X = sp.csr_matrix(counts.astype(np.float64))
    cpu = LDAGibbs(5, 20, n_passes=6, random_state=0).fit(X)
    gpu = LDAGibbs(5, 20, n_passes=6, random_state=0, device="gpu").fit(backend.to_device(X))
    A, B = cpu.components_, backend.to_host(gpu.components_)
    A = A / np.linalg.norm(A, axis=1, keepdims=True)
    B = B / np.linalg.norm(B, axis=1, keepdims=True)
    assert (A @ B.T).max(1).min() > 0.95
    assert abs(cpu.score(X) - gpu.score(backend.to_device(X))) < 0.05


def test_a_gpu_learner_trains_in_the_background_and_checkpoints(tmp_path):
    from bidlab.models.lda import LDA

    rng = np.random.default_rng(2)
    X = sp.csr_matrix(rng.poisson(0.3, (600, 120)).astype(np.float64))
    model = LDA(6, n_passes=3, device="gpu", random_state=0)
    lrn = model.learner(backend.to_device(X))
    lrn.start()
    assert lrn.join(timeout=120), "the GPU learner did not finish in 120 s"
    assert lrn.state == "done", lrn.state
    ckpt = tmp_path / "gpu.ckpt"
    lrn.save(ckpt)
    assert ckpt.exists() and ckpt.stat().st_size > 0
