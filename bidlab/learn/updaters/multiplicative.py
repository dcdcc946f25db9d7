"""Multiplicative updaters for nonnegative factors (NMF): IncMult, OnlineMult and BatchMult.

The model writes, for each matrix ``i`` these updaters move, a numerator and a denominator
statistic (``updatemats[i] = {"num": N, "den": D}``, both Mats of the model matrix's shape,
nonnegative), e.g. NMF's ``W.T @ X`` and ``W.T @ W @ H`` for the factor ``H`` of
``X ~ W @ H``. The step is Lee and Seung's ``m <- m * N / max(D, epsilon)``, which keeps a
nonnegative ``m`` nonnegative.

=========  ==================================================================================
BatchMult  sums ``N`` and ``D`` over a pass's minibatches and takes one step at the pass end
           (the classic multiplicative update of the whole data; a full-batch model hands
           over the pass's totals at its last block instead).
IncMult    keeps running statistics, blended at each minibatch with a decaying weight
           ``r = min(1, (t0 / t) ** power)``, ``t = 1, 2, ...``: ``N <- (1 - r) N + r num``,
           ``D <- (1 - r) D + r den``, then steps ``m <- m * N / max(D, epsilon)`` (BIDMach's
           IncMult: an online NMF whose step forgets old minibatches slowly). Its running
           ratio mixes statistics of earlier values of ``m`` and is applied to the current
           ``m`` at every minibatch, so where ``N / D`` stays above 1 ``m`` grows without
           bound: NMF's online method uses OnlineMult.
OnlineMult keeps running averages of the minibatches' step *targets*:
           ``A <- (1 - r) A + r m * num``, ``B <- (1 - r) B + r den``, then sets
           ``m <- A / max(B, epsilon)`` (the online multiplicative update of Lefevre, Bach and
           Fevotte, as scikit-learn's ``MiniBatchNMF`` takes it). With ``m`` fixed this is
           ``m * sum(num) / sum(den)`` over the remembered minibatches, so ``m`` stays where
           the batch update would; ``r = (t0 / (t0 + t)) ** power``, ``t = 1, 2, ...``,
           and before the first minibatch ``A = m * den``, ``B = den`` (the start ``m`` is
           remembered with weight ``1 - r``), so an entry whose first numerator is 0 (a
           feature absent from the first minibatch) shrinks but is not frozen at 0.
=========  ==================================================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.options import Option
from bidlab.learn.updaters.base import Updater
from bidlab.mat import Mat

__all__ = ["IncMult", "OnlineMult", "BatchMult"]

_EPSILON = Option("epsilon", float, 1e-9, "floor of the denominator statistic", low=0.0,
                  low_open=True)


class _Mult(Updater):
    """Shared by IncMult and BatchMult: the statistics, their check and the step."""

    STATS = ("num", "den")

    def check_stats(self, i: int) -> None:
        super().check_stats(i)
        for stat in self.STATS:
            self.stat_mat(i, stat, (self.model.modelmats[i].shape,))

    def init(self, model: Any) -> None:
        super().init(model)
        mm = model.modelmats
        self.num = self._per_mat(lambda i: backend.zeros_as(mm[i].data))
        self.den = self._per_mat(lambda i: backend.zeros_as(mm[i].data))

    def _step(self, i: int, num: Any, den: Any) -> None:
        """``m <- m * num / max(den, epsilon)``."""
        xp, m, tmp = self.xp, self.model.modelmats[i].data, self._tmp[i]
        xp.maximum(den, self.opts.epsilon, out=tmp)
        xp.divide(num, tmp, out=tmp)
        xp.multiply(m, tmp, out=m)

    def state(self) -> dict[str, Mat]:
        out = {f"num{i}": Mat(a) for i, a in enumerate(self.num) if a is not None}
        return out | {f"den{i}": Mat(a) for i, a in enumerate(self.den) if a is not None}


class IncMult(_Mult):
    """Incremental multiplicative step from running, decaying numerator and denominator
    statistics (see the module doc)."""

    OPTIONS = (
        Option("power", float, 0.3, "decay exponent of the blending weight (t0/t)**power",
               low=0.0),
        Option("t0", float, 1.0, "time offset: the weight is 1 until t exceeds t0", low=0.0,
               low_open=True),
        _EPSILON,
    )

    def rate(self) -> float:
        """The blending weight of the next update."""
        return min(1.0, (self.opts.t0 / (self.t + 1)) ** self.opts.power)

    def update(self, step: int) -> None:
        xp, r = self.xp, self.rate()
        for i in self.mats:
            u = self.model.updatemats[i]
            for run, new in ((self.num[i], u["num"].data), (self.den[i], u["den"].data)):
                tmp = self._tmp[i]
                xp.multiply(new, r, out=tmp)
                xp.multiply(run, 1.0 - r, out=run)
                xp.add(run, tmp, out=run)
            self._step(i, self.num[i], self.den[i])
        self.t += 1


class OnlineMult(_Mult):
    """Online multiplicative step from running averages of the minibatches' step targets
    ``m * num`` and denominators ``den`` (see the module doc): the step NMF's
    ``method="online"`` takes.

    Examples
    --------
    >>> from bidlab.learn.updaters.multiplicative import OnlineMult
    >>> up = OnlineMult(power=0.5)
    >>> up.opts.power, up.opts.t0, OnlineMult().opts.power
    (0.5, 1.0, 0.3)
    """

    OPTIONS = (
        Option("power", float, 0.3, "decay exponent of the blending weight "
               "(t0 / (t0 + t)) ** power", low=0.0),
        Option("t0", float, 1.0, "time offset of the blending weight (the start counts as "
               "t0 minibatches)", low=0.0, low_open=True),
        _EPSILON,
    )

    def rate(self) -> float:
        """The blending weight of the next update (below 1: the start is remembered)."""
        t0 = self.opts.t0
        return (t0 / (t0 + self.t + 1)) ** self.opts.power

    def update(self, step: int) -> None:
        xp, r = self.xp, self.rate()
        for i in self.mats:
            u, m, tmp = self.model.updatemats[i], self.model.modelmats[i].data, self._tmp[i]
            A, B, num, den = self.num[i], self.den[i], u["num"].data, u["den"].data
            if self.t == 0:  # remember the start: its own target, with the first den
                xp.multiply(m, den, out=A)
                B[...] = den
            xp.multiply(m, num, out=tmp)
            xp.multiply(tmp, r, out=tmp)
            xp.multiply(A, 1.0 - r, out=A)
            xp.add(A, tmp, out=A)
            xp.multiply(den, r, out=tmp)
            xp.multiply(B, 1.0 - r, out=B)
            xp.add(B, tmp, out=B)
            xp.maximum(B, self.opts.epsilon, out=tmp)
            xp.divide(A, tmp, out=m)
        self.t += 1


class BatchMult(_Mult):
    """One multiplicative step per pass from the pass's summed statistics (see the module
    doc); ``t`` counts minibatches."""

    OPTIONS = (_EPSILON,)

    def init(self, model: Any) -> None:
        super().init(model)
        if model.full_batch:  # the model hands over the pass's totals: no sums kept
            self.num = self.den = [None] * len(model.modelmats)
        self.count = 0
        self._count = np.zeros(1)  # the count as an array, summed with the sums

    def update(self, step: int) -> None:
        if not self.model.full_batch:
            xp, (first, second) = self.xp, self.STATS
            for i in self.mats:
                u = self.model.updatemats[i]
                xp.add(self.num[i], u[first].data, out=self.num[i])
                xp.add(self.den[i], u[second].data, out=self.den[i])
        self.count += 1
        self.t += 1

    def pass_statistics(self) -> list[Any]:
        """The pass's summed statistics (a full-batch model's totals) and the count:
        learners sharing the rows sum them, so every rank takes one step."""
        self._count[0] = self.count
        if self.model.full_batch:
            um, (first, second) = self.model.updatemats, self.STATS
            sums = [a for i in self.mats for a in (um[i][first].data, um[i][second].data)]
        else:
            sums = [a for i in self.mats for a in (self.num[i], self.den[i])]
        return [*sums, self._count]

    def statistics_combined(self) -> None:
        self.count = int(round(float(self._count[0])))

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_count", np.zeros(1))  # files written before it was kept
        super().__setstate__(state)

    def end_pass(self, pass_: int) -> None:
        if self.count == 0:
            return
        full, (first, second) = self.model.full_batch, self.STATS
        for i in self.mats:
            if full:
                u = self.model.updatemats[i]
                self._step(i, u[first].data, u[second].data)
            else:
                self._step(i, self.num[i], self.den[i])
                self.num[i].fill(0)
                self.den[i].fill(0)
        self.count = 0

    def counters(self) -> dict[str, int]:
        return {**super().counters(), "count": int(self.count)}

    def set_counters(self, values: dict[str, int]) -> None:
        super().set_counters(values)
        self.count = int(values.get("count", 0))
