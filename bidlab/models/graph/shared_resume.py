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
resumed within from a file written by a run in blocks, likewise.
"""

from __future__ import annotations

from typing import Any

from bidlab.learn.staging import Minibatch

__all__ = ["SharedFileResume"]


class SharedFileResume:
    """What :class:`~bidlab.models.graph.model.PageRankModel` does about a pass in progress
    in a checkpoint shared by ranks (the module doc)."""

    _comm: Any = None
    _redo = False  # restored from a file shared by ranks: a pass in progress is redone
    _void = False  # this pass hands the scores back unchanged (it is run again next)
    _skipped = 0  # void passes so far, not counted as iterations
    _held = 0  # the rows this learner's data holds

    def bind(self, learner: Any) -> None:
        self._comm = learner.comm if learner.comm.size > 1 else None

    def restored(self, earlier: dict[str, Any]) -> None:
        """After a checkpoint was loaded: ranks sharing its file check the first block
        they train (:meth:`_void_pass`)."""
        super().restored(earlier)  # type: ignore[misc]
        comm = self._comm
        self._redo = comm is not None and not comm.file_keeps_rows

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
