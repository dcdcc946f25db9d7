"""Starting MPI jobs: the ``mpiexec`` to use and ``bidlab train --ranks N``'s relaunch.

Examples
--------
>>> launch(2, ["glm", "--data", "a9a", "--n_passes", "1"])   # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

__all__ = ["mpiexec_path", "launch", "rebuild_argv"]


def mpiexec_path() -> str:
    """The ``mpiexec`` beside this Python (the mpich wheel's), else the first on PATH."""
    here = Path(sys.executable).with_name("mpiexec")
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if not found:
        raise FileNotFoundError("no mpiexec found: pip install 'bidlab[mpi]' (the mpich "
                                "wheel brings one) or put an MPI's mpiexec on PATH")
    return found


def launch(ranks: int, argv: list[str]) -> int:
    """Run ``python -m bidlab.distributed.train *argv`` on ``ranks`` MPI processes; the
    job's exit status."""
    import subprocess

    cmd = [mpiexec_path(), "-n", str(int(ranks)), sys.executable, "-m",
           "bidlab.distributed.train", *argv]
    return subprocess.call(cmd)


def not_on_ranks(args: argparse.Namespace) -> str | None:
    """Why ``bidlab train``'s arguments cannot run on ranks (None: they can): a held-out
    share would make the ranks' minibatch counts differ, per-pass coherence reads every
    document, which no rank holds, and a plain learner model (``lsq``) is not sharded (each
    rank would train alone on every row, all writing the one ``--checkpoint``).

    Examples
    --------
    >>> not_on_ranks(argparse.Namespace(holdout=0.2, coherence=None))[:9]
    '--holdout'
    >>> not_on_ranks(argparse.Namespace(holdout=0.0, coherence=None)) is None
    True
    """
    if getattr(args, "holdout", None):
        return ("--holdout is not available with --ranks (every rank trains on all of its "
                "rows): score a held-out file afterwards from --save, or leave --ranks out")
    if getattr(args, "coherence", None):
        return ("--coherence is not available with --ranks (no rank holds every document): "
                "compute it afterwards from --save, or leave --ranks out")
    model = getattr(args, "model", None)
    if model and not getattr(args, "help", False):
        from bidlab.cli.train_options import _is_estimator, _registry

        factory = _registry()[0].get(model)
        if factory is not None and not _is_estimator(factory):
            return (f"{model} is a plain learner Model, which --ranks does not run (each "
                    "rank would train alone on every row): leave --ranks out, or train an "
                    "estimator model (e.g. glm) on ranks")
    return None


def rebuild_argv(args: argparse.Namespace) -> list[str]:
    """``bidlab train``'s parsed arguments as this command's argv (without ``--ranks``)."""
    argv = [args.model] if args.model else []
    for flag in ("data", "min_df", "max_df", "checkpoint", "save", "progress"):
        value = getattr(args, flag, None)
        if value is not None:
            argv += [f"--{flag}", str(value)]
    if getattr(args, "restart", False):
        argv.append("--restart")
    if getattr(args, "help", False):
        argv.append("--help")
    return argv + list(getattr(args, "extra", []))
