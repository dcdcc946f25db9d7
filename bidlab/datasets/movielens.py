"""Ratings: MovieLens and any ratings CSV (user, item, rating[, time]) as a users x items CSR.

:func:`read_ratings_csv` reads a ratings file (comma-, tab-, space- or ``::``-separated,
the last as MovieLens 1M / 10M's ``ratings.dat``, with or without a header line) through
:mod:`bidlab._bounded_io`; :func:`load_movielens` reads a MovieLens folder (the shared
``movielens-latest-small``, or ``ml-1m`` / ``ml-10M100K`` with their ``.dat`` files) with
its movie titles. Users and items are numbered in
the order of their raw ids (``user_ids[row]``, ``item_ids[column]`` give them back). The
user comes first on a line unless a header line names the item column first
(``movieId,userId,rating``, ``i,u,r``).

**Duplicate (user, item) pairs**: the latest rating counts (largest time; without a time
column, or at equal times, the one later in the file); :attr:`Ratings.duplicates` says
how many were dropped.

:meth:`Ratings.split` holds out a share of each user's ratings (a fixed seed, every user
keeps at least one rating for training); :meth:`Ratings.implicit` is the implicit view
(every rating at or above a threshold as one interaction).
"""

from __future__ import annotations

import codecs
import csv
import io
import os
import re
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab._bounded_io import check_budget, not_found, read_data, stat_path
from bidlab.datasets.formats import ratings_header_order, ratings_separator
from bidlab.datasets.paths import resolve_shared

_INTEGER = re.compile(r"[+-]?\d+")

__all__ = ["Ratings", "RatingsSplit", "read_ratings_csv", "load_movielens"]


@dataclass
class RatingsSplit:
    """Two users x items CSR matrices of one shape: ``train`` and held-out ``test``."""

    train: sp.csr_matrix
    test: sp.csr_matrix


@dataclass
class Ratings:
    """A users x items CSR of ratings with its id maps (see the module doc).

    Attributes
    ----------
    X
        users x items ``scipy.sparse.csr_matrix`` (one stored entry per rating).
    user_ids, item_ids
        the raw id of each row and each column.
    titles
        the title of each column (MovieLens), or None.
    times
        the time of each stored entry (aligned with ``X.data``), or None.
    duplicates
        (user, item) pairs rated more than once whose earlier ratings were
        dropped.

    Examples
    --------
    >>> ml = load_movielens()                      # doctest: +SKIP
    >>> ml.X.shape, ml.titles[ml.item_column(1)]   # doctest: +SKIP
    ((610, 9724), 'Toy Story (1995)')
    """

    X: sp.csr_matrix
    user_ids: np.ndarray
    item_ids: np.ndarray
    titles: list[str] | None = None
    times: np.ndarray | None = None
    duplicates: int = 0
    _item_index: dict[Any, int] = field(default_factory=dict, repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.X.shape)  # type: ignore[return-value]

    def item_column(self, raw_id: Any) -> int:
        """The column of an item's raw id (KeyError naming it when unknown)."""
        if not self._item_index:
            self._item_index = {v.item(): i for i, v in enumerate(self.item_ids)}
        try:
            return self._item_index[raw_id]
        except KeyError:
            raise KeyError(f"item id {raw_id!r} is not in these ratings") from None

    def implicit(self, min_rating: float = 0.0) -> sp.csr_matrix:
        """The implicit view: 1 where a user rated an item at least ``min_rating``."""
        X = self.X.copy()
        X.data = (X.data >= min_rating).astype(X.dtype)
        X.eliminate_zeros()
        return X

    def split(self, test_size: float = 0.2, seed: int = 0, X: Any = None) -> RatingsSplit:
        """Hold out ``test_size`` of each user's ratings (rounded down; a user keeps at
        least one for training), chosen with the fixed ``seed``; ``X``: the matrix to
        split (default ``self.X``; e.g. the implicit view).

        Examples
        --------
        >>> ml = load_movielens()                      # doctest: +SKIP
        >>> parts = ml.split(0.2, seed=0)              # doctest: +SKIP
        >>> parts.train.nnz + parts.test.nnz == ml.X.nnz  # doctest: +SKIP
        True
        """
        if not 0.0 <= float(test_size) < 1.0:
            raise ValueError(f"test_size must be in [0, 1); got {test_size}")
        X = self.X if X is None else sp.csr_matrix(X)
        rng = np.random.default_rng(seed)
        counts = np.diff(X.indptr)
        held = np.zeros(X.nnz, bool)
        for u in np.flatnonzero(counts > 1):
            n = int(counts[u])
            take = min(int(n * test_size + 1e-9), n - 1)  # 0.29 * 100 is 28.99...96
            if take:
                held[X.indptr[u] + rng.choice(n, take, replace=False)] = True
        return RatingsSplit(_keep(X, ~held), _keep(X, held))


def _keep(X: sp.csr_matrix, keep: np.ndarray) -> sp.csr_matrix:
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    return sp.csr_matrix((X.data[keep], (rows[keep], X.indices[keep])), shape=X.shape)


def _table(text: str, path: Path
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(user ids, item ids, ratings and times as an n x 1 or n x 2 float table, the file
    line of each rating). The ids are numbers, or any text (kept as strings when one is not
    a number; a field holding the separator must be quoted, as in any CSV); the first
    non-blank line is a header when its rating is not a number, or when its user and item
    are not numbers while every later line's are. A header naming the item column first
    (``movieId,userId,rating``; :func:`~bidlab.datasets.formats.ratings_header_order`)
    is read in that order. Errors name the line of the file."""
    # only line ends split (str.splitlines also splits at \x85, \x1c, \u2028, ..., which
    # a Latin-1 or UTF-8 id may hold)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    filled = np.fromiter((bool(ln.strip()) for ln in lines), bool, len(lines))
    line_no = np.flatnonzero(filled) + 1  # the file line of each non-blank line
    body = list(compress(lines, filled))
    sep = ratings_separator(body[0]) if body else ","
    if sep == "\t":  # a spreadsheet's trailing tab ends a line, not an empty field
        body = [ln.rstrip() for ln in body]
    quoted = '"' in text and sep not in ("::", " ")  # '::' and space files quote nothing
    start = 0  # 1 when the first non-blank line is a header
    header: list[str] = []
    if body:
        no, first = int(line_no[0]), body[0]
        fields = (next(csv.reader([first], delimiter=sep)) if quoted
                  else first.split() if sep == " " else first.split(sep))
        try:
            float(fields[2] if len(fields) > 2 else "")
        except ValueError:
            if len(fields) in (3, 4) and _number(np.array(fields[:2])):
                raise ValueError(  # numeric user and item: a rating row, not a header
                    f"{path}: ratings row {no} holds {first.strip()!r}: the rating (and "
                    "time) must be numbers") from None
            start, header = 1, fields  # a header line
    body, line_no = body[start:], line_no[start:]
    if not body:
        raise ValueError(f"{path}: no ratings (expected lines of user{sep}item{sep}rating"
                         f"[{sep}time])")
    try:
        if quoted:  # quoted fields: the csv module's rules (a slower, general path)
            rows = list(csv.reader(body, delimiter=sep))
            _same_width([len(row) for row in rows], body, line_no)
            cells = np.array(rows, dtype=str).reshape(len(rows), len(rows[0]))
        else:
            joined, delim = _one_char_fields("\n".join(body), sep)
            try:  # runs of spaces (delimiter None) for a space-separated file
                cells = np.loadtxt(io.StringIO(joined), delimiter=None if sep == " " else delim,
                                   dtype=str, ndmin=2, comments=None)
            except ValueError:  # say which line of the file, rather than numpy's row
                _same_width([len(ln.split()) if sep == " " else ln.count(sep) + 1
                             for ln in body], body, line_no)
                raise
    except (ValueError, csv.Error) as exc:
        raise ValueError(f"{path}: not a ratings file user{sep}item{sep}rating[{sep}time] "
                         f"({exc})") from None
    if cells.shape[1] not in (3, 4):
        raise ValueError(f"{path}: {cells.shape[1]} columns; a ratings file has user, item, "
                         "rating and optionally time")
    if (not start and len(cells) > 1 and not any(_number(f) for f in cells[0, :2])
            and _number(cells[1:, :2])):
        header = cells[0].tolist()  # a header whose rating column is a number
        cells, line_no = cells[1:], line_no[1:]
    try:
        values = cells[:, 2:].astype(np.float64)
    except ValueError:
        row = next(r for r in range(len(cells)) if not _number(cells[r, 2:]))
        raise ValueError(f"{path}: ratings row {line_no[row]} holds "
                         f"{sep.join(cells[row])!r}: the rating (and time) must be numbers"
                         ) from None
    u, i = (1, 0) if ratings_header_order(header) == "item-user" else (0, 1)
    return (_id_column(cells[:, u], path, "user", line_no),
            _id_column(cells[:, i], path, "item", line_no), values, line_no)


def _one_char_fields(text: str, sep: str) -> tuple[str, str]:
    """``text`` with its separator made one character (numpy's reader takes no longer
    one): ``::`` becomes the unit separator, or a private-use character, that the text
    does not hold."""
    if len(sep) == 1:
        return text, sep
    free = next(c for c in ("\x1f", *map(chr, range(0xE000, 0xF900))) if c not in text)
    return text.replace(sep, free), free


def _same_width(widths: list[int], body: list[str], line_no: np.ndarray) -> None:
    """A ValueError naming the first line whose number of fields differs from the first's."""
    bad = next((r for r, w in enumerate(widths) if w != widths[0]), None)
    if bad is not None:
        raise ValueError(f"the number of columns changed from {widths[0]} to {widths[bad]} "
                         f"at line {line_no[bad]}, {body[bad].strip()[:60]!r}: give every "
                         "rating the same fields (user, item, rating and optionally time)")


def _number(fields: np.ndarray) -> bool:
    try:
        fields.astype(np.float64)
    except ValueError:
        return False
    return True


def _id_column(a: np.ndarray, path: Path, what: str, line_no: np.ndarray) -> np.ndarray:
    """An id column as integers (int64, else uint64) when every id is one, else as floats
    when every id is a number, else as the strings (also integers past uint64, which a
    float would round together); an empty id is an error."""
    a = np.char.strip(a)
    empty = np.flatnonzero(a == "")
    if empty.size:
        raise ValueError(f"{path}: ratings row {line_no[empty[0]]} has no {what} id "
                         f"(an empty field): fill it in or drop the row")
    for kind in (np.int64, np.uint64):
        try:
            return a.astype(kind)
        except (ValueError, OverflowError):
            pass
    if all(_INTEGER.fullmatch(v) for v in a.tolist()):
        return a  # integers too large for 64 bits: exact as text
    try:
        return a.astype(np.float64)
    except (ValueError, OverflowError):
        return a


def _decode(raw: bytes, path: Path) -> str:
    """UTF-16 text when it starts with a UTF-16 byte-order mark, else UTF-8 text (a
    byte-order mark dropped), else Latin-1 (which decodes any bytes, so distinct ids stay
    distinct)."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: starts with a UTF-16 byte-order mark but is not "
                             f"valid UTF-16 ({exc}); save it as UTF-8") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def read_ratings_csv(path: str | os.PathLike, dtype: Any = np.float32) -> Ratings:
    """A ratings file (user, item, rating[, time]) as :class:`Ratings`; duplicate pairs
    keep the latest rating (see the module doc).

    Examples
    --------
    >>> r = read_ratings_csv("ratings.csv")  # doctest: +SKIP
    >>> r.X.shape                            # doctest: +SKIP
    (610, 9724)
    """
    path = Path(path)
    try:
        size = stat_path(path).st_size
    except FileNotFoundError:
        raise not_found(path, "ratings file (user,item,rating[,time] per line)") from None
    check_budget(path, "ratings", size * 6)  # text, table and matrix
    raw = read_data(path, what="ratings file")
    uid, iid, t, line_no = _table(_decode(raw, path), path)
    bad = ~np.isfinite(t[:, :1])
    for col in (uid, iid):
        if col.dtype.kind == "f":
            bad |= ~np.isfinite(col)[:, None]
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ValueError(f"{path}: ratings row {line_no[row]} holds NaN or infinity: "
                         "fix or drop that row")
    users, u = np.unique(uid, return_inverse=True)
    items, i = np.unique(iid, return_inverse=True)
    timed = t.shape[1] == 2
    times = t[:, 1] if timed else np.zeros(len(t))
    order = np.lexsort((np.arange(len(t)), times, i, u))  # latest last within a pair
    u, i, r, tm = u[order], i[order], t[order, 0], times[order]
    last = np.ones(len(u), bool)
    last[:-1] = (u[1:] != u[:-1]) | (i[1:] != i[:-1])
    with np.errstate(over="ignore"):
        kept = r[last].astype(dtype)
    lost = ~np.isfinite(kept)
    if lost.any():  # finite in the file, beyond what dtype holds
        row = int(line_no[order[last]][np.flatnonzero(lost)[0]])
        raise ValueError(f"{path}: the rating on row {row} ({r[last][lost][0]:g}) is beyond "
                         f"the largest {np.dtype(dtype)} ({np.finfo(dtype).max:g}): pass "
                         "dtype=numpy.float64, or rescale the ratings")
    X = sp.csr_matrix((kept, (u[last], i[last])), shape=(users.size, items.size))
    X.sort_indices()
    return Ratings(X, _ids(users), _ids(items), None,
                   tm[last] if timed else None, int((~last).sum()))


def _ids(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind != "f":
        return a  # integer or text ids
    whole = np.all(np.mod(a, 1) == 0) and np.all(np.abs(a) < 2.0 ** 63)
    return a.astype(np.int64) if whole else a


def _titles(path: Path, item_ids: np.ndarray) -> list[str]:
    """The title of each item from a movies file: ``movies.csv`` (``id,title,genres``,
    quoted as CSV) or MovieLens 1M / 10M's ``movies.dat`` (``id::title::genres``, ML-1M's
    in Latin-1)."""
    text = _decode(read_data(path, what="movies file"), path)
    names: dict[int, str] = {}
    lines = text.replace("\r\n", "\n").split("\n")  # not splitlines: see _table
    if ratings_separator(lines[0]) == "::":
        rows: Any = ([r[0], "::".join(r[1:-1]) if len(r) > 2 else r[1]]
                     for r in (ln.split("::") for ln in lines) if len(r) >= 2)
    else:
        rows = csv.reader(io.StringIO(text))
    for row in rows:
        if len(row) >= 2 and row[0].strip().isdigit():
            names[int(row[0])] = row[1]
    return [names.get(int(m), f"movie {int(m)}") for m in item_ids]


def _first_file(base: Path, names: tuple[str, ...]) -> Path:
    """The first of ``names`` that is a file in ``base`` (else the first name's path)."""
    return next((base / n for n in names if (base / n).is_file()), base / names[0])


def load_movielens(shared: str | os.PathLike | None = None, dtype: Any = np.float32,
                   folder: str = "movielens-latest-small") -> Ratings:
    """MovieLens ``latest-small`` (610 users x 9,724 movies, 100,836 ratings of 0.5-5
    stars) from the shared data folder, with the movies' titles.

    ``folder`` may name another MovieLens folder there: ``ratings.csv`` and ``movies.csv``
    are read, else ``ratings.dat`` and ``movies.dat`` (``::``-separated, as in ``ml-1m``
    and ``ml-10M100K``).

    Examples
    --------
    >>> ml = load_movielens()  # doctest: +SKIP
    >>> ml.titles[ml.item_column(1)]  # doctest: +SKIP
    'Toy Story (1995)'
    """
    base = resolve_shared(shared, folder)
    ratings = read_ratings_csv(_first_file(base, ("ratings.csv", "ratings.dat")), dtype=dtype)
    movies = _first_file(base, ("movies.csv", "movies.dat"))
    if movies.is_file():
        ratings.titles = _titles(movies, ratings.item_ids)
    return ratings
