"""An unfitted estimator answers ``dir()`` and ``hasattr`` for every attribute as
scikit-learn's do: a fitted attribute that is not there yet raises AttributeError (which
``hasattr``, IPython's tab completion and scikit-learn's ``__dir__`` expect), never
another error."""

from __future__ import annotations

import inspect

import pytest

import bidlab.models as models


def _estimators() -> list[type]:
    return [c for _, c in sorted(vars(models).items())
            if inspect.isclass(c) and hasattr(c, "fit") and hasattr(c, "get_params")]


@pytest.mark.parametrize("cls", _estimators(), ids=lambda c: c.__name__)
def test_every_attribute_of_an_unfitted_estimator_is_there_or_an_attribute_error(cls):
    est = cls()
    names = dir(est)  # scikit-learn's __dir__ reads every property
    assert "fit" in names
    for name in names:
        try:
            getattr(est, name)
        except AttributeError:
            pass  # a fitted attribute not there yet (or a NotFittedError)


def test_an_unfitted_bayesnet_has_no_temperature_log_yet():
    bn = models.BayesNet()
    assert not hasattr(bn, "temperature_log_")
    with pytest.raises(AttributeError, match="call fit.X. or learner.X. first"):
        _ = bn.temperature_log_
