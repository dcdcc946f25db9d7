"""Data by rank: each rank holds and trains on its own contiguous share of the rows.

The rows ``0..n-1`` are split into ``size`` contiguous ranges whose lengths differ by one
at most (:func:`shard_range`). Every rank must run the same number of minibatches per pass
(the learners meet at every sync point), so each rank's batch size is chosen to give the
same count (:func:`rank_batch_size`). :func:`shard` cuts matrices in memory;
:func:`read_rank_data` reads a data file (whole, then keeps its rows) or a shard folder
(only the shard files that overlap the rank's rows, so no rank holds the whole set).

Examples
--------
>>> shard_range(10, 0, 3), shard_range(10, 2, 3)
((0, 3), (6, 10))
>>> rank_batch_size(1000, 1, 2, 128)
125
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.learn.comm import shard_range

__all__ = ["shard_range", "rank_batch_size", "shard", "read_rank_data", "chosen_batch_size",
           "even_batch_size"]


def chosen_batch_size(est: Any, given: Any, n: int, size: int, default: int = 1000, *,
                      rows: Any = None, comm: Any = None) -> int:
    """The rows per minibatch of one rank, before :func:`rank_batch_size` evens the counts:
    ``given`` (a learner option), else the estimator's ``batch_size``, resolved against a
    rank's share of the ``n`` rows when it is a rule such as GLM's ``"auto"`` (the
    estimator's ``_batch_rows``). A ``batch_size`` of None is resolved as the estimator
    resolves it in single-process training (its ``_default_batch``: SFA's all users,
    LDA's default per device) on this rank's ``rows``, the largest answer of ``comm``'s
    ranks (a collective: every rank calls this alike), so that they agree; ``default``
    without ``rows`` or such a method.

    Examples
    --------
    >>> from bidlab.models import GLM
    >>> chosen_batch_size(GLM(), None, 2000, 2), chosen_batch_size(GLM(), 64, 2000, 2)
    (63, 64)
    """
    bs = given or getattr(est, "batch_size", None)
    if not bs:
        bs = _estimator_default(est, rows, size, comm) or default
    if isinstance(bs, str) and hasattr(est, "_batch_rows"):
        bs = est._batch_rows(-(-int(n) // max(1, int(size))))
    return int(bs)


def _estimator_default(est: Any, rows: Any, size: int, comm: Any) -> int | None:
    """The rows per minibatch ``est`` takes for ``batch_size=None`` on ``rows``, the largest
    over ``comm``'s ranks; None when it has no such rule or no ``rows`` are given."""
    ask = getattr(est, "_default_batch", None)
    if ask is None or rows is None:
        return None
    if size > 1 and comm is None:
        raise ValueError(f"chosen_batch_size: rows on {size} ranks need comm, the ranks' "
                         "communicator, to agree on one batch size: pass comm=")
    counts = getattr(est, "_counts", None)
    if callable(counts):  # LDA: asked on the counts it trains on, on its device
        rows = counts(rows, None)
    mine = int(ask(rows))
    if comm is None or comm.size == 1:
        return mine
    every = np.zeros(comm.size, np.int64)
    every[comm.rank] = mine
    comm.allreduce([every], "sum")
    return int(every.max())


def rank_batch_size(n: int, rank: int, size: int, batch_size: int) -> int:
    """The batch size that gives rank ``rank`` as many minibatches per pass as every other
    rank: ``ceil(largest share / batch_size)``, with its rows spread over them.

    Examples
    --------
    >>> [rank_batch_size(1001, r, 2, 100) for r in range(2)]
    [84, 84]
    """
    shares = [b - a for a, b in (shard_range(n, r, size) for r in range(size))]
    bs = _even_batch_size(shares, shares[rank], batch_size)
    if bs is None:
        batches = math.ceil(max(shares) / max(1, int(batch_size)))
        fits = even_batch_size(n, size, batch_size)
        raise ValueError(f"{n} rows on {size} ranks cannot make {batches} minibatches of "
                         f"batch_size {batch_size} on every rank: choose a batch_size that does "
                         f"(the nearest is {fits})")
    return bs


def even_batch_size(n: int, size: int, batch_size: int) -> int:
    """``batch_size`` when :func:`rank_batch_size` takes it on every rank, else the nearest
    one that it takes (what a batch size nobody asked for, a default or a rule such as
    GLM's ``"auto"``, becomes on ranks).

    Examples
    --------
    >>> even_batch_size(41, 2, 2), even_batch_size(41, 2, 5)
    (3, 5)
    """
    shares = [b - a for a, b in (shard_range(n, r, size) for r in range(size))]
    batch_size = max(1, int(batch_size))
    return next(b for d in range(max(shares) + 1) for b in (batch_size - d, batch_size + d)
                if b >= 1 and all(_even_batch_size(shares, m, b) for m in shares))


def _even_batch_size(shares: list[int], mine: int, batch_size: int) -> int | None:
    """The batch size that splits ``mine`` rows into as many minibatches as
    ``batch_size`` makes of the largest of ``shares``; None when none does."""
    batches = math.ceil(max(shares) / max(1, int(batch_size)))
    bs = math.ceil(mine / batches)
    return bs if math.ceil(mine / bs) == batches else None


def shard(comm: Any, *mats: Any) -> tuple[Any, ...]:
    """This rank's rows of each aligned matrix (``None`` passes through).

    Examples
    --------
    >>> from bidlab.learn.comm import SingleProcess
    >>> shard(SingleProcess(), np.arange(4.0))[0].shape
    (4,)
    """
    n = next(m.shape[0] for m in mats if m is not None)
    a, b = shard_range(n, comm.rank, comm.size)
    return tuple(None if m is None else m[a:b] for m in mats)


def read_rank_data(comm: Any, path: str, model: str | None = None,
                   min_df: int | float | None = None, max_df: int | float | None = None
                   ) -> tuple[Any, int]:
    """This rank's rows of the data at ``path`` (a ``bidlab.datasets.sniff.LoadedData``)
    and the total row count. A shard folder is read shard by shard, only the shards that
    hold the rank's rows; any other format is loaded whole, cut, and the rest dropped.
    The format is chosen as single-process ``bidlab train`` chooses it
    (:func:`bidlab.cli.train_data.sniff_data`: a file that fits several formats is read as
    ``model`` prefers); ``min_df`` and ``max_df`` bound a text folder's words.
    """
    from bidlab.cli.train_data import sniff_data
    from bidlab.datasets.sniff import LoadedData, load

    s = sniff_data(path, model, min_df, max_df)
    if s.format != "shards":
        data = load(s, min_df=min_df, max_df=max_df)
        X, y, w = shard(comm, data.X, data.y, getattr(data, "w", None))
        return _with(data, X, y, w), data.X.shape[0]
    return _read_shard_rows(comm, Path(s.path), LoadedData)


def _with(data: Any, X: Any, y: Any, w: Any) -> Any:
    import dataclasses

    return dataclasses.replace(data, X=X, y=y, w=w)


def _read_shard_rows(comm: Any, folder: Path, loaded: Any) -> tuple[Any, int]:
    from bidlab.learn.shards import _load_shard, read_manifest

    manifest = read_manifest(folder)
    n = int(manifest["n_samples"])
    a, b = shard_range(n, comm.rank, comm.size)
    pieces, at = [], 0
    for entry in manifest["shards"]:
        rows = int(entry["rows"])
        lo, hi = max(a, at), min(b, at + rows)
        if lo < hi:
            part = _load_shard(folder, entry, manifest["matrices"])
            pieces.append([m[lo - at:hi - at] for m in part])
        at += rows
    mats = []
    for j in range(len(manifest["matrices"])):
        got = [p[j] for p in pieces]
        mats.append(sp.vstack(got, format="csr") if sp.issparse(got[0]) else np.concatenate(got))
    mats += [None] * (3 - len(mats))
    y = mats[1]
    if y is not None and y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    return loaded(mats[0], y, mats[2]), n
