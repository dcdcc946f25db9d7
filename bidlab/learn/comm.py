"""Communicators: how learners that each train on a share of the rows combine their work.

The :class:`~bidlab.learn.learner.Learner` calls its communicator at named sync points,
and nowhere else:

* **start** (before the first minibatch): rank 0's model matrices are broadcast, so every
  rank starts from the same model; then the model's ``refresh`` runs;
* **step** (every ``sync_every`` training minibatches): the model matrices are combined,
  each as the model declares in ``Model.combine`` (``"mean"``, ``"sum"`` or ``"local"``),
  then the model's ``refresh`` runs;
* **pass end** (before the updater applies a pass): the updater's pass statistics
  (``Updater.pass_statistics``, e.g. a full-batch updater's summed updates) are summed;
* **stopping**: a model's ``converged`` and a stop request end every rank's run together
  (``any_of``, in :meth:`Communicator.meet` at the first minibatch boundary after each
  step sync point and after each pass end; carried with the step's combine by
  :meth:`Communicator.combine_and_meet` where the communicator can), so no rank waits in a
  collective that the others left. Between sync points the ranks do not meet: each runs
  its ``sync_every`` minibatches at its own pace (a rank that waited at every boundary
  would pay, every minibatch, for whichever rank was slower in that one), and a stop, a
  convergence or a command takes effect at the next meeting.

:class:`SingleProcess` (the default) does nothing. :class:`ThreadGroup` joins learners in
threads of one process: the tests' proof of the seam. MPI and NCCL communicators implement
the same four methods over their engines.

Example::

    group = ThreadGroup(2)
    learners = [Learner(make_model(), (X[i::2],), Batch(), comm=group.comm(i))
                for i in range(2)]
    # run each learner's fit() in its own thread: they train as one
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from bidlab import backend

__all__ = ["Communicator", "SingleProcess", "ThreadGroup", "COMBINATIONS", "rank_path",
           "shard_range"]

#: How a model matrix is combined across ranks at a step sync point.
COMBINATIONS = ("mean", "sum", "local")


class Communicator:
    """The operations a learner needs from its peers (rank ``rank`` of ``size``).

    Arrays are numpy or CuPy arrays, changed in place. Every rank must make the same calls
    in the same order.
    """

    rank: int = 0
    size: int = 1
    #: True when only the model rows that changed since the last sync travel (a sparse
    #: exchange): a model then defers per-row work that would change every row at every
    #: step (e.g. a GLM's L2 decay of untouched weights) until the row is next touched.
    changed_rows_only: bool = False
    #: True when the ranks share one checkpoint file (one rank writes it, every rank reads
    #: it: :meth:`checkpoint_file`): what each rank keeps per data row of its own (a
    #: :class:`~bidlab.learn.rowstate.RowState`) is then not in it, and a resumed rank
    #: starts its rows afresh (so the file resumes on any number of ranks)
    shared_checkpoint: bool = False
    #: True when the last meeting delivered commands (:meth:`steer`): every rank got them
    #: there, so the ranks meet again at the next boundary, where a delivered pause takes
    #: effect (commands queued while paused then land as soon as training resumes)
    delivered: bool = False

    @property
    def file_keeps_rows(self) -> bool:
        """Whether this rank's checkpoint file keeps its per-row state (not when the
        ranks share one file: :attr:`shared_checkpoint`)."""
        return self.size == 1 or not self.shared_checkpoint

    def allreduce(self, arrays: Sequence[Any], op: str = "sum") -> None:
        """Replace each array by the sum (``op="sum"``) or mean (``"mean"``) of that
        array over all ranks."""
        raise NotImplementedError

    def broadcast(self, arrays: Sequence[Any], root: int = 0) -> None:
        """Replace each array by rank ``root``'s."""
        raise NotImplementedError

    def any_of(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is True on any rank."""
        raise NotImplementedError

    def combine(self, modelmats: Sequence[Any], how: Sequence[str]) -> None:
        """The step sync point: each model matrix (a Mat) combined as ``how`` says (one of
        :data:`COMBINATIONS` per matrix). A communicator with another way of mixing models
        (butterfly, sparse rows) overrides this."""
        for op in ("mean", "sum"):
            group = [m.data for m, h in zip(modelmats, how, strict=True) if h == op]
            if group:
                self.allreduce(group, op)

    def rank_failed(self, error: BaseException) -> None:
        """Called on a rank whose run failed, before its learner ends: a communicator
        whose ranks would otherwise wait for it in their next collective releases them.
        Nothing by default (an MPI job ends as a whole: ``bidlab.distributed.guarded``)."""

    def steer(self, learner: Any) -> None:
        """Called at every meeting of a learner of several ranks (the minibatch boundary
        after a step sync point), on every rank, before the collective stop check: a
        communicator that carries commands to all ranks (pause, option changes) delivers
        them here. Nothing by default."""

    def meet(self, learner: Any, stop: bool) -> tuple[bool, bool]:
        """A minibatch boundary's meeting (the first of a run, and the first after each
        step sync point or pass end), on every rank of a learner of several ranks: the
        group's commands delivered (:meth:`steer`), then (a stop requested on any rank,
        ``learner.model.converged`` on any rank). A communicator that carries all of it in
        one exchange overrides this."""
        self.steer(learner)
        if self.any_of(stop):
            return True, False
        return False, self.any_of(learner.model.converged)

    def combine_and_meet(self, learner: Any, modelmats: Sequence[Any], how: Sequence[str],
                         stop: bool) -> tuple[bool, bool] | None:
        """The step sync point (:meth:`combine`) together with the next minibatch
        boundary's meeting, when nothing between the two can change what the ranks agree
        on (the learner calls this only when no pass ends in between). Returns what
        :meth:`meet` would, or None: meet at the boundary as usual (the default; also
        after commands were delivered, so a pause is followed by a fresh meeting).
        :class:`bidlab.distributed.MPIComm` overlaps the two in one wait."""
        self.combine(modelmats, how)
        return None

    def checkpoint_file(self, path: str, write: bool) -> str | None:
        """The file this rank writes (``write``) or reads for checkpoint ``path``; None: this
        rank writes none. By default each rank has its own (:func:`rank_path`)."""
        return rank_path(path, self)

    def fold_seed(self, seed: int) -> int:
        """``seed`` made distinct per rank (rank 0 keeps it): for streams that must differ
        across ranks, such as the order each rank visits its rows in."""
        return int(seed) if self.rank == 0 else int(seed) * 1_000_003 + self.rank


class SingleProcess(Communicator):
    """One learner on its own: every operation leaves its arguments as they are."""

    def allreduce(self, arrays: Sequence[Any], op: str = "sum") -> None:
        _check_op(op)

    def broadcast(self, arrays: Sequence[Any], root: int = 0) -> None:
        pass

    def any_of(self, flag: bool) -> bool:
        return bool(flag)


class ThreadGroup:
    """``size`` learners in threads of one process, combined through shared memory.

    ``comm(rank)`` is the communicator of the learner of rank ``rank``. Each collective
    waits (with ``timeout`` seconds at most) until every rank has arrived, so the learners
    must run concurrently, one thread each. Every rank must be at the same collective (the
    same kind and shapes; at a minibatch boundary's meeting, the same step): ranks out of
    step, such as learners given different numbers of minibatches a pass, raise a
    RuntimeError that says so on every rank.
    """

    def __init__(self, size: int, timeout: float = 120.0) -> None:
        if int(size) < 1:
            raise ValueError(f"a ThreadGroup needs size >= 1; got {size}")
        self.size = int(size)
        self.timeout = float(timeout)
        self._barrier = threading.Barrier(self.size)
        self._posted: list[Any] = [None] * self.size
        self._comms = [_ThreadComm(self, r) for r in range(self.size)]
        self.failure: tuple[int, BaseException] | None = None  # the first rank that failed

    def comm(self, rank: int) -> Communicator:
        return self._comms[rank]

    def _wait(self) -> None:
        try:
            self._barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            if self.failure is not None:
                rank, exc = self.failure
                raise RuntimeError(f"rank {rank} of this {self.size}-learner group failed: "
                                   f"{type(exc).__name__}: {exc}") from None
            raise RuntimeError(
                f"a rank of this {self.size}-learner group did not reach the same sync point "
                f"within {self.timeout} s (it failed, stopped on its own, or made other "
                "calls): every rank must run, with the same number of minibatches per pass"
            ) from None

    def abort(self) -> None:
        """Release every rank waiting in a collective (they raise)."""
        self._barrier.abort()


class _ThreadComm(Communicator):
    def __init__(self, group: ThreadGroup, rank: int) -> None:
        self.group, self.rank, self.size = group, rank, group.size
        self._scratch: dict[tuple, list[Any]] = {}

    def rank_failed(self, error: BaseException) -> None:
        if self.group.failure is None:
            self.group.failure = (self.rank, error)
        self.group.abort()

    def _exchange(self, value: Any, call: tuple[Any, ...]) -> list[Any]:
        """Post ``value``; return every rank's, once all have posted (valid until the
        caller's next barrier). ``call`` says which collective this is (its kind and
        shapes): RuntimeError on every rank when the ranks are at different ones."""
        g = self.group
        g._posted[self.rank] = (call, value)
        g._wait()
        posted = list(g._posted)
        calls = [c for c, _ in posted]
        if any(c != call for c in calls):
            raise RuntimeError(_out_of_step(calls))
        return [v for _, v in posted]

    def meet(self, learner: Any, stop: bool) -> tuple[bool, bool]:
        """:meth:`Communicator.meet` in one exchange, which also compares the ranks' steps
        (RuntimeError unless equal)."""
        self.steer(learner)
        everyone = self._exchange((bool(stop), bool(learner.model.converged)),
                                  ("meet", int(learner.step)))
        self.group._wait()
        if any(s for s, _ in everyone):
            return True, False
        return False, any(c for _, c in everyone)

    def allreduce(self, arrays: Sequence[Any], op: str = "sum") -> None:
        _check_op(op)
        arrays = list(arrays)
        everyone = self._exchange(arrays, ("allreduce", op, _shapes(arrays)))
        key = tuple((a.shape, a.dtype.str, backend.backend_name(a)) for a in arrays)
        out = self._scratch.get(key)
        if out is None:
            out = self._scratch[key] = [backend.empty_as(a) for a in arrays]
        for i, acc in enumerate(out):
            xp = backend.namespace(acc)
            xp.copyto(acc, everyone[0][i])
            for r in range(1, self.size):
                xp.add(acc, everyone[r][i], out=acc)
            if op == "mean":
                xp.multiply(acc, 1.0 / self.size, out=acc, casting="unsafe")
        self.group._wait()  # every rank has read every other's arrays
        for a, acc in zip(arrays, out, strict=True):
            backend.namespace(a).copyto(a, acc)

    def broadcast(self, arrays: Sequence[Any], root: int = 0) -> None:
        arrays = list(arrays)
        everyone = self._exchange(arrays, ("broadcast", root, _shapes(arrays)))
        if self.rank != root:
            for a, src in zip(arrays, everyone[root], strict=True):
                backend.namespace(a).copyto(a, src)
        self.group._wait()

    def any_of(self, flag: bool) -> bool:
        everyone = self._exchange(bool(flag), ("any_of",))
        self.group._wait()
        return any(everyone)


def _shapes(arrays: Sequence[Any]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(a.shape) for a in arrays)


def _out_of_step(calls: Sequence[tuple[Any, ...]]) -> str:
    """What to say when the ranks of a group are at different collectives (``calls``, by
    rank: what :meth:`_ThreadComm._exchange` posts)."""
    fix = ("each rank must make as many minibatches a pass as the others: give each rank's "
           "learner the batch size bidlab.distributed.rank_batch_size(n, rank, size, "
           "batch_size) gives it for the n rows of all the ranks (bidlab train --ranks "
           "does)")
    if all(c[0] == "meet" for c in calls):
        steps = [c[1] for c in calls]
        return (f"the ranks met at different minibatches (steps {min(steps)} to "
                f"{max(steps)}): {fix}")

    def said(call: tuple[Any, ...]) -> str:
        kind = call[0]
        if kind == "meet":
            return f"the minibatch boundary of step {call[1]}"
        if kind == "any_of":
            return "any_of"
        shapes = ", ".join(str(s) for s in call[2])
        return f"{kind} of arrays shaped {shapes}"

    where = "; ".join(f"rank {r}: {said(c)}" for r, c in enumerate(calls))
    return f"the ranks are out of step, at different collectives ({where}): {fix}"


def _check_op(op: str) -> None:
    if op not in ("sum", "mean"):
        raise ValueError(f"allreduce op must be 'sum' or 'mean'; got {op!r}")


def combine_models(comm: Communicator, modelmats: Sequence[Any], how: Sequence[str]) -> None:
    """The step sync point's work: each model matrix combined as ``how`` says."""
    if comm.size == 1:
        return
    comm.combine(modelmats, how)


def check_combine(how: Any, n: int, owner: str) -> tuple[str, ...]:
    """A model's ``combine`` declaration as one word per model matrix."""
    if how is None:
        return ("mean",) * n
    if isinstance(how, str):
        how = (how,) * n
    how = tuple(how)
    if len(how) != n or any(h not in COMBINATIONS for h in how):
        raise ValueError(f"{owner}.combine must name one of {COMBINATIONS} per model matrix "
                         f"({n} of them); got {how!r}")
    return how



def shard_range(n: int, rank: int, size: int) -> tuple[int, int]:
    """Rows ``[start, stop)`` of rank ``rank`` of ``size`` over ``n`` rows: contiguous
    shares in rank order, whose lengths differ by one at most (how
    ``bidlab.distributed.shard`` and ``bidlab train --ranks`` split the rows).

    >>> shard_range(10, 0, 3), shard_range(10, 2, 3)
    ((0, 3), (6, 10))
    """
    if not 0 <= rank < size:
        raise ValueError(f"rank must be in 0..{size - 1}; got {rank}")
    if n < size:
        raise ValueError(f"{n} rows cannot be shared by {size} ranks: use fewer ranks")
    return rank * n // size, (rank + 1) * n // size


def rank_path(path: str, comm: Communicator) -> str:
    """A rank's own checkpoint file: ``ck.npz`` -> ``ck.rank1.npz`` when there are several
    ranks (each keeps its own rows' state), ``path`` itself for one."""
    if comm.size == 1:
        return path
    head, dot, ext = path.rpartition(".")
    if not dot or "/" in ext:
        return f"{path}.rank{comm.rank}"
    return f"{head}.rank{comm.rank}.{ext}"
