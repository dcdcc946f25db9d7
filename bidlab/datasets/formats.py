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
           "ratings_separator", "ratings_header_order", "ratings_header_refusal"]


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
    "ratings": "ratings CSV ('user,item,rating[,time]' per line, or tab-, space- or "
               "'::'-separated as MovieLens 1M / 10M's ratings.dat; a header line, if any, "
               "starts with a user and an item column such as u,i,r, userId,movieId,rating "
               "or uid,iid,score, in either order)",
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
#: a rating or time as the ratings reader parses it: a number, or NaN / infinity (which the
#: reader refuses naming the line)
_VALUE_TEXT = re.compile(_NUMBER + r"|[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
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
    holds more of them than commas, a comma when it holds one, else runs of spaces
    (``1 1 2.0``, as FilmTrust's ``ratings.txt``), returned as ``" "``."""
    if "\t" in line:
        return "\t"
    if "::" in line and line.count("::") > line.count(","):
        return "::"
    if "," not in line and " " in line.strip():
        return " "
    return ","


def _ratings_rows(lines: list[bytes]) -> tuple[str, list[list[str]]] | None:
    """The separator and the fields of ``lines`` as a ratings file's (a byte-order mark
    dropped, bare CRs, old Mac line ends, splitting lines as the reader does), or None
    when they are not CSV."""
    if not lines:
        return None
    texts = [p for ln in [lines[0].removeprefix(codecs.BOM_UTF8), *lines[1:]]
             for p in ln.decode("latin-1").split("\r") if p.strip()]
    if not texts:
        return None
    sep = ratings_separator(texts[0])
    if sep == "\t":  # a trailing tab ends a line (as the reader reads it)
        texts = [ln.rstrip() for ln in texts]
    if sep in ("::", " "):  # no quoting in ratings.dat or space-separated files
        return sep, [ln.split(sep) if sep == "::" else ln.split() for ln in texts]
    try:
        return sep, [next(csv.reader([ln], delimiter=sep), []) for ln in texts]
    except csv.Error:
        return None


def _looks_ratings(lines: list[bytes]) -> str | None:
    """Lines of 'user,item,rating[,time]' (or tab-, '::'- or space-separated, fields maybe
    quoted, as :func:`~bidlab.datasets.movielens.read_ratings_csv` reads them). A header
    line must start with a user and an item column (``u,i,r``, or ``i,u,r``: see
    :func:`ratings_header_order`): a rating column alone does not make a table ratings
    (``x1,x2,rating`` may as well be features and a target); only after such a header may
    the ids be text rather than numbers."""
    found = _ratings_rows(lines)
    if found is None:
        return None
    sep, rows = found
    header = not _rating_row(rows[0], text_ids=False)
    width = len(rows[0])
    if header:
        if ratings_header_order(rows[0]) is None:
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
_ITEM_NAME = re.compile(r"(?:i|item|items|movie|film|product|prod|book|isbn|(?:parent)?asin"
                        r"|song|track|artist|album|business|game|anime|recipe|article|video"
                        r"|app|course|restaurant|hotel|beer|wine|joke|page|doc|document|venue"
                        r"|poi|place|show|series|episode|podcast|post|paper|event|m|p)"
                        + _ID_END)
#: any other id column, as written: ``venue_id``, ``venueId``, ``AppID`` (not ``paid``)
_ID_COLUMN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_\-. ](?:id|ID|Id)|[a-z0-9](?:Id|ID))s?")


def ratings_header_order(fields: list[str]) -> str | None:
    """How a ratings header line's ``fields`` (3 or 4 of them) name its first two columns:
    ``"user-item"`` (``u,i,r``, ``uid,iid,score``, ``customer_id,product_id,stars``, a
    user and any id column such as ``user_id,venue_id,rating``), ``"item-user"``
    (``movieId,userId,rating``, ``venue_id,user_id,rating``), else None: a header that
    does not start with a user and an item column (``x1,x2,rating``, or two ids of which
    neither is a user's, as MovieLens' ``movieId,imdbId,tmdbId``) is not a ratings header.

    Examples
    --------
    >>> ratings_header_order(["userId", "movieId", "rating", "timestamp"])
    'user-item'
    >>> ratings_header_order(["i", "u", "r"])
    'item-user'
    >>> ratings_header_order(["x1", "x2", "rating"]) is None
    True
    """
    if len(fields) not in (3, 4):
        return None
    named = [f.strip().strip('"').strip() for f in fields[:2]]
    a, b = (re.sub(r"[\s_.\-]+", "", f.lower()) for f in named)
    ida, idb = (_ID_COLUMN.fullmatch(f) is not None for f in named)
    user_a, user_b = _USER_NAME.fullmatch(a), _USER_NAME.fullmatch(b)
    if user_a and (_ITEM_NAME.fullmatch(b) or idb) and not user_b:
        return "user-item"
    if user_b and (_ITEM_NAME.fullmatch(a) or ida) and not user_a:
        return "item-user"
    return None


def ratings_header_refusal(lines: list[bytes]) -> str | None:
    """Why lines that would be ratings but for their header line are not read as ratings
    (a sentence naming the header and how to have the file read as ratings), or None when
    they are not such lines: a header of 3 or 4 names that :func:`ratings_header_order`
    does not take (``x1,x2,rating``), then rows of user, item, rating[, time]."""
    if len(lines) < 2:
        return None
    found = _ratings_rows(lines)
    if found is None:
        return None
    sep, rows = found
    head = rows[0]
    if (len(rows) < 2 or len(head) not in (3, 4) or _rating_row(head, text_ids=False)
            or ratings_header_order(head) is not None
            or not all(len(r) == len(head) and _rating_row(r, text_ids=True)
                       for r in rows[1:])):
        return None
    names = sep.join(h.strip() for h in head)
    named = sep.join(("user", "item", "rating", "time")[:len(head)])
    return (f"its rows could be ratings, but its header {names!r} does not start with a "
            f"user and an item column, so it is not read as ratings (a rating column alone "
            f"does not say the rows are ratings: they may be features and a target). If the "
            f"rows are user, item, rating{', time' if len(head) == 4 else ''}, name the "
            f"columns so (e.g. {named!r}, or "
            f"userId{sep}movieId{sep}rating) or drop the header line; in Python, "
            "bidlab.datasets.read_ratings_csv(path) reads it as ratings whatever its header")


def _rating_row(fields: list[str], text_ids: bool) -> bool:
    """Whether ``fields`` are user, item, rating[, time]: numbers (the ids non-empty text
    when ``text_ids``)."""
    if len(fields) not in (3, 4):
        return False
    ids, values = fields[:2], fields[2:]
    return (all(_VALUE_TEXT.fullmatch(v.strip()) for v in values)
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
            "time per line, numbers or ids; a header line, if any, starting with a user and "
            "an item column such as u,i,r or userId,movieId,rating); for any "
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
    why = ratings_header_refusal(lines)
    if why is not None:
        raise DataFormatError(f"{path} (UTF-16): {why}. {CSV_HINT}")
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
    header = None if looks_binary(head) else ratings_header_refusal(_lines(head, complete))
    raise DataFormatError(
        f"cannot tell the format of {path}: it is {appearance(head, was_gzip)}. "
        + (f"{header[0].upper()}{header[1:]}. " if header else "")
        + f"Tried: {tried(tuple(k for k in FORMATS if k != 'text-folder'))} (the text "
        "formats and tar archives plain or gzip). Convert the data to one of these, e.g. "
        "with sklearn.datasets.dump_svmlight_file or numpy.savez(path, X=X, y=y)"
        + (f". It looks like a CSV / TSV table: {CSV_HINT}" if looks_table(head, complete)
           else ""))
