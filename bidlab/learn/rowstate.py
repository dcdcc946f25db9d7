"""Per-row state kept across passes: BIDMach's ``putBack``, keyed by global row id.

A model that keeps something for each data row between passes (a document's topic
weights for a warm start, a factor model's row factors, a Gibbs chain's state, a row's
distance bounds) holds it in a :class:`RowState`. Every minibatch carries the global ids of
its rows (:attr:`bidlab.learn.staging.Minibatch.ids`), the same every pass whether or not
the source shuffles and whether the rows come from memory or from shards, so the state
follows the rows. Its matrices are model state: a model lists them in ``extra_state`` and
they ride along in checkpoints.

Example::

    self.theta = RowState(n_rows=info.n_samples, width=k, dtype=np.float32, xp=xp)
    ...
    if self.theta.all_seen(batch):               # every row was trained on before
        self.theta.get(batch, out=theta_mb)      # its values from last time
    self.theta.put(batch, theta_mb)

A source that yields the same consecutive blocks every pass
(:class:`~bidlab.learn.blocks.BlockSource`) gives minibatches whose ids are one ascending
run; :meth:`RowState.view` then hands out the rows' values in place, so a model updates
them without a gather and a scatter::

    u = self.bounds.view(batch)                  # in place; None when not one run
    if u is None:
        self.bounds.get(batch, out=u_mb)         # else a gathered copy ...
        u = u_mb                                 # ... put back after the step
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numba
import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.kern.standin import stand_in
from bidlab.learn.staging import Minibatch

__all__ = ["RowState", "pack_rows", "row_state_keys", "unpack_rows"]


class RowState:
    """``width`` numbers for each of ``n_rows`` data rows, read and written a minibatch at
    a time by the rows' global ids.

    Parameters
    ----------
    n_rows
        rows in the data set (ids run from 0 to ``n_rows - 1``).
    width
        numbers kept per row.
    dtype
        their dtype.
    xp
        numpy or cupy (where the values live).

    Notes
    -----
    ``values`` (``n_rows`` x ``width``) and ``seen`` (``n_rows`` x 1, 1 where a row was
    written) are :class:`~bidlab.Mat` objects, so they checkpoint like model matrices.
    Reading and writing allocate nothing after the first minibatch of each size.
    """

    def __init__(self, n_rows: int, width: int, dtype: Any = np.float64, xp: Any = np) -> None:
        if int(n_rows) < 0 or int(width) < 1:
            raise ValueError(f"RowState needs n_rows >= 0 and width >= 1; got {n_rows}, "
                             f"{width}")
        self.xp = xp
        self.values = bl.Mat(backend.zeros((int(n_rows), int(width)), dtype, xp))
        self.seen = bl.Mat(backend.zeros((int(n_rows), 1), np.int8, xp))
        self._dev_ids: dict[int, Any] = {}  # per minibatch size, on a GPU
        self._seen_rows: dict[int, Any] = {}  # the minibatch's seen flags, per size

    @classmethod
    def for_source(cls, info: Any, width: int, dtype: Any, why: str) -> RowState:
        """Zero state for every row of the source ``info`` describes (a
        :class:`~bidlab.learn.datasource.DataInfo`), where the source's data live.

        ``why`` says, in the error for a source of unknown size, why rows are kept
        (``"NMF keeps one row of factors per data row"``).

        Examples
        --------
        >>> from bidlab.learn import MemorySource
        >>> info = MemorySource(np.ones((5, 2))).info
        >>> RowState.for_source(info, 3, np.float32, "a model keeps rows").values.shape
        (5, 3)
        """
        if info.n_samples is None:
            raise ValueError(f"{why}, so it needs a source of known size (not an endless "
                             "stream)")
        return cls(int(info.n_samples), width, dtype, info.xp)

    @property
    def n_rows(self) -> int:
        return int(self.values.shape[0])

    def _ids(self, batch: Minibatch) -> Any:
        ids = batch.ids
        if ids is None:
            raise ValueError("this minibatch carries no row ids (a source outside the "
                             "spine?): per-row state needs them")
        n = int(batch.n)
        ids = ids[:n]
        if n and (int(ids.min()) < 0 or int(ids.max()) >= self.n_rows):
            raise ValueError(f"row ids {int(ids.min())}..{int(ids.max())} fall outside this "
                             f"RowState's {self.n_rows} rows: was it made for another data "
                             "set?")
        if self.xp is np:
            return ids
        dev = self._dev_ids.get(n)
        if dev is None:
            dev = self._dev_ids[n] = backend.empty((n,), np.int64, self.xp)
        dev.set(ids)
        return dev

    def all_seen(self, batch: Minibatch) -> bool:
        """True when every row of the minibatch was written before."""
        return self._all_seen(self._ids(batch))

    def _all_seen(self, ids: Any) -> bool:
        n = int(ids.shape[0])
        if n == 0:
            return True
        flags = self._seen_rows.get(n)
        if flags is None:
            flags = self._seen_rows[n] = backend.empty((n, 1), np.int8, self.xp)
        backend.take_into(self.seen.data, ids, out=flags, axis=0)  # no temporary per step
        return bool(flags.all())

    def view(self, batch: Minibatch) -> Any:
        """The minibatch rows' values as a view into the store (``batch.n`` x ``width``, a
        raw array: what is written there is kept), when their ids are one ascending run
        (an unshuffled source); None otherwise (use :meth:`get` and :meth:`put`). The rows
        count as written from then on."""
        ids = batch.ids
        n = int(batch.n)
        if ids is None or n == 0:
            return None
        a = batch.run if batch.run >= 0 else run_start(ids[:n])
        if a < 0 or a + n > self.n_rows:
            return None
        self.seen.data[a : a + n] = 1
        return self.values.data[a : a + n]

    def get(self, batch: Minibatch, out: Any) -> bool:
        """Copy the minibatch rows' values into the first ``batch.n`` rows of ``out`` (a Mat
        or array); True when every one of them had been written before (rows never written
        read as zeros)."""
        n = int(batch.n)
        ids = self._ids(batch)
        dst = out.data if isinstance(out, bl.Mat) else out
        backend.take_into(self.values.data, ids, out=dst[:n], axis=0)
        return self._all_seen(ids)

    def put(self, batch: Minibatch, values: Any) -> None:
        """Store the first ``batch.n`` rows of ``values`` (a Mat or array) as the minibatch
        rows' state."""
        n = int(batch.n)
        ids = self._ids(batch)
        src = values.data if isinstance(values, bl.Mat) else values
        self.values.data[ids] = src[:n]
        self.seen.data[ids] = 1

    def clear(self) -> None:
        """Forget every row (all read as unseen zeros again)."""
        self.values.data.fill(0)
        self.seen.data.fill(0)

    def state(self, prefix: str) -> dict[str, bl.Mat]:
        """Its matrices, named for a model's ``extra_state``."""
        return {f"{prefix}.values": self.values, f"{prefix}.seen": self.seen}


def row_state_keys(names: Any) -> set[str]:
    """The names among a model's ``extra_state`` names that are :class:`RowState`
    matrices (``<prefix>.values`` beside ``<prefix>.seen``, as :meth:`RowState.state`
    names them).

    Examples
    --------
    >>> sorted(row_state_keys(["W.values", "W.seen", "previous"]))
    ['W.seen', 'W.values']
    """
    names = set(names)
    prefixes = {n[: -len(".seen")] for n in names if n.endswith(".seen")}
    return {n for p in prefixes for n in (f"{p}.values", f"{p}.seen") if n in names}


def pack_rows(state: dict[str, Any], name: str) -> None:
    """Replace the RowState ``state[name]`` (or None) of an object's pickled state by its
    two matrices, ``<name>_values`` and ``<name>_seen``: a RowState holds its array module,
    which neither pickles nor saves; :func:`unpack_rows` makes it again."""
    rows = state.pop(name)
    state[f"{name}_values"] = None if rows is None else rows.values
    state[f"{name}_seen"] = None if rows is None else rows.seen


def unpack_rows(state: dict[str, Any], name: str) -> RowState | None:
    """The RowState :func:`pack_rows` stored in ``state`` (its two entries removed)."""
    values, seen = state.pop(f"{name}_values", None), state.pop(f"{name}_seen", None)
    if values is None:
        return None
    rows = RowState(values.shape[0], values.shape[1], values.dtype, values.xp)
    rows.values <<= values
    rows.seen <<= seen
    return rows


@numba.njit(cache=True, nogil=True)
def run_start(ids: np.ndarray) -> int:  # pragma: no cover - compiled
    """``ids[0]`` when ``ids`` are ``ids[0], ids[0] + 1, ...`` (one ascending run of
    non-negative ids), else -1."""
    a = ids[0]
    if a < 0:
        return -1
    for i in range(ids.shape[0]):
        if ids[i] != a + i:
            return -1
    return a


class RowStatePickling:
    """Pickling for a model that keeps one :class:`RowState` attribute (``ROW_STATE``) and
    scratch buffers (``SCRATCH``: attribute name -> a function making its empty value):
    the row state travels as its two matrices (:func:`pack_rows`), the buffers are left
    out and start empty again, and device arrays come back as numpy where no GPU is.

    Examples
    --------
    >>> import pickle
    >>> class Rows(RowStatePickling):
    ...     ROW_STATE = "W"
    ...     SCRATCH = {"_buf": dict}
    >>> r = Rows(); r.W = RowState(3, 2, np.float32, np); r._buf = {"x": 1}
    >>> back = Rows.__new__(Rows)
    >>> back.__setstate__(pickle.loads(pickle.dumps(r.__getstate__())))
    >>> back.W.values.shape, back._buf
    ((3, 2), {})
    """

    ROW_STATE: ClassVar[str] = "W"
    SCRATCH: ClassVar[dict[str, Callable[[], Any]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name, empty in self.SCRATCH.items():
            state[name] = empty()
        pack_rows(state, self.ROW_STATE)
        return backend.portable_state(state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = backend.restore_state(state)
        rows = unpack_rows(state, self.ROW_STATE)
        self.__dict__.update(state)
        setattr(self, self.ROW_STATE, rows)
        for name, empty in self.SCRATCH.items():
            setattr(self, name, empty())


@stand_in(run_start)
def _run_start_arrays(ids: np.ndarray) -> int:
    """:func:`run_start` in numpy, run while it compiles (:mod:`bidlab.kern.standin`)."""
    a = int(ids[0])
    ok = a >= 0 and bool(np.array_equal(ids, np.arange(a, a + ids.shape[0])))
    return a if ok else -1
