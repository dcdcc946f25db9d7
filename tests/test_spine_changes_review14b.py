"""GLM sample weights on several ranks: a weighted minibatch's gradient is scaled by the mean
weight of all the ranks' rows, so the ranks' averaged model reaches the weighted optimum of
all the rows, and a rank whose rows all weigh 0 takes part (its shard is not refused).
A learner stopped at interpreter exit whose last checkpoint cannot be written says so."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from bidlab.learn import ThreadGroup
from bidlab.models.glm import GLM


def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 40))
    beta = np.zeros(40)
    beta[:6] = rng.standard_normal(6) * 1.5
    y = (rng.random(2000) < 1 / (1 + np.exp(-X @ beta))).astype(int)
    # rank 1's rows (the odd ones) weigh 10 times rank 0's
    w = np.where(np.arange(2000) % 2 == 0, 1.0, 10.0) * (1 + (X[:, 0] > 0) * 4)
    return X, y, w


def _objective(X, y, w, est) -> float:
    m = X @ est.coef_.ravel() + est.intercept_
    return float(np.sum(w * (np.logaddexp(0, m) - y * m)) / w.sum())


_STEPS = dict(texp=0.0, average_from=-1)  # constant full-batch steps: they converge


def _glm(**kw) -> GLM:
    kw.setdefault("lrate", 1.0)
    return GLM("logistic", l2=0.0, updater="grad", n_passes=300, random_state=0,
               shuffle=False, **kw)


def _on_two_ranks(X, y, w, **kw) -> list[GLM]:
    group = ThreadGroup(2, timeout=60)
    ests = [_glm(**kw) for _ in range(2)]
    errors: list[BaseException] = []

    def run(r: int) -> None:
        try:
            ests[r].learner(X[r::2], y[r::2], sample_weight=w[r::2], comm=group.comm(r),
                            batch_size=1000, **_STEPS).fit(progress=None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]
    return ests


def test_weighted_glm_on_two_ranks_reaches_the_weighted_optimum_of_all_rows():
    X, y, w = _data()
    one = _glm()
    one.learner(X, y, sample_weight=w, batch_size=2000, **_STEPS).fit(progress=None)
    ranks = _on_two_ranks(X, y, w)
    best = _objective(X, y, w, one)
    # each rank's own mean weight: 0.3999, the mean of the two ranks' weighted losses'
    # optimum; one process: 0.3901
    assert _objective(X, y, w, ranks[0]) - best < 2e-3


def test_a_rank_whose_weights_are_all_zero_trains_with_the_others():
    X, y, w = _data()
    w = w * (np.arange(2000) % 2 == 1)  # every row of rank 0 weighs 0
    ranks = _on_two_ranks(X, y, w, lrate="auto")  # rank 0's pilot: unweighted
    one = _glm()
    one.learner(X, y, sample_weight=w, batch_size=2000, **_STEPS).fit(progress=None)
    assert np.isfinite(ranks[0].coef_).all()
    np.testing.assert_array_equal(ranks[0].coef_, ranks[1].coef_)
    assert _objective(X, y, w, ranks[0]) - _objective(X, y, w, one) < 2e-3


def test_weights_all_zero_on_every_rank_are_named():
    X, y, w = _data()
    with pytest.raises(ValueError, match="sample_weight is 0 on every row of all 2 ranks"):
        _on_two_ranks(X, y, 0.0 * w)


_EXIT_SCRIPT = """
import os, shutil, sys, time
import numpy as np
from bidlab.learn import Grad, Learner
from bidlab.models.lsq import LeastSquares
rng = np.random.default_rng(0)
X = rng.standard_normal((20000, 4)).astype(np.float32)
y = X @ np.arange(1, 5, dtype=np.float32)[:, None]
folder = sys.argv[1]
os.makedirs(folder)
lr = Learner(LeastSquares(), (X, y), Grad(lrate=0.01), batch_size=5, n_passes=100,
             checkpoint=os.path.join(folder, "run.npz"), name="lost-run")
lr.start()
while lr.step < 50:
    time.sleep(0.005)
shutil.rmtree(folder)
open(folder, "w").close()  # the checkpoint's folder is gone: its write at exit fails
print("leaving", flush=True)
"""


def test_a_checkpoint_that_cannot_be_written_at_exit_is_said(tmp_path):
    """The run stopped at interpreter exit failed writing its checkpoint and the script
    ended silently, as if its progress had been saved."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, str(tmp_path / "ck")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "leaving" in done.stdout, done.stderr[-3000:]
    assert "learner 'lost-run', stopped at interpreter exit, failed: " in done.stderr
