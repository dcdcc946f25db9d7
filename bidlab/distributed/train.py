"""``mpiexec -n N python -m bidlab.distributed.train MODEL --data PATH [options]``.

``bidlab train``'s command (:mod:`bidlab.cli.train`: the same models, options, data formats,
``--checkpoint`` and ``--save``) with every MPI rank training on its share of the rows
(:mod:`bidlab.distributed.sharding`) and meeting the others at the learner's sync points.
Its own options:

* ``--comm-mode average|butterfly|sparse`` (default ``average``) and ``--elastic A``:
  how the models are combined (:mod:`bidlab.distributed.combine`); ``--sync_every K`` (a
  learner option) how often;
* ``--sync-timeout S`` (seconds > 0, default 120): the longest a rank waits for the
  others at a sync point before the job ends;
* ``--nest D1,D2,...`` (with ``--comm-mode sparse``): the sparse mode's layers (degrees
  multiplying to N; see :class:`~bidlab.distributed.MPIComm`), e.g. ``--nest 4,8`` on 32
  ranks;
* ``--comm mpi|nccl`` (default ``mpi``): ``nccl`` combines GPU models (``--device gpu``)
  over NCCL, one rank per GPU (:class:`~bidlab.distributed.NCCLComm`; needs CuPy with
  NCCL).

``bidlab train MODEL --ranks N ...`` runs this under ``mpiexec -n N`` (the ``mpiexec`` next
to the Python running it, else the first on ``PATH``).

Faults: a rank whose training raises prints ``rank R of N failed:`` with the error and its
traceback, then ends the whole job (``MPI_Abort``) at once; a rank that dies (e.g. SIGKILL)
makes ``mpiexec`` end the others; a rank stuck for ``--sync-timeout`` seconds at a sync
point is reported and the job ends. Only rank 0 prints results, writes ``--checkpoint``
(at each pass end, atomically) and ``--save``; a checkpoint resumes on any number of ranks.

Examples
--------
::

    mpiexec -n 2 python -m bidlab.distributed.train glm --data news.svm --n_passes 3 \\
        --comm-mode sparse --sync_every 4 --checkpoint glm.ck
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from bidlab.distributed.rank_options import (
    add_rank_arguments,
    check_comm_options,
    nest_degrees,
)

__all__ = ["main", "guarded"]

#: seconds a rank that learned of another's failure waits before it ends the job itself,
#: so the failing rank's own error and traceback are printed first (it ends the job too)
OTHER_RANK_GRACE = 2.0


def guarded(comm: Any, fn: Callable[[], Any]) -> Any:
    """Run ``fn()``; if it raises, print the rank's error and traceback and end the job.

    Examples
    --------
    >>> guarded(comm, lambda: learner.fit())  # doctest: +SKIP
    """
    try:
        return fn()
    except BaseException as exc:  # noqa: BLE001 - every failure ends every rank
        tb = getattr(getattr(fn, "__self__", None), "traceback", None) or \
            traceback.format_exc()
        print(f"rank {comm.rank} of {comm.size} failed: {type(exc).__name__}: {exc}\n{tb}",
              file=sys.stderr, flush=True)
        if comm.size > 1:
            from bidlab.distributed.mpi_comm import OtherRankFailed

            if isinstance(exc, OtherRankFailed):  # the failing rank prints its own
                time.sleep(OTHER_RANK_GRACE)  # error and ends the job: give it the time
            comm.abort(1)
        raise


class _RankParser(argparse.ArgumentParser):
    """Its errors are the same on every rank: rank 0 prints the usage and the error, the
    others end quietly (with the same exit status)."""

    def error(self, message: str) -> Any:
        from bidlab.distributed.mpi_comm import world

        if world().Get_rank() != 0:
            self.exit(2)
        super().error(message)


def _parser() -> argparse.ArgumentParser:
    from bidlab.cli.train_options import add_arguments

    p = _RankParser(prog="mpiexec -n N python -m bidlab.distributed.train", add_help=False,
                    allow_abbrev=False)
    add_arguments(p)
    add_rank_arguments(p)
    return p


def _communicator(args: argparse.Namespace) -> Any:
    """The rank's communicator (ValueError / ImportError: the job cannot start)."""
    from bidlab.distributed.mpi_comm import MPIComm

    check_comm_options(args)
    if args.comm == "nccl":
        from bidlab.distributed.nccl_comm import NCCLComm

        return NCCLComm(mode=args.comm_mode, elastic=args.elastic, timeout=args.sync_timeout)
    return MPIComm(mode=args.comm_mode, elastic=args.elastic, timeout=args.sync_timeout,
                   nest=nest_degrees(args.nest))


def main(argv: list[str] | None = None) -> int:
    """Parse, train on this rank's rows, report on rank 0; the exit code."""
    from bidlab.cli import train as cli

    args, extra = _parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    args.extra = extra
    args.ranks = None
    from bidlab.distributed.launch import not_on_ranks

    why = not_on_ranks(args)
    if why:  # the same on every rank: rank 0 says so, all end
        from bidlab.distributed.mpi_comm import world

        if world().Get_rank() == 0:
            print(f"error: {why}", file=sys.stderr)
        return 2
    args.holdout = 0.0  # none held out by default either: the ranks' minibatches must agree
    try:
        comm = _communicator(args)
    except (ValueError, ImportError) as exc:  # the same on every rank: rank 0 says so
        from bidlab.distributed.mpi_comm import world

        if world().Get_rank() == 0:
            print(f"error: {exc}", file=sys.stderr)
        return 2
    quiet = comm.rank != 0
    if quiet:
        args.progress = "none"
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(
            null if quiet else sys.stdout):
        code = _run(cli, args, comm)
        if args.help:
            rank_options = argparse.ArgumentParser(prog="ranks", add_help=False)
            add_rank_arguments(rank_options)
            print("options of a run on ranks:\n" + rank_options.format_help().partition(
                "options:\n")[2])
    if code != 0 and comm.size > 1:
        sys.stderr.flush()
        comm.abort(code)
    return code


def _run(cli: Any, args: argparse.Namespace, comm: Any) -> int:
    class RankJob(cli._EstimatorJob):
        """``bidlab train``'s job on this rank's rows, with the communicator."""

        est: Any = None  # the estimator trained (learner_options)

        def need_data(self) -> Any:
            from bidlab.distributed.sharding import read_rank_data

            if not self.args.data:
                return super().need_data()  # its message
            data, self.n_total = read_rank_data(comm, self.args.data, self.name,
                                                self.args.min_df, self.args.max_df)
            self.rank_rows = data.X  # what an estimator's batch_size=None is resolved on
            if comm.rank == 0:
                print(f"data {self.args.data}: {self.n_total} rows on {comm.size} ranks "
                      f"(rank 0: {data.describe()})", file=sys.stderr)
            if comm.rank != 0:
                self.args.save = None
            return data

        def resume(self, learner: Any, again: dict[str, Any],
                   params: dict[str, Any] | None = None) -> bool:
            if comm.rank == 0:
                return super().resume(learner, again, params)
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                # rank 0 says it (errors still raise)
                return super().resume(learner, again, params)

        def learner_options(self, est: Any, lopts: dict[str, Any]) -> dict[str, Any]:
            from bidlab.distributed.sharding import (
                chosen_batch_size,
                even_batch_size,
                rank_batch_size,
            )

            self.est = est  # its users are gathered from every rank after training
            bs = chosen_batch_size(est, lopts.get("batch_size"), self.n_total, comm.size,
                                   rows=getattr(self, "rank_rows", None), comm=comm)
            named = {t[2:].partition("=")[0].replace("-", "_") for t in self.extra
                     if t.startswith("--")}
            if not lopts.get("batch_size") and ("batch_size" not in named or isinstance(
                    getattr(est, "batch_size", None), str)):
                # nobody asked for this size: take the nearest that evens the ranks' counts
                bs = even_batch_size(self.n_total, comm.size, bs)
            return {**lopts, "comm": comm,
                    "batch_size": rank_batch_size(self.n_total, comm.rank, comm.size, bs)}

        def result(self, learner: Any, extra: str = "") -> str:
            line = super().result(learner, extra)  # the counts are rank 0's
            return line.replace(" samples", f" samples on rank 0 of {comm.size}", 1)

        def train(self, learner: Any, source_close: Any = None) -> int:
            code = super().train(learner, source_close)
            if code == 0 and self.est is not None:  # e.g. every rank's users for rank 0
                self.est.gather_ranks(comm)  # to save (a recommender answers for them all)
            if code == 1:  # its error and traceback are printed: end every rank now
                print(f"rank {comm.rank} of {comm.size} failed (above)", file=sys.stderr,
                      flush=True)
            return code

    return cli.run(args, estimator_job=RankJob)


if __name__ == "__main__":
    sys.exit(main())
