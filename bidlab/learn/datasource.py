"""Data sources: streams of minibatches, samples as rows, copied into reused containers.

**Samples are rows** (the scikit-learn convention): a source holds one or more *aligned*
matrices with the same number of rows -- features first, then targets, sample weights,
... -- and a minibatch is ``batch_size`` consecutive rows of each (of a shuffled order
when ``shuffle=True``).

Every source is a stream: :meth:`DataSource.next` returns the next :class:`Minibatch`
(with its pass and its index in the pass) and passes follow one another until
``n_passes`` is reached (``None``, the default, repeats forever; the learner decides when
to stop). The last minibatch of a pass is shorter when ``batch_size`` does not divide the
number of samples; it gets its own cached container set (allocated once), so no data is
dropped and, after the first pass, nothing is allocated.

Sources here:

* :class:`MemorySource` -- numpy / scipy / CuPy / bidlab matrices in memory.
* :class:`BlendedSource` -- every minibatch mixes rows of two sources in a fixed fraction.
* :class:`bidlab.learn.shards.ShardSource` -- ``.npz`` shards on disk with background
  prefetch (see :mod:`bidlab.learn.shards`).

Bad input (checked in :mod:`bidlab.learn.source_inputs`): matrices that disagree in row
count (both counts named), empty data sets and non-2-D arrays raise ``ValueError``. **A
batch size larger than the data is clamped** to the number of samples with a
``UserWarning`` (so a small demo still trains).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.resume_position import resume_row
from bidlab.learn.source_inputs import (
    _as_matrix,
    _clamp_batch,
    check_aligned,
    check_seed,
    default_names,
)
from bidlab.learn.staging import MatSpec, Minibatch, Piece, Plan, Stager

__all__ = ["DataInfo", "DataSource", "MemorySource", "BlendedSource", "Minibatch",
           "as_source"]


@dataclass(frozen=True)
class DataInfo:
    """The shape of a source's data: what a model needs to initialise itself.

    Attributes
    ----------
    n_samples
        rows per pass (None when unknown).
    names
        one name per aligned matrix (``("X", "y")`` by default).
    specs
        one :class:`MatSpec` (columns, dtype, sparse) per matrix.
    device
        ``"cpu"`` or ``"gpu"``: where minibatch containers live.
    batch_size
        rows per full minibatch.
    """

    n_samples: int | None
    names: tuple[str, ...]
    specs: tuple[MatSpec, ...]
    device: str
    batch_size: int

    @property
    def n_features(self) -> int:
        """Columns of the first matrix (the features)."""
        return self.specs[0].cols

    @property
    def n_targets(self) -> int:
        """Columns of the second matrix (0 when there is none)."""
        return self.specs[1].cols if len(self.specs) > 1 else 0

    @property
    def dtype(self) -> np.dtype:
        return self.specs[0].dtype

    @property
    def xp(self) -> Any:
        """numpy or cupy, matching :attr:`device`."""
        return np if self.device == "cpu" else backend.cupy()

    @property
    def batches_per_pass(self) -> int | None:
        if self.n_samples is None:
            return None
        return math.ceil(self.n_samples / self.batch_size)


class DataSource:
    """Base class: a stream of minibatches copied into reused containers.

    Subclasses implement :meth:`_plan` (which rows make minibatch ``index`` of pass
    ``pass_``) and set ``self._info``; or override :meth:`_next_plan` for a stream that is
    not random-access. :meth:`next` stages the plan into the containers.
    """

    _info: DataInfo
    _host_data: bool = True

    def __init__(self, batch_size: int, n_passes: int | None, device: str | None) -> None:
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or (
                batch_size < 1):
            raise ValueError(f"batch_size must be an int >= 1; got {batch_size!r}")
        if n_passes is not None and (not isinstance(n_passes, (int, np.integer)) or isinstance(
                n_passes, bool) or n_passes < 1):
            raise ValueError(f"n_passes must be an int >= 1 or None (repeat); got {n_passes!r}")
        if device not in (None, "cpu", "gpu"):
            raise ValueError(f"device must be 'cpu', 'gpu' or None (where the data is); "
                             f"got {device!r}")
        self.batch_size = int(batch_size)
        self.n_passes = None if n_passes is None else int(n_passes)
        self._device = device
        self._pass = 0
        self._index = 0
        self._skew: tuple[int, int] | None = None  # (pass, first row - index * batch_size)
        self._stager: Stager | None = None

    # -- description ----------------------------------------------------------------------
    @property
    def info(self) -> DataInfo:
        """Shapes, dtypes, device and batch size (see :class:`DataInfo`)."""
        return self._info

    @property
    def n_samples(self) -> int | None:
        return self._info.n_samples

    @property
    def batches_per_pass(self) -> int | None:
        return self._info.batches_per_pass

    @property
    def position(self) -> tuple[int, int]:
        """(pass, index) of the minibatch :meth:`next` returns next."""
        return self._pass, self._index

    @property
    def row(self) -> int:
        """The first row (in the pass's order) of the minibatch :meth:`next` returns next: a
        checkpoint records it, so a run resumed with another batch size goes on from it."""
        return self._first_row(self._pass, self._index)

    _row_seek = False  # whether seek() can start a pass's minibatches at any row

    def _first_row(self, pass_: int, index: int) -> int:
        skew = self._skew[1] if self._skew is not None and self._skew[0] == pass_ else 0
        return index * self.batch_size + skew

    # -- streaming ------------------------------------------------------------------------
    def seek(self, pass_: int = 0, index: int = 0, row: int | None = None) -> None:
        """Make minibatch ``index`` of pass ``pass_`` the next one (used to resume).

        ``row``: its first row in the pass's order (:attr:`row`), when that is not
        ``index * batch_size`` -- a pass checkpointed by a run with another batch size. The
        rest of that pass is then cut into ``batch_size`` rows from ``row`` on (numbered on
        from ``index``; the last one shorter), so no row is skipped or seen twice.
        """
        self._skew = None
        if row is not None and row != index * self.batch_size:
            index, skew = resume_row(self, index, int(row))
            if skew:
                self._pass, self._index = int(pass_), index
                self._skew = (self._pass, skew)
                return
        bpp = self.batches_per_pass
        if bpp is not None and index >= bpp:
            pass_, index = pass_ + index // bpp, index % bpp
        self._pass, self._index = int(pass_), int(index)

    def _plan(self, pass_: int, index: int) -> Plan:
        raise NotImplementedError

    def _next_plan(self) -> Plan | None:
        """The next plan of the stream, advancing the position; None when exhausted."""
        if self.n_passes is not None and self._pass >= self.n_passes:
            return None
        plan = self._plan(self._pass, self._index)
        if plan.last:
            self._pass, self._index = self._pass + 1, 0
        else:
            self._index += 1
        return plan

    def next(self) -> Minibatch | None:
        """The next minibatch (reused containers), or None when ``n_passes`` are done."""
        plan = self._next_plan()
        if plan is None:
            return None
        if self._stager is None:
            self._stager = Stager(list(self._info.specs), self._info.device, self._host_data,
                                  self.nnz_bound)
        return self._stager.stage(plan)

    def passes(self, n: int = 1):
        """Iterate over the minibatches of the next ``n`` passes (a convenience)."""
        stop = self._pass + n
        while self._pass < stop:
            b = self.next()
            if b is None:
                return
            yield b

    def nnz_bound(self, j: int, n: int) -> int | None:
        """The most stored entries ``n`` rows of sparse matrix ``j`` can hold (None: unknown).

        Sparse containers are sized for it when made, so they never grow later.
        """
        return None

    def use_rank(self, fold_seed: Any) -> None:
        """This source feeds one rank of several: ``fold_seed(seed)`` makes its random
        streams (the order it visits rows in) the rank's own. Nothing to do here."""

    def release(self) -> None:
        """Stop background work (prefetch threads) for now; :meth:`next` restarts it.

        The learner calls this when a run ends, so an idle learner holds no threads.
        """

    def close(self) -> None:
        """Release background resources (threads, files) for good."""
        self.release()

    def _set_batch_size(self, n: int) -> None:
        """Re-plan with a new batch size (only before the source has produced anything)."""
        if self._stager is not None:
            raise RuntimeError("cannot change the batch size of a source already in use")
        if self._info.n_samples:
            n = _clamp_batch(n, self._info.n_samples)
        self.batch_size = n
        i = self._info
        self._info = DataInfo(i.n_samples, i.names, i.specs, i.device, n)

    @property
    def container_sizes(self) -> list[int]:
        """Minibatch sizes that have a container set (for tests and diagnostics)."""
        return [] if self._stager is None else self._stager.sizes


# --------------------------------------------------------------------------- memory
class MemorySource(DataSource):
    """Minibatches of in-memory matrices (samples as rows), optionally shuffled per pass.

    Parameters
    ----------
    *mats
        aligned matrices -- features first, then targets, weights, ... Each is a
        numpy array (1-D becomes one column), a pandas DataFrame / Series or a list
        (converted with ``numpy.asarray``), a scipy sparse matrix (converted to CSR
        once), a CuPy array / cupyx sparse matrix, or a bidlab ``Mat`` / ``SMat``.
    batch_size
        rows per minibatch (clamped to the number of samples, with a warning).
    shuffle
        visit the rows in a new random order each pass (seeded by ``seed`` and
        the pass number, so a resumed run sees the same order).
    n_passes
        stop after this many passes (None: repeat forever).
    device
        ``"cpu"`` or ``"gpu"`` for the minibatch containers (default: where the
        data lives).
    names
        one name per matrix (default ``("X", "y", "w")``).
    """

    def __init__(self, *mats: Any, batch_size: int = 1000, shuffle: bool = False,
                 seed: int = 0, n_passes: int | None = None, device: str | None = None,
                 names: tuple[str, ...] | None = None) -> None:
        super().__init__(batch_size, n_passes, device)
        if not mats:
            raise ValueError("MemorySource needs at least one data matrix (the features)")
        names = tuple(names) if names is not None else default_names(len(mats))
        if len(names) != len(mats):
            raise ValueError(f"got {len(names)} names for {len(mats)} data matrices")
        raws, specs, hosts = [], [], []
        for i, (name, m) in enumerate(zip(names, mats, strict=True)):
            raw, spec, host = _as_matrix(m, i, name)
            raws.append(raw)
            specs.append(spec)
            hosts.append(host)
        if len(set(hosts)) > 1:
            raise TypeError("the data matrices live on different devices (some numpy/scipy, "
                            "some CuPy): put them all on one, e.g. with bidlab.backend.to_host")
        n = check_aligned(names, raws)
        self._mats = tuple(raws)
        self._host_data = hosts[0]
        dev = device or ("cpu" if hosts[0] else "gpu")
        if dev == "cpu" and not hosts[0]:
            raise ValueError("the data lives on the GPU but device='cpu' was asked for: move "
                             "it with bidlab.backend.to_host first")
        self.batch_size = _clamp_batch(self.batch_size, n)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(seed)
        self._order_pass: int | None = None
        self._top_nnz: dict[int, np.ndarray] = {}
        self._order: Any = None
        self._arange: np.ndarray | None = None  # 0..n-1, and the pass's order, kept
        self._perm: np.ndarray | None = None
        self._info = DataInfo(n, names, tuple(specs), dev, self.batch_size)

    _row_seek = True

    def use_rank(self, fold_seed: Any) -> None:
        self.seed = fold_seed(self.seed)
        self._order_pass = None

    def nnz_bound(self, j: int, n: int) -> int | None:
        m = self._mats[j]
        if not backend.is_sparse(m):
            return None
        top = self._top_nnz.get(j)
        if top is None:
            lengths = np.diff(backend.to_host(m.indptr)).astype(np.int64)
            top = self._top_nnz[j] = np.cumsum(np.sort(lengths)[::-1])
        return int(top[min(n, top.shape[0]) - 1])

    def _order_for(self, pass_: int) -> Any:
        if self._order_pass != pass_:
            n = self._info.n_samples
            if self._arange is None or self._arange.shape[0] != n:
                self._arange, self._perm = np.arange(n), np.empty(n, np.int64)
            perm = self._perm
            np.copyto(perm, self._arange)  # permutation(n) shuffles an arange: same order
            np.random.default_rng([self.seed, pass_]).shuffle(perm)
            if self._host_data:
                self._order = perm
            elif self._order is None or self._order.shape[0] != n:
                self._order = backend.cupy().asarray(perm)
            else:
                self._order.set(perm)
            self._order_pass = pass_
        return self._order

    def _plan(self, pass_: int, index: int) -> Plan:
        n, b = self._info.n_samples, self.batch_size
        start = self._first_row(pass_, index)
        stop = min(start + b, n)
        rows: Any = slice(start, stop)
        if self.shuffle:
            rows = self._order_for(pass_)[start:stop]
        return Plan([Piece(self._mats, rows)], pass_, index, stop >= n, start)


# --------------------------------------------------------------------------- blended
class BlendedSource(DataSource):
    """Each minibatch takes ``frac`` of its rows from ``a`` and the rest from ``b``.

    ``a`` sets the passes (a blended pass ends when ``a`` finishes one); ``b`` repeats
    as often as needed. Both must have the same matrices (columns, dtypes, dense/sparse)
    and live on the same side (host or GPU). Their batch sizes are set here:
    ``round(frac * batch_size)`` rows from ``a`` (at least 1) and the rest from ``b``.
    """

    def __init__(self, a: DataSource, b: DataSource, frac: float = 0.5,
                 batch_size: int | None = None, n_passes: int | None = None,
                 device: str | None = None) -> None:
        if not (isinstance(frac, (int, float)) and 0.0 < frac <= 1.0):
            raise ValueError(f"frac (the share of rows taken from the first source) must be a "
                             f"float in (0, 1]; got {frac!r}")
        bs = batch_size if batch_size is not None else a.batch_size
        super().__init__(bs, n_passes, device)
        ia, ib = a.info, b.info
        if [(s.cols, s.sparse, s.dtype) for s in ia.specs] != [
                (s.cols, s.sparse, s.dtype) for s in ib.specs]:
            raise ValueError(
                "blended sources must hold the same matrices: first has "
                f"{[(s.cols, s.dtype.name, 'csr' if s.sparse else 'dense') for s in ia.specs]}"
                ", second has "
                f"{[(s.cols, s.dtype.name, 'csr' if s.sparse else 'dense') for s in ib.specs]}")
        if a._host_data != b._host_data:
            raise TypeError("blended sources must both live on the host or both on the GPU")
        na = max(1, int(round(frac * self.batch_size)))
        nb = self.batch_size - na
        if ia.n_samples is not None and na > ia.n_samples:
            raise ValueError(f"frac * batch_size = {na} rows per minibatch from the first "
                             f"source, but it has only {ia.n_samples} samples")
        self.a, self.b, self.frac = a, b, float(frac)
        a._set_batch_size(na)
        if nb:
            b._set_batch_size(nb)
            nb = b.batch_size  # clamped to b's samples when it has fewer
        b.n_passes = None
        self._nb = nb
        self._host_data = a._host_data
        dev = device or ia.device
        n, bpp = ia.n_samples, a.batches_per_pass
        rows = None if n is None or bpp is None else n + bpp * nb
        self._info = DataInfo(rows, ia.names, ia.specs, dev, self.batch_size)

    @property
    def batches_per_pass(self) -> int | None:
        return self.a.batches_per_pass

    def nnz_bound(self, j: int, n: int) -> int | None:
        ba = self.a.nnz_bound(j, self.a.batch_size)
        bb = self.b.nnz_bound(j, self._nb) if self._nb else 0
        return None if ba is None or bb is None else ba + bb

    @property
    def row(self) -> int:
        """The first row of the first source (which sets the passes) in the next minibatch."""
        return self.a.row

    def seek(self, pass_: int = 0, index: int = 0, row: int | None = None) -> None:
        """:meth:`DataSource.seek`, ``row`` being the first source's (:attr:`row`)."""
        self.a.seek(pass_, index, row)
        self._pass, self._index = self.a.position
        done = pass_ * (self.a.batches_per_pass or 0) + index
        self.b.seek(0, done)  # b has served one piece per blended minibatch so far

    def _next_plan(self) -> Plan | None:
        if self.n_passes is not None and self.a.position[0] >= self.n_passes:
            return None
        pa = self.a._next_plan()
        if pa is None:
            return None
        pieces = list(pa.pieces)
        if self._nb:
            pb = self.b._next_plan()
            if pb is not None:
                pieces += [Piece(p.mats, p.rows, None) for p in pb.pieces]
        self._pass, self._index = self.a.position
        return Plan(pieces, pa.pass_, pa.index, pa.last, pa.start)

    def release(self) -> None:
        self.a.release()
        self.b.release()


def as_source(data: Any, batch_size: int = 1000, **kwargs: Any) -> DataSource:
    """A DataSource from a source (returned as is), a matrix or a tuple of aligned matrices."""
    if isinstance(data, DataSource):
        return data
    if isinstance(data, (tuple, list)):
        return MemorySource(*data, batch_size=batch_size, **kwargs)
    return MemorySource(data, batch_size=batch_size, **kwargs)
