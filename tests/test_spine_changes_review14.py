"""L1's proximal step on several ranks: the ranks' combined model at the end of a run takes
it (a mean of sparse models is not sparse), with rank 0's step sizes so every rank ends
with the same model."""

from __future__ import annotations

import threading
import warnings

import numpy as np

from bidlab.learn import ThreadGroup
from bidlab.models.glm import GLM


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 40))
    beta = np.zeros(40)
    beta[:6] = rng.standard_normal(6) * 1.5
    y = (rng.random(2000) < 1 / (1 + np.exp(-X @ beta))).astype(int)
    return X, y


def test_l1_on_two_ranks_ends_sparse_and_the_same_on_each_rank():
    X, y = _data()
    group = ThreadGroup(2, timeout=60)
    ests = [GLM("logistic", l1=1e-2, l2=0.0, n_passes=10, random_state=0) for _ in range(2)]
    errors: list[BaseException] = []

    def run(r: int) -> None:
        try:
            ests[r].learner(X[r::2], y[r::2], comm=group.comm(r)).fit(progress=None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and not any(t.is_alive() for t in threads)
    c0, c1 = ests[0].coef_, ests[1].coef_
    np.testing.assert_array_equal(c0, c1)  # one model on every rank
    # one rank on all rows: 21 of 40 weights nonzero; the mean of the ranks' sparse models
    # without a proximal step kept 38
    assert np.count_nonzero(c0) <= 32


def test_l1_model_resumed_with_no_step_left_lands_sparse(tmp_path):
    """A checkpoint written where the passes were all made but the run had not ended (a
    stop at that boundary, the interpreter's exit): the learner that loads it trains no
    step, and the mean of iterates it lands still takes L1's proximal step."""
    X, y = _data()
    ck = str(tmp_path / "run.ckpt")

    def learner(n_passes: int, **kw):
        est = GLM("logistic", l1=1e-2, l2=0.0, n_passes=n_passes, random_state=0,
                  batch_size=100)
        return est.learner(X, y, average_from=20, **kw)

    whole = learner(3)
    whole.fit(progress=None)
    W = whole.model.modelmats[0].numpy()
    cut = learner(4, checkpoint=ck, max_steps=whole.step)  # 3 passes made, run not ended
    cut.fit(progress=None)
    assert cut.step == whole.step
    resumed = learner(3, checkpoint=ck)
    resumed.load(ck)
    resumed.set(n_passes=3, max_steps=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # start() trains nothing: meant here
        resumed.fit(progress=None)
    assert resumed.step == whole.step
    V = resumed.model.modelmats[0].numpy()
    assert np.count_nonzero(V) == np.count_nonzero(W) < W.size  # all 40 nonzero before
    np.testing.assert_allclose(V, W, rtol=1e-12, atol=1e-15)
