"""IncNorm: the incremental moving average of online EM (online variational LDA)."""

from __future__ import annotations

from typing import Any

from bidlab import backend
from bidlab.learn.options import Option
from bidlab.learn.updaters.base import Updater
from bidlab.learn.updaters.sparse import form_sparse_updates

__all__ = ["IncNorm"]


class IncNorm(Updater):
    """Incremental moving average for online EM (online variational LDA).

    ``m <- (1 - r) m + r u`` with ``r = min(1, (t0 / t) ** power)`` and ``t = 1, 2, ...``
    updates. With ``isprob`` each row of ``u`` is first scaled to sum 1. The model's
    ``update`` writes the full-data estimate of the statistics into ``updatemats``.
    """

    OPTIONS = (
        Option("power", float, 0.7, "decay exponent of the averaging rate (t0/t)**power",
               low=0.0, vector=True),
        Option("t0", float, 1.0, "time offset: the rate is 1 until t exceeds t0", low=0.0,
               low_open=True, vector=True),
        Option("isprob", bool, False, "normalise each row of the update to sum 1 first"),
    )

    def init(self, model: Any) -> None:
        super().init(model)
        self.power = self._hyper("power")
        self.t0 = self._hyper("t0")
        self._rate = self._per_mat(
            lambda i: backend.empty((self.shapes[i][0], 1), self.dtype, self.xp))
        self._rowsum = self._per_mat(
            lambda i: backend.empty((self.shapes[i][0], 1), self.dtype, self.xp))

    def update(self, step: int) -> None:
        form_sparse_updates(self.model, self.mats)
        xp = self.xp
        t = float(self.t + 1)
        for i in self.mats:
            m, u = self.model.modelmats[i], self.model.updatemats[i]
            r, tmp = self._rate[i], self._tmp[i]
            xp.divide(self.t0[i], t, out=r)
            xp.power(r, self.power[i], out=r)
            xp.minimum(r, 1.0, out=r)
            src = u.data
            if self.opts.isprob:
                rs = self._rowsum[i]
                xp.sum(src, axis=1, keepdims=True, out=rs)
                xp.maximum(rs, xp.finfo(rs.dtype).tiny, out=rs)
                xp.divide(src, rs, out=tmp)
                src = tmp
            xp.subtract(src, m.data, out=tmp)
            xp.multiply(tmp, r, out=tmp)
            xp.add(m.data, tmp, out=m.data)
        self.t += 1
