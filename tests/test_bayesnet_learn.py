"""BayesNet learning: SAME Gibbs-EM from rows with hidden entries, the learned network saved
as BIF, and ``bidlab train bayesnet``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bidlab.datasets.paths import find_shared_data_dir
from bidlab.models import BayesNet, load
from bidlab.models.bayesnet import read_bif, write_bif

_SHARED = find_shared_data_dir()
BNLEARN = None if _SHARED is None else _SHARED / "bnlearn"
pytestmark = pytest.mark.skipif(BNLEARN is None or not BNLEARN.is_dir(),
                                reason="shared data folder with bnlearn/ not found")


def _hidden(X: np.ndarray, frac: float, seed: int, missing: float) -> np.ndarray:
    out = X.astype(np.float64)
    out[np.random.default_rng(seed).random(X.shape) < frac] = missing
    return out


@pytest.mark.parametrize(("name", "missing"), [("asia", np.nan), ("child", -1.0)])
def test_learns_tables_from_rows_with_30_percent_hidden(name, missing, tmp_path):
    truth = BayesNet.from_bif(BNLEARN / f"{name}.bif.gz")
    train = truth.sample(4000, random_state=1)
    test = truth.sample(3000, random_state=2)
    X = _hidden(train, 0.3, 0, missing)
    bn = BayesNet(truth.network_.uniform(), n_passes=15, nsamps=4, random_state=0)
    bn.fit(X)
    ll_true, ll = truth.log_likelihood(test), bn.log_likelihood(test)
    start = BayesNet(truth.network_.uniform()).log_likelihood(test)
    assert ll > start + 0.5 * (ll_true - start)  # most of the way from the start
    assert ll_true - ll < 0.05 * abs(ll_true)  # held-out log-likelihood close to the truth
    # the learned network saves as BIF and reads back the same
    back = read_bif(bn.to_bif(tmp_path / "learned.bif.gz"))
    assert all(np.array_equal(a, b) for a, b in
               zip(back.cpts, bn.network_.cpts, strict=True))
    assert back.names == truth.network_.names


def test_rows_with_bad_entries_are_refused():
    bn = BayesNet.from_bif(BNLEARN / "cancer.bif.gz")
    with pytest.raises(ValueError, match="gives 'Smoker' the state index 2, but it has 2"):
        bn.fit(np.array([[0, 2, 0, 0, 0]]))
    with pytest.raises(ValueError, match="one column per variable \\(5\\)"):
        bn.fit(np.zeros((3, 4)))


def test_fit_is_reproducible_and_ends_on_a_valid_network():
    truth = BayesNet.from_bif(BNLEARN / "cancer.bif.gz")
    X = _hidden(truth.sample(1000, random_state=3), 0.3, 1, np.nan)
    a = BayesNet(truth.network_.uniform(), n_passes=4, random_state=5).fit(X)
    b = BayesNet(truth.network_.uniform(), n_passes=4, random_state=5).fit(X)
    for ta, tb in zip(a.network_.cpts, b.network_.cpts, strict=True):
        assert np.array_equal(ta, tb)
        assert np.allclose(ta.sum(axis=1), 1.0)


def test_bidlab_train_bayesnet(tmp_path):
    truth = BayesNet.from_bif(BNLEARN / "asia.bif.gz")
    np.savez(tmp_path / "rows.npz", X=_hidden(truth.sample(800, random_state=4), 0.3, 2, -1))
    start = tmp_path / "asia.bif"
    write_bif(truth.network_.uniform(), start)
    r = subprocess.run([sys.executable, "-m", "bidlab.cli", "train", "bayesnet", "--data",
                        str(tmp_path / "rows.npz"), "--network", str(start), "--n_passes", "3",
                        "--save", str(tmp_path / "bn.bidlab")], capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    bn = load(tmp_path / "bn.bidlab")
    assert isinstance(bn, BayesNet)
    lung = bn.network_.cpts[bn.network_.index("lung")]
    assert not np.allclose(lung, 0.5)  # learned, not the uniform start
