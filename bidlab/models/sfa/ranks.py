"""After an SFA run on ranks: each rank's users gathered onto every rank, so that a
recommender saved by rank 0 (``bidlab train sfa --ranks N --save PATH``) answers for every
user of the data, not only for rank 0's share of them (:meth:`SFA.gather_ranks`).

A factor model's per-user rows (:class:`~bidlab.learn.rowstate.RowState`) and the ratings
it filters recommendations by (``train_``) are each rank's own during training; the item
factors are the same on every rank. :func:`gather_users` puts the ranks' users together
in rank order (their global order: ranks hold contiguous shares), in one allreduce of
zero-padded arrays once a run has ended.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.learn.rowstate import RowState

__all__ = ["gather_users"]


def gather_users(comm: Any, est: Any) -> None:
    """Give the fitted SFA ``est`` (on every rank of ``comm``) the users of every rank: its
    model's user rows, ``train_`` and ``n_users_``. Every rank calls it, with the ratings
    it trained on; nothing happens on one rank."""
    if comm.size == 1:
        return
    W, S = est.model_.W, est.train_.tocsr()
    m, f = W.values.shape
    sizes = np.zeros((2, comm.size))
    sizes[:, comm.rank] = (m, S.nnz)
    comm.allreduce([sizes], "sum")
    n, nnz = (int(v) for v in sizes.sum(axis=1))
    a, p = (int(v) for v in sizes[:, :comm.rank].sum(axis=1))
    rows = np.zeros((n, f + 2))  # the factors, the seen flag, the ratings per user
    rows[a:a + m, :f] = backend.to_host(W.values.data)
    rows[a:a + m, f] = backend.to_host(W.seen.data)[:, 0]
    rows[a:a + m, f + 1] = np.diff(S.indptr)
    entries = np.zeros((2, nnz))  # the ratings and their items
    entries[:, p:p + S.nnz] = (S.data, S.indices)
    comm.allreduce([rows, entries], "sum")
    whole = RowState(n, f, W.values.dtype, W.xp)
    whole.values.data[...] = W.xp.asarray(rows[:, :f].astype(W.values.dtype))
    whole.seen.data[...] = W.xp.asarray(rows[:, f:f + 1].astype(np.int8))
    indptr = np.concatenate([[0], np.cumsum(rows[:, f + 1])]).astype(S.indptr.dtype)
    est.train_ = sp.csr_matrix((entries[0].astype(S.dtype), entries[1].astype(
        S.indices.dtype), indptr), shape=(n, S.shape[1]))
    est.model_.W = whole
    est.n_users_ = n
