"""Files written by an earlier bidlab still load: a saved estimator and a learner checkpoint.

The fixtures in ``tests/fixtures`` were written before the updaters became a package (their
classes were then saved as ``bidlab.learn.updaters.<Name>``):

* ``glm_adagrad.bidlab``: ``GLM(link="logistic", updater="adagrad", n_passes=3,
  batch_size=20, random_state=0)`` fitted on 60 x 5 standard-normal float32 rows
  (``numpy.random.default_rng(0)``) and a random linear threshold target, then ``est.save``;
  ``glm_adagrad_proba.npy`` holds its ``predict_proba`` on those rows.
* ``lsq_adagrad.ckpt``: a learner checkpoint of ``LeastSquares`` with ``ADAGrad(lrate=0.05)``
  and ``L2Regularizer(l2=1e-3)``, 2 passes over 80 x 4 rows in minibatches of 20.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bidlab.learn import ADAGrad, L2Regularizer, Learner, MemorySource
from bidlab.learn.checkpoint import load_checkpoint
from bidlab.models import GLM
from bidlab.models.lsq import LeastSquares

FIXTURES = Path(__file__).parent / "fixtures"


def _glm_rows() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.standard_normal((60, 5)).astype(np.float32)


def test_saved_glm_with_adagrad_loads_and_predicts_as_when_saved():
    est = GLM.load(FIXTURES / "glm_adagrad.bidlab")
    assert isinstance(est.updater_, ADAGrad)
    assert est.updater_.t == 9  # 3 passes of 3 minibatches
    expected = np.load(FIXTURES / "glm_adagrad_proba.npy")
    np.testing.assert_allclose(est.predict_proba(_glm_rows()), expected, rtol=1e-6)
    X = _glm_rows()
    est.partial_fit(X, est.predict(X))  # the loaded updater trains on: one more pass
    assert est.updater_.t == 12


def test_learner_checkpoint_loads_and_training_continues():
    ck = load_checkpoint(FIXTURES / "lsq_adagrad.ckpt")
    rng = np.random.default_rng(1)
    X = rng.standard_normal((80, 4)).astype(np.float32)
    Y = (X @ rng.standard_normal((4, 2))).astype(np.float32)
    lr = Learner(LeastSquares(), MemorySource(X, Y, batch_size=20), ADAGrad(lrate=0.05),
                 [L2Regularizer(l2=1e-3)], n_passes=2)
    lr.load(str(FIXTURES / "lsq_adagrad.ckpt"))
    assert lr.step == 8 and lr.updater.t == 8
    np.testing.assert_array_equal(lr.model.modelmats[0].data, ck.arrays["model/0"])
    np.testing.assert_array_equal(lr.updater.sumsq[0], ck.arrays["updater/sumsq0"])
    lr.set(n_passes=3)
    lr.fit(progress=None)
    assert lr.step == 12
    assert np.all(np.isfinite(lr.model.modelmats[0].data))
