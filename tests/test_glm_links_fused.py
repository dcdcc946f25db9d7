"""The fused logistic link step (bidlab.kern.glm_links) against LinkStep's ufunc sequence."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.models.glm.links import Layout, LinkStep


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_fused_logistic_step_matches_the_ufuncs(dtype, weighted):
    rng = np.random.default_rng(0)
    n, K = 300, 7
    layout = Layout(("logistic",) * 5 + ("linear",) * 2, (1,) * 7)
    E = (rng.standard_normal((n, K)) * 20).astype(dtype)  # large margins both ways
    Y = (rng.random((n, K)) > 0.5).astype(dtype)
    w = rng.random((n, 1)).astype(dtype) if weighted else None
    fused, ufuncs = E.copy(), np.asfortranarray(E)  # C-ordered margins take the kernel
    loss_f, loss_u = np.zeros((1, K), dtype), np.zeros((1, K), dtype)
    LinkStep(layout, n, dtype, np)(fused, Y, loss_f, w)
    LinkStep(layout, n, dtype, np)(ufuncs, Y, loss_u, w)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(fused, ufuncs, rtol=tol, atol=tol)
    np.testing.assert_allclose(loss_f, loss_u, rtol=20 * tol)
    assert loss_f.min() > 0


@pytest.mark.parametrize("weighted", [False, True])
def test_fused_logistic_stand_in_matches_the_kernel(weighted):
    from bidlab.kern import standin
    from bidlab.kern.glm_links import logistic_step

    rng = np.random.default_rng(1)
    E = (rng.standard_normal((80, 6)) * 10).astype(np.float32)
    Y = (rng.random((80, 8)) > 0.5).astype(np.float32)
    w = rng.random((80, 1)).astype(np.float32) if weighted else None
    outs = []
    for forced in (False, True):
        M, loss = E.copy(), np.zeros(4)
        with standin.forced() if forced else standin.enabled(False):
            runs = standin.runs()
            logistic_step(M, Y, 1, 5, 2, loss, w, True)
            assert (standin.runs() > runs) == forced
        outs.append((M, loss))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5)
    np.testing.assert_array_equal(outs[1][0][:, [0, 5]], E[:, [0, 5]])  # other columns kept
