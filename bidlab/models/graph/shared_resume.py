"""PageRank resumed within a pass from a checkpoint file that ranks share:
:class:`SharedFileResume`.

A pass of blocks adds each block's share of the next scores to the totals, which a
checkpoint keeps, so a run resumed within the pass goes on adding to them. Ranks that share
one file (MPI: rank 0 writes it, every rank reads it) find there rank 0's share only, not
the whole's; resumed within a pass, they make that pass void: each rank sets the totals to
its own rows of the scores (their sum over the ranks is the scores, handed back unchanged),
and the next pass runs that iteration again, its change not measured twice
(``PageRankModel._start_iteration`` counts the void passes, which are no iterations).
The in-edge engine (one block of the whole graph a pass) makes void the rest of a pass
resumed within from a file written by a run in blocks, likewise. So does a run resumed
within a pass from a file of an earlier version, which kept no totals.

A learner in blocks scales the scores it loads to sum 1 (:meth:`SharedFileResume.restored`):
Gauss-Seidel sweeps leave them unscaled until the run converges, and its power iterations
keep whatever sum they start from. The in-edge engine keeps them as written: its sweeps
measure each change in the scale they were written in, as the run never stopped did.
"""

from __future__ import annotations

from typing import Any

from bidlab.learn.staging import Minibatch

__all__ = ["SharedFileResume"]

#: how far from 1 the loaded scores' sum may be before they are scaled (rounding: 1e-15)
_SUM_SLACK = 1e-9


class SharedFileResume:
    """What :class:`~bidlab.models.graph.model.PageRankModel` does about a pass in progress
    in a checkpoint shared by ranks (the module doc)."""

    _redo = False  # restored from a file shared by ranks: a pass in progress is redone
    _void = False  # this pass hands the scores back unchanged (it is run again next)
    _skipped = 0  # void passes so far, not counted as iterations
    _held = 0  # the rows this learner's data holds
    _totals_saved = True  # the loaded file kept the pass's totals (earlier versions' did not)

    def check_extra_state(self, saved: dict[str, Any]) -> None:
        """Note whether the file holds the pass's totals so far (before it is loaded)."""
        super().check_extra_state(saved)  # type: ignore[misc]
        self._totals_saved = "totals" in saved

    def restored(self, earlier: dict[str, Any]) -> None:
        """After a checkpoint was loaded: a learner in blocks scales the scores to sum 1
        (:meth:`_scale_loaded`); ranks sharing its file, and a learner whose file kept no
        totals, check the first block they train (:meth:`_void_pass`)."""
        super().restored(earlier)  # type: ignore[misc]
        if not self.pull:  # type: ignore[attr-defined]  (sweeps measure from the file's)
            self._scale_loaded()
        self._redo = self.shares_checkpoint() or not self._totals_saved  # type: ignore[attr-defined]

    def _scale_loaded(self) -> None:
        """Scale the loaded scores, and the previous ones with them, to sum 1: a file
        written by Gauss-Seidel sweeps holds them unscaled (a learner in blocks resumed from
        it ended with scores summing to 1.03). Every engine's iteration is homogeneous, so
        the scale changes nothing else; a file of scores summing to 1 is left as it is."""
        x = self.modelmats[0].data  # type: ignore[attr-defined]
        total = float(x.sum())
        if total > 0.0 and abs(total - 1.0) > _SUM_SLACK:
            x *= 1.0 / total
            self._prev.data *= 1.0 / total  # type: ignore[attr-defined]

    def _void_pass(self, batch: Minibatch) -> bool:
        """At the first block after a restore (:meth:`restored`): whether this pass is
        void (it resumed within the pass), its totals then set to this rank's own rows of
        the scores."""
        self._redo = False
        self._void = batch.index > 0
        if self._void:
            T, x, a = self.updatemats[0].data, self.modelmats[0].data, self.first_row
            T.fill(0)
            self.xp.copyto(T[:, a:a + self._held], x[:, a:a + self._held])
        return self._void
