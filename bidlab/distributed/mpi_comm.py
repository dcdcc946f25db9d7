"""The MPI communicator: a learner's sync points over mpi4py, one process per rank.

:class:`MPIComm` implements :class:`bidlab.learn.comm.Communicator` (allreduce sum / mean,
broadcast, any_of) over an ``mpi4py`` communicator, plus :meth:`MPIComm.sparse_allreduce`,
the sum of (row index, values) blocks that each rank holds for a few rows of a large matrix.
How the model is combined at a step sync point is the communicator's ``mode``
(:mod:`bidlab.distributed.combine`): ``"average"`` (an allreduce of every matrix),
``"butterfly"`` (one partner per sync) or ``"sparse"`` (only the rows that changed).

It also carries the group's commands (:meth:`steer`: pause and option changes made on rank
0 reach every rank at the same minibatch boundary) and its checkpoints (rank 0 writes one
file, every rank reads it, so a run resumes on any number of ranks; each rank's per-row
state is its own and not in it, so a resumed rank starts its rows afresh; the updater's
state is rank 0's). A pass end's checkpoint, the default, resumes a sufficient-statistic
model (Lloyd k-means, batch-VB LDA, NMF, PageRank) exactly; one written mid-pass
(``checkpoint_every``) holds rank 0's partial pass sums, so such a model should resume
from a pass end's.

Every rank must make the same calls in the same order. Bytes a rank sends are counted in
``bytes_sent`` (by the schedule each operation's algorithm uses; see
:func:`~bidlab.distributed.combine.dense_allreduce_bytes`).
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bidlab.distributed.combine import dense_allreduce_bytes
from bidlab.learn.comm import Communicator

__all__ = ["MPIComm", "OtherRankFailed", "dense_allreduce_bytes", "world"]
FAILED_TAG = 911  #: the tag of a failing rank's message (:meth:`MPIComm.rank_failed`)


class OtherRankFailed(RuntimeError):
    """Raised on a rank whose wait ended because another rank said it failed."""


def world() -> Any:
    """``mpi4py.MPI.COMM_WORLD``, or an ImportError that says how to install it.

    Examples
    --------
    >>> world().Get_size()   # doctest: +SKIP
    2
    """
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("bidlab.distributed needs mpi4py and an MPI library: pip install "
                          "'bidlab[mpi]' (mpi4py, the mpich wheel and ipyparallel)") from exc
    return MPI.COMM_WORLD


class MPIComm(Communicator):
    """One rank of an MPI job as a learner's communicator.

    Parameters
    ----------
    comm
        an ``mpi4py.MPI.Comm`` (default ``COMM_WORLD``).
    mode
        how the model matrices are combined at a step sync point: ``"average"``
        (allreduce; BIDMach's ParLearner), ``"butterfly"`` (average with one partner, a
        full mix every log2(size) syncs; size a power of 2) or ``"sparse"`` (each rank's
        changed rows only, summed by :meth:`sparse_allreduce`; the result is the average's).
    elastic
        with ``mode="average"``, elastic averaging: each rank moves this fraction of the
        way to the average instead of taking it (0: plain averaging).
    timeout
        seconds a rank waits at a sync point for the others before it raises
        ``TimeoutError`` (which ends the job).
    nest
        the sparse allreduce's layers (Kylix's nesting): degrees whose product is the
        number of ranks, e.g. ``(4, 8)`` for 32 ranks: rows are summed within groups of 4,
        then across the groups (8 ranks with the same place in theirs), so a rank
        exchanges with 4 + 8 others instead of 31. None: one layer of every rank.
    spin
        seconds a rank polls an exchange without sleeping (yielding its core between
        polls) before it naps between polls, once every rank has arrived at the meeting;
        a rank waiting for the others to arrive naps (see :meth:`_wait`).

    Examples
    --------
    Under ``mpiexec -n 2 python script.py``::

        from bidlab.distributed import MPIComm, shard
        comm = MPIComm(mode="sparse")
        X_mine, y_mine = shard(comm, X, y)            # this rank's rows
        lrn = GLM("logistic").learner(X_mine, y_mine, comm=comm, sync_every=4)
        lrn.fit()
    """

    def __init__(self, comm: Any = None, mode: str = "average", elastic: float = 0.0,
                 timeout: float = 120.0, spin: float = 0.002,
                 nest: Sequence[int] | None = None) -> None:
        from bidlab.distributed.combine import MODES, check_nest

        self.mpi = world() if comm is None else comm
        self.rank, self.size = self.mpi.Get_rank(), self.mpi.Get_size()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}; got {mode!r}")
        if not 0.0 <= float(elastic) < 1.0:
            raise ValueError(f"elastic must be in [0, 1) (0: plain averaging); got {elastic!r}")
        self.mode, self.elastic = mode, float(elastic)
        self.timeout = float(timeout)
        if not 0.0 <= float(spin) <= self.timeout:
            raise ValueError(f"spin must be in [0, timeout] seconds; got {spin!r}")
        self.spin = float(spin)
        self.nest = check_nest(nest, self.size)
        self._layers: list[tuple[Any, int, int]] | None = None  # (comm, degree, stride)
        self._combiner = MODES[mode](self)
        self.changed_rows_only = mode == "sparse"
        self.bytes_sent = 0  #: bytes this rank sent in collectives so far
        self.syncs = 0  #: step sync points so far
        self.bytes_after_first_sync = 0  #: bytes_sent once the first sync was done
        self._commands: list[tuple[str, dict[str, Any]]] = []  # rank 0's, for steer()
        self._lock = threading.Lock()
        #: resumes this rank was sent (:meth:`resumed`): a pause asked for before the latest
        #: one is stale and never delivered
        self.resumes = 0

    # ------------------------------------------------------------------ collectives
    def allreduce(self, arrays: Sequence[Any], op: str = "sum") -> None:
        from mpi4py import MPI

        if op not in ("sum", "mean"):
            raise ValueError(f"allreduce op must be 'sum' or 'mean'; got {op!r}")
        for a in arrays:
            buf = _contiguous(a)
            self._wait(self.mpi.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM), "allreduce")
            if op == "mean":
                np.multiply(buf, 1.0 / self.size, out=buf, casting="unsafe")
            if not np.shares_memory(buf, a):
                a[...] = buf
            self.bytes_sent += dense_allreduce_bytes(buf.nbytes, self.size)

    def broadcast(self, arrays: Sequence[Any], root: int = 0) -> None:
        for a in arrays:
            buf = _contiguous(a)
            self._wait(self.mpi.Ibcast(buf, root=root), "broadcast")
            if not np.shares_memory(buf, a):
                a[...] = buf
            if self.rank == root:
                self.bytes_sent += buf.nbytes * (self.size - 1)

    def any_of(self, flag: bool) -> bool:
        from mpi4py import MPI

        buf = np.array([1 if flag else 0], np.int32)
        self._wait(self.mpi.Iallreduce(MPI.IN_PLACE, buf, op=MPI.MAX), "any_of")
        return bool(buf[0])

    def sparse_allreduce(self, index: Any, values: Any,
                         n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Sum (row index, values) blocks over all ranks.

        ``index`` (n,) holds distinct row numbers and ``values`` (n, k) their rows; returns
        (the union of every rank's rows, sorted; their summed values), the same on every
        rank. Each layer of :attr:`nest` (one layer of all ranks by default) splits the
        rows among its ranks by one digit of the row number (``row % size`` for one
        layer): each rank sends the others of its layer the rows they own (all-to-all) and
        sums what it gets; after the last layer a rank holds the total of its share, and
        the layers in reverse gather the summed blocks back (allgather). A rank sends
        about twice its own rows per layer, not the whole matrix. ``n_rows`` (the same on
        every rank), when below 2**31, sends 4-byte indices.

        Examples
        --------
        >>> rows, vals = comm.sparse_allreduce(np.array([3, 9]), np.ones((2, 4)))  # doctest: +SKIP
        """
        itype = np.int32 if n_rows is not None and n_rows < 2**31 else np.int64
        index = np.asarray(index, dtype=itype).ravel()
        values = np.ascontiguousarray(values)
        if values.ndim == 1:
            values = values[:, None]
        if values.shape[0] != index.size:
            raise ValueError(f"sparse_allreduce: {index.size} row indices for "
                             f"{values.shape[0]} rows of values")
        layers = self.layers()
        for c, degree, stride in layers:  # 1. reduce-scatter, layer by layer
            index, values = self._scatter_sum(c, degree, stride, index, values)
        for c, degree, _ in reversed(layers):  # 2. gather the summed blocks back
            index, values = self._gather(c, degree, index, values)
        order = np.argsort(index, kind="stable")
        return index[order], values[order]

    def layers(self) -> list[tuple[Any, int, int]]:
        """The sparse allreduce's layers: (communicator, degree, stride of its digit)."""
        if self._layers is None:
            if len(self.nest) == 1:
                self._layers = [(self.mpi, self.size, 1)]
            else:
                self._layers, stride = [], 1
                for degree in self.nest:
                    place = (self.rank // stride) % degree
                    sub = self.mpi.Split(color=self.rank - place * stride, key=place)
                    self._layers.append((sub, degree, stride))
                    stride *= degree
        return self._layers

    def _scatter_sum(self, c: Any, n: int, stride: int, index: np.ndarray,
                     values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Send each row to the rank of ``c`` that owns its digit ``(row // stride) % n``
        and sum the rows this rank gets: (its rows, sorted and distinct; their sums)."""
        k, itype = values.shape[1], index.dtype
        owner = (index // stride) % n
        order = np.argsort(owner, kind="stable")
        idx_s, val_s = index[order], values[order]
        counts = np.bincount(owner, minlength=n).astype(np.int64)
        got_counts = np.empty(n, np.int64)
        self._wait(c.Ialltoall(counts, got_counts), "sparse_allreduce")
        got_idx = np.empty(int(got_counts.sum()), itype)
        got_val = np.empty((int(got_counts.sum()), k), values.dtype)
        self._wait(c.Ialltoallv([idx_s, (counts, _displ(counts))],
                                [got_idx, (got_counts, _displ(got_counts))]), "sparse")
        self._wait(c.Ialltoallv([val_s, (counts * k, _displ(counts) * k)],
                                [got_val, (got_counts * k, _displ(got_counts) * k)]),
                   "sparse_allreduce")
        mine = int(counts[c.Get_rank()])
        self.bytes_sent += (index.size - mine) * (itype.itemsize + k * values.itemsize) \
            + 8 * n
        rows, inverse = np.unique(got_idx, return_inverse=True)
        summed = np.zeros((rows.size, k), values.dtype)
        np.add.at(summed, inverse, got_val)
        return rows, summed

    def _gather(self, c: Any, n: int, rows: np.ndarray,
                values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every rank of ``c``'s (rows, values) blocks, on every rank of ``c``."""
        k, itype = values.shape[1], rows.dtype
        sizes = np.empty(n, np.int64)
        self._wait(c.Iallgather(np.array([rows.size], np.int64), sizes), "sparse")
        all_rows = np.empty(int(sizes.sum()), itype)
        all_vals = np.empty((int(sizes.sum()), k), values.dtype)
        self._wait(c.Iallgatherv(rows, [all_rows, (sizes, _displ(sizes))]), "sparse")
        self._wait(c.Iallgatherv(values, [all_vals, (sizes * k, _displ(sizes) * k)]),
                   "sparse_allreduce")
        self.bytes_sent += rows.size * (itype.itemsize + k * values.itemsize) * (n - 1) \
            + 8 * (n - 1)
        return all_rows, all_vals

    def exchange(self, array: Any, partner: int) -> np.ndarray:
        """Send ``array`` to ``partner`` and return the partner's (same shape)."""
        buf = np.ascontiguousarray(array)
        out = np.empty_like(buf)
        rq = [self.mpi.Irecv(out, source=partner, tag=7), self.mpi.Isend(buf, dest=partner, tag=7)]
        self._wait(rq[0], "exchange")
        self._wait(rq[1], "exchange")
        self.bytes_sent += buf.nbytes
        return out

    def _wait(self, req: Any, what: str, spin: float | None = None) -> None:
        """Wait for a nonblocking operation, at most ``timeout`` seconds. A collective makes
        progress only inside a test, and one exchange takes several rounds between the
        ranks, so for the first ``spin`` seconds (default ``self.spin``) the rank tests
        without sleeping, yielding its core between tests; then it naps between tests
        (0.05 ms, doubling up to 0.1 ms; up to 1 ms after 50 ms: a paused rank). A rank
        that waits for the others to arrive naps (``spin=0``: a spinning rank would spend
        the CPU time its own next step needs on a loaded machine); once every rank is known
        to be there, the exchange's rounds spin."""
        if req.Test():
            return
        start = time.monotonic()
        spin_end = start + (self.spin if spin is None else spin)
        nap = 5e-5
        while not req.Test():
            now = time.monotonic()
            if now < spin_end:
                os.sched_yield()
                continue
            self._raise_if_a_rank_failed(what)
            if now - start > self.timeout:
                raise TimeoutError(
                    f"rank {self.rank} of {self.size} waited {self.timeout:g} s in {what} "
                    "for the other ranks: one is stuck, or runs a different number of "
                    "minibatches per pass (the job ends; raise MPIComm(timeout=...) for "
                    "longer waits)")
            time.sleep(nap)
            nap = min(nap * 2, 1e-4 if now - start < 0.05 else 1e-3)

    def rank_failed(self, error: BaseException) -> None:
        """Tell the other ranks, which would wait for this one until ``timeout``: their
        waits end at once with this rank's error (a job mpiexec runs ends anyway)."""
        text = f"{type(error).__name__}: {error}"[:2000]
        self._failure_sends = [self.mpi.isend(text, dest=r, tag=FAILED_TAG)
                               for r in range(self.size) if r != self.rank]

    def _raise_if_a_rank_failed(self, what: str) -> None:
        """Raise the error of a rank that said it failed (:meth:`rank_failed`)."""
        from mpi4py import MPI
        status = MPI.Status()
        if self.mpi.Iprobe(source=MPI.ANY_SOURCE, tag=FAILED_TAG, status=status):
            source = status.Get_source()
            text = self.mpi.recv(source=source, tag=FAILED_TAG)
            raise OtherRankFailed(f"rank {source} of {self.size} failed ({text}); rank "
                                  f"{self.rank} stops too, in {what}")

    # ------------------------------------------------------------------ sync points
    def combine(self, modelmats: Sequence[Any], how: Sequence[str]) -> None:
        self.syncs += 1
        self._combiner.combine(modelmats, how)
        if self.syncs == 1:  # the start's broadcast and the first (common-start) sync
            self.bytes_after_first_sync = self.bytes_sent

    def request(self, verb: str, **values: Any) -> None:
        """Queue a command on this rank (only rank 0's are carried): ``"set"`` with option
        values, ``"pause"`` or ``"stop"``. Every rank acts on it at the same minibatch
        boundary, the next one at which the learners meet. A ``"pause"`` may carry
        ``after``: the number of resumes its sender had sent (:meth:`resumed`)."""
        if verb not in ("set", "pause", "stop"):
            raise ValueError(f"verb must be 'set', 'pause' or 'stop'; got {verb!r}")
        with self._lock:
            self._commands.append((verb, dict(values)))

    def resumed(self, count: int) -> None:
        """Record that resume number ``count`` reached this rank: a pause asked for before
        it (``after`` < ``count``) is dropped from the queue and, if it is already on its
        way to the ranks, not acted on. As on one learner, where ``resume()`` clears a
        pause not yet taken: pausing twice and resuming once leaves the ranks running."""
        with self._lock:
            self.resumes = max(self.resumes, int(count))
            self._commands = [(verb, v) for verb, v in self._commands
                              if not self._stale(verb, v)]

    def _stale(self, verb: str, values: dict[str, Any]) -> bool:
        return verb == "pause" and int(values.get("after", self.resumes)) < self.resumes

    def steer(self, learner: Any) -> None:
        blob = self._take_commands()
        n = np.array([len(blob)], np.int64)
        self._wait(self.mpi.Ibcast(n, root=0), "steer")
        self._deliver(learner, int(n[0]), blob)

    def meet(self, learner: Any, stop: bool) -> tuple[bool, bool]:
        """The minibatch boundary's meeting in one allreduce of a few numbers: a stop on any
        rank, convergence on any rank, the size of rank 0's commands (then broadcast and
        delivered, when there are any) and the ranks' steps (RuntimeError unless equal)."""
        stop, converged, _ = self._end_meeting(learner, self._post_meeting(learner, stop))
        return stop, converged

    def combine_and_meet(self, learner: Any, modelmats: Sequence[Any], how: Sequence[str],
                         stop: bool) -> tuple[bool, bool] | None:
        """:meth:`meet`'s allreduce first, waited for by napping (it is where the ranks
        arrive), then the step sync point's exchange, whose rounds spin (every rank is
        there): one meeting a step."""
        stop, converged, delivered = self._end_meeting(learner,
                                                       self._post_meeting(learner, stop))
        self.combine(modelmats, how)
        return None if delivered else (stop, converged)

    def _take_commands(self) -> bytes:
        """Rank 0's queued commands, pickled (b"": none; other ranks' are dropped)."""
        with self._lock:
            mine, self._commands = self._commands, []
        return pickle.dumps(mine) if self.rank == 0 and mine else b""

    def _post_meeting(self, learner: Any, stop: bool) -> tuple[Any, np.ndarray, bytes]:
        from mpi4py import MPI

        blob = self._take_commands()
        step = int(learner.step)  # with -step: the ranks' largest and smallest step
        flags = np.array([bool(stop), bool(learner.model.converged), len(blob), step, -step],
                         np.int64)
        return self.mpi.Iallreduce(MPI.IN_PLACE, flags, op=MPI.MAX), flags, blob

    def _end_meeting(self, learner: Any, pending: tuple[Any, np.ndarray, bytes],
                     ) -> tuple[bool, bool, bool]:
        req, flags, blob = pending
        self._wait(req, "the minibatch boundary's meeting", spin=0.0)
        if flags[3] != -flags[4]:
            raise RuntimeError(f"the ranks met at different minibatches (steps {-flags[4]} "
                               f"to {flags[3]}): each rank must make as many minibatches a "
                               "pass as the others (rank_batch_size evens them)")
        n = int(flags[2])
        self.delivered = n > 0
        self._deliver(learner, n, blob)
        return bool(flags[0]), bool(flags[1]), n > 0

    def _deliver(self, learner: Any, n: int, blob: bytes) -> None:
        """Broadcast rank 0's ``n`` bytes of commands and act on them on every rank."""
        if n == 0:
            return
        data = np.frombuffer(blob, np.uint8).copy() if self.rank == 0 else np.empty(
            n, np.uint8)
        self._wait(self.mpi.Ibcast(data, root=0), "steer")
        for verb, values in pickle.loads(data.tobytes()):  # noqa: S301 - rank 0's own
            if verb == "set":
                learner.set(**values)
            elif verb == "pause":
                with self._lock:
                    stale = self._stale(verb, values)
                if not stale:
                    learner.pause()
            else:
                learner.stop(wait=False)

    shared_checkpoint = True

    def checkpoint_file(self, path: str, write: bool) -> str | None:
        """Rank 0 writes the group's one checkpoint; every rank reads it. It holds the
        model, the updater and the progress, not what a model keeps per data row (each
        rank's rows are its own): a resumed rank, on any number of ranks, starts its rows
        afresh (LDA's warm starts, k-means' labels and bounds, SFA's and NMF's row factors
        from their start)."""
        return path if (not write or self.rank == 0) else None

    def free(self) -> None:
        """Free the communicator and its layers' (every rank, once nothing uses them: a
        learner made on it has stopped); COMM_WORLD and COMM_SELF stay. Again: nothing."""
        from mpi4py import MPI
        layers, self._layers = self._layers or [], None
        for sub in {id(c): c for c, _, _ in layers}.values():
            if sub is not self.mpi:
                sub.Free()
        if self.mpi not in (MPI.COMM_WORLD, MPI.COMM_SELF, MPI.COMM_NULL):
            self.mpi.Free()

    def abort(self, code: int = 1) -> None:
        """End the whole job now (every rank), with exit status ``code``."""
        self.mpi.Abort(code)


def _contiguous(a: Any) -> np.ndarray:
    """``a`` itself or a contiguous view of it (a transposed Fortran array's too), else a
    copy (the caller writes a copy back)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"MPIComm moves numpy arrays; got {type(a).__name__} (train on "
                        "device='cpu', or combine GPU models with "
                        "bidlab.distributed.NCCLComm)")
    if a.flags.c_contiguous:
        return a
    if a.flags.f_contiguous:
        return a.T
    return np.ascontiguousarray(a)


def _displ(counts: np.ndarray) -> np.ndarray:
    out = np.zeros_like(counts)
    np.cumsum(counts[:-1], out=out[1:])
    return out
