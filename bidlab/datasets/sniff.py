"""Tell a data set's format from its content, not its name, and load it.

``bidlab train --data PATH`` accepts any of :data:`FORMATS`; :func:`sniff` looks at the
bytes (gzip by its magic number, zip for ``.npz``, tar for archives, the shape of the
first text lines) and :func:`load` reads the data with the matching loader of
:mod:`bidlab.datasets`. A LIBSVM file named ``a9a`` (no extension), a gzipped docword
file named ``kos.gz`` or an ``.npz`` named ``data.bin`` are all recognised. When nothing
fits, :class:`DataFormatError` names the formats tried and what the file looked like.

A bidlab shard folder (``manifest.json`` with ``"format": "bidlab-shards"``) is
recognised here but streamed by :class:`bidlab.learn.ShardSource`; :func:`load` does not
read it (this package stays free of the learner layer).

What each single file's format looks like lives in :mod:`bidlab.datasets.formats`; this
module adds folders, shard manifests and loading.

Reading is bounded (:mod:`bidlab._bounded_io`): only regular files are opened (a FIFO, a
device such as ``/dev/zero`` or a symlink loop is refused by its type), gzip content and
``.npz`` / tar members stop at a decompressed-size cap (``max_decompressed=`` or
``$BIDLAB_MAX_DECOMPRESSED``; default 4 GiB or the memory budget, whichever is smaller),
and a header that asks for more than the memory budget (``memory_budget=`` or
``$BIDLAB_MEMORY_BUDGET``; default a quarter of the machine's memory) is refused before
anything is allocated.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab._bounded_io import (
    check_npz,
    open_regular,
    require_regular,
    stat_path,
)
from bidlab.datasets.formats import (
    CSV_HINT,
    DOCWORD_NAME,
    FORMATS,
    DataFormatError,
    Sniffed,
    appearance,
    looks_binary,
    looks_table,
    read_head,
    sniff_file,
    tried,
)

__all__ = ["FORMATS", "DataFormatError", "Sniffed", "LoadedData", "sniff", "load", "shared_matches"]


@dataclass
class LoadedData:
    """Data in memory, samples as rows: features ``X`` (CSR or dense), optional targets
    ``y`` and sample weights ``w``, and the column / label names when the format has them."""

    X: Any
    y: np.ndarray | None = None
    w: np.ndarray | None = None
    vocab: list[str] | None = None
    label_names: list[str] | None = None
    sniffed: Sniffed | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def matrices(self) -> list[Any]:
        """``[X]``, ``[X, y]`` or ``[X, y, w]``: what a learner's data source takes."""
        mats = [self.X]
        if self.y is not None:
            mats.append(self.y)
            if self.w is not None:
                mats.append(self.w)
        return mats

    def describe(self) -> str:
        """One line, e.g. ``svmlight, 32561 x 123 (sparse, 451592 nonzeros), targets``."""
        kind = (f"sparse, {self.X.nnz} nonzeros" if sp.issparse(self.X) else "dense")
        fmt = self.sniffed.format if self.sniffed is not None else "data"
        text = f"{fmt}, {self.X.shape[0]} x {self.X.shape[1]} ({kind})"
        if self.y is not None:
            text += ", targets"
        return text


def _visible_files(folder: Path, limit: int) -> list[Path]:
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                found.append(Path(root) / name)
                require_regular(found[-1], "document")  # a FIFO here would block open()
                if len(found) >= limit:
                    return found
    return found


def _sniff_folder(path: Path) -> Sniffed:
    manifest = path / "manifest.json"
    if manifest.is_file():
        return _sniff_manifest(manifest)
    docwords = sorted(p for p in path.iterdir() if DOCWORD_NAME.match(p.name) and p.is_file())
    if len(docwords) == 1:
        inner = sniff_file(docwords[0])
        if inner.format == "uci-bow":
            return Sniffed("uci-bow", docwords[0], inner.gzip, inner.detail)
    files = _visible_files(path, 200)
    if not files:
        raise DataFormatError(f"{path} is an empty folder (no visible files): expected a "
                              f"{tried(('shards', 'uci-bow', 'text-folder'))}")
    if all(p.parent == path for p in files):  # flat: maybe data files rather than texts
        data_files = []
        for p in files[:20]:
            try:
                kind = sniff_file(p).format
            except (DataFormatError, OSError):
                continue
            if kind in ("svmlight", "npz", "scipy-npz", "uci-bow", "text-archive", "edge-list"):
                data_files.append(f"{p.name} ({kind})")
        if data_files:
            raise DataFormatError(
                f"{path} holds data files ({', '.join(data_files)}), not a folder of text "
                "documents: pass one of the files as the data")
    heads = {p: read_head(p)[0] for p in files[:20]}
    texts = [p for p, head in heads.items() if not looks_binary(head[:4096])]
    tables = [p.name for p in texts if looks_table(heads[p])]
    if tables and 2 * len(tables) >= len(texts):
        raise DataFormatError(
            f"{path} holds CSV / TSV tables ({', '.join(tables[:4])}"
            f"{', ...' if len(tables) > 4 else ''}), not text documents, so it is not read as "
            f"a corpus: {CSV_HINT}, and pass that file")
    if not texts:
        raise DataFormatError(
            f"{path}: its files look binary (e.g. {files[0].name}: "
            f"{appearance(*read_head(files[0]))}); expected a "
            f"{tried(('shards', 'uci-bow', 'text-folder'))}")
    subdirs = sorted({p.parent.name for p in files if p.parent != path})
    return Sniffed("text-folder", path, False,
                   f"{len(subdirs)} label folders" if subdirs else "no label folders")


def _sniff_manifest(manifest: Path) -> Sniffed:
    try:
        doc = json.loads(manifest.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"{manifest} is not valid JSON ({exc}): expected "
                              f"{FORMATS['shards']}") from None
    if not isinstance(doc, dict) or doc.get("format") != "bidlab-shards":
        raise DataFormatError(f"{manifest} is not a bidlab shard manifest (no \"format\": "
                              "\"bidlab-shards\"); write shards with "
                              "bidlab.learn.write_shards(folder, X, y)")
    return Sniffed("shards", manifest.parent, False, f"{doc.get('n_samples')} samples")


def shared_matches(name: str, limit: int = 4) -> list[Path]:
    """Data files of the shared data folder (:mod:`bidlab.datasets.paths`) a bare name such
    as ``a9a``, ``kos`` or ``wiki-vote`` may mean: the data files of the data sets whose
    folder name holds it, and files whose name holds it (at most ``limit``). Empty for a
    name with a folder part, or when there is no shared data folder.

    Examples
    --------
    >>> shared_matches("no/such/name")
    []
    """
    from bidlab.datasets.paths import find_shared_data_dir

    key = name.strip().lower()
    root = find_shared_data_dir()
    if not key or "/" in key or os.sep in key or root is None:
        return []
    found: list[Path] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        in_name = key in folder.name.lower()
        for f in sorted(folder.iterdir()):
            stem = f.name.lower().split(".")[0]
            if f.is_file() and not stem.startswith(("readme", "manifest", "vocab")) and (
                    in_name or key in f.name.lower()):
                found.append(f)
    return found[:limit]


def sniff(path: str | os.PathLike) -> Sniffed:
    """The format of the data at ``path`` (a file or folder), told from its content.

    Raises FileNotFoundError when nothing is there, NotRegularFileError (a ``ValueError``)
    for a FIFO, device, socket or symlink loop, and :class:`DataFormatError` (a
    ``ValueError``) naming the formats tried and what the file looked like when none fits.
    """
    path = Path(path)
    try:
        mode = stat_path(path).st_mode
    except FileNotFoundError as exc:
        if "symlink" in str(exc):
            raise FileNotFoundError(str(exc)) from None
        near = shared_matches(str(path))
        hint = f". The shared data folder has: {', '.join(map(str, near))}" if near else ""
        raise FileNotFoundError(f"{path}: no such file or folder{hint}") from None
    if stat.S_ISDIR(mode):
        return _sniff_folder(path)
    require_regular(path)
    if path.name == "manifest.json":
        return _sniff_manifest(path)
    return sniff_file(path)


# ------------------------------------------------------------------------------- loading
def _uci_vocab(docword: Path) -> Path | bool:
    m = DOCWORD_NAME.match(docword.name)
    if m is not None:
        for cand in (f"vocab.{m['name']}.txt", f"vocab.{m['name']}.txt.gz"):
            if (docword.parent / cand).is_file():
                return docword.parent / cand
    return False  # no vocabulary beside it: words are named w1 .. wW


def _npz_mats(arrays: dict[str, np.ndarray], path: Path) -> list[Any]:
    mats: list[Any] = []
    for name in ("X", "y", "w"):
        if name in arrays:
            mats.append(arrays[name])
        elif f"{name}__data" in arrays:
            try:
                mats.append(sp.csr_matrix(
                    (arrays[f"{name}__data"], arrays[f"{name}__indices"],
                     arrays[f"{name}__indptr"]), shape=tuple(arrays[f"{name}__shape"])))
            except KeyError as exc:
                raise DataFormatError(f"{path}: CSR matrix {name!r} lacks the part {exc}; "
                                      f"expected {FORMATS['npz']}") from None
            except (ValueError, TypeError) as exc:
                raise DataFormatError(f"{path}: CSR matrix {name!r} is malformed ({exc}); "
                                      f"expected {FORMATS['npz']}") from None
        elif name == "y" and "Y" in arrays:
            mats.append(arrays["Y"])
        else:
            break
    return mats


def _check_npz_mats(X: Any, y: Any, w: Any, path: Path) -> None:
    """A valid 2-D ``X`` (a sparse one's indices within its shape) and one ``y`` / ``w``
    row per sample, else a DataFormatError saying what is wrong."""
    if sp.issparse(X) and X.format in ("csr", "csc"):  # coo checks its indices itself
        minor = X.shape[1] if X.format == "csr" else X.shape[0]
        bad = np.flatnonzero((X.indices < 0) | (X.indices >= minor))
        if bad.size:  # scipy does not look (and may crash on them later)
            at = int(bad[0])
            line = int(np.searchsorted(X.indptr, at, side="right")) - 1
            major, inner = ("row", "column") if X.format == "csr" else ("column", "row")
            raise DataFormatError(f"{path}: X {major} {line} has {inner} index "
                                  f"{int(X.indices[at])}, outside [0, {minor}); re-write it "
                                  "with scipy.sparse.save_npz")
        try:
            X.check_format(full_check=True)
        except ValueError as exc:
            raise DataFormatError(f"{path}: the sparse matrix X is malformed ({exc}); "
                                  "re-write it with scipy.sparse.save_npz") from None
    elif np.ndim(X) != 2:
        raise DataFormatError(f"{path}: X has shape {np.shape(X)}, not samples x features; "
                              "save a 2-D array (X.reshape(-1, 1) for one feature)")
    for name, v in (("y", y), ("w", w)):
        if v is not None and (np.ndim(v) == 0 or v.shape[0] != X.shape[0]):
            raise DataFormatError(f"{path}: X has {X.shape[0]} rows but {name} has shape "
                                  f"{np.shape(v)}: save one {name} entry per row of X")


def _load_npz(path: Path, kind: str, cap: int | None = None) -> tuple[Any, Any, Any]:
    try:
        check_npz(path, cap)  # declared sizes within the cap before numpy inflates anything
    except (zipfile.BadZipFile, EOFError) as exc:
        raise DataFormatError(f"{path}: a zip file that numpy cannot read as .npz ({exc}); "
                              "re-write it with numpy.savez or scipy.sparse.save_npz") from None
    with open_regular(path) as f, np.load(f, allow_pickle=False) as z:
        try:
            arrays = {k: z[k] for k in z.files}
        except ValueError as exc:  # an object array (pickled Python objects)
            raise DataFormatError(f"{path}: {exc}; bidlab reads only numeric arrays (no "
                                  "pickled objects): save X (and y, w) as numbers, e.g. "
                                  "X.astype(float)") from None
    if kind == "scipy-npz":
        fmt = arrays["format"].item()
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        cls = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "coo": None}.get(fmt, False)
        if cls is False:
            raise DataFormatError(f"{path}: scipy sparse format {fmt!r} is not supported "
                                  "(csr, csc or coo)")
        try:
            if cls is None:
                X = sp.coo_matrix((arrays["data"], (arrays["row"], arrays["col"])),
                                  shape=tuple(arrays["shape"]))
            else:
                X = cls((arrays["data"], arrays["indices"], arrays["indptr"]),
                        shape=tuple(arrays["shape"]))
        except (KeyError, ValueError, TypeError) as exc:
            raise DataFormatError(f"{path}: a malformed scipy {fmt} matrix ({exc!s}); "
                                  "re-write it with scipy.sparse.save_npz") from None
        _check_npz_mats(X, None, None, path)
        return X.tocsr(), None, None
    mats = _npz_mats(arrays, path)
    mats += [None] * (3 - len(mats))
    _check_npz_mats(*mats, path)
    return mats[0], mats[1], mats[2]


def load(data: str | os.PathLike | Sniffed, *, dtype: np.dtype | type = np.float32,
         max_decompressed: int | None = None, memory_budget: int | None = None,
         min_df: int | float | None = None, max_df: int | float | None = None
         ) -> LoadedData:
    """Read the data at ``data`` (a path, or what :func:`sniff` returned) into memory.

    svmlight gives ``X, y``; a UCI docword file ``X`` and its vocabulary; a text folder or
    archive word counts (each document read as UTF-8, else Latin-1), and labels when the
    documents sit in one sub-folder per label;
    an ``.npz`` its ``X`` (and ``y``, ``w``); a SNAP edge list its n x n adjacency
    matrix as ``X`` (rows = source vertices; ``extra["ids"]``: the original vertex ids); a
    ratings CSV its users x items ratings (``extra["user_ids"]``, ``extra["item_ids"]``;
    the latest rating of a duplicate pair counts).
    A shard folder is refused: stream it with
    :class:`bidlab.learn.ShardSource` instead.

    ``max_decompressed`` caps the bytes that compressed input may expand to and
    ``memory_budget`` the memory a header may ask for (defaults: see the module docstring);
    exceeding either raises ``InputTooLargeError`` (a ``ValueError``) saying how to raise it.
    ``min_df`` and ``max_df`` (None: the loader's defaults) bound the words kept from a
    text folder or archive, as in :func:`bidlab.datasets.load_text_folder`; a ValueError
    for any other format.
    """
    from bidlab.datasets.graphs import load_snap_edges
    from bidlab.datasets.svmlight import load_svmlight
    from bidlab.datasets.text import load_text_folder
    from bidlab.datasets.uci import load_uci_bow

    s = data if isinstance(data, Sniffed) else sniff(data)
    if s.format == "shards":
        raise DataFormatError(f"{s.path} is a bidlab shard folder: stream it with "
                              "bidlab.learn.ShardSource(folder) rather than loading it whole")
    bounds = {k: v for k, v in (("min_df", min_df), ("max_df", max_df)) if v is not None}
    if bounds and s.format not in ("text-folder", "text-archive"):
        raise ValueError(f"{' and '.join(bounds)} bound the words of text folders and "
                         f"archives; {s.path} holds {FORMATS[s.format]}")
    if s.format in ("npz", "scipy-npz"):
        X, y, w = _load_npz(s.path, s.format, max_decompressed)
        if sp.issparse(X):
            X = X.tocsr()
        return LoadedData(X, y, w, sniffed=s)
    if s.format == "svmlight":
        X, y = load_svmlight(s.path, dtype=dtype, max_decompressed=max_decompressed,
                             memory_budget=memory_budget)
        return LoadedData(X, y, sniffed=s)
    if s.format == "uci-bow":
        corpus = load_uci_bow(s.path, vocab=_uci_vocab(s.path), dtype=dtype,
                              max_decompressed=max_decompressed, memory_budget=memory_budget)
        return LoadedData(corpus.X, vocab=list(corpus.vocab), sniffed=s,
                          extra={"name": corpus.name})
    if s.format in ("text-folder", "text-archive"):
        corpus = load_text_folder(s.path, dtype=dtype, max_decompressed=max_decompressed,
                                  encoding="auto", **bounds)
        y = None if corpus.labels is None else corpus.labels.astype(dtype)
        return LoadedData(corpus.X, y, vocab=list(corpus.vocab),
                          label_names=corpus.label_names, sniffed=s,
                          extra={"name": corpus.name})
    if s.format == "edge-list":
        g = load_snap_edges(s.path, dtype=dtype, cap=max_decompressed)
        return LoadedData(g.A, sniffed=s, extra={"ids": g.ids})
    if s.format == "ratings":
        from bidlab.datasets.movielens import read_ratings_csv

        r = read_ratings_csv(s.path, dtype=dtype)
        return LoadedData(r.X, sniffed=s, extra={"user_ids": r.user_ids,
                                                 "item_ids": r.item_ids,
                                                 "duplicates": r.duplicates})
    raise DataFormatError(f"{s.path}: unknown format {s.format!r}; known: {', '.join(FORMATS)}")
