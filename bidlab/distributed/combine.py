"""How ranks combine their models at a step sync point: the modes of :class:`MPIComm`.

Each mode combines the matrices a model declares ``"mean"`` (``Model.combine``) its own way;
matrices declared ``"sum"`` (sufficient statistics) are always summed exactly, and
``"local"`` ones are left alone.

* :class:`Average` -- allreduce of each matrix (BIDMach's ParLearner). With
  ``elastic=a`` it is synchronous elastic averaging: a centre variable ``c`` moves
  ``min(1, size * a)`` of the way to the ranks' mean, each rank ``a`` of the way to ``c``.
* :class:`Butterfly` -- butterfly mixing: at sync ``t`` each rank averages with the rank
  whose number differs in bit ``t mod log2(size)``; after log2(size) syncs every rank has
  mixed with every other (size a power of 2).
* :class:`SparseRows` -- only the rows that changed since the last sync travel: each rank's
  change ``x - x_last`` on the rows it touched, summed by :meth:`MPIComm.sparse_allreduce`
  and divided by ``size``; the result is the average's. "Rows" are indices along the last
  axis of a model matrix (a GLM's or an LDA model's features / words), which a minibatch of
  sparse text touches a few of. A sparse row costs its index as well as its values, so
  when the ranks' union of changed rows was so large at the last sparse sync that the
  rows cost more than the whole matrix, the next syncs of that matrix are dense
  allreduces (same result), with a sparse one again every :data:`REPROBE` syncs to see
  whether the union shrank (many minibatches between syncs touch most rows of a GLM on
  text; the decision uses only the union, the same on every rank).

Examples
--------
>>> comm = MPIComm(mode="butterfly")                 # doctest: +SKIP
>>> lrn = LDA(20).learner(X_mine, comm=comm, sync_every=2)   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Average", "Butterfly", "SparseRows", "MODES", "dense_allreduce_bytes"]


class _Mode:
    def __init__(self, comm: Any) -> None:
        self.comm = comm

    def combine(self, modelmats: Sequence[Any], how: Sequence[str]) -> None:
        sums = [m.data for m, h in zip(modelmats, how, strict=True) if h == "sum"]
        if sums:
            self.comm.allreduce(sums, "sum")
        means = [m.data for m, h in zip(modelmats, how, strict=True) if h == "mean"]
        if means:
            self.mix(means)

    def mix(self, arrays: list[Any]) -> None:
        raise NotImplementedError


class Average(_Mode):
    """Allreduce mean (optionally elastic; see the module doc)."""

    def __init__(self, comm: Any) -> None:
        super().__init__(comm)
        self._centre: list[np.ndarray] | None = None

    def mix(self, arrays: list[Any]) -> None:
        a = self.comm.elastic
        if a == 0.0:
            self.comm.allreduce(arrays, "mean")
            return
        means = [np.array(x, copy=True) for x in arrays]
        self.comm.allreduce(means, "mean")
        if self._centre is None:  # the first sync: everyone starts at the mean
            self._centre = means
            for x, m in zip(arrays, means, strict=True):
                x[...] = m
            return
        beta = min(1.0, self.comm.size * a)
        for x, m, c in zip(arrays, means, self._centre, strict=True):
            x -= a * (x - c)
            c += beta * (m - c)


class Butterfly(_Mode):
    """Average with one partner per sync, bit ``t mod log2(size)`` of the rank flipped."""

    def __init__(self, comm: Any) -> None:
        super().__init__(comm)
        n = comm.size
        if n & (n - 1):
            raise ValueError(f"butterfly mixing needs a power-of-2 number of ranks; got {n} "
                             "(use mode='average' or 'sparse', or 2, 4, 8, ... ranks)")
        self.stages = max(1, n.bit_length() - 1)
        self.t = 0

    def mix(self, arrays: list[Any]) -> None:
        if self.comm.size == 1:
            return
        partner = self.comm.rank ^ (1 << (self.t % self.stages))
        self.t += 1
        for x in arrays:
            other = self.comm.exchange(x, partner)
            x += other
            x *= 0.5


#: :class:`SparseRows`: syncs of a matrix sent dense before a sparse one tries again
REPROBE = 8


class SparseRows(_Mode):
    """Changed rows only (Kylix-style sparse allreduce); equals :class:`Average`."""

    def __init__(self, comm: Any) -> None:
        super().__init__(comm)
        self._last: list[np.ndarray] | None = None
        self._touched = self._rows_seen = 0
        self._dense_left: list[int] = []  # per matrix: dense syncs before the next probe
        self.dense_syncs = 0  #: syncs of a matrix sent dense (rows would have cost more)

    @property
    def touched_fraction(self) -> float:
        """The share of model rows a rank sent, over the sparse syncs so far."""
        return self._touched / self._rows_seen if self._rows_seen else float("nan")

    def mix(self, arrays: list[Any]) -> None:
        if self._last is None:  # the first sync: a dense average makes the common start
            self.comm.allreduce(arrays, "mean")
            self._last = [np.array(x, copy=True) for x in arrays]
            self._dense_left = [0] * len(arrays)
            return
        inv = 1.0 / self.comm.size
        for i, (x, last) in enumerate(zip(arrays, self._last, strict=True)):
            xt, lt = _rows(x), _rows(last)
            delta = xt - lt
            touched = np.flatnonzero(np.any(delta != 0, axis=1))
            self._touched += touched.size
            self._rows_seen += xt.shape[0]
            if self._dense_left[i] > 0:  # every rank decided the same at the last probe
                self._dense_left[i] -= 1
                self.dense_syncs += 1
                self.comm.allreduce([x], "mean")  # last + the mean change: the same
                last[...] = x
                continue
            rows, summed = self.comm.sparse_allreduce(touched, delta[touched], xt.shape[0])
            lt[rows] += summed * inv
            x[...] = last
            if rows_cost_more(rows.size, xt.shape[0], xt.shape[1], x.itemsize):
                self._dense_left[i] = REPROBE


def rows_cost_more(union: int, n_rows: int, width: int, itemsize: int) -> bool:
    """Whether ``union`` changed rows of a matrix of ``n_rows`` rows of ``width`` values
    cost more sent as rows (a 4-byte index each, as :meth:`MPIComm.sparse_allreduce` sends
    below 2**31 rows) than the whole matrix.

    Examples
    --------
    >>> rows_cost_more(40, 100, 1, 4), rows_cost_more(60, 100, 1, 4)   # 8 B a row vs 4 B
    (False, True)
    >>> rows_cost_more(90, 100, 20, 4)     # wide rows: the index hardly counts
    False
    """
    return union * (4 + width * itemsize) > n_rows * width * itemsize


def _rows(a: np.ndarray) -> np.ndarray:
    """A 2-D view with the last axis's indices as rows."""
    return a.reshape(a.shape[0], -1).T if a.ndim >= 2 else a.reshape(-1, 1)


MODES = {"average": Average, "butterfly": Butterfly, "sparse": SparseRows}


def check_nest(nest: Sequence[int] | None, size: int) -> tuple[int, ...]:
    """The sparse allreduce's layer degrees, checked against the number of ranks."""
    if nest is None:
        return (size,)
    try:
        degrees = tuple(int(d) for d in nest)
    except (TypeError, ValueError):
        raise ValueError(f"nest must be a sequence of whole numbers (layer degrees); "
                         f"got {nest!r}") from None
    if not degrees or min(degrees) < 1 or int(np.prod(degrees)) != size:
        raise ValueError(f"nest={list(degrees)}: the layer degrees must be positive and "
                         f"multiply to the number of ranks, {size} (e.g. nest=[{size}] for "
                         "one layer)")
    return tuple(d for d in degrees if d > 1) or (1,)


def dense_allreduce_bytes(nbytes: int, size: int) -> int:
    """Bytes one rank sends in a dense allreduce of ``nbytes`` over ``size`` ranks by
    reduce-scatter + allgather (the schedule MPI libraries use for large messages):
    ``2 (size - 1) / size * nbytes``.

    Examples
    --------
    >>> dense_allreduce_bytes(1000, 2), dense_allreduce_bytes(1000, 1)
    (1000, 0)
    """
    return 0 if size == 1 else int(2 * (size - 1) * nbytes // size)
