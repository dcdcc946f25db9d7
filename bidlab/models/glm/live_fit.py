"""``GLM.fit_learner``: the live learner that ``bidlab train glm`` runs, trained and ended
as ``fit`` trains and ends, so a model trained from the command line is what ``fit``
gives: on the standardised features (``standardize``, :mod:`~bidlab.models.glm.standardize`)
with the map folded into the weights at the end, and ``lrate_`` the rate the run ended
with (a run resumed from a checkpoint takes the checkpoint's, not a new pilot's pick).

:func:`through_fit_maps`: the maps a fitted GLM's ``fit`` trained through, for a
``partial_fit`` that continues its model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from bidlab.models.glm.standardize import Scaling, choose_scaling, dense_input
from bidlab.models.glm.target_scale import TargetScale

__all__ = ["fit_learner", "through_fit_maps"]


@contextlib.contextmanager
def through_fit_maps(est: Any, X: Any, Y2: np.ndarray) -> Iterator[tuple[Any, np.ndarray]]:
    """The host CSR features ``X`` (on the model's device) and targets ``Y2`` in the
    standardised features and scaled targets that ``est.fit`` trained through
    (``scaling_``, ``target_scale_``), with its model and updater turned to them inside
    the block and folded back after it, as a warm-started ``fit`` does; as given when
    ``fit`` kept no map (a model that ``partial_fit`` started takes the features as given).

    Continuing a model fitted through a map on the features as given would step its
    weights for features of large spread by about ``lrate`` as if they were on the unit
    scale: one ``partial_fit`` of 40 rows took breast cancer from 0.96 to 0.35 accuracy.
    """
    scaling = Scaling.from_dict(est.__dict__.get("scaling_"))
    kept = est.__dict__.get("target_scale_")
    tscale = None if kept is None else TargetScale(kept)
    X = X if scaling is None else scaling.apply(X)
    Y2 = Y2 if tscale is None else tscale.apply(Y2)
    if scaling is not None:
        scaling.to_standardized(est.model_, est.updater_)
    if tscale is not None:
        tscale.turn(est, forward=False)
    try:
        yield est._on_device(X), Y2
    finally:
        if scaling is not None:
            scaling.to_original(est.model_, est.updater_)
        if tscale is not None:
            tscale.turn(est, forward=True)


def fit_learner(est: Any, X: Any, y: Any, options: dict[str, Any]
                ) -> tuple[Any, Callable[[], None]]:
    """``est.learner`` on the features ``est.fit`` trains on (``standardize``, rows
    weighted alike), and the step that ends the training as ``fit`` does: it folds the
    map into the weights, keeps it as ``scaling_`` and reports the run's final rate as
    ``lrate_``. Until then the live model takes the standardised features (its
    checkpoints too: a resumed run makes the same map from the same rows). Call the step
    once, after the last run.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import GLM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(100.0, 20.0, (200, 3)); y = (X[:, 0] > 100).astype(int)
    >>> est = GLM(random_state=0)
    >>> lrn, finish = est.fit_learner(X, y)
    >>> _ = lrn.fit(progress=None)
    >>> finish()
    >>> est.scaling_ is not None and est.score(X, y) > 0.9
    True
    """
    est._validate_params()
    Xh = est._host_features(X, reset=True)
    scaling = choose_scaling(Xh, est.standardize, dense_input(X))
    learner = est.learner(Xh if scaling is None else scaling.apply(Xh), y, **options)

    def finish() -> None:
        est.scaling_ = None if scaling is None else scaling.as_dict()
        if scaling is not None:
            scaling.to_original(est.model_, est.updater_)
        rate = learner.opts.lrate  # one, or one per target: what lrate_ reports
        if np.size(rate) in (1, est.targets_.K):
            est.lrate_ = rate if np.ndim(rate) == 0 else np.asarray(rate).tolist()

    return learner, finish
