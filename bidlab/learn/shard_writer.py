"""Writing a shard folder (:func:`write_shards`): aligned matrices split row-wise into
``.npz`` files and a JSON manifest, the format :mod:`bidlab.learn.shards` reads."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.learn.checkpoint import atomic_write_bytes
from bidlab.learn.shard_checks import check_names, members
from bidlab.learn.source_inputs import _as_matrix, check_aligned, default_names

__all__ = ["FORMAT", "MANIFEST", "write_shards"]

#: the manifest's file name in a shard folder
MANIFEST = "manifest.json"
#: the manifest's ``"format"``
FORMAT = "bidlab-shards"


def write_shards(folder: str | os.PathLike, *mats: Any, rows_per_shard: int = 100_000,
                 names: tuple[str, ...] | None = None, compress: bool = False) -> Path:
    """Split aligned matrices (samples as rows) into ``.npz`` shards; return the manifest path.

    Parameters
    ----------
    folder
        created if needed; the shards of an earlier write are replaced: the new ones are
        written beside them (``shard-00000.npz``, ... or, where the folder's manifest lists
        those, ``shard-b00000.npz``, ...), then the manifest, then the old shards are
        removed, so a write that fails (an error, a full disk, an interrupt) leaves the
        earlier data set readable and removes what it wrote.
    *mats
        features first, then targets, weights, ... (numpy arrays, 1-D becomes one
        column; scipy sparse matrices, stored as CSR). All must have the same rows.
    rows_per_shard
        rows in each shard (the last may have fewer).
    names
        one per matrix, distinct strings (default ``("X", "y", "w")``).
    compress
        zip-deflate the shards (smaller, slower to read).
    """
    if not mats:
        raise ValueError("write_shards needs at least one matrix (the features)")
    if not isinstance(rows_per_shard, (int, np.integer)) or isinstance(
            rows_per_shard, bool) or rows_per_shard < 1:
        raise ValueError(f"rows_per_shard must be an int >= 1; got {rows_per_shard!r}")
    rows_per_shard = int(rows_per_shard)
    names = tuple(names) if names is not None else default_names(len(mats))
    if len(names) != len(mats):
        raise ValueError(f"got {len(names)} names for {len(mats)} matrices")
    raws, specs = [], []
    for i, (name, m) in enumerate(zip(names, mats, strict=True)):
        raw, spec, host = _as_matrix(m, i, name)
        if not host:
            raise TypeError(f"write_shards takes host (numpy/scipy) data; {name!r} is on the GPU")
        raws.append(raw)
        specs.append(spec)
    check_names(names, [s.sparse for s in specs])
    n = check_aligned(names, raws)
    if n == 0:
        raise ValueError("the data set is empty (0 samples): nothing to write")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # the new shards go beside the old ones under names the current manifest does not
    # list and the manifest is replaced last: a write that fails leaves the old set as it
    # was (and removes what it wrote); the old shards go once the new manifest is in place
    listed = _listed(folder)
    n_shards = -(-n // rows_per_shard)
    tag = next(t for t in ("", *"bcdefghijklmnopqrstuvwxyz", None) if t is None or not any(
        (folder / f"shard-{t}{k:05d}.npz").resolve() in listed for k in range(n_shards)))
    written: set[Path] = set()
    try:
        path = _write(folder, names, raws, specs, n, rows_per_shard, compress,
                      tag if tag is not None else f"{os.getpid()}-", written)
    except BaseException:
        if not {f.resolve() for f in written} & _listed(folder):  # (else the new manifest
            for f in written:                                      # is in place after all)
                f.unlink(missing_ok=True)
        raise
    for old in folder.glob("shard-*.npz"):
        if old not in written:
            old.unlink(missing_ok=True)
    return path


def _listed(folder: Path) -> set[Path]:
    """The files the folder's current manifest lists (resolved); none when it has none or
    it cannot be read."""
    try:
        shards = json.loads((folder / MANIFEST).read_text())["shards"]
        return {(folder / str(s["file"])).resolve() for s in shards}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _write(folder: Path, names: tuple[str, ...], raws: list[Any], specs: list[Any], n: int,
           rows_per_shard: int, compress: bool, tag: str, written: set[Path]) -> Path:
    """Write the shards ``shard-{tag}00000.npz``, ... (each added to ``written`` once it is
    written), then the manifest; return its path."""
    save = np.savez_compressed if compress else np.savez
    shards = []
    hists: dict[str, dict[int, int]] = {nm: {} for nm, s in zip(names, specs, strict=True)
                                         if s.sparse}
    for k, a in enumerate(range(0, n, rows_per_shard)):
        b = min(a + rows_per_shard, n)
        arrays: dict[str, np.ndarray] = {}
        for name, raw, spec in zip(names, raws, specs, strict=True):
            part = raw[a:b]
            if spec.sparse:
                part = sp.csr_matrix(part)
                arrays.update(zip(members(name, True), (
                    part.data, part.indices.astype(spec.index_dtype, copy=False),
                    part.indptr.astype(spec.index_dtype, copy=False)), strict=True))
                lengths, counts = np.unique(np.diff(part.indptr), return_counts=True)
                h = hists[name]
                for ln, c in zip(lengths.tolist(), counts.tolist(), strict=True):
                    h[ln] = h.get(ln, 0) + c
            else:
                arrays[name] = np.ascontiguousarray(part)
        fname = f"shard-{tag}{k:05d}.npz"
        atomic_write_bytes(folder / fname, lambda f, arrays=arrays: save(f, **arrays))
        written.add(folder / fname)
        shards.append({"file": fname, "rows": b - a, "bytes": (folder / fname).stat().st_size})
    manifest = {
        "format": FORMAT,
        "version": 1,
        "n_samples": n,
        "matrices": [
            {"name": nm, "kind": "csr" if s.sparse else "dense", "cols": s.cols,
             "dtype": s.dtype.name,
             **({"index_dtype": s.index_dtype.name,
                 # row lengths (nnz per row) -> how many rows have it: sizes containers
                 "row_nnz_hist": sorted(([ln, c] for ln, c in hists[nm].items()),
                                        reverse=True)} if s.sparse else {})}
            for nm, s in zip(names, specs, strict=True)],
        "shards": shards,
    }
    path = folder / MANIFEST
    atomic_write_bytes(path, lambda f: f.write(json.dumps(manifest, indent=1).encode()))
    return path
