"""One origin for the ranks of a distributed k-means learner: :class:`OriginVote`.

A learner alone trains on dense rows less their mean when they lie far from the origin
(:mod:`bidlab.models.kmeans.shift`). Ranks must measure their centres from one point, or
combining them (rank 0's start centres, the pass sums, the step means) mixes frames; no
rank sees the others' rows when its learner is made, and a collective there would wait for
learners that are made one after another in one thread. So each rank's estimator makes
what a lone learner would (its rows less their own mean, a copy, when they lie far; its
start centres in the data's coordinates, as rank 0 broadcasts them) and leaves a vote on
the model: before its first minibatch every rank adds up its rows' count, sum and squared
norms (one allreduce of d + 3 numbers), and the ranks take the mean of all their rows as
the origin by the rule of a lone learner on all of them, when every rank's rows lie far
(each then holds a copy to move in place, once); else none (every rank's rows back as
given). A rank of CSR rows has none: the ranks then train on their rows as given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.kmeans import row_norms_sq
from bidlab.models.kmeans.shift import far_point

__all__ = ["OriginVote", "row_sums"]


def row_sums(X: Any) -> tuple[Any, float] | None:
    """Dense ``X``'s column sums (float64, on its device) and the sum of its rows' squared
    norms; None for CSR rows."""
    if backend.is_sparse(X):
        return None
    return X.sum(axis=0, dtype=np.float64), float(row_norms_sq(X).sum(dtype=np.float64))


class OriginVote:
    """A rank's part in choosing the ranks' common origin (see the module doc).

    Parameters
    ----------
    comm
        the learner's communicator (several ranks).
    n
        this rank's rows.
    sums
        :func:`row_sums` of its rows (None: CSR rows).
    shift
        what its rows were moved by (float64 (d,), on their device), or None.
    rows
        the moved rows (this rank's own copy, moved in place by the vote), or None.
    """

    def __init__(self, comm: Any, n: int, sums: tuple[Any, float] | None, shift: Any,
                 rows: Any, d: int, dtype: Any) -> None:
        self.comm, self.n, self.sums, self.shift, self.rows = comm, n, sums, shift, rows
        self.d, self.dtype = d, np.dtype(dtype)

    def agree(self, xp: Any) -> np.ndarray | None:
        """The ranks' origin (float64 host array, or None), after one allreduce on every
        rank; this rank's rows are moved to it in place."""
        d = self.d
        vec = np.zeros(d + 3)
        vec[d] = self.n
        if self.sums is not None:
            vec[:d] = backend.to_host(self.sums[0])
            vec[d + 1] = self.sums[1]
            vec[d + 2] = float(self.rows is not None)
        buf = xp.asarray(vec)
        self.comm.allreduce([buf], "sum")
        vec = np.asarray(backend.to_host(buf), np.float64)
        origin = None
        if vec[d + 2] == self.comm.size:  # every rank's rows lie far, each has its copy
            origin = far_point(vec[:d], vec[d], float(vec[d + 1]), self.dtype)
        if self.rows is not None:
            step = np.asarray(backend.to_host(self.shift), np.float64) - (
                0.0 if origin is None else origin)
            if step.any():
                self.rows += backend.namespace(self.rows).asarray(step).astype(
                    self.rows.dtype)
        self.comm = self.rows = self.sums = None  # nothing held once agreed
        return None if origin is None else np.asarray(origin, np.float64)
