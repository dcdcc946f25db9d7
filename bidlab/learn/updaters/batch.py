"""Batch: a pass's updates summed, applied once at the pass end (EM, k-means, full-batch
gradient ascent).

A **full-batch** model (``model.full_batch``: Lloyd k-means) accumulates a pass's statistics
itself and writes the totals into ``updatemats`` at the pass's last block; the updater then
reads them once at the pass end and keeps no sums of its own (the other blocks' update
matrices are never read, so the model need not fill them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.options import Option
from bidlab.learn.updaters.base import _LRATE, Updater
from bidlab.learn.updaters.sparse import form_sparse_updates
from bidlab.mat import Mat

__all__ = ["Batch"]


class Batch(Updater):
    """Once per pass: accumulate ``updatemats`` over the pass, then apply at its end.

    ``batch_mode="replace"`` (EM, k-means): the model matrices become the sums of the
    pass's updates (the model normalises them in its ``end_pass``). ``"step"``: one
    gradient step ``m += lrate * mean(u)`` per pass (full-batch gradient ascent). For a
    full-batch model the sums are the totals its ``updatemats`` hold at the pass end.
    """

    OPTIONS = (
        Option("batch_mode", str, "replace", "what a pass's summed updates do: replace the "
               "model, or step along their mean", choices=("replace", "step"), live=False),
        _LRATE,
    )

    def init(self, model: Any) -> None:
        super().init(model)
        mm = model.modelmats
        self.sums = self._per_mat(
            lambda i: None if model.full_batch else backend.zeros_as(mm[i].data))
        self.count = 0
        self._count = np.zeros(1)  # the count as an array, summed with the sums
        #: whether the last pass end applied the pass's sums (False: no minibatch of the
        #: pass was trained -- all held out -- and the model matrices were left as they were)
        self.applied = False
        self.lrate = self._hyper("lrate")

    def update(self, step: int) -> None:
        form_sparse_updates(self.model, self.mats)
        if not self.model.full_batch:
            xp, um = self.xp, self.model.updatemats
            for i in self.mats:
                xp.add(self.sums[i], um[i].data, out=self.sums[i])
        self.count += 1
        self.t += 1

    def inert_options(self) -> dict[str, str]:
        if self.opts.batch_mode != "replace":
            return {}
        return {"lrate": "the pass's result replaces the model (batch_mode='replace'); "
                         "lrate is the step of batch_mode='step'"}

    def pass_statistics(self) -> list[Any]:
        self._count[0] = self.count
        um, full = self.model.updatemats, self.model.full_batch
        if full and self.model.totals_reduced:  # the same on every rank already
            return [self._count]
        return [*(um[i].data if full else self.sums[i] for i in self.mats), self._count]

    def statistics_combined(self) -> None:
        self.count = int(round(float(self._count[0])))

    def end_pass(self, pass_: int) -> None:
        self.applied = self.count > 0
        if self.count == 0:
            return
        xp, full = self.xp, self.model.full_batch
        for i in self.mats:
            m = self.model.modelmats[i]
            s = self.model.updatemats[i].data if full else self.sums[i]
            if self.opts.batch_mode == "replace":
                xp.copyto(m.data, s)
            else:
                tmp = self._tmp[i]
                xp.multiply(s, 1.0 / self.count, out=tmp)
                xp.multiply(tmp, self.lrate[i], out=tmp)
                xp.add(m.data, tmp, out=m.data)
            if not full:
                s.fill(0)
        self.count = 0

    def state(self) -> dict[str, Mat]:
        return {f"sums{i}": Mat(s) for i, s in enumerate(self.sums) if s is not None}

    def counters(self) -> dict[str, int]:
        return {**super().counters(), "count": int(self.count)}

    def set_counters(self, values: dict[str, int]) -> None:
        super().set_counters(values)
        self.count = int(values.get("count", 0))
