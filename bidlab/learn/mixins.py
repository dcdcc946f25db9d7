"""Mixins: extra loss terms, their gradients, and the KPIs they report.

After ``model.update`` writes the score's ascent direction into ``model.updatemats``, each
mixin adds the ascent direction of its own term (a penalty is *subtracted*: the learner
maximises ``score - penalty``). Each mixin also reports the current value of its term
as a KPI (``l2``, ``l1``) in the learner's metrics, computed when metrics are published,
not every step.

Strengths are hyperparameters (a number, one per model-matrix row, or one per model
matrix), changeable live. ``mats`` limits a mixin to some model matrices (default all).
On the CPU each term's gradient is one fused pass (:mod:`bidlab.kern.steps`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern import steps
from bidlab.learn.hyper import Component, Hyper
from bidlab.learn.options import Option

__all__ = ["Mixin", "L1Regularizer", "L2Regularizer", "MIXINS"]


class Mixin(Component):
    """Base class: implement :meth:`gradient` and :meth:`score`.

    Args:
        mats: indices of the model matrices the term applies to (default: all).
    """

    kpi: str = "mixin"

    def __init__(self, mats: list[int] | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.mats = None if mats is None else [int(i) for i in mats]
        self.model: Any = None

    def init(self, model: Any) -> None:
        """Attach to an initialised model; allocate scratch space."""
        self.model = model
        mm = model.modelmats
        n = len(mm)
        idx = list(range(n)) if self.mats is None else self.mats
        bad = [i for i in idx if not 0 <= i < n]
        if bad:
            raise ValueError(f"{type(self).__name__}: mats={self.mats} names matrices "
                             f"{bad}, but the model has {n} (0..{n - 1})")
        self.idx = idx
        self.xp = mm[0].xp
        self.shapes = [m.shape for m in mm]
        self._tmp = {i: backend.empty_as(mm[i].data) for i in idx}

    def _hyper(self, name: str) -> Hyper:
        mm = self.model.modelmats
        return self.hyper(name, self.shapes, mm[0].xp, mm[0].dtype, self.model.row_groups)

    def gradient(self) -> None:
        """Add this term's ascent direction into ``model.updatemats``."""
        raise NotImplementedError

    def score(self) -> float:
        """The current value of the term (a KPI; a penalty is reported as a positive number)."""
        raise NotImplementedError


class L2Regularizer(Mixin):
    """Penalty ``l2 / 2 * sum(w ** 2)``; adds ``-l2 * w`` to the update."""

    kpi = "l2"
    OPTIONS = (Option("l2", float, 0.0, "L2 penalty strength (per-row/per-model vector ok)",
                      low=0.0, vector=True),)

    def init(self, model: Any) -> None:
        super().init(model)
        self.strength = self._hyper("l2")

    def gradient(self) -> None:
        if self.strength.is_zero():
            return
        xp = self.xp
        for i in self.idx:
            tmp, u = self._tmp[i], self.model.updatemats[i].data
            w = self.model.modelmats[i].data
            if xp is np and steps.subtract_scaled(u, w, self.strength[i]):
                continue
            xp.multiply(w, self.strength[i], out=tmp)
            xp.subtract(u, tmp, out=u)

    def score(self) -> float:
        total = 0.0
        xp = self.xp
        for i in self.idx:
            w, tmp = self.model.modelmats[i].data, self._tmp[i]
            xp.multiply(w, w, out=tmp)
            xp.multiply(tmp, self.strength[i], out=tmp)
            total += 0.5 * float(tmp.sum())
        return total


class L1Regularizer(Mixin):
    """Penalty ``l1 * sum(|w|)``; adds ``-l1 * sign(w)`` to the update."""

    kpi = "l1"
    OPTIONS = (Option("l1", float, 0.0, "L1 penalty strength (per-row/per-model vector ok)",
                      low=0.0, vector=True),)

    def init(self, model: Any) -> None:
        super().init(model)
        self.strength = self._hyper("l1")

    def gradient(self) -> None:
        if self.strength.is_zero():
            return
        xp = self.xp
        for i in self.idx:
            tmp, u = self._tmp[i], self.model.updatemats[i].data
            w = self.model.modelmats[i].data
            if xp is np and steps.subtract_scaled_sign(u, w, self.strength[i]):
                continue
            xp.sign(w, out=tmp)
            xp.multiply(tmp, self.strength[i], out=tmp)
            xp.subtract(u, tmp, out=u)

    def score(self) -> float:
        total = 0.0
        xp = self.xp
        for i in self.idx:
            tmp = self._tmp[i]
            xp.abs(self.model.modelmats[i].data, out=tmp)
            xp.multiply(tmp, self.strength[i], out=tmp)
            total += float(tmp.sum())
        return total


MIXINS: dict[str, type[Mixin]] = {"l1": L1Regularizer, "l2": L2Regularizer}
