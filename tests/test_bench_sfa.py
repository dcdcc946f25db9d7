"""The SFA benchmark's parts: the generated power-law matrix and the biases-only baseline
(the timed comparison itself is a program, not a test)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.bench.sfa import biases_only, generated


def test_generated_matrix_has_the_shape_and_power_law_items():
    X = generated(0.001, seed=0)  # 20,000 draws on about 4,364 x 853
    assert X.shape[1] == int(27_000 * 0.001 ** 0.5)
    assert X.shape[0] <= int(138_000 * 0.001 ** 0.5)
    assert np.all(np.diff(X.indptr) > 0)  # users with no interaction are dropped
    assert 0.9 * 20_000 < X.sum() <= 20_000
    pop = np.sort(np.bincount(X.indices, minlength=X.shape[1]))[::-1]
    assert pop[0] > 20 * np.median(pop)  # a few items take much of the mass


def test_biases_only_recovers_additive_ratings():
    rng = np.random.default_rng(0)
    bu, ci = rng.normal(size=30), rng.normal(size=20)
    full = 3.0 + bu[:, None] + ci[None, :]
    mask = rng.random(full.shape) < 0.6
    rows, cols = np.nonzero(mask)
    R = sp.csr_matrix((full[rows, cols], (rows, cols)), shape=full.shape)
    predict = biases_only(R, l2=0.0, sweeps=200)
    np.testing.assert_allclose(predict(rows, cols), full[rows, cols], atol=1e-6)
    shrunk = biases_only(R, l2=50.0)(rows, cols)
    assert np.abs(shrunk - R.data.mean()).mean() < np.abs(full[rows, cols] -
                                                          R.data.mean()).mean()
    with pytest.raises(IndexError):
        predict(np.array([30]), np.array([0]))


def test_without_implicit_its_cases_are_left_out(monkeypatch, shared_data, capsys):
    """A machine without the peer (a GPU image, say) still gets bidlab's own figures."""
    import sys

    from bidlab.bench.sfa import run

    monkeypatch.setitem(sys.modules, "implicit", None)  # blocks `import implicit`
    res = run(quick=True, scale=0.001, factors=[], iters=2)
    assert res["implicit_cases"] == []
    assert res["explicit"]["sfa_rmse"] < res["explicit"]["biases_rmse"] + 0.05
    assert [t["name"] for t in res["targets"]] == ["explicit RMSE: biases-only - SFA"]
    assert "implicit is not installed" in capsys.readouterr().err
