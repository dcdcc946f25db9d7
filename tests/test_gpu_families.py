"""The families built on the spine's newer parts train on the GPU as on the CPU: NMF (per-row
state and multiplicative updaters) and LDA's warm starts by row id (two ThreadGroup learners
on the GPU: the xp variant in tests/test_learn_comm.py). Marked ``gpu``; skipped with the
reason where CuPy sees no CUDA device."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_gpu():
    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: GPU family tests skipped (install bidlab[gpu])")


def _low_rank(seed=0, n=120, d=40, k=4):
    rng = np.random.default_rng(seed)
    return rng.random((n, k)) @ rng.random((k, d))


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
def test_nmf_on_the_gpu_matches_the_cpu(loss):
    from bidlab.models import NMF

    X = _low_rank()
    kw = {"n_components": 4, "loss": loss, "max_iter": 30, "random_state": 0, "tol": 0.0}
    cpu = NMF(**kw).fit(X)
    gpu = NMF(device="gpu", **kw).fit(X)
    np.testing.assert_allclose(backend.to_host(gpu.components_), cpu.components_,
                               rtol=1e-6, atol=1e-9)
    assert gpu.reconstruction_err_ == pytest.approx(cpu.reconstruction_err_, rel=1e-6)


def test_nmf_with_missing_values_on_the_gpu():
    from bidlab.models import NMF

    X = _low_rank(1)
    hide = np.random.default_rng(2).random(X.shape) < 0.2
    Xn = np.where(hide, np.nan, X)
    est = NMF(n_components=4, max_iter=200, random_state=0, device="gpu").fit(Xn)
    back = backend.to_host(est.inverse_transform(est.transform(Xn)))
    err = np.sqrt(np.mean((back[hide] - X[hide]) ** 2))
    base = np.sqrt(np.mean((np.nanmean(Xn, axis=0)[None, :].repeat(X.shape[0], 0)[hide]
                            - X[hide]) ** 2))
    assert err < 0.2 * base, (err, base)


def test_lda_warm_starts_by_row_id_on_the_gpu():
    from bidlab.learn.rowstate import RowState
    from bidlab.models import LDA

    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.poisson(0.3, (300, 60)).astype(np.float64))
    lrn = LDA(4, n_passes=2, batch_size=50, random_state=0, device="gpu").learner(
        backend.to_device(X), val_every=0)
    lrn.fit(progress=None)
    store = lrn.model._store
    assert isinstance(store, RowState) and bool(backend.to_host(store.seen.data).all())
