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
