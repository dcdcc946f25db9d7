"""LIBSVM / svmlight sparse files (``<label> <index>:<value> ...``), and a9a / w8a.

Parsing is scikit-learn's ``load_svmlight_file`` (C speed, skips blank lines). Note from the
shared data README: ``a9a.t`` never uses feature 123, so both a9a files load with
``n_features=123``; ``w8a`` has 300 features and ends with an empty line.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from bidlab.datasets.corpus import canonical_csr
from bidlab.datasets.paths import resolve_shared

A9A_FEATURES = 123
W8A_FEATURES = 300


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
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Load an svmlight/LIBSVM file as ``(X, y)``: X canonical CSR (rows are samples).

    ``n_features`` fixes the column count (needed when a file, like a9a.t, never uses the
    last feature); ``zero_based="auto"`` treats indices as 1-based unless a 0 occurs.
    ``y`` has the file's labels (e.g. +1/-1) as ``dtype``. A gzip file is read by its
    magic number, whatever its name. X's ``indices`` and ``indptr`` are int32 when they
    fit (scikit-learn's ``SGDClassifier`` refuses int64 ones).
    """
    from sklearn.datasets import load_svmlight_file  # lazy: sklearn is slow to import

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: expected an svmlight/LIBSVM text file "
            "('<label> <index>:<value> ...' per line)"
        )
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"  # by content: the name need not end in .gz
        with gzip.open(path, "rb") if gzipped else open(path, "rb") as f:
            X, y = load_svmlight_file(
                f, n_features=n_features, dtype=dtype, zero_based=zero_based
            )
    except (ValueError, OSError, EOFError) as e:
        where = _first_bad_line(path, gzipped) if not isinstance(e, EOFError) else None
        at = f" at line {where[0]}: {where[1]!r}" if where else ""
        raise ValueError(f"{path}: could not read as svmlight/LIBSVM{at} ({e})") from e
    return int32_indices(canonical_csr(X, dtype)), y.astype(dtype)


def int32_indices(X: sp.csr_matrix) -> sp.csr_matrix:
    """``X`` with int32 ``indices`` / ``indptr`` when its columns and nonzeros fit (scipy
    and bidlab take either; scikit-learn's SGD estimators and Cython code want int32)."""
    limit = np.iinfo(np.int32).max
    if X.indices.dtype != np.int32 and X.nnz <= limit and X.shape[1] <= limit:
        X.indices = X.indices.astype(np.int32)
        X.indptr = X.indptr.astype(np.int32)
    return X


def _token_ok(tok: bytes) -> bool:
    name, sep, value = tok.partition(b":")
    if not sep or not name:
        return False
    try:
        float(value)
        return name == b"qid" or int(name) >= 0
    except ValueError:
        return False


def _first_bad_line(path: Path, gzipped: bool) -> tuple[int, str] | None:
    """(line number, its start) of the first line that is not ``<label> <index>:<value>
    ...``, to say where a file is damaged; None when every line reads (or it cannot be
    scanned)."""
    try:
        with gzip.open(path, "rb") if gzipped else open(path, "rb") as f:
            for no, raw in enumerate(f, start=1):
                line = raw.split(b"#", 1)[0].strip()
                if not line:
                    continue
                label, *feats = line.split()
                try:
                    [float(v) for v in label.split(b",")]
                except ValueError:
                    return no, raw[:80].decode(errors="replace").rstrip()
                if not all(_token_ok(t) for t in feats):
                    return no, raw[:80].decode(errors="replace").rstrip()
    except (OSError, EOFError):
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
