"""A Lloyd pass's cluster sums (:class:`LloydPassSums`, a mixin of
:class:`~bidlab.models.kmeans.lloyd.LloydKMeansModel`).

Each block's rows are added into per-thread partials
(:class:`~bidlab.kern.kmeans.CenterWork`, zeroed at the pass's first block and reduced
once); the pass's last block writes the totals into the update matrices, which the
:class:`~bidlab.learn.Batch` updater puts in the model matrices at the pass end. A
checkpoint taken mid-pass keeps the sums so far as one float64 matrix, tagged with the
pass, the next block and the centre generation, so a resumed pass continues from them
(and, without them, knows its sums miss blocks).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.staging import Minibatch
from bidlab.mat import Mat

__all__ = ["LloydPassSums"]


class LloydPassSums:
    """The pass's cluster sums of a Lloyd model (see the module doc); it reads the model's
    ``modelmats``, ``updatemats``, ``xp``, ``_work``, ``_buf``, ``_pass_state`` and
    ``_generation`` and keeps the checkpointed copy in ``_pending`` (``_sums_loaded``: it
    holds a loaded checkpoint's sums, which a save before the next block writes again)."""

    _sums_loaded = False

    def _begin_sums(self, ps: dict[str, Any], batch: Minibatch) -> None:
        """Get the pass's cluster sums (per-thread partials, reduced once) ready for the
        block: zeroed at the pass's first block. A pass resumed mid-way continues from the
        sums a checkpoint kept (the model's ``extra_state``); without them its sums miss
        blocks and the pass end does not use them."""
        i = batch.index
        if i == 0:
            self._work.reset()
            ps["sums_ok"] = True
        elif ps["sums_next"] != i:
            ps["sums_ok"] = self._resume_sums(batch.pass_, i)

    def _end_sums(self, buf: dict[str, Any], ps: dict[str, Any], batch: Minibatch) -> None:
        """After the block's rows were added: the last block writes the pass's totals into
        ``updatemats`` (the model is full-batch: the Batch updater reads them at the pass end
        and never the other blocks' update matrices)."""
        ps["sums_next"] = batch.index + 1
        if batch.last:
            N = buf["N"]
            self._work.total_into(self.updatemats[0].data, N)
            self.updatemats[1].data[:, 0] = N

    def _pass_sums_state(self) -> Mat:
        """The current pass's sums so far as one float64 matrix for a checkpoint: sums |
        weights (k rows), then a row (pass, next block, valid, token)."""
        xp = self.xp
        shape = self._pending_shape()
        k, d = self.modelmats[0].shape
        P = self._pending
        if P is None or P.shape != shape:
            P = self._pending = Mat(backend.zeros(shape, np.float64, xp))
        ps, buf = self._pass_state, self._buf
        if ps is None and self._sums_loaded:  # loaded, and no block run since: kept as read
            return P
        A = P.data
        A.fill(0)
        if (ps is not None and ps["sums_ok"] and ps["sums_next"] is not None
                and self._work is not None and buf is not None):
            S, N = buf["S"], buf["N"]
            S.fill(0)
            N.fill(0)
            self._work.total(S, N)
            A[:k, :d] = S
            A[:k, d] = N
            A[k, :4] = xp.asarray([ps["pass"], ps["sums_next"], 1.0, float(self._generation)])
        return P

    def _pending_shape(self) -> tuple[int, int]:
        k, d = self.modelmats[0].shape
        return k + 1, max(d + 1, 4)

    def _resume_sums(self, pass_: int, index: int) -> bool:
        """Restart the accumulation from a checkpoint's sums of the blocks before ``index``
        of pass ``pass_``; False when it holds none for that point."""
        P = self._pending
        k, d = self.modelmats[0].shape
        if P is None or P.shape != self._pending_shape():
            return False
        A = P.data
        tag = [float(v) for v in backend.to_host(A[k, :4])]
        if tag != [float(pass_), float(index), 1.0, float(self._generation)]:
            return False
        self._work.seed(A[:k, :d], A[:k, d])
        return True
