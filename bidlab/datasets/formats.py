"""The data formats bidlab reads and what each looks like: :data:`FORMATS`, the rules that
tell a single file's format from its first bytes (gzip and zip magic numbers, tar, the
shape of the first text lines), and :class:`Sniffed`, what they found.
:func:`bidlab.datasets.sniff.sniff` applies them to a path (a file or a folder).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import re
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bidlab._bounded_io import (
    open_regular,
)

__all__ = ["FORMATS", "DataFormatError", "Sniffed", "sniff_file", "read_head", "looks_binary",
           "looks_table", "appearance", "tried", "CSV_HINT", "DOCWORD_NAME",
           "ratings_separator", "ratings_header_order"]


#: format name -> what it is, in words (the order in which :func:`sniff` tries them).
FORMATS: dict[str, str] = {
    "shards": "bidlab shard folder (manifest.json from bidlab.learn.write_shards)",
    "uci-bow": "UCI docword file (D, W, NNZ lines, then 'doc word count') + vocab.NAME.txt",
    "svmlight": "svmlight / LIBSVM file ('<label> <index>:<value> ...' per line)",
    "npz": "numpy .npz: X (or X__data, X__indices, X__indptr, X__shape), optional y, w",
    "scipy-npz": "scipy.sparse.save_npz file",
    "text-folder": "folder of text files, one document per file (label = sub-folder)",
    "text-archive": "tar archive of text files, one document per file",
    "edge-list": "SNAP edge list ('# ...' comments, then 'source target [weight]' per line)",
    "ratings": "ratings CSV ('user,item,rating[,time]' per line, or tab- or '::'-separated "
               "as MovieLens 1M / 10M's ratings.dat; a header line, if any, names a user or "
               "a rating column, or starts with a user and an item column such as u,i,r or "
               "uid,iid,score, in either order)",
}

_HEAD_BYTES = 1 << 16
_SAMPLE_LINES = 50
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_SVM_LINE = re.compile(
    rb"^\s*" + _NUMBER.encode() + rb"(?:," + _NUMBER.encode() + rb")*"
    rb"(?:\s+qid:\d+)?(?:\s+\d+:\S+)*\s*(?:#.*)?$")
_SVM_PAIR = re.compile(rb"\s\d+:\S")
_INT_LINE = re.compile(rb"^\s*\d+\s*$")
_TRIPLE_LINE = re.compile(rb"^\s*\d+\s+\d+\s+\d+\s*$")
_EDGE_LINE = re.compile(rb"^\s*\d+[ \t]+\d+(?:[ \t]+" + _NUMBER.encode() + rb")?\s*(?:#.*)?$")
_NUMBER_TEXT = re.compile(_NUMBER)
DOCWORD_NAME = re.compile(r"^docword\.(?P<name>.+)\.txt(\.gz)?$")


class DataFormatError(ValueError):
    """The data's format could not be told, or the file does not hold what it seemed to."""


@dataclass(frozen=True)
class Sniffed:
    """What :func:`sniff` found: the format (a key of :data:`FORMATS`) and how it knew;
    ``also``: the other formats the content fits (``1<TAB>10<TAB>4`` lines are both a
    weighted SNAP edge list and headerless ratings)."""

    format: str
    path: Path
    gzip: bool = False
    detail: str = ""
    also: tuple[str, ...] = ()  # other formats the content fits (a reader may pick one)

    def __str__(self) -> str:
        gz = " (gzip)" if self.gzip else ""
        return f"{self.path}: {self.format}{gz}" + (f", {self.detail}" if self.detail else "")


# ------------------------------------------------------------------------------ sniffing
def read_head(path: Path) -> tuple[bytes, bool]:
    """The first bytes of ``path`` (decompressed when it is gzip) and whether it was."""
    with open_regular(path) as f:
        raw = f.read(_HEAD_BYTES)
    if raw[:2] != _GZIP_MAGIC:
        return raw, False
    try:
        with open_regular(path) as f, gzip.GzipFile(fileobj=f, mode="rb") as g:
            return g.read(_HEAD_BYTES), True
    except (OSError, EOFError) as exc:
        raise DataFormatError(f"{path}: starts like gzip (1f 8b) but cannot be decompressed "
                              f"({exc}); is the file complete?") from None


def _lines(head: bytes, complete: bool) -> list[bytes]:
    """Non-empty lines of ``head`` (a UTF-8 byte-order mark dropped); the last one is
    dropped when ``head`` was cut short."""
    lines = head.removeprefix(codecs.BOM_UTF8).split(b"\n")
    if not complete and len(lines) > 1:
        lines = lines[:-1]
    return [ln.rstrip(b"\r") for ln in lines if ln.strip()][:_SAMPLE_LINES]


def _looks_docword(lines: list[bytes]) -> str | None:
    if len(lines) < 3 or not all(_INT_LINE.match(ln) for ln in lines[:3]):
        return None
    body = lines[3:]
    if not body and int(lines[2]) != 0:
        return None
    if not all(_TRIPLE_LINE.match(ln) for ln in body):
        return None
    d, w, nnz = (int(ln) for ln in lines[:3])
    return f"D={d} W={w} NNZ={nnz}"


def _looks_svmlight(lines: list[bytes]) -> str | None:
    rows = [ln for ln in lines if not ln.lstrip().startswith(b"#")]
    if not rows or not all(_SVM_LINE.match(ln) for ln in rows):
        return None
    if not any(_SVM_PAIR.search(ln) for ln in rows):
        return None  # numbers only, no index:value pair: not evidence of svmlight
    return f"first line {rows[0][:40].decode('latin-1')!r}"


def _looks_edge_list(lines: list[bytes]) -> str | None:
    lines = [lines[0].removeprefix(codecs.BOM_UTF8), *lines[1:]] if lines else lines
    rows = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith(b"#")]
    if not rows or not all(_EDGE_LINE.match(ln) for ln in rows):
        return None
    return f"first edge {rows[0].strip()[:40].decode('latin-1')!r}"


def ratings_separator(line: str) -> str:
    """The field separator of a ratings file, told from its first line: a tab, ``::``
    (MovieLens 1M / 10M's ``ratings.dat``, ``user::item::rating::time``) when the line
    holds more of them than commas, else a comma."""
    if "\t" in line:
        return "\t"
    if "::" in line and line.count("::") > line.count(","):
        return "::"
    return ","


def _looks_ratings(lines: list[bytes]) -> str | None:
    """Lines of 'user,item,rating[,time]' (or tab- or '::'-separated, fields maybe quoted,
    as :func:`~bidlab.datasets.movielens.read_ratings_csv` reads them). A header line must
    name a user or a rating, or start with a user and an item column (``u,i,r``, or
    ``i,u,r``: see :func:`ratings_header_order`); only after one may the ids be text rather
    than numbers."""
    if not lines:
        return None
    first = lines[0].removeprefix(codecs.BOM_UTF8)
    sep = ratings_separator(first.decode("latin-1"))
    texts = [ln.decode("latin-1") for ln in [first, *lines[1:]]]
    try:
        rows = ([ln.split(sep) for ln in texts] if sep == "::"  # no quoting in ratings.dat
                else [next(csv.reader([ln], delimiter=sep), []) for ln in texts])
    except csv.Error:  # e.g. a bare CR (old Mac line ends) inside a line
        return None
    header = not _rating_row(rows[0], text_ids=False)
    width = len(rows[0])
    if header:
        if (b"user" not in first.lower() and b"rating" not in first.lower()
                and ratings_header_order(rows[0]) is None):
            return None
        if len(rows) == 1 and len(rows[0]) in (3, 4):  # the reader says there are none
            return f"header {sep.join(rows[0])[:40]!r} and no ratings"
        rows = rows[1:]
    if not rows:
        return None
    if not all(_rating_row(r, text_ids=header) for r in rows):
        # a named header, then rows of its width, some rating a number but not all of
        # them fine: the reader names the line that is not
        if not (header and width in (3, 4) and all(len(r) == width for r in rows)
                and any(_NUMBER_TEXT.fullmatch(r[2].strip()) for r in rows)):
            return None
    return f"first rating {sep.join(rows[0])[:40]!r}"


#: the header names of a ratings file's user and item columns, lower case without ``_``,
#: ``-``, spaces or dots: a user (``u``, ``uid``, ``user_id``, ``customerId``, ...) and an
#: item (``i``, ``iid``, ``item_id``, ``movieId``, ``ISBN``, ...), each maybe ending in an id
#: word
_ID_END = r"(?:id|ids|no|num|number|idx|index|key|code)?"
_USER_NAME = re.compile(r"(?:u|user|users|customer|cust|client|reviewer|rater|member|viewer"
                        r"|listener|reader|player|buyer|visitor|person|account)" + _ID_END)
_ITEM_NAME = re.compile(r"(?:i|item|items|movie|film|product|prod|book|isbn|asin|song|track"
                        r"|artist|album|business|game|anime|recipe|article|video|app|course"
                        r"|restaurant|hotel|beer|joke|page|doc|document|m|p)" + _ID_END)


def ratings_header_order(fields: list[str]) -> str | None:
    """How a ratings header line's ``fields`` (3 or 4 of them) name its first two columns:
    ``"user-item"`` (``u,i,r``, ``uid,iid,score``, ``customer_id,product_id,stars``),
    ``"item-user"`` (``movieId,userId,rating``), else None."""
    if len(fields) not in (3, 4):
        return None
    a, b = (re.sub(r"[\s_.\-]+", "", f.strip().strip('"').lower()) for f in fields[:2])
    if _USER_NAME.fullmatch(a) and _ITEM_NAME.fullmatch(b):
        return "user-item"
    if _ITEM_NAME.fullmatch(a) and _USER_NAME.fullmatch(b):
        return "item-user"
    return None


def _rating_row(fields: list[str], text_ids: bool) -> bool:
    """Whether ``fields`` are user, item, rating[, time]: numbers (the ids non-empty text
    when ``text_ids``)."""
    if len(fields) not in (3, 4):
        return False
    ids, values = fields[:2], fields[2:]
    return (all(_NUMBER_TEXT.fullmatch(v.strip()) for v in values)
            and all(v.strip() if text_ids else _NUMBER_TEXT.fullmatch(v.strip())
                    for v in ids))


def _npz_kind(path: Path) -> tuple[str | None, list[str]]:
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = list(z.files)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise DataFormatError(f"{path}: a zip file that numpy cannot read as .npz ({exc}); "
                              "re-write it with numpy.savez or scipy.sparse.save_npz") from None
    names = set(keys)
    if {"data", "shape", "format"} <= names:  # csr / csc (indices, indptr), coo (row, col)
        return "scipy-npz", keys
    if "X" in names or "X__data" in names:
        return "npz", keys
    return None, keys


def _holds_npy(path: Path) -> bool:
    """Whether the zip file ``path`` holds a ``.npy`` member (an .npz does)."""
    try:
        with open_regular(path) as f, zipfile.ZipFile(f) as z:
            return any(n.endswith(".npy") for n in z.namelist())
    except (zipfile.BadZipFile, OSError, EOFError):
        return True  # unreadable: let the .npz messages say so


def looks_binary(head: bytes) -> bool:
    """Whether the start of a file holds a NUL byte (not text)."""
    return b"\x00" in head[:4096]


def looks_table(head: bytes, complete: bool | None = None) -> bool:
    """A CSV / TSV table: at least two lines, each with the same number (>= 1) of commas,
    or each with the same number of tabs. ``complete``: whether ``head`` is the whole file
    (default: when it is shorter than :func:`read_head` reads); the last line is left out
    only when it is not, as it may be cut short."""
    if looks_binary(head):
        return False
    if complete is None:
        complete = len(head) < _HEAD_BYTES
    lines = _lines(head, complete)
    if len(lines) < 2:
        return False
    return any(len({ln.count(sep) for ln in lines}) == 1 and lines[0].count(sep) >= 1
               for sep in (b",", b"\t"))


CSV_HINT = ("bidlab reads a CSV / TSV table only as ratings (user, item, rating and optionally "
            "time per line, numbers or ids; a header line, if any, naming a user or a rating "
            "column, or starting with a user and an item column such as u,i,r); for any "
            "other table, load it (e.g. with pandas) and save the matrix with "
            "numpy.savez(path, X=X, y=y) or sklearn.datasets.dump_svmlight_file")


def appearance(head: bytes, was_gzip: bool) -> str:
    """What the start of a file looks like, for error messages."""
    gz = "gzip-compressed " if was_gzip else ""
    if not head:
        return f"an empty {gz}file"
    if looks_binary(head):
        return f"{gz}binary data starting with bytes {head[:8].hex(' ')}"
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    return f"{gz}text whose first line is {first[:60].decode('latin-1')!r}"


def tried(kinds: tuple[str, ...]) -> str:
    """The formats ``kinds`` in words, for error messages."""
    return "; ".join(FORMATS[k] for k in kinds)


#: the text formats, in the order they are tried, and the rule that tells each
_TEXT_RULES = (("uci-bow", _looks_docword), ("svmlight", _looks_svmlight),
               ("edge-list", _looks_edge_list), ("ratings", _looks_ratings))


def _sniff_utf16(path: Path, head: bytes, was_gzip: bool, complete: bool) -> Sniffed:
    """A file starting with a UTF-16 byte-order mark: ratings (which
    :func:`~bidlab.datasets.movielens.read_ratings_csv` decodes), else an error saying to
    save it as UTF-8."""
    text = head[:len(head) // 2 * 2].decode("utf-16", errors="replace")
    lines = _lines(text.encode("utf-8"), complete)
    detail = _looks_ratings(lines)
    if detail is not None:
        return Sniffed("ratings", path, was_gzip, f"{detail}, UTF-16")
    first = lines[0][:60].decode("utf-8") if lines else ""
    raise DataFormatError(
        f"{path} is UTF-16 text (byte-order mark {head[:2].hex(' ')}) whose first line is "
        f"{first!r}: bidlab reads UTF-16 only in ratings files; save it as UTF-8 (e.g. "
        "iconv -f UTF-16 -t UTF-8, or your editor's 'save as UTF-8')")


def sniff_file(path: Path) -> Sniffed:
    """The format of the regular file ``path`` (not a folder or a shard manifest)."""
    with open_regular(path) as f:
        magic = f.read(4)
    if magic == _ZIP_MAGIC:
        kind, keys = _npz_kind(path)
        if kind is None and not _holds_npy(path):
            files = [k for k in keys if not k.endswith("/")]
            raise DataFormatError(
                f"{path} is a zip archive of {len(files)} files"
                + (f" (e.g. {files[0]})" if files else "")
                + ", not a numpy .npz (whose members are .npy arrays): bidlab reads text "
                "documents from a folder or a tar archive (unzip it and pass the folder, or "
                "tar czf docs.tar.gz FOLDER), and arrays from numpy.savez(path, X=X, y=y)")
        if kind is None:
            raise DataFormatError(
                f"{path}: an .npz without features: it holds {sorted(keys)}; expected "
                f"{tried(('npz', 'scipy-npz'))}")
        return Sniffed(kind, path, False, f"arrays {', '.join(sorted(keys))}")
    if tarfile.is_tarfile(path):
        return Sniffed("text-archive", path, magic[:2] == _GZIP_MAGIC)
    head, was_gzip = read_head(path)
    complete = len(head) < _HEAD_BYTES
    if was_gzip and head.startswith(_ZIP_MAGIC):
        raise DataFormatError(
            f"{path} is a gzip-compressed zip file (an .npz?), which numpy cannot read: "
            f"decompress it first (gunzip -c {path.name} > data.npz) and pass that; "
            "numpy.savez_compressed writes a compressed .npz that loads as it is")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _sniff_utf16(path, head, was_gzip, complete)
    if not looks_binary(head):
        lines = _lines(head, complete)
        for n, (kind, looks) in enumerate(_TEXT_RULES):
            detail = looks(lines)
            if detail is not None:
                also = tuple(k for k, fits in _TEXT_RULES[n + 1:] if fits(lines) is not None)
                return Sniffed(kind, path, was_gzip, detail, also)
    raise DataFormatError(
        f"cannot tell the format of {path}: it is {appearance(head, was_gzip)}. Tried: "
        f"{tried(tuple(k for k in FORMATS if k != 'text-folder'))} (the text formats and "
        "tar archives plain or gzip). Convert the data to one of these, e.g. with "
        "sklearn.datasets.dump_svmlight_file or numpy.savez(path, X=X, y=y)"
        + (f". It looks like a CSV / TSV table: {CSV_HINT}" if looks_table(head, complete)
           else ""))
