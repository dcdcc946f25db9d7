"""Checkpoints: model matrices, updater state, options and progress in one ``.npz``.

Format: an uncompressed ``.npz`` (``numpy.savez``) holding only numeric arrays --
``model/0``, ``model/1``, ... (the model matrices), ``model_extra/<name>``,
``updater/<name>`` (e.g. ADAGrad's squared-gradient means) -- plus ``__meta__``, the UTF-8
bytes of a JSON document (options, progress, class names, shapes). It is read with
``numpy.load(allow_pickle=False)`` and ``json.loads``, so loading a crafted file can fail
but never runs code.

Reading is bounded: every member must be stored uncompressed (bidlab writes no other
kind, so a zip bomb is refused before anything is inflated), each array's header must
describe exactly the bytes the member holds (a header claiming 10^12 floats in a small file
is refused before anything is allocated), the file must be a regular file (a FIFO or
device is refused before it is opened), and the file and the sizes its zip directory
declares are capped at ``MAX_BYTES`` -- by default (None) the memory budget of
:mod:`bidlab._bounded_io` (``$BIDLAB_MEMORY_BUDGET``, else a quarter of the machine's
memory) -- before any member is read. The file is read member by member, never whole.
Any failure is a :class:`CheckpointError` naming the file and the reason.

Writing is atomic: a temporary file in the same folder is written, flushed and fsynced,
then renamed over the target (and the folder fsynced), so a writer killed at any moment
leaves either the previous checkpoint or the new one, never a torn file. A missing folder
is made, also when it is removed while the file is written (the write starts over, so a
training run outlives a folder deleted under it). The temporary files of writers that
died are removed by the next save to the same path. The target must be missing or a
regular file (:mod:`bidlab.learn.save_target`, checked before writing and again just
before the rename): a directory, FIFO, socket, device or symbolic link there is refused
with :class:`~bidlab.learn.save_target.SaveTargetError`, never replaced.
"""

from __future__ import annotations

import json
import math
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bidlab._bounded_io import (
    MEMORY_BUDGET_ENV,
    NotRegularFileError,
    format_bytes,
    memory_budget,
    open_regular,
    require_regular,
)
from bidlab.learn.save_target import check_save_target

__all__ = ["save_checkpoint", "load_checkpoint", "Checkpoint", "CheckpointError",
           "atomic_write_bytes", "remove_stale_temps", "MAX_BYTES"]

FORMAT = "bidlab-checkpoint"
VERSION = 1
#: how many times a write starts over when its folder is removed while it writes
WRITE_ATTEMPTS = 3
#: the largest checkpoint (file, and sum of its declared members) read, in bytes; None:
#: the memory budget (``bidlab._bounded_io.memory_budget()``)
MAX_BYTES: int | None = None


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, not a bidlab checkpoint, or does not fit."""


@dataclass
class Checkpoint:
    """A loaded checkpoint: arrays by name and the JSON metadata."""

    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]
    path: Path

    def group(self, prefix: str) -> dict[str, np.ndarray]:
        """Arrays under ``prefix/`` with the prefix removed."""
        p = prefix + "/"
        return {k[len(p):]: v for k, v in self.arrays.items() if k.startswith(p)}

    @property
    def modelmats(self) -> list[np.ndarray]:
        g = self.group("model")
        return [g[str(i)] for i in range(len(g))]


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Remove ``path``'s temporary files left by writers that died (their pid is gone);
    return what was removed."""
    path = Path(path)
    removed = []
    prefix = f".{path.name}.tmp-"
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid_text = entry.name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)):
            continue
        try:
            entry.unlink()
            removed.append(entry)
        except OSError:
            pass
    return removed


def atomic_write_bytes(path: str | os.PathLike, write: Any) -> Path:
    """Call ``write(fileobj)`` on a temporary file next to ``path``, fsync, rename.

    ``path`` must be missing or a regular file; anything else there (a directory, FIFO,
    socket, device or symbolic link) raises
    :class:`~bidlab.learn.save_target.SaveTargetError` and is left as it was. The folder is
    made when it is missing, and made again when it (or the temporary file) is removed
    while the file is written: ``write`` is then called again, up to
    :data:`WRITE_ATTEMPTS` times in all.
    """
    path = check_save_target(path)
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # made, then removed before mkdir saw it was a folder
            if attempt == WRITE_ATTEMPTS or (os.path.lexists(path.parent)
                                              and not path.parent.is_dir()):
                raise  # (or a file is there: not a folder to write in)
            if not path.parent.is_dir():
                continue
        remove_stale_temps(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            check_save_target(path)  # nothing else appeared there while the file was written
            os.replace(tmp, path)
            break
        except FileNotFoundError:  # the folder (so the temporary file) vanished: again
            if os.path.lexists(tmp):  # something else is missing: not ours to mend
                _unlink(tmp)
                raise
            if attempt == WRITE_ATTEMPTS:
                raise
        except BaseException:
            _unlink(tmp)
            raise
    _fsync_dir(path.parent)
    return path


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def save_checkpoint(path: str | os.PathLike, arrays: dict[str, Any],
                    meta: dict[str, Any]) -> Path:
    """Write ``arrays`` (name -> host numpy array) and ``meta`` (JSON-able) atomically."""
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf":
            raise TypeError(f"checkpoint array {name!r} must be a numeric numpy array; got "
                            f"{type(a).__name__} {getattr(a, 'dtype', '')}")
    doc = {"format": FORMAT, "version": VERSION, "written": time.time(), **meta}
    blob = np.frombuffer(json.dumps(doc, allow_nan=True).encode("utf-8"), dtype=np.uint8)
    payload = {**arrays, "__meta__": blob}
    return atomic_write_bytes(path, lambda f: np.savez(f, **payload))


def _read_members(path: Path, f: Any, size: int, cap: int) -> dict[str, np.ndarray]:
    """The arrays of an uncompressed ``.npz``, each checked against its header first."""
    arrays = {}
    with zipfile.ZipFile(f) as zf:
        infos = zf.infolist()
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED:
                raise CheckpointError(f"checkpoint {path}: member {info.filename!r} is "
                                      "compressed; bidlab writes (and reads) only stored "
                                      "members")
        declared = sum(info.file_size for info in infos)
        if declared > min(size, cap):
            raise CheckpointError(
                f"checkpoint {path}: its zip directory declares {format_bytes(declared)} of "
                f"arrays, more than the file holds ({format_bytes(size)}) or the cap "
                f"({format_bytes(cap)}, bidlab.learn.checkpoint.MAX_BYTES or "
                f"${MEMORY_BUDGET_ENV}); it is corrupt or crafted")
        for info in infos:
            if not info.filename.endswith(".npy"):
                raise CheckpointError(f"checkpoint {path}: unexpected member "
                                      f"{info.filename!r}")
            with zf.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
                else:
                    raise CheckpointError(f"checkpoint {path}: member {info.filename!r} has "
                                          f"array format {version}")
                if dtype.hasobject or dtype.kind not in "biuf":
                    raise CheckpointError(f"checkpoint {path}: array {info.filename[:-4]!r} "
                                          f"has dtype {dtype}; only numbers are allowed")
                header = member.tell()
                need = math.prod(shape) * dtype.itemsize
                if need != info.file_size - header:
                    raise CheckpointError(
                        f"checkpoint {path}: array {info.filename[:-4]!r} claims shape "
                        f"{shape} ({need} bytes) but holds {info.file_size - header} bytes")
                data = member.read(need)
            arr = np.frombuffer(data, dtype=dtype)
            order = "F" if fortran else "C"
            arrays[info.filename[:-4]] = arr.reshape(shape, order=order).copy(order=order)
    return arrays


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read a checkpoint without unpickling anything; CheckpointError names the file."""
    path = Path(path)
    try:
        size = require_regular(path, "checkpoint").st_size
    except NotRegularFileError as exc:
        raise CheckpointError(str(exc)) from None
    except OSError:
        raise CheckpointError(f"no checkpoint file at {path}") from None
    cap = memory_budget() if MAX_BYTES is None else MAX_BYTES
    if size > cap:
        raise CheckpointError(f"checkpoint {path} is {format_bytes(size)}, over the cap of "
                              f"{format_bytes(cap)} (bidlab.learn.checkpoint.MAX_BYTES, by "
                              f"default the memory budget: raise ${MEMORY_BUDGET_ENV})")
    try:
        with open_regular(path, "checkpoint") as f:
            arrays = _read_members(path, f, size, cap)
    except CheckpointError:
        raise
    except Exception as exc:  # any parse failure of a crafted or torn file  # noqa: BLE001
        raise CheckpointError(
            f"checkpoint {path} cannot be read safely ({type(exc).__name__}: {exc}); it is "
            "corrupt, truncated or not a bidlab checkpoint (object arrays / pickles are "
            "refused)") from None
    blob = arrays.pop("__meta__", None)
    if blob is None or blob.dtype != np.uint8 or blob.ndim != 1:
        raise CheckpointError(f"{path} has no bidlab metadata: not a bidlab checkpoint")
    try:
        meta = json.loads(blob.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CheckpointError(f"checkpoint {path} has unreadable metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a bidlab checkpoint (format != {FORMAT!r})")
    version = meta.get("version", 0)
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {version!r}; "
                              f"this bidlab reads up to {VERSION}: upgrade bidlab")
    return Checkpoint(arrays, meta, path)
