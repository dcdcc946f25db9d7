"""PageRank's record of the L1 change of each iteration: :class:`ResidualLog`.

The record grows with the iterations run (doubling, ``max_iter`` at most), so a run's
memory follows the iterations it takes, not ``max_iter``: a ``max_iter`` set high "to be
safe" (``10**9``, ``sys.maxsize``) costs nothing on a graph that converges in 30. A
checkpoint keeps the record at the length it had (files of earlier versions: ``max_iter``
long); the learner hands it back to :meth:`ResidualLog.restored` whatever its length
(``grown_state``), rather than checking it against the model's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ResidualLog"]

#: the record's length at the start of a run (``max_iter`` when that is less)
FIRST_LENGTH = 64


def empty_log(max_iter: int) -> np.ndarray:
    """A fresh record: NaN (not yet measured) for the first iterations."""
    return np.full(min(int(max_iter), FIRST_LENGTH), np.nan)


class ResidualLog:
    """The ``residuals`` of :class:`~bidlab.models.graph.model.PageRankModel` (the module
    doc): ``residuals[t - 1]`` is the L1 change of iteration ``t``, NaN where not measured;
    at least ``n_iter`` long."""

    #: extra_state names whose length varies: the learner's checkpoint loader hands the
    #: file's arrays to :meth:`restored` (``earlier``) instead of writing them in place
    grown_state = ("residuals",)
    residuals: np.ndarray
    n_iter: int

    def _log_change(self, t: int, r: float) -> None:
        """Record iteration ``t``'s change ``r`` (the record grown when it is full)."""
        res = self.residuals
        if t > res.shape[0]:
            self.residuals = res = _grown(res, t, int(self.opts.max_iter))  # type: ignore[attr-defined]
        res[t - 1] = r

    def restored(self, earlier: dict[str, Any]) -> None:
        """A checkpoint's record, whatever its length, as this model's (NaN-padded to
        ``n_iter`` when it holds fewer)."""
        saved = earlier.pop("residuals", None)
        super().restored(earlier)  # type: ignore[misc]
        if saved is not None:
            res = np.array(saved, dtype=np.float64).reshape(-1)
            self.residuals = _grown(res, self.n_iter, self.n_iter) if (
                self.n_iter > res.shape[0]) else res


def _grown(res: np.ndarray, t: int, cap: int) -> np.ndarray:
    """``res`` copied into a record at least ``t`` long: doubled, ``cap`` at most."""
    out = np.full(max(t, min(2 * res.shape[0], cap)), np.nan)
    out[: res.shape[0]] = res
    return out
