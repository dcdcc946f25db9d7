"""The options of a run on ranks that ``bidlab train`` itself has not (``--comm-mode``,
``--elastic``, ``--sync-timeout``, ``--nest``, ``--comm``): declared for the rank trainer's
parser (:mod:`bidlab.distributed.train`), and checked by ``bidlab train --ranks N`` before it
starts the ranks (:func:`without_rank_options`)."""

from __future__ import annotations

import argparse
import math

__all__ = ["add_rank_arguments", "check_comm_options", "nest_degrees", "without_rank_options"]


def nest_degrees(text: str | None) -> list[int] | None:
    """``--nest``'s comma-separated layer degrees."""
    if text is None:
        return None
    try:
        return [int(d) for d in text.split(",")]
    except ValueError:
        raise ValueError(f"--nest {text}: give the layer degrees as whole numbers separated "
                         "by commas, e.g. --nest 2,2") from None


def _seconds(text: str) -> float:
    """``--sync-timeout``'s value: seconds > 0 (``inf``: wait for ever)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0; got {text!r}")
    return value


def add_rank_arguments(p: argparse.ArgumentParser) -> None:
    """The options of a run on ranks that ``bidlab train`` itself has not."""
    p.add_argument("--comm-mode", default="average", choices=["average", "butterfly", "sparse"],
                   help="how the ranks' models are combined at each sync point")
    p.add_argument("--elastic", type=float, default=0.0, help="with average: the fraction of "
                   "the way each rank moves to the average (0: plain averaging)")
    p.add_argument("--sync-timeout", type=_seconds, default=120.0, help="seconds a rank "
                   "waits for the others at a sync point before the job ends ('inf': ever)")
    p.add_argument("--nest", default=None, help="the sparse allreduce's layer degrees, "
                   "comma-separated, multiplying to the number of ranks (e.g. 4,8)")
    p.add_argument("--comm", default="mpi", choices=["mpi", "nccl"],
                   help="nccl: GPU models combined over NCCL, one rank per GPU")


def check_comm_options(args: argparse.Namespace) -> None:
    """ValueError when the communicator options contradict each other."""
    if args.comm == "nccl" and args.nest:
        raise ValueError("--nest layers the sparse mode, which --comm nccl does not run")
    if args.nest and args.comm_mode != "sparse":
        raise ValueError(f"--nest layers the sparse mode, and --comm-mode is "
                         f"{args.comm_mode}: add --comm-mode sparse, or leave --nest out")
    nest_degrees(args.nest)


def without_rank_options(extra: list[str]) -> list[str]:
    """``extra`` without the options of a run on ranks, each checked first (ValueError
    names a bad one): what ``bidlab train --ranks N`` checks before it starts the ranks.

    Examples
    --------
    >>> without_rank_options(["--comm-mode", "sparse", "--l2", "1e-4"])
    ['--l2', '1e-4']
    """
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_rank_arguments(p)
    try:
        args, rest = p.parse_known_args(extra)
    except argparse.ArgumentError as exc:
        raise ValueError(str(exc)) from None
    check_comm_options(args)
    return rest
