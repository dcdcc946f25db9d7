"""Every estimator takes ``random_state`` as scikit-learn's do: None, an int, or a numpy
``Generator`` / ``RandomState``; the same generator state gives the same model."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models import GLM, LDA, KMeans, LDAGibbs


def _data():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, (60, 20)).astype(float))
    return X, np.arange(60) % 2


def _fit(est, X, y):
    return est.fit(X, y) if isinstance(est, GLM) else est.fit(X)


def _result(est):
    return np.asarray(est.coef_ if isinstance(est, GLM) else
                      est.cluster_centers_ if isinstance(est, KMeans) else est.components_)


@pytest.mark.parametrize("make", [lambda rs: LDA(3, n_passes=2, random_state=rs),
                                  lambda rs: LDAGibbs(3, 5, n_passes=2, random_state=rs),
                                  lambda rs: KMeans(3, random_state=rs),
                                  lambda rs: GLM(n_passes=2, random_state=rs)],
                         ids=["LDA", "LDAGibbs", "KMeans", "GLM"])
def test_random_state_takes_ints_none_and_generators(make):
    X, y = _data()
    for rs in (None, 7, np.random.RandomState(1), np.random.default_rng(2)):
        _fit(make(rs), X, y)
    a = _result(_fit(make(np.random.default_rng(5)), X, y))
    b = _result(_fit(make(np.random.default_rng(5)), X, y))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="random_state.*numpy random generator. Got -1"):
        _fit(make(-1), X, y)


@pytest.mark.parametrize("make", [lambda: LDA(3, n_passes=2), lambda: LDAGibbs(3, 5, n_passes=2),
                                  lambda: KMeans(3), lambda: GLM(n_passes=2)],
                         ids=["LDA", "LDAGibbs", "KMeans", "GLM"])
def test_a_fitted_model_keeps_only_its_own_options(make):
    """After fit, the finished learner's run options are not the model's any more."""
    X, y = _data()
    est = _fit(make(), X, y)
    parts = (est.model_, est.__dict__.get("updater_"), *est.__dict__.get("mixins_", ()))
    for part in (p for p in parts if p is not None):
        names = set(part.opts.as_dict())
        assert not names & {"checkpoint", "n_passes", "max_steps", "val_every"}, (part, names)
        assert names == {s.name for s in part.option_table()} & names
    _fit(est, X, y)  # and it fits again


def test_every_estimator_takes_verbose_and_n_jobs():
    """The README's promise: ``verbose`` and ``n_jobs`` on every estimator."""
    import bidlab.models as models
    from bidlab.models.base import BidlabEstimator

    found = [cls for cls in vars(models).values() if isinstance(cls, type)
             and issubclass(cls, BidlabEstimator) and cls is not BidlabEstimator]
    assert {c.__name__ for c in found} >= {"GLM", "KMeans", "LDA", "LDAGibbs", "NMF", "SFA",
                                           "PageRank", "BayesNet"}
    for cls in found:
        params = cls().get_params()
        assert {"verbose", "n_jobs"} <= set(params), cls.__name__
