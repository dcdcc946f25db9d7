"""The ``bidlab`` command: one subcommand per entry of :data:`COMMANDS`.

Every command-line front end of bidlab lives in this package (``bidlab.cli.train`` is
``bidlab train``); ``python -m bidlab.cli`` is the same as ``bidlab``.

Adding a subcommand means adding one line to :data:`COMMANDS`: its name, a one-line help
and the module that implements it. That module provides::

    def add_arguments(parser: argparse.ArgumentParser) -> None   # declare its arguments
    def run(args: argparse.Namespace) -> int                       # do it; the exit code

and may set ``ACCEPTS_EXTRA = True`` to receive unparsed ``--name value`` pairs in
``args.extra`` (``bidlab train`` does: they are learner options). Modules are imported
only when their subcommand runs, so ``bidlab --help`` stays fast. A warning raised
while a command runs is printed as one line, ``warning: MESSAGE``. When the reader of
stdout goes away (``bidlab demo | head``), the command ends quietly, as a Unix tool does;
Ctrl-C ends it with one line, ``bidlab COMMAND: interrupted``, and status 130.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any

__all__ = ["COMMANDS", "Command", "main", "build_parser"]


@dataclass(frozen=True)
class Command:
    """A subcommand: one-line help and the module with ``add_arguments`` and ``run``."""

    help: str
    module: str


COMMANDS: dict[str, Command] = {
    "train": Command("train a model on a data set, with progress and checkpoints",
                     "bidlab.cli.train"),
    "demo": Command("train LDA on a demo corpus, print its topics, write a bubble chart",
                    "bidlab.demo"),
    "lab": Command("open JupyterLab (127.0.0.1, with a token) on a bidlab notebook",
                   "bidlab.lab.launcher"),
    "warmup": Command("compile the CPU kernels of the common first fits into numba's cache",
                      "bidlab.cli.warmup"),
    "docs": Command("build the documentation site (HTML) with Sphinx", "bidlab.cli.docs"),
}


def _module(name: str):
    return importlib.import_module(COMMANDS[name].module)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only ``command``'s module is imported (all when None)."""
    parser = argparse.ArgumentParser(
        prog="bidlab", description="bidlab: fast, interactive machine learning.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, cmd in COMMANDS.items():
        extra = command == name and _accepts_extra(name)
        # allow_abbrev=False: an extra option such as --check must not be taken for --checkpoint
        sp = sub.add_parser(name, help=cmd.help, description=cmd.help, add_help=not extra,
                            allow_abbrev=not extra)
        if command == name:
            _module(name).add_arguments(sp)
    return parser


def _accepts_extra(name: str) -> bool:
    return bool(getattr(_module(name), "ACCEPTS_EXTRA", False))


#: the exit status when stdout's reader went away: 128 + SIGPIPE, what a shell reports for
#: a tool the closed pipe ended
CLOSED_STDOUT_STATUS = 141

#: the exit status after Ctrl-C: 128 + SIGINT, what a shell reports for an interrupted tool
INTERRUPTED_STATUS = 130


def main(argv: list[str] | None = None) -> int:
    """Run ``bidlab COMMAND ...``; return the exit code (:data:`CLOSED_STDOUT_STATUS`,
    with no traceback, when stdout's reader went away; :data:`INTERRUPTED_STATUS`, with
    one line on stderr, after Ctrl-C)."""
    try:
        return _main(argv)
    except BrokenPipeError:
        _drop_stdout()
        return CLOSED_STDOUT_STATUS
    except KeyboardInterrupt:
        args = sys.argv[1:] if argv is None else argv
        command = next((a for a in args if not a.startswith("-")), "")
        print(f"\nbidlab {command}: interrupted".rstrip(), file=sys.stderr)
        return INTERRUPTED_STATUS


def _drop_stdout() -> None:
    """Point stdout at the null device, so that flushing what is left of its buffer at
    exit does not fail again (and print "Exception ignored ... BrokenPipeError")."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # not a real file (captured, or already closed)
        pass


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command is not None and command not in COMMANDS:
        known = ", ".join(COMMANDS)
        print(f"bidlab: unknown command {command!r}; the commands are: {known} "
              "(bidlab --help)", file=sys.stderr)
        return 2
    try:
        parser = build_parser(command)
    except ImportError as exc:
        print(f"bidlab: the {command!r} command is not available: {exc} (module "
              f"{COMMANDS[command].module}; is bidlab fully installed?)", file=sys.stderr)
        return 2
    if command is None:  # `bidlab --help` to stdout; a bare or unknown flag is a misuse
        if any(a in ("-h", "--help") for a in argv):
            parser.print_help(sys.stdout)
            return 0
        parser.print_help(sys.stderr)
        if argv:
            print(f"bidlab: unrecognised arguments: {' '.join(argv)}", file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra and not _accepts_extra(command):
        parser.error(f"unrecognised arguments: {' '.join(extra)}")
    args.extra = extra
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return int(_module(command).run(args) or 0)


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: Any = None, line: str | None = None) -> None:
    """A warning as one line on stderr, ``warning: MESSAGE`` (the category's name added
    when it is not a plain UserWarning), not Python's format with the source line."""
    kind = "" if category is UserWarning else f" ({category.__name__})"
    text = " ".join(str(message).split())
    print(f"warning{kind}: {text}", file=sys.stderr if file is None else file)
