"""``GLM(standardize=...)`` for linear targets: ``fit`` trains each linear target on its
values divided by their standard deviation, and hands back weights for the values as given.

Why: ADAGrad moves a weight by about ``lrate`` a step whatever the size of its gradient, so
a linear target whose values spread over thousands (prices, counts) needs thousands of
times more steps to reach its weights than one on the unit scale. The defaults fit
``y = X @ beta`` plus noise to a training R^2 of 0.99 with ``y`` as given, 0.95 with
``y * 100``, 0.22 with ``y * 1000`` and 0.02 with ``y * 10_000``, where ``Ridge`` reaches
0.99 on each. Dividing a target by ``s`` divides the least-squares loss by ``s^2`` and the
minimising weights by ``s``, and ``l2 / 2 * |w|^2`` scales the same way, so the L2 problem
keeps its solution: training on ``y / s`` and multiplying the weights and bias by ``s``
afterwards is the same model, reached in the passes a unit-scale target needs. (``l1``
then applies to the weights of the scaled target, as ``l1`` / ``l2`` apply to the weights
of the standardised features.)

``fit`` scales a data column when ``standardize`` is not False, every model target that
learns it is linear (a column a classifier reads holds labels) and its values' standard
deviation exceeds :data:`LARGE_SPREAD`; a target on about the unit scale trains as given
(so a fixed ``lrate`` keeps its meaning there), and so does one of smaller spread, which
ADAGrad's steps and the averaging of its iterates handle (the same fit with ``y / 1000``:
0.99). The scales are kept as ``target_scale_`` (one per data column, 1 for the
columns not scaled; None: none scaled), so a warm-started ``fit`` continues on the same
scale. The held-out loss that ``tol`` checks and ``loss_curve_`` are measured on the
scaled values. ``learner()`` and a ``partial_fit`` that starts a model train on the
values as given; one that continues a fitted model trains on its scale.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LARGE_SPREAD", "TargetScale", "target_scale"]

#: ``fit`` scales a linear target whose values' standard deviation exceeds this, some way
#: below where fits as given degrade (the defaults, with the largest rate ``lrate="auto"``
#: tries, 10: ``y * 10``, deviation 27, 0.99; ``y * 100``, deviation 270, 0.95)
LARGE_SPREAD = 10.0


class TargetScale:
    """Each data column's divisor ``scale`` (q,): ``fit`` trains on ``Y[:, c] / scale[c]``."""

    def __init__(self, scale: np.ndarray) -> None:
        self.scale = np.asarray(scale, np.float64).reshape(-1)

    def apply(self, Y2: np.ndarray) -> np.ndarray:
        """A copy of the n x q targets ``Y2`` with each scaled column divided by its scale."""
        cols = np.flatnonzero(self.scale != 1.0)
        if Y2.dtype.kind in "biuf":
            out = Y2.astype(np.float64, copy=True)
            out[:, cols] /= self.scale[cols]
            return out
        out = Y2.copy()  # an object array (a mixed DataFrame): the labels stay as they are
        for c in cols:
            out[:, c] = np.asarray(Y2[:, c], np.float64) / self.scale[c]
        return out

    def turn(self, est: Any, forward: bool) -> None:
        """Turn the fitted GLM ``est``'s weights, biases and its updater's per-weight state
        (attached to the model) to the targets as given (``forward``) or back to the
        scaled targets."""
        model = est.model_
        if not model.initialised:
            return  # stopped before the model was made (e.g. in the rate pilot)
        t, lay = est.targets_, est.layout_
        per_col = self.scale[np.asarray(t.data_col)[lay.col_target]]
        if forward is False:
            per_col = 1.0 / per_col
        xp = model.xp
        s = xp.asarray(per_col.astype(model.dtype, copy=False))[:, None]
        for m in model.modelmats:
            m.data *= s
        updater = est.updater_
        if updater is None or getattr(updater, "model", None) is not model:
            return  # not attached: its state is made afresh when training starts
        # a weight's gradient scales with its target: ADAGrad's sums of squares by s^2,
        # velocities and a stopped run's running sum of iterates as the weights
        for name, mat in updater.state().items():
            mat.data[...] = mat.data * (s * s if name.startswith("sumsq") else s)


def target_scale(est: Any, Y2: np.ndarray, w: np.ndarray | None,
                 warm: bool) -> TargetScale | None:
    """The :class:`TargetScale` GLM ``est`` trains through on the n x q targets ``Y2``
    (rows weighted by ``w``), kept as ``target_scale_``: a warm start's kept one, else each
    column's (weighted) standard deviation where only linear targets learn it and it
    exceeds :data:`LARGE_SPREAD` (see the module doc); None when no column is scaled."""
    if warm:
        kept = est.__dict__.get("target_scale_")
        return None if kept is None else TargetScale(kept)
    est.target_scale_ = None
    t = est.targets_
    if est.standardize is False or Y2.shape[0] < 2:
        return None
    weights = None if w is None else np.asarray(w, np.float64).reshape(-1)
    if weights is not None and not weights.sum() > 0:
        return None
    links = np.asarray(t.links)
    scale = np.ones(t.q)
    for c in range(t.q):
        readers = links[np.asarray(t.data_col) == c]
        if readers.size == 0 or not (readers == "linear").all():
            continue
        col = np.asarray(Y2[:, c], np.float64)
        mean = np.average(col, weights=weights)
        with np.errstate(over="ignore"):
            sd = float(np.sqrt(np.average(np.square(col - mean), weights=weights)))
        if not np.isfinite(sd):  # squares past float64's range (values above ~1e154)
            u = float(np.abs(col).max())
            sd = u * float(np.sqrt(np.average(np.square(col / u - mean / u),
                                              weights=weights)))
        if sd > LARGE_SPREAD:
            scale[c] = sd
    if (scale == 1.0).all():
        return None
    est.target_scale_ = scale
    return TargetScale(scale)
