"""Updaters: how a model's matrices move given each minibatch's ``updatemats``.

The model writes an ascent direction (a gradient of its score), sufficient statistics, or
the named statistics an updater declares (:attr:`Updater.STATS`) into ``model.updatemats``;
mixins add their terms; then the updater changes ``model.modelmats`` in place. All
arithmetic is raw ``xp`` ufuncs with ``out=`` into state allocated in :meth:`Updater.init`;
every hyperparameter (``lrate``, ``vexp``, ...) is a :class:`~bidlab.learn.hyper.Hyper`: a
number, one value per model-matrix row, or one per model matrix, changeable live. ``t``
counts the updates made so far (it is checkpointed, so a resumed run continues the
schedules where they were).

===========  ================================================================================
Batch        accumulates ``updatemats`` over a pass; at the pass end either replaces the model
             with the sums (``batch_mode="replace"``: EM-style sufficient statistics; the model
             normalises in its ``end_pass``) or takes one step ``lrate * mean`` (``"step"``).
IncNorm      moving average ``m <- (1 - r) m + r u`` with ``r = min(1, (t0 / t) ** power)``.
Grad         ``m <- m + lrate * (t0 / (t0 + t)) ** texp * u`` (+ momentum, iterate averaging).
ADAGrad      steps scaled by the running mean of squared updates (+ momentum, averaging).
BatchMult    ``m <- m * sum(num) / sum(den)`` once per pass (multiplicative, NMF).
BatchCD      one coordinate-descent sweep of a nonnegative factor's rows per pass from
             ``num`` = W^T X and ``gram`` = W^T W (hierarchical ALS, NMF's ``solver="cd"``).
IncMult      ``m <- m * N / D`` each minibatch, ``N``, ``D`` decaying running statistics
             (BIDMach's; the ratio of statistics of earlier iterates can run away).
OnlineMult   ``m <- A / B`` each minibatch, ``A``, ``B`` running averages of the step targets
             ``m * num`` and of ``den`` (online NMF, as MiniBatchNMF).
RunningMean  rows of the model kept as running weighted means with their counts, step
             ``1 / count`` (Sculley's minibatch k-means).
CG           a few conjugate-gradient steps per minibatch on SPD systems, warm-started (ALS).
PerMatrix    one updater per model matrix (``updater={"W": IncMult(), "H": CG()}``).
===========  ================================================================================

One module per job: :mod:`~bidlab.learn.updaters.base` (the base class),
:mod:`~bidlab.learn.updaters.sparse` (unformed sparse updates),
:mod:`~bidlab.learn.updaters.gradient`, :mod:`~bidlab.learn.updaters.incremental`,
:mod:`~bidlab.learn.updaters.batch`, :mod:`~bidlab.learn.updaters.multiplicative`,
:mod:`~bidlab.learn.updaters.coordinate`,
:mod:`~bidlab.learn.updaters.cg`, :mod:`~bidlab.learn.updaters.running_mean`,
:mod:`~bidlab.learn.updaters.per_matrix`. Files saved
when the updaters were one module name them ``bidlab.learn.updaters.<Class>``; those names
still load (:func:`bidlab.learn.persistable.alias`).
"""

from __future__ import annotations

from bidlab.learn.persistable import alias
from bidlab.learn.updaters.base import Updater
from bidlab.learn.updaters.batch import Batch
from bidlab.learn.updaters.cg import CG
from bidlab.learn.updaters.coordinate import BatchCD
from bidlab.learn.updaters.gradient import ADAGrad, Grad, _Stepper
from bidlab.learn.updaters.incremental import IncNorm
from bidlab.learn.updaters.multiplicative import BatchMult, IncMult, OnlineMult
from bidlab.learn.updaters.per_matrix import PerMatrix, as_updater
from bidlab.learn.updaters.running_mean import RunningMean
from bidlab.learn.updaters.sparse import SparseUpdate, form_sparse_updates, sparse_updates

__all__ = ["Updater", "Batch", "IncNorm", "Grad", "ADAGrad", "IncMult", "OnlineMult",
           "BatchMult", "BatchCD", "CG", "RunningMean", "PerMatrix", "as_updater", "UPDATERS",
           "SparseUpdate", "sparse_updates", "form_sparse_updates"]

UPDATERS: dict[str, type[Updater]] = {
    "grad": Grad, "adagrad": ADAGrad, "incnorm": IncNorm, "batch": Batch,
    "incmult": IncMult, "onlinemult": OnlineMult, "batchmult": BatchMult, "batchcd": BatchCD,
    "cg": CG, "runningmean": RunningMean,
}
"""The updaters chosen by name (``bidlab train --updater``, ``GLM(updater=...)``)."""

for _cls in (Updater, _Stepper, Grad, ADAGrad, IncNorm, Batch):
    alias(f"bidlab.learn.updaters.{_cls.__qualname__}", _cls)
