"""NMF's batch method resumed within a pass whose sums are not its own: :class:`PassRedo`.

With ``method="batch"`` the components take one step a pass from the pass's sums, and a
checkpoint written within a pass keeps the sums so far (:mod:`~bidlab.models.nmf.
pass_sums`), so a run resumed there goes on adding to them. Ranks that share one file (MPI:
rank 0 writes it, every rank reads it) find there rank 0's sums only, and a file loaded
without the row factors (that file, or one of an earlier version) holds sums made with row
factors that are gone. Resumed within a pass from such a file, the learner makes that pass
void: its minibatches are scored as :meth:`~bidlab.models.nmf.model.NMFModel.evaluate`
scores them, with nothing kept, the totals it hands the updater at its end leave the
components as they are, and it is not counted (``n_passes_done``, the errors of the
stopping rule); the next pass runs that step again, on every row. A file written during a
void pass says so (the ``pass_void`` counter), so a run resumed from it voids the pass too.
"""

from __future__ import annotations

from typing import Any

from bidlab.learn.staging import Minibatch

__all__ = ["PassRedo"]


class PassRedo:
    """What :class:`~bidlab.models.nmf.model.NMFModel` does about a pass in progress in a
    checkpoint loaded without its row factors (the module doc)."""

    _redo = False  # loaded without the row factors: a pass resumed within is void
    _void = False  # this pass leaves the components as they are (it is run again next)

    def rows_reset(self) -> None:
        super().rows_reset()  # type: ignore[misc]
        self._redo = True

    def redo_counters(self) -> dict[str, int]:
        """The counter a checkpoint keeps while a void pass is pending or in progress."""
        return {"pass_void": 1} if self._redo or self._void else {}

    def set_redo_counters(self, values: dict[str, int]) -> None:
        self._redo, self._void = bool(values.get("pass_void", 0)), False

    def void_pass(self, batch: Minibatch) -> bool:
        """Whether ``batch`` is of a void pass: decided at the first training minibatch
        after a restore (void when it resumes within a pass of the batch method), whose
        loaded sums are then dropped."""
        if self._redo:
            self._redo = False
            self._void = batch.index > 0 and self.full_batch  # type: ignore[attr-defined]
            if self._void:
                self._pass_sums().drop()  # type: ignore[attr-defined]
        return self._void

    def void_update(self, batch: Minibatch) -> float:
        """A minibatch of a void pass: its score, nothing kept; at the pass's last, totals
        that leave the components as they are, summed over any ranks (multiplicative:
        ``H * n / n``; coordinate descent: no component has rows to fit)."""
        score = self.evaluate(batch)  # type: ignore[attr-defined]
        if batch.last:
            u: dict[str, Any] = self.updatemats[0]  # type: ignore[attr-defined]
            if self.cd:  # type: ignore[attr-defined]
                u["num"].data.fill(0)
                u["gram"].data.fill(0)
            else:
                u["num"].data.fill(1)
                u["den"].data.fill(1)
        return score

    def end_void(self) -> bool:
        """At a pass end: whether the pass was void (it then takes no step and is not
        counted); the next pass is not."""
        void, self._void = self._void, False
        return void
