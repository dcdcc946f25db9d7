"""Data sets larger than memory: ``.npz`` shards plus a JSON manifest, read with prefetch.

Samples are rows. :func:`write_shards` (:mod:`bidlab.learn.shard_writer`) splits aligned
matrices (features, targets, ...) row-wise into shard files ``shard-00000.npz``, ... (dense
arrays as is, CSR matrices as their ``data`` / ``indices`` / ``indptr`` arrays; never
pickled) and writes ``manifest.json`` last, each file atomically (temporary name, fsync,
rename)::

    {"format": "bidlab-shards", "version": 1, "n_samples": 10000,
     "matrices": [{"name": "X", "kind": "csr", "cols": 500, "dtype": "float32",
                   "index_dtype": "int32"}, {"name": "y", "kind": "dense", ...}],
     "shards": [{"file": "shard-00000.npz", "rows": 2500, "bytes": 123456}, ...]}

:class:`ShardSource` streams them: a pass is the shards in order (or in a shuffled order,
``shuffle_shards``), each shard's rows in order (or shuffled, ``shuffle_rows``), cut into
minibatches *across* shard boundaries -- so without shuffling it yields exactly the
minibatches of a :class:`~bidlab.learn.datasource.MemorySource` over the same data, and
only the last minibatch of a pass is partial. A background thread loads the shards and
plans the next ``prefetch`` minibatches while the model trains, so training runs at disk
speed; the training thread only copies the planned rows into its reused containers.

A missing shard is reported when the source is made; a corrupt or truncated one (a bad
zip, a wrong shape or dtype, a size that disagrees with the manifest) when it is read --
each error names the file. A manifest names files inside its folder only: a ``"file"`` that is
absolute, holds ``..`` or resolves (through a symlink) outside the folder is refused, as
is one that is not a regular file, and one file listed twice (under any two names). Each
shard's ``.npz`` members are checked against the decompressed-size cap
(:mod:`bidlab._bounded_io`) before numpy inflates them.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import weakref
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab._bounded_io import (
    InputTooLargeError,
    NotRegularFileError,
    check_npz,
    is_within,
    open_regular,
    require_regular,
)
from bidlab.learn.datasource import DataInfo, DataSource
from bidlab.learn.shard_checks import check_matrices, check_stored, members
from bidlab.learn.shard_writer import FORMAT, MANIFEST, write_shards
from bidlab.learn.source_inputs import (
    _clamp_batch,
    check_seed,
)
from bidlab.learn.staging import MatSpec, Piece, Plan
from bidlab.mat import validate_csr

__all__ = ["write_shards", "ShardSource", "ShardError", "read_manifest"]



class ShardError(OSError):
    """A shard folder is incomplete or a shard file is corrupt (the message names it)."""


def read_manifest(folder: str | os.PathLike) -> dict[str, Any]:
    """The parsed, checked manifest of a shard folder (every shard file must exist).

    Its ``"_folder"`` is absolute: a source made from a relative path still reads its
    shards after the working directory changes (a paused learner resumed elsewhere)."""
    folder = Path(folder).absolute()
    path = folder / MANIFEST if folder.is_dir() else folder
    folder = path.parent
    try:
        require_regular(path, "shard manifest")
        manifest = json.loads(path.read_text())
    except NotRegularFileError as exc:
        raise ShardError(str(exc)) from None
    except FileNotFoundError:
        raise ShardError(f"no shard manifest at {path}: write one with "
                         "bidlab.learn.write_shards(folder, X, y)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ShardError(f"shard manifest {path} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ShardError(f"{path} is not a bidlab shard manifest (format != {FORMAT!r})")
    try:
        rows = [int(s["rows"]) for s in manifest["shards"]]
        total = sum(rows)
        check_matrices(manifest["matrices"])
        if min(rows, default=0) < 0:
            raise ValueError("a shard has a negative row count")
        if not isinstance(manifest.get("n_samples"), int):
            raise ValueError(f"n_samples is {manifest.get('n_samples')!r}, not an int")
    except (KeyError, TypeError, ValueError) as exc:
        raise ShardError(f"shard manifest {path} is malformed ({exc!r}); re-write the "
                         "shards with write_shards(...)") from None
    if total != manifest.get("n_samples"):
        raise ShardError(f"shard manifest {path} lists {total} rows in its shards but "
                         f"n_samples={manifest.get('n_samples')}")
    seen: dict[Any, str] = {}
    for entry in manifest["shards"]:
        shard = _shard_path(folder, entry, path)
        real = os.path.realpath(shard)
        key: Any = real
        if shard.exists():
            try:
                st = require_regular(shard, "shard file")
            except NotRegularFileError as exc:
                raise ShardError(str(exc)) from None
            key = (st.st_dev, st.st_ino)
        if key in seen:
            raise ShardError(f"shard manifest {path} lists the shard file {real} "
                             f"twice (as {seen[key]!r} and {entry['file']!r}), so its rows "
                             "would be read twice: list each file once (or re-write the "
                             "shards with write_shards(...))")
        seen[key] = entry["file"]
    missing = [s["file"] for s in manifest["shards"] if not (folder / s["file"]).exists()]
    if missing:
        raise ShardError(f"shard folder {folder} is missing {len(missing)} shard file(s): "
                         f"{', '.join(str(folder / f) for f in missing[:5])}; re-write the "
                         "shards with write_shards(...)")
    manifest["_folder"] = str(folder)
    return manifest


def _shard_path(folder: Path, entry: Any, manifest: Path | str) -> Path:
    """``folder / entry["file"]``, refused unless it names a file inside ``folder``."""
    name = entry.get("file") if isinstance(entry, dict) else None
    if not isinstance(name, str) or not name:
        raise ShardError(f"shard manifest {manifest} has a shard entry without a file name: "
                         f"{entry!r:.80}")
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts or (folder / rel).exists() and not is_within(
            folder / rel, folder):
        raise ShardError(f"shard manifest {manifest} names {name!r}, which is outside its "
                         f"folder {folder}: shard files must lie inside the folder (no '..', "
                         "no absolute paths, no symlinks out); re-write the shards with "
                         "write_shards(...)")
    return folder / rel


def _load_shard(folder: Path, entry: dict[str, Any], mspecs: list[dict[str, Any]]) -> tuple:
    """The aligned matrices of one shard (CSR as scipy matrices), checked against the manifest."""
    path = _shard_path(folder, entry, folder / MANIFEST)
    rows = int(entry["rows"])
    try:
        size = require_regular(path, "shard file").st_size
        if "bytes" in entry and size != int(entry["bytes"]):
            raise ShardError(f"shard file {path} has {size} bytes but the manifest says "
                             f"{entry['bytes']}: it is truncated or was changed; re-write it")
        check_npz(path)
        out = []
        with open_regular(path, "shard file") as f, np.load(f, allow_pickle=False) as z:
            for m in mspecs:
                name, cols = m["name"], int(m["cols"])
                if m["kind"] == "csr":
                    data, indices, indptr = (z[k] for k in members(name, True))
                    check_stored(m, (data, indices, indptr))
                    if indptr.shape != (rows + 1,) or data.shape != indices.shape or (
                            int(indptr[-1]) != data.shape[0]):
                        raise ValueError(f"{name!r} is not a valid {rows}-row CSR matrix")
                    csr = sp.csr_matrix((data, indices, indptr), shape=(rows, cols))
                    validate_csr(csr, f"shard matrix {name!r}")
                    out.append(csr)
                else:
                    a = z[name]
                    check_stored(m, (a,))
                    if a.shape != (rows, cols):
                        raise ValueError(f"{name!r} has shape {a.shape}, expected {(rows, cols)}")
                    out.append(a)
        return tuple(out)
    except ShardError:
        raise
    except (NotRegularFileError, InputTooLargeError) as exc:
        raise ShardError(str(exc)) from None
    except FileNotFoundError:
        raise ShardError(f"shard file {path} is missing; re-write the shards") from None
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError) as exc:
        raise ShardError(f"shard file {path} is corrupt or unreadable ({type(exc).__name__}: "
                         f"{exc}); re-write the shards with write_shards(...)") from None


class _Stop:
    """Sentinel telling the consumer that the producer has ended (n_passes reached)."""


def _produce(folder: Path, manifest: dict[str, Any], batch_size: int, shuffle_shards: bool,
             shuffle_rows: bool, seed: int, n_passes: int | None, pass0: int, index0: int,
             skew0: int, out: queue.Queue, stop: threading.Event) -> None:
    """The prefetch thread: load shards ahead and plan minibatches into ``out``, from
    minibatch ``index0`` of pass ``pass0`` on, that pass's minibatches starting ``skew0``
    rows after the multiples of ``batch_size`` (a pass resumed at a row of another one).

    It holds no reference to the source object, so an abandoned source can be collected
    (its finaliser sets ``stop``).
    """
    shards = manifest["shards"]
    mspecs = manifest["matrices"]
    sizes = np.array([int(s["rows"]) for s in shards], dtype=np.int64)
    n = int(sizes.sum())
    first_row = np.cumsum(sizes) - sizes  # each shard's first global row id

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    try:
        pass_, index = pass0, index0
        loaded: dict[int, tuple] = {}
        while n_passes is None or pass_ < n_passes:
            order = (np.random.default_rng([seed, pass_, 1]).permutation(len(shards))
                     if shuffle_shards else np.arange(len(shards)))
            ends = np.cumsum(sizes[order])
            starts = ends - sizes[order]
            b = 0
            while b < n:
                a = index * batch_size + (skew0 if pass_ == pass0 else 0)
                b = min(a + batch_size, n)
                pieces = []
                k = int(np.searchsorted(ends, a, side="right"))
                pos = a
                while pos < b:
                    sid = int(order[k])
                    if sid not in loaded:
                        mats = _load_shard(folder, shards[sid], mspecs)
                        perm = (np.random.default_rng([seed, pass_, 2, sid]).permutation(
                            int(sizes[sid])) if shuffle_rows else None)
                        loaded = {sid: (mats, perm)}  # keep only the current shard
                    mats, perm = loaded[sid]
                    lo = pos - int(starts[k])
                    hi = min(b, int(ends[k])) - int(starts[k])
                    rows: Any = slice(lo, hi) if perm is None else perm[lo:hi]
                    pieces.append(Piece(mats, rows, int(first_row[sid])))
                    pos += hi - lo
                    k += 1
                if not put(Plan(pieces, pass_, index, b >= n, a)):
                    return
                index += 1
            pass_, index = pass_ + 1, 0
            loaded = {}
        put(_Stop())
    except BaseException as exc:  # surfaces in the consumer's thread
        put(exc)


class ShardSource(DataSource):
    """Minibatches read from a shard folder written by :func:`write_shards`.

    Parameters
    ----------
    folder
        the folder (or its ``manifest.json``).
    batch_size
        rows per minibatch (clamped to the number of samples, with a warning).
    shuffle_shards
        visit the shards in a new random order each pass.
    shuffle_rows
        visit each shard's rows in a new random order each pass.
    seed
        seeds both shuffles (with the pass number: a resumed run sees the same order).
    prefetch
        minibatches planned ahead by the background thread.
    n_passes
        stop after this many passes (None: repeat forever).
    device
        ``"cpu"`` (default) or ``"gpu"`` for the minibatch containers.
    """

    def __init__(self, folder: str | os.PathLike, batch_size: int = 1000,
                 shuffle_shards: bool = False, shuffle_rows: bool = False, seed: int = 0,
                 prefetch: int = 4, n_passes: int | None = None,
                 device: str | None = None) -> None:
        super().__init__(batch_size, n_passes, device)
        if not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"prefetch must be an int >= 1; got {prefetch!r}")
        check_seed(seed)
        self.manifest = read_manifest(folder)
        self.folder = Path(self.manifest["_folder"])
        n = int(self.manifest["n_samples"])
        specs = []
        for m in self.manifest["matrices"]:
            sparse = m["kind"] == "csr"
            specs.append(MatSpec(int(m["cols"]), np.dtype(m["dtype"]), sparse,
                                 np.dtype(m.get("index_dtype", "int32")) if sparse else None))
        names = tuple(m["name"] for m in self.manifest["matrices"])
        self.batch_size = _clamp_batch(self.batch_size, n)
        self.shuffle_shards, self.shuffle_rows = bool(shuffle_shards), bool(shuffle_rows)
        self.seed, self.prefetch = int(seed), prefetch
        self._info = DataInfo(n, names, tuple(specs), device or "cpu", self.batch_size)
        self._queue: queue.Queue | None = None
        self._stop_event: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._finalizer: Any = None

    # -- the prefetch thread --------------------------------------------------------------
    def _start_thread(self) -> None:
        self._halt_thread()
        self._queue = queue.Queue(maxsize=self.prefetch)
        self._stop_event = threading.Event()
        self._thread = threading.Thread(
            target=_produce, name=f"bidlab-shards-{self.folder.name}", daemon=True,
            args=(self.folder, self.manifest, self.batch_size, self.shuffle_shards,
                  self.shuffle_rows, self.seed, self.n_passes, self._pass, self._index,
                  self.row - self._index * self.batch_size, self._queue, self._stop_event))
        self._thread.start()
        self._finalizer = weakref.finalize(self, _halt, self._stop_event, self._thread)

    def _halt_thread(self) -> None:
        if self._thread is not None:
            self._finalizer.detach()
            _halt(self._stop_event, self._thread)
            self._thread = None

    _row_seek = True

    def seek(self, pass_: int = 0, index: int = 0, row: int | None = None) -> None:
        super().seek(pass_, index, row)
        self._halt_thread()  # the next _next_plan restarts it at the new position

    def _set_batch_size(self, n: int) -> None:
        super()._set_batch_size(n)
        self._halt_thread()

    def nnz_bound(self, j: int, n: int) -> int | None:
        hist = self.manifest["matrices"][j].get("row_nnz_hist")
        if not hist:
            return None
        total, left = 0, n
        for length, count in hist:  # longest rows first
            take = min(left, int(count))
            total += take * int(length)
            left -= take
            if left == 0:
                break
        return total

    def _next_plan(self) -> Plan | None:
        if self.n_passes is not None and self._pass >= self.n_passes:
            return None
        if self._thread is None:
            self._start_thread()
        item = self._queue.get()
        if isinstance(item, _Stop):
            self._thread = None
            return None
        if isinstance(item, BaseException):
            self._halt_thread()
            raise item
        if item.last:
            self._pass, self._index = item.pass_ + 1, 0
        else:
            self._pass, self._index = item.pass_, item.index + 1
        return item

    def release(self) -> None:
        """Stop the prefetch thread; the next minibatch restarts it where the stream is."""
        self._halt_thread()


def _halt(stop: threading.Event, thread: threading.Thread) -> None:
    stop.set()
    if thread is not threading.current_thread():
        thread.join(timeout=5.0)
