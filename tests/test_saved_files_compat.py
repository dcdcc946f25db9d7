"""Files saved by bidlab 0.1 (estimators and learner checkpoints) still load and predict.

``tests/fixtures/v0_1`` holds small files written by the 0.1 code, before the model families
moved into packages, and ``expected.json`` the numbers that code computed from them. A module
move or a renamed class must keep every one of them loadable with the same numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.models import GLM, LDA, KMeans, LDAGibbs, load

FIXTURES = Path(__file__).parent / "fixtures" / "v0_1"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def _data():
    """The data the fixtures were written from (the same seed and calls)."""
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.4, (60, 40)).astype(np.float64))
    Xd = rng.standard_normal((80, 5))
    y = (Xd[:, 0] + 0.3 * rng.standard_normal(80) > 0).astype(int)
    return X, Xd, y


@pytest.mark.parametrize("name, cls", [("lda", LDA), ("lda_gibbs", LDAGibbs), ("glm", GLM),
                                       ("kmeans_lloyd", KMeans), ("kmeans_minibatch", KMeans)])
def test_an_estimator_saved_by_0_1_loads_with_the_same_numbers(name, cls):
    X, Xd, _ = _data()
    path = FIXTURES / f"{name}.bidlab"
    for est in (load(path), cls.load(path)):
        assert type(est) is cls
        want = EXPECTED[name]
        if name == "lda":
            got = est.transform(X[:4])
            np.testing.assert_allclose(got, want["transform"], rtol=1e-6)
        elif name == "lda_gibbs":
            np.testing.assert_allclose(est.components_[:, :6], want["components"], rtol=1e-6)
        elif name == "glm":
            np.testing.assert_allclose(est.predict_proba(Xd[:5]), want["proba"], rtol=1e-6)
        else:
            np.testing.assert_allclose(est.transform(Xd[:5]), want["transform"], rtol=1e-6)


@pytest.mark.parametrize("name", ["lda", "glm", "kmeans"])
def test_a_learner_checkpoint_written_by_0_1_restores(name):
    X, Xd, y = _data()
    if name == "lda":
        lrn = LDA(3, n_passes=2, random_state=0, batch_size=10).learner(X)
    elif name == "glm":
        lrn = GLM("logistic", n_passes=2, random_state=0, batch_size=10).learner(Xd, y)
    else:
        lrn = KMeans(3, algorithm="minibatch", random_state=0, batch_size=10).learner(Xd)
    lrn.load(str(FIXTURES / f"{name}_learner.ckpt"))
    want = EXPECTED[f"{name}_learner"]
    assert lrn.step == want["step"]
    got = backend.to_host(lrn.model.modelmats[0].data).ravel()[:8]
    np.testing.assert_allclose(got, want["modelmat0"], rtol=1e-6)
    if name == "lda":  # its counters, then packed in a float matrix, come back as integers
        assert lrn.model.counters() == {"n_batches": 12, "n_docs_seen": 120,
                                        "n_passes_done": 2}


@pytest.mark.parametrize("old", ["bidlab.models.lda.gibbs.LDAGibbsModel",
                                 "bidlab.models.lda_gibbs.LDAGibbsModel"])
def test_an_engine_moved_to_its_own_module_loads_under_its_earlier_name(old):
    from bidlab.learn.persistable import lookup
    from bidlab.models.lda.gibbs_model import LDAGibbsModel

    assert lookup(old) is LDAGibbsModel
