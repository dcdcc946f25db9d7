"""Bounded, safe reading of data files: regular files only, capped decompression, a budget.

Every loader of bidlab (:mod:`bidlab.datasets`, shard folders, checkpoints and saved
models) opens its files through this module:

* :func:`require_regular` and :func:`open_regular` accept regular files only. A FIFO, a
  device (``/dev/zero``), a socket or a symlink loop is refused by its type, from
  ``os.stat``, before anything is opened (``open`` on a FIFO waits forever for a writer),
  with :class:`NotRegularFileError` naming the path and what it is.
* :func:`open_data` streams a gzip file (told by its magic number) through a decompressor
  that stops with :class:`InputTooLargeError` once more than :func:`max_decompressed`
  bytes came out. The cap is the ``max_decompressed=`` keyword of a loader, else
  ``$BIDLAB_MAX_DECOMPRESSED`` (bytes, or a size such as ``16G``), else 4 GiB or the memory
  budget, whichever is smaller. The same cap bounds tar members and ``.npz`` members.
* :func:`check_budget` compares what a file's header asks for (rows, columns, nonzeros)
  with :func:`memory_budget` before anything is allocated: the ``memory_budget=`` keyword,
  else ``$BIDLAB_MEMORY_BUDGET``, else a quarter of the physical memory (or of the
  address-space limit, ``ulimit -v``, when that is lower).
* :func:`check_npz` reads an ``.npz``'s zip directory and each array's header and refuses
  one whose declared sizes exceed the cap before numpy inflates or allocates anything.

Only the standard library and numpy: both :mod:`bidlab.datasets` and :mod:`bidlab.learn`
use it.
"""

from __future__ import annotations

import errno
import gzip
import io
import math
import os
import resource
import stat
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

__all__ = ["NotRegularFileError", "InputTooLargeError", "MAX_DECOMPRESSED_ENV",
           "MEMORY_BUDGET_ENV", "DEFAULT_MAX_DECOMPRESSED", "require_regular", "open_regular",
           "open_data", "read_data", "max_decompressed", "memory_budget", "check_budget",
           "check_npz", "format_bytes", "parse_size", "stat_path", "is_within",
           "not_found"]

MAX_DECOMPRESSED_ENV = "BIDLAB_MAX_DECOMPRESSED"
MEMORY_BUDGET_ENV = "BIDLAB_MEMORY_BUDGET"
DEFAULT_MAX_DECOMPRESSED = 4 << 30  #: 4 GiB (or the memory budget, when smaller)
_GZIP_MAGIC = b"\x1f\x8b"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class NotRegularFileError(ValueError):
    """A data path is not a regular file (a FIFO, device, socket, symlink loop, ...)."""


class InputTooLargeError(ValueError):
    """A file decompresses to more than the cap, or its header asks for more memory than
    the budget (the message names the file, the figure and how to raise the limit)."""


# ------------------------------------------------------------------------------ sizes
def format_bytes(n: float) -> str:
    """``7.5 GiB``, ``512 MiB``, ``80 bytes``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} bytes"


def parse_size(text: str, what: str = "size") -> int:
    """Bytes from ``"4096"``, ``"512M"``, ``"16G"``, ``"1.5GiB"`` (powers of 1024)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS and t[-1:] else ""
    try:
        value = float(t[:-1] if unit else t) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a size: give bytes or a number with K, M, "
                         "G or T (e.g. 16G)") from None
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{what} {text!r} must be at least one byte")
    return int(value)


def _override(value: int | None, env: str) -> int | None:
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"a byte limit must be an int >= 1; got {value!r}")
        return value
    text = os.environ.get(env)
    return parse_size(text, f"${env}") if text else None


def memory_budget(budget: int | None = None) -> int:
    """The bytes one loader may ask for: ``budget`` when given, else ``$BIDLAB_MEMORY_BUDGET``,
    else a quarter of the physical memory or of the address-space limit, whichever is less."""
    chosen = _override(budget, MEMORY_BUDGET_ENV)
    if chosen is not None:
        return chosen
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        ram = 16 << 30
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
        ram = min(ram, soft)
    return max(ram // 4, 1 << 20)


def max_decompressed(cap: int | None = None) -> int:
    """The decompressed-size cap: ``cap`` when given, else ``$BIDLAB_MAX_DECOMPRESSED``, else
    :data:`DEFAULT_MAX_DECOMPRESSED` or :func:`memory_budget`, whichever is smaller."""
    chosen = _override(cap, MAX_DECOMPRESSED_ENV)
    return chosen if chosen is not None else min(DEFAULT_MAX_DECOMPRESSED, memory_budget())


def _raise_cap(path: os.PathLike | str, what: str, cap: int) -> InputTooLargeError:
    return InputTooLargeError(
        f"{path}: {what} exceeds the decompressed-size cap of {format_bytes(cap)}; if the "
        f"data is genuine, raise the cap with max_decompressed=BYTES or ${MAX_DECOMPRESSED_ENV}"
        f"=SIZE (e.g. {MAX_DECOMPRESSED_ENV}={max(2 * cap >> 30, 1)}G)")


def check_budget(path: os.PathLike | str, what: str, nbytes: int, budget: int | None = None,
                 fix: str = "") -> None:
    """Raise :class:`InputTooLargeError` when ``nbytes`` (what ``what`` would need) exceeds
    :func:`memory_budget`; the message names the file, the figure and ``fix``."""
    limit = memory_budget(budget)
    if nbytes > limit:
        raise InputTooLargeError(
            f"{path}: {what} would need {format_bytes(nbytes)}, over the memory budget of "
            f"{format_bytes(limit)}; {fix + ', or ' if fix else ''}if that is intended, raise "
            f"the budget with memory_budget=BYTES or ${MEMORY_BUDGET_ENV}=SIZE")


# ------------------------------------------------------------------------- file types
def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def stat_path(path: os.PathLike | str) -> os.stat_result:
    """``os.stat(path)`` (following symlinks), saying "symlink loop" for one and naming a
    dangling symlink's target; FileNotFoundError when nothing is there."""
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFileError(
                f"{path}: symlink loop (too many levels of symbolic links): point at the "
                "real file or folder") from None
        if exc.errno == errno.ENOENT and os.path.islink(path):
            raise FileNotFoundError(f"{path} is a symlink to {os.readlink(path)!r}, which "
                                    "does not exist") from None
        raise


def require_regular(path: os.PathLike | str, what: str = "data file") -> os.stat_result:
    """The ``os.stat`` of ``path``; NotRegularFileError unless it is a regular file."""
    st = stat_path(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(
            f"{path} is {_kind(st.st_mode)}, not a regular file: bidlab reads a {what} only "
            "from a regular file (copy the data into one)")
    return st


def open_regular(path: os.PathLike | str, what: str = "data file") -> BinaryIO:
    """``open(path, "rb")`` for a regular file only, checked before and after opening (the
    open itself cannot block: it is non-blocking until the type is confirmed)."""
    require_regular(path, what)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(f"{path} changed into {_kind(os.fstat(fd).st_mode)} "
                                      f"while being opened; bidlab reads a {what} only from a "
                                      "regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# ----------------------------------------------------------------- capped decompression
class _Capped(io.RawIOBase):
    """A readable stream over ``inner`` that raises once more than ``cap`` bytes came out."""

    def __init__(self, inner: BinaryIO, cap: int, path: os.PathLike | str,
                 source: BinaryIO | None = None) -> None:
        self._inner, self._cap, self._path, self._total = inner, cap, path, 0
        self._source = source  # the file under ``inner``, closed with it (GzipFile does not)

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        n = self._inner.readinto(b)
        self._total += n or 0
        if self._total > self._cap:
            raise _raise_cap(self._path, "its decompressed content", self._cap)
        return n

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            if self._source is not None:
                self._source.close()
            super().close()


def open_data(path: os.PathLike | str, cap: int | None = None,
              what: str = "data file") -> BinaryIO:
    """A binary stream of a regular file's content, gunzipped (capped at
    :func:`max_decompressed`) when the file starts with the gzip magic number."""
    f = open_regular(path, what)
    try:
        gzipped = f.read(2) == _GZIP_MAGIC
        f.seek(0)
    except BaseException:
        f.close()
        raise
    if not gzipped:
        return f
    raw = _Capped(gzip.GzipFile(fileobj=f, mode="rb"), max_decompressed(cap), path, f)
    return io.BufferedReader(raw, 1 << 20)


def not_found(path: os.PathLike | str, what: str) -> FileNotFoundError:
    """A FileNotFoundError naming ``path``, what was expected there and, for a relative
    path, the working directory (a dangling symlink says so instead)."""
    if os.path.islink(path):
        return FileNotFoundError(f"{path} is a symlink to {os.readlink(path)!r}, which does "
                                 "not exist")
    where = "" if os.path.isabs(path) else f", which is relative to {os.getcwd()}"
    return FileNotFoundError(f"{path} not found: expected a {what} there; check the path"
                             + where)


def read_data(path: os.PathLike | str, cap: int | None = None, what: str = "data file") -> bytes:
    """All of :func:`open_data`'s stream (corrupt gzip data is a ValueError naming the file;
    a missing file a FileNotFoundError saying what was expected, :func:`not_found`)."""
    try:
        stream = open_data(path, cap, what)
    except FileNotFoundError:
        raise not_found(path, what) from None
    with stream as f:
        try:
            return f.read()
        except (OSError, EOFError) as exc:
            raise ValueError(f"{path}: corrupt gzip data ({exc}); re-download the "
                             "file") from exc


# ------------------------------------------------------------------------------- npz
def check_npz(path: os.PathLike | str, cap: int | None = None) -> None:
    """Refuse an ``.npz`` whose members declare more than the cap in all, or whose array
    headers claim more bytes than their member holds, before numpy inflates or allocates.

    Raises :class:`InputTooLargeError` for the first, ValueError for the second and for a
    member that is not an array; zip errors pass through (``zipfile.BadZipFile``).
    """
    limit = max_decompressed(cap)
    with open_regular(path) as f, zipfile.ZipFile(f) as zf:
        infos = zf.infolist()
        total = sum(info.file_size for info in infos)
        if total > limit:
            raise _raise_cap(path, f"its arrays ({format_bytes(total)} declared in the zip "
                                   "directory)", limit)
        for info in infos:
            with zf.open(info) as member:
                try:
                    shape, dtype = _array_header(member)
                except ValueError as exc:
                    raise ValueError(f"{path}: member {info.filename!r} is not a numpy array "
                                     f"({exc})") from None
                holds = info.file_size - member.tell()
            need = math.prod(shape) * dtype.itemsize
            if need > holds:
                raise ValueError(f"{path}: array {info.filename!r} claims shape {shape} "
                                 f"({format_bytes(need)}) but its member holds "
                                 f"{format_bytes(holds)}; the file is corrupt or crafted")


def _array_header(member: BinaryIO) -> tuple[tuple[int, ...], np.dtype]:
    fmt = np.lib.format
    version = fmt.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = fmt.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, _, dtype = fmt.read_array_header_2_0(member)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    return shape, dtype


def is_within(path: Path, folder: Path) -> bool:
    """True when ``path``, symlinks resolved, lies inside ``folder`` (also resolved)."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False
