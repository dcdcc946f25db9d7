"""Where bidlab may write a file: only a regular file (new or replaced), never anything else.

Every file bidlab writes -- an estimator's ``save``, a learner's checkpoint, ``bidlab train
--save`` / ``--checkpoint`` -- goes through :func:`bidlab.learn.checkpoint.atomic_write_bytes`
(a temporary file renamed over the target). A rename replaces whatever has the target's
name, so the target is checked first (and again just before the rename):

* a missing path or an existing regular file is written (the file is replaced);
* a directory, FIFO, socket, character or block device is refused;
* a symbolic link is refused rather than followed (the link would otherwise be replaced by
  a file, or the write would land wherever the link points): save to the file itself.

:func:`check_writable` adds what a command line wants before a long run: that the folder
exists (or can be made) and a file can be created in it, so an unwritable checkpoint path
is reported before training rather than after. :func:`guard_path_option` makes a learner's
file option (``checkpoint``) refuse such a path when it is set, live or not, so the run
keeps its old path instead of failing at its next write.
"""

from __future__ import annotations

import os
import stat
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SaveTargetError", "check_save_target", "check_writable", "check_outputs",
           "same_file", "guard_path_option"]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


class SaveTargetError(ValueError):
    """A path bidlab was asked to write to is not (and cannot become) a regular file."""


def check_save_target(path: str | os.PathLike) -> Path:
    """Return ``path`` when it is missing or a regular file; raise :class:`SaveTargetError`
    when it is a symbolic link, a directory, a FIFO, a socket or a device."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except OSError:
        return path  # nothing there (or an unreachable folder: the write itself says so)
    if stat.S_ISREG(st.st_mode):
        return path
    if stat.S_ISLNK(st.st_mode):
        raise SaveTargetError(
            f"{path} is a symbolic link (to {os.readlink(path)}); bidlab does not write "
            "through links: save to the file's own path, or remove the link first")
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    raise SaveTargetError(
        f"{path} is {kind}, not a regular file; bidlab writes models and checkpoints only to "
        "regular files (it replaces an existing file, nothing else): choose a file path")


def check_writable(path: str | os.PathLike) -> Path:
    """:func:`check_save_target`, and that a file can be created next to ``path`` (its
    folder, or the nearest existing folder above a missing one); raise
    :class:`SaveTargetError` naming the path and the reason otherwise."""
    path = check_save_target(path)
    folder = path.absolute().parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise SaveTargetError(f"cannot write {path}: {folder} is not a folder")
    probe = folder / f".{path.name}.tmp-{os.getpid()}-{time.monotonic_ns()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise SaveTargetError(f"cannot write {path}: {exc.strerror or exc} (in "
                              f"{folder})") from None
    os.close(fd)
    os.unlink(probe)
    return path


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether the paths ``a`` and ``b`` name one file: an existing file both reach, or
    (one of them missing) the same absolute path once ``..`` and links are resolved."""
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:  # one of them does not exist yet
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(paths: dict[str, str | os.PathLike | None]) -> None:
    """:func:`check_writable` for each path given in ``paths`` (what names it, such as the
    flag ``--save`` -> the path; None: not given), and that no two name one file (the one
    written last would replace the other: a saved model a checkpoint); raise
    :class:`SaveTargetError` naming the flag, the path and the reason otherwise."""
    given = [(what, path) for what, path in paths.items() if path]
    for i, (what, path) in enumerate(given):
        for other, earlier in given[:i]:
            if same_file(earlier, path):
                raise SaveTargetError(f"{other} and {what} name one file ({path}): the one "
                                      "written last would replace the other; give each its "
                                      "own path")
        try:
            check_writable(path)
        except SaveTargetError as exc:
            raise SaveTargetError(f"{what}: {exc}") from None


def guard_path_option(opts: Any, name: str,
                      target: Callable[[str, bool], str | None] | None = None) -> None:
    """Make the option set ``opts`` refuse a new value of its file option ``name`` that
    :func:`check_writable` refuses (a directory, link, FIFO or device there, or no
    folder a file can be created in), with :class:`SaveTargetError` naming the path, the
    reason and the fix; the option keeps its value.

    ``target(path, True)``: the file actually written for ``path`` (a rank's own, as
    :meth:`bidlab.learn.comm.Communicator.checkpoint_file` says), None when this process
    writes none (then nothing is checked). Only a value that differs from the current one
    is checked, so setting other options never fails on a path set earlier.
    """
    ref = weakref.ref(opts)  # the option set holds this check: no cycle through it

    def check(values: dict[str, Any]) -> None:
        value, owner = values.get(name), ref()
        if not value or owner is None or value == owner.get(name):
            return
        path = target(str(value), True) if target is not None else str(value)
        if path is None:
            return
        try:
            check_writable(path)
        except SaveTargetError as exc:
            hint = (f" (e.g. {Path(path) / 'checkpoint.npz'}, a file in that folder)"
                    if os.path.isdir(path) and not os.path.islink(path) else "")
            raise SaveTargetError(f"the {name!r} option must name a file bidlab can write; "
                                  f"{exc}{hint}. It stays {owner.get(name)!r}") from None

    opts.add_validator(check)
