"""The live learner of the LDA estimators: ``LDA(...).learner(X)`` / ``LDAGibbs(...).learner(X)``.

:class:`LDALearner` is a :class:`bidlab.learn.Learner` on the estimator's own model
(:class:`~bidlab.models.lda.LDAModel` or :class:`~bidlab.models.lda.gibbs_model.LDAGibbsModel`)
that also reaches the Gibbs model's per-parameter temperatures (``set_temperature`` /
``temperature`` / ``temperature_log``): a change made while training runs takes effect at
the next minibatch and is logged with that minibatch's pass, index and number.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab.learn import Learner
from bidlab.models.lda.steering import TopicSteering

__all__ = ["LDALearner"]


class LDALearner(TopicSteering, Learner):
    """A :class:`bidlab.learn.Learner` for LDA, with the Gibbs model's temperatures.

    Attributes
    ----------
    estimator
        the estimator whose ``learner()`` made it (None when built directly).
    """

    def __init__(self, *args: Any, estimator: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.estimator = estimator

    # -- topic steering (bidlab.models.lda.steering) -------------------------------------
    def _steer_model(self) -> Any:
        if not self.model.initialised:
            self.init()
        return self.model

    def _steer_vocab(self) -> Any:
        est = self.estimator
        return None if est is None else est._steer_vocab()

    def _steer_docs(self) -> Any:
        mats = getattr(self.source, "_mats", None)
        return mats[0] if mats else None

    @property
    def has_temperature(self) -> bool:
        """True when the model has per-parameter temperatures (SAME Gibbs)."""
        return hasattr(self.model, "set_temperature")

    def set_temperature(self, value: float, topic: int | None = None,
                        word: int | None = None) -> None:
        """See :meth:`bidlab.models.LDAGibbs.set_temperature` (takes effect next minibatch)."""
        self._gibbs().set_temperature(value, topic=topic, word=word)

    @property
    def temperature(self) -> np.ndarray:
        """The k x vocabulary temperature matrix (a host copy)."""
        return self._gibbs().temperature()

    @property
    def temperature_log(self) -> list[dict[str, Any]]:
        """The temperature changes with the pass, index and minibatch each took effect at
        (the last 10,000, oldest first; see :mod:`bidlab.models.lda.temperature`)."""
        return list(self._gibbs().temperature_log)

    def _gibbs(self) -> Any:
        if not self.has_temperature:
            raise AttributeError(
                "per-parameter temperatures belong to the SAME Gibbs sampler: build the "
                "learner from bidlab.models.LDAGibbs")
        if not self.model.initialised:
            self.init()
        return self.model
