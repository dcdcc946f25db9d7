"""LIBSVM / svmlight sparse files (``<label> <index>:<value> ...``), and a9a / w8a.

Parsing is scikit-learn's ``load_svmlight_file`` (C speed, skips blank lines). Note from the
shared data README: ``a9a.t`` never uses feature 123, so both a9a files load with
``n_features=123``; ``w8a`` has 300 features and ends with an empty line.

Reading is bounded (:mod:`bidlab._bounded_io`): a FIFO or device is refused before it is
opened, gzip content stops at a decompressed-size cap, runs of blank lines are dropped
before the parser sees them (2 GB of newlines cost a decompression, not 2e9 parser steps),
and a largest feature index whose columns would not fit the memory budget is refused.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
import scipy.sparse as sp

from bidlab._bounded_io import (
    InputTooLargeError,
    check_budget,
    open_data,
    require_regular,
    stat_path,
)
from bidlab.datasets.corpus import canonical_csr
from bidlab.datasets.paths import resolve_shared

A9A_FEATURES = 123
W8A_FEATURES = 300
_COLUMN_BYTES = 8  # one float64 per column: the least a model over the columns holds
_CHUNK = 1 << 20
_BLANK_RUN = re.compile(rb"\n[ \t\r\f\v\n]*\n")  # blank lines, whatever their spaces
_MAX_INDEX = np.iinfo(np.int32).max  # scikit-learn's parser holds an index in a C int


class _Lines:
    """The lines of a binary stream, runs of blank lines collapsed at C speed, for
    scikit-learn's parser (which takes one Python step per line, blank or not)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f

    def read(self, n: int = -1) -> bytes:  # the parser checks for a read method
        return self._f.read(n)

    def __iter__(self) -> Iterator[bytes]:
        parts: list[bytes] = []
        first = True
        while chunk := self._f.read(_CHUNK):
            if first:  # a UTF-8 byte-order mark (Windows editors) is not part of the label
                chunk, first = chunk.removeprefix(codecs.BOM_UTF8), False
            lines = _BLANK_RUN.sub(b"\n", chunk).split(b"\n")
            if len(lines) == 1:
                parts.append(lines[0])
                continue
            parts.append(lines[0])
            yield b"".join(parts)
            yield from lines[1:-1]
            parts = [lines[-1]]
        if any(parts):
            yield b"".join(parts)


class TrainTest(NamedTuple):
    """A train/test pair; unpacks as ``Xtr, ytr, Xte, yte``."""

    X_train: sp.csr_matrix
    y_train: np.ndarray
    X_test: sp.csr_matrix
    y_test: np.ndarray


def load_svmlight(
    path: str | os.PathLike,
    n_features: int | None = None,
    dtype: np.dtype | type = np.float32,
    zero_based: bool | str = "auto",
    *,
    max_decompressed: int | None = None,
    memory_budget: int | None = None,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Load an svmlight/LIBSVM file as ``(X, y)``: X canonical CSR (rows are samples).

    ``n_features`` fixes the column count (needed when a file, like a9a.t, never uses the
    last feature); ``zero_based="auto"`` treats indices as 1-based unless a 0 occurs.
    ``y`` has the file's labels (e.g. +1/-1) as ``dtype``. A gzip file is read by its
    magic number, whatever its name. X's ``indices`` and ``indptr`` are int32 when they
    fit (scikit-learn's ``SGDClassifier`` refuses int64 ones).

    ``max_decompressed`` caps the bytes a gzip file may expand to (default 4 GiB or the
    memory budget, whichever is smaller; ``$BIDLAB_MAX_DECOMPRESSED``). Without
    ``n_features``, the largest feature index sets the column count, which must fit
    ``memory_budget`` at 8 bytes per column (default a quarter of the machine's memory;
    ``$BIDLAB_MEMORY_BUDGET``). Either limit raises ``InputTooLargeError`` (a ValueError).
    """
    from sklearn.datasets import load_svmlight_file  # lazy: sklearn is slow to import

    path = Path(path)
    try:
        stat_path(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path} not found: expected an svmlight/LIBSVM text file "
            "('<label> <index>:<value> ...' per line)"
        ) from None
    require_regular(path, "svmlight/LIBSVM file")
    try:
        with open_data(path, max_decompressed) as f:
            X, y = load_svmlight_file(
                _Lines(f), n_features=n_features, dtype=dtype, zero_based=zero_based
            )
    except InputTooLargeError:
        raise
    except (ValueError, OverflowError, OSError, EOFError) as e:
        where = (_first_bad_line(path, max_decompressed, zero_based)
                 if not isinstance(e, EOFError) else None)
        at = f" at line {where[0]}: {where[1]!r}" if where else ""
        why = f"{where[2]}; " if where and where[2] else ""
        raise ValueError(f"{path}: could not read as svmlight/LIBSVM{at} ({why}{e})") from e
    if n_features is None:
        check_budget(path, f"the largest feature index, which sets {X.shape[1]} columns "
                     f"({_COLUMN_BYTES} bytes each),",
                     X.shape[1] * _COLUMN_BYTES, memory_budget,
                     "pass n_features= (the true column count) or fix the index")
    return int32_indices(canonical_csr(X, dtype)), y.astype(dtype)


def int32_indices(X: sp.csr_matrix) -> sp.csr_matrix:
    """``X`` with int32 ``indices`` / ``indptr`` when its columns and nonzeros fit (scipy
    and bidlab take either; scikit-learn's SGD estimators and Cython code want int32)."""
    limit = np.iinfo(np.int32).max
    if X.indices.dtype != np.int32 and X.nnz <= limit and X.shape[1] <= limit:
        X.indices = X.indices.astype(np.int32)
        X.indptr = X.indptr.astype(np.int32)
    return X


def _line_problem(line: bytes, zero_based: bool | str) -> str | None:
    """What is wrong with one (comment-free, non-blank) svmlight line, or None: ``""``
    when a token does not parse, else the problem and its fix in words."""
    label, *feats = line.split()
    if b"," in label:
        return ("a multilabel line ('1,2 ...'); load_svmlight reads one label per line "
                "(use sklearn.datasets.load_svmlight_file(path, multilabel=True))")
    try:
        float(label)
    except ValueError:
        return ""
    if feats and feats[0].startswith(b"qid:"):
        feats = feats[1:]
    prev = -1
    for tok in feats:
        name, sep, value = tok.partition(b":")
        try:
            float(value)
            index = int(name)
        except ValueError:
            return ""
        if not sep or index < 0:
            return ""
        if index == 0 and zero_based is False:
            return "feature index 0 in a 1-based file (pass zero_based=True or 'auto')"
        if index > _MAX_INDEX:
            return (f"feature index {index} is past the largest readable index, "
                    f"{_MAX_INDEX}")
        if index <= prev:
            return (f"feature index {index} follows {prev}: indices must increase along a "
                    "line (sort them, and sum or drop repeated ones)")
        prev = index
    return None


def _first_bad_line(path: Path, cap: int | None,
                    zero_based: bool | str = "auto") -> tuple[int, str, str] | None:
    """(line number, its start, the problem in words or "") of the first line that is not
    ``<label> [qid:<n>] <index>:<value> ...`` with increasing indices, to say where a file
    is damaged; None when every line reads (or it cannot be scanned)."""
    try:
        with open_data(path, cap) as f:
            for no, raw in enumerate(f, start=1):
                if no == 1:
                    raw = raw.removeprefix(codecs.BOM_UTF8)
                line = raw.split(b"#", 1)[0].strip()
                if not line:
                    continue
                problem = _line_problem(line, zero_based)
                if problem is not None:
                    return no, raw[:80].decode(errors="replace").rstrip(), problem
    except (OSError, EOFError, InputTooLargeError):
        return None
    return None


def _binary(y: np.ndarray, zero_one: bool) -> np.ndarray:
    return (y > 0).astype(y.dtype) if zero_one else y


def load_a9a(
    shared: str | os.PathLike | None = None,
    *,
    zero_one: bool = False,
    dtype: np.dtype | type = np.float32,
) -> TrainTest:
    """a9a (UCI Adult): train 32,561 x 123, test 16,281 x 123, labels +1/-1 (0/1 with
    ``zero_one=True``)."""
    folder = resolve_shared(shared, "libsvm-a9a")
    Xtr, ytr = load_svmlight(folder / "a9a", n_features=A9A_FEATURES, dtype=dtype)
    Xte, yte = load_svmlight(folder / "a9a.t", n_features=A9A_FEATURES, dtype=dtype)
    return TrainTest(Xtr, _binary(ytr, zero_one), Xte, _binary(yte, zero_one))


def load_w8a(
    shared: str | os.PathLike | None = None,
    *,
    zero_one: bool = False,
    dtype: np.dtype | type = np.float32,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """w8a: 49,749 x 300 binary features, 3% positive; only the training file exists, so
    this returns ``(X, y)`` (split it yourself for validation)."""
    folder = resolve_shared(shared, "libsvm-w8a")
    X, y = load_svmlight(folder / "w8a", n_features=W8A_FEATURES, dtype=dtype)
    return X, _binary(y, zero_one)
