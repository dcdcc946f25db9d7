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
