"""Where a resumed run starts: a checkpoint's position as a row of a pass, not a minibatch.

A checkpoint records the next minibatch's pass, its index in the pass and its first row in
the pass's order (``"row"``). A run resumed with another batch size goes on from that row:
the sources that can (:class:`~bidlab.learn.datasource.MemorySource`,
:class:`~bidlab.learn.blocks.BlockSource`, :class:`~bidlab.learn.shards.ShardSource`, a
:class:`~bidlab.learn.datasource.BlendedSource` of them) cut the rest of that pass into
minibatches from the row on, numbered on from the checkpoint's index, so no row is skipped
or seen twice; any other source resumes where the row starts one of its minibatches, and
otherwise refuses with an error that names the batch sizes that fit.

:func:`check_row` checks the position against the data before
:func:`bidlab.learn.learner_state.restore` writes anything. A file written before
checkpoints kept the row resumes by its minibatch index, as it always did.
"""

from __future__ import annotations

from typing import Any

from bidlab.learn.checkpoint import CheckpointError

__all__ = ["resume_row", "check_row"]


def resume_row(src: Any, index: int, row: int) -> tuple[int, int]:
    """``(index, skew)`` that make ``row`` the first row of the next minibatch of ``src``
    (minibatch ``index`` of its pass by the checkpoint), ``skew`` being ``row - index *
    batch_size`` for a source that can start minibatches at any row, else 0 with the index
    of the minibatch that starts at ``row``. ValueError names why it cannot."""
    n, b = src.n_samples, src.batch_size
    if row < 0 or (n is not None and row >= n) or (row == 0) != (index == 0):
        raise ValueError(f"cannot resume minibatch {index} at row {row}: " + (
            f"this data has {n} rows per pass (different data?)" if row > 0 and index > 0
            else "only minibatch 0 starts at row 0"))
    if src._row_seek:
        return index, row - index * b
    if row % b:
        raise ValueError(
            f"{type(src).__name__} cannot resume a pass at row {row}: its minibatches start "
            f"at multiples of batch_size={b}. Resume with a batch size that divides {row} "
            "(e.g. the one the checkpoint was written with)")
    return row // b, 0


def check_row(path: str, progress: dict[str, Any], src: Any) -> None:
    """CheckpointError when a checkpoint's position (``progress``: its ``index`` and
    ``row``; no row: a file that resumes by minibatch index) cannot resume on ``src`` (a
    blended source's first source: its rows are the ones counted)."""
    row = progress.get("row")
    if row is None:
        return
    try:
        resume_row(src, progress["index"], row)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {path}: {exc}") from None
