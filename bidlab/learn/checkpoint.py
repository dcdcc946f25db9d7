"""Checkpoints: model matrices, updater state, options and progress in one ``.npz``.

Format: an uncompressed ``.npz`` (``numpy.savez``) holding only numeric arrays --
``model/0``, ``model/1``, ... (the model matrices), ``model_extra/<name>``,
``updater/<name>`` (e.g. ADAGrad's squared-gradient means) -- plus ``__meta__``, the UTF-8
bytes of a JSON document (options, progress, class names, shapes). It is read with
``numpy.load(allow_pickle=False)`` and ``json.loads``, so loading a crafted file can fail
but never runs code.

Writing is atomic: a temporary file in the same folder is written, flushed and fsynced,
then renamed over the target (and the folder fsynced), so a writer killed at any moment
leaves either the previous checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["save_checkpoint", "load_checkpoint", "Checkpoint", "CheckpointError",
           "atomic_write_bytes"]

FORMAT = "bidlab-checkpoint"
VERSION = 1


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


def atomic_write_bytes(path: str | os.PathLike, write: Any) -> Path:
    """Call ``write(fileobj)`` on a temporary file next to ``path``, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)
    return path


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


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read a checkpoint without unpickling anything; CheckpointError names the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint file at {path}")
    try:
        with open(path, "rb") as f:
            raw = f.read()
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise CheckpointError(
            f"checkpoint {path} cannot be read safely ({type(exc).__name__}: {exc}); it is "
            "corrupt, truncated or not a bidlab checkpoint (object arrays / pickles are "
            "refused)") from None
    blob = arrays.pop("__meta__", None)
    if blob is None or blob.dtype != np.uint8 or blob.ndim != 1:
        raise CheckpointError(f"{path} has no bidlab metadata: not a bidlab checkpoint")
    try:
        meta = json.loads(blob.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path} has unreadable metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a bidlab checkpoint (format != {FORMAT!r})")
    if int(meta.get("version", 0)) > VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {meta['version']}; "
                              f"this bidlab reads up to {VERSION}: upgrade bidlab")
    for name, a in arrays.items():
        if a.dtype.kind not in "biuf":
            raise CheckpointError(f"checkpoint {path}: array {name!r} has dtype {a.dtype}; "
                                  "only numbers are allowed")
    return Checkpoint(arrays, meta, path)
