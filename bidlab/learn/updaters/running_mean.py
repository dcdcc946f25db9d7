"""RunningMean: rows of a model matrix kept as running weighted means (minibatch k-means).

The updater moves a pair of model matrices: ``means`` (k x d) and their ``counts``
(k x 1, the weight each row of ``means`` has absorbed). The model writes, per minibatch and
with the same shapes, the weighted ``sums`` (k x d) of the data rows given to each mean and
their total ``weights`` (k x 1). The step is Sculley's per-centre learning rate
``1 / count``::

    counts <- counts + weights
    means  <- means + lrate * (sums - weights * means) / counts

so with ``lrate`` 1 each row of ``means`` is exactly the weighted mean of every data row it
was given; ``lrate`` < 1 damps the steps. A model that moves a mean elsewhere (k-means
re-seeding a starved centre at a data row ``x``) writes the statistics of that jump: weight
``c' - c`` and sums ``(c' - c) m + c' (x - m)`` take the mean from ``m`` to ``x`` with count
``c'``.

Example::

    class Means(Model):
        mat_names = ("means", "counts")

        def default_updater(self, **options):
            return RunningMean(**options)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.updaters.base import _LRATE, Updater

__all__ = ["RunningMean"]


class RunningMean(Updater):
    """Running weighted means and their counts (see the module doc): the first model
    matrix it moves holds the means, the second their counts (one column, a row per
    mean); ``updatemats`` hold the minibatch's sums and weights in the same shapes.

    Example::

        Learner(model, source, updater=RunningMean(lrate=0.5))   # damped steps
    """

    OPTIONS = (dataclasses.replace(_LRATE, default=1.0),)
    _SCRATCH = ("_tmp", "_rate")

    def init(self, model: Any) -> None:
        super().init(model)
        mats = self.mats
        if len(mats) != 2:
            raise ValueError(f"RunningMean moves two model matrices (means, counts); it was "
                             f"given {len(mats)}: give it the pair, e.g. updater="
                             "RunningMean() for a model of exactly those two")
        (k, _), counts = self.shapes[mats[0]], self.shapes[mats[1]]
        if counts != (k, 1):
            raise ValueError(f"RunningMean: the counts (model matrix "
                             f"{model.mat_name(mats[1])!r}) must be {k} x 1, one per row of "
                             f"the means; got {counts[0]} x {counts[1]}")
        self.lrate = self._hyper("lrate")

    def _new_scratch(self) -> None:
        super()._new_scratch()
        self._rate: Any = None  # k x 1: lrate / count, made at the first update

    def update(self, step: int) -> None:
        xp = self.xp
        i, j = self.mats
        mm, um = self.model.modelmats, self.model.updatemats
        M, c = mm[i].data, mm[j].data
        S, n = um[i].data, um[j].data
        xp.add(c, n, out=c)
        r = self._rate
        if r is None:
            r = self._rate = backend.empty_as(c)
        xp.maximum(c, 1e-300 if c.dtype == np.float64 else 1e-30, out=r)
        xp.divide(self.lrate[i], r, out=r)
        tmp = self._tmp[i]
        xp.multiply(M, n, out=tmp)
        xp.subtract(S, tmp, out=tmp)
        xp.multiply(tmp, r, out=tmp)
        xp.add(M, tmp, out=M)
        self.t += 1
