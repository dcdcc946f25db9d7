"""``KMeans.fit_learner``: the live learner that ``bidlab train kmeans`` runs, ended as
``fit`` ends (every row labelled by the final centres: ``labels_``, ``inertia_``,
``n_iter_``, ``n_steps_``), so a model trained from the command line is what ``fit`` gives."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn import Learner
from bidlab.models.kmeans.lloyd import LloydKMeansModel

__all__ = ["KMeansFitLearner", "final_labels"]


class KMeansFitLearner:
    """The ``fit_learner`` of :class:`~bidlab.models.kmeans.estimator.KMeans`."""

    def fit_learner(self, X: Any, y: Any = None, **options: Any
                    ) -> tuple[Learner, Callable[[], None]]:
        """:meth:`learner` on ``X``, and the step to call once its training is over: it
        labels every row by the final centres and sets ``labels_``, ``inertia_``,
        ``n_iter_`` and ``n_steps_`` as ``fit`` does (``bidlab train`` runs this).

        Examples
        --------
        >>> import numpy as np
        >>> from bidlab.models import KMeans
        >>> X = np.random.default_rng(0).random((40, 2))
        >>> km = KMeans(3, random_state=0)
        >>> lrn, finish = km.fit_learner(X)
        >>> _ = lrn.fit(progress=None)
        >>> finish()
        >>> km.labels_.shape, km.inertia_ > 0
        ((40,), True)
        """
        sample_weight = options.get("sample_weight")
        lrn = self.learner(X, y, **options)  # type: ignore[attr-defined]

        def finish() -> None:
            Xv = self._data(X, reset=False)  # type: ignore[attr-defined]
            w = self._weights(sample_weight, Xv.shape[0])  # type: ignore[attr-defined]
            model = self.model_  # type: ignore[attr-defined]
            with self._threads():  # type: ignore[attr-defined]
                labels, inertia, n_iter = final_labels(model, lrn, Xv, w)
            self.labels_ = np.asarray(backend.to_host(labels))
            self.inertia_ = float(inertia)
            self.n_iter_ = int(n_iter)
            self.n_steps_ = int(lrn.step)
            self.distance_evaluations_ = int(model.distance_evaluations)

        return lrn, finish


def final_labels(model: Any, lrn: Learner, X: Any, w: Any) -> tuple[Any, float, int]:
    """Every row of ``X`` labelled by ``model``'s final centres as ``predict`` labels them
    (:meth:`~bidlab.models.kmeans.model.KMeansModel.labels_of`; its per-row training state
    freed first), the inertia, and the iterations ``lrn`` trained (Lloyd updates, or
    passes of minibatch steps): what ``fit`` reports."""
    model.forget_rows()
    labels, inertia = model.labels_of(X, w)
    n_iter = (model.n_updates if isinstance(model, LloydKMeansModel)
              else math.ceil(lrn.samples / X.shape[0]))
    return labels, float(inertia), int(n_iter)
