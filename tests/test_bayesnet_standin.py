"""The Bayesian-network kernels' numpy forms (run while numba compiles them on a fresh
installation) draw the kernels' own bits: sweeps with evidence, clamped rows, tabled and
untabled conditionals, deterministic descendants, the first fill, learning's counts."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import both_paths, clamped_chains

from bidlab.datasets.paths import find_shared_data_dir
from bidlab.kern import bn_gibbs
from bidlab.models import BayesNet
from bidlab.models.bayesnet import read_bif
from bidlab.models.bayesnet.tables import Tables

_SHARED = find_shared_data_dir()
BNLEARN = None if _SHARED is None else _SHARED / "bnlearn"
pytestmark = pytest.mark.skipif(BNLEARN is None or not BNLEARN.is_dir(),
                                reason="shared data folder with bnlearn/ not found")


# alarm: coupled pairs, tabled; asia and hailfinder: deterministic descendants; water:
# most units untabled
@pytest.mark.parametrize("name", ["alarm", "asia", "hailfinder", "water"])
@pytest.mark.parametrize("tabled", [True, False])
def test_sweeps_draw_the_kernels_bits(name, tabled, monkeypatch):
    chains = clamped_chains(BNLEARN / f"{name}.bif.gz", 24, 5, monkeypatch, tabled)

    def run():
        ch = chains()
        for k in range(12):
            ch.sweep(m_active=2, record=k % 3 == 0)
        return ch.X.copy(), ch.rb.copy(), ch.log_joint_mean(2)

    compiled, arrays = both_paths(run)
    np.testing.assert_array_equal(arrays[0], compiled[0])
    np.testing.assert_array_equal(arrays[1], compiled[1])
    assert arrays[2] == pytest.approx(compiled[2], rel=1e-12)


@pytest.mark.parametrize("name", ["alarm", "child", "water"])
def test_tabled_conditionals_are_the_kernels(name):
    t = Tables.of(read_bif(BNLEARN / f"{name}.bif.gz"))
    args = (t.cond_ptr, t.mb_ptr, t.mb_idx, t.mb_stride, t.cpt, t.off, t.card, *t.parents,
            t.unit_a, t.unit_b, t.fac_ptr, t.fac_idx, t.fac_step_a, t.fac_step_b)

    def run():
        cond = np.full_like(t.cond, -1.0)
        bn_gibbs.conditionals(cond, *args)
        return cond

    compiled, arrays = both_paths(run)
    assert (compiled >= 0).all()
    np.testing.assert_array_equal(arrays, compiled)


def test_learning_counts_and_inference_give_the_kernels_results():
    truth = BayesNet.from_bif(BNLEARN / "asia.bif.gz")
    X = truth.sample(300, random_state=1).astype(np.float64)
    X[np.random.default_rng(0).random(X.shape) < 0.3] = np.nan

    def run():
        bn = BayesNet(truth.network_.uniform(), n_passes=3, nsamps=2, random_state=0).fit(X)
        m = BayesNet(truth.network_, n_chains=20, n_samples=30, burn_in=10,
                     random_state=0).infer({"xray": "yes"})
        return [c.copy() for c in bn.network_.cpts], m

    compiled, arrays = both_paths(run)
    for a, c in zip(arrays[0], compiled[0], strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-15)
    for v in compiled[1]:
        for s in compiled[1][v]:
            assert arrays[1][v][s] == pytest.approx(compiled[1][v][s], rel=1e-12, abs=1e-15)
