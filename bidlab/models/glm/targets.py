"""How a GLM's K model targets read the data's q target columns, and their encoding.

``Y`` is n x q (or a length-n vector, q = 1): real values for ``linear``, two labels for
``logistic`` / ``svm``, any labels for ``softmax``. The target map (BIDMach's ``targmap``)
says which data column each model target learns, so ``targmap=[0] * 32`` trains 32
configurations of one target in one pass. Each data column used by a classifier link gets
its own ``classes`` (sorted labels); training sees them encoded as 0/1 (logistic), -1/+1
(svm) or the class index (softmax), in one float matrix with a column per
(data column, encoding) pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets

from bidlab import backend
from bidlab.learn.persist import persistable
from bidlab.models.glm.links import CLASSIFIER_LINKS

_FAMILY = {"linear": "value", "logistic": "bin01", "svm": "pm1", "softmax": "class"}


@persistable
@dataclass
class Targets:
    """The resolved target structure of a fitted GLM."""

    links: tuple[str, ...]  # per model target
    data_col: np.ndarray  # (K,) the data column each model target learns
    enc_col: np.ndarray  # (K,) the encoded column it trains on
    encodings: list[tuple[int, str]]  # (data column, family) of each encoded column
    classes: list[np.ndarray | None]  # per data column (None: not a classifier column)
    q: int  # data target columns
    y_1d: bool  # Y was a vector

    @property
    def K(self) -> int:
        return len(self.links)

    def widths(self) -> list[int]:
        return [
            len(self.classes[c]) if link == "softmax" else 1
            for link, c in zip(self.links, self.data_col, strict=True)
        ]


def as_targets_2d(Y: Any, n_rows: int, owner: str) -> tuple[np.ndarray, bool]:
    """Y as a host n x q array (and whether it was 1-D); checks the row count."""
    if hasattr(Y, "guid") and hasattr(Y, "numpy"):  # a bidlab Mat
        Y = Y.numpy()
    Y = backend.to_host(Y)
    if sp.issparse(Y):  # a sparse label indicator matrix (MultiLabelBinarizer's sparse_output)
        Y = Y.toarray()
    Y = np.asarray(Y)
    if Y.ndim == 0 or Y.ndim > 2:
        raise ValueError(f"{owner}: Y must be 1-D (n,) or 2-D (n, targets); got shape {Y.shape}")
    y_1d = Y.ndim == 1
    Y2 = Y.reshape(-1, 1) if y_1d else Y
    if Y2.shape[0] != n_rows:
        raise ValueError(
            f"Y has {Y2.shape[0]} rows but X has {n_rows} samples: give one row of targets "
            "per sample"
        )
    if Y2.dtype.kind == "c":
        raise ValueError(f"{owner}: Y holds complex numbers, which no link takes (the "
                         "imaginary part would be dropped): give real values or labels")
    if Y2.dtype.kind == "f" and not np.isfinite(Y2).all():
        r, c = (int(v) for v in np.argwhere(~np.isfinite(Y2))[0])
        raise ValueError(f"{owner}: Y contains NaN or infinity (first at row {r}, column {c}): "
                         "drop those rows or impute the targets first")
    if Y2.dtype.kind == "O" and Y2.size:  # labels read from pandas: NaN, None, pd.NA
        missing = np.frompyfunc(_is_missing, 1, 1)(Y2).astype(bool)
        if missing.any():
            r, c = (int(v) for v in np.argwhere(missing)[0])
            raise ValueError(f"{owner}: Y has a missing label ({Y2[r, c]!r}, first at row {r}, "
                             f"column {c}): drop those rows or fill the labels in first")
    return Y2, y_1d


def _is_missing(v: Any) -> bool:
    """Whether the label ``v`` is a missing value (None, NaN, pandas' NA or NaT)."""
    if isinstance(v, str):
        return False
    return v is None or (isinstance(v, float) and v != v) or \
        type(v).__name__ in ("NAType", "NaTType")


def _zero_one_classes(col: np.ndarray) -> np.ndarray | None:
    """The classes of a numeric column of 0s and 1s (None for any other column): such a
    column is a valid classification target, so it needs no further check."""
    if col.dtype.kind in "biuf":
        lo, hi = col.min(), col.max()
        if lo >= 0 and hi <= 1 and ((col == 0) | (col == 1)).all():
            return np.array([v for v in (0, 1) if (col == v).any()], dtype=col.dtype)
    return None


def _normalise_links(link: Any, K: int, owner: str) -> tuple[str, ...]:
    links = (link,) * K if isinstance(link, str) else tuple(link)
    if len(links) != K:
        raise ValueError(
            f"{owner} has {len(links)} links but {K} model targets: give one link, or one per "
            "target"
        )
    return links


def resolve(
    link: Any,
    targmap: Sequence[int] | None,
    Y2: np.ndarray,
    y_1d: bool,
    owner: str,
    classes: Any = None,
) -> Targets:
    """Work out the model targets for data targets ``Y2`` (n x q) and infer their classes.

    ``classes`` (partial_fit): labels for every classifier column, or one array per data
    column; None infers them from ``Y2``.
    """
    q = Y2.shape[1]
    tm = np.arange(q) if targmap is None else np.asarray(targmap, dtype=np.int64).reshape(-1)
    if tm.size and (tm.min() < 0 or tm.max() >= q):
        raise ValueError(
            f"targmap refers to data target column {int(tm.max() if tm.max() >= q else tm.min())}"
            f" but Y has {q} column(s): entries must be in 0..{q - 1}"
        )
    links = _normalise_links(link, tm.size, owner)
    Y2 = np.asfortranarray(Y2)  # the checks below read it a column at a time
    cls: list[np.ndarray | None] = [None] * q
    for k, (lk, c) in enumerate(zip(links, tm, strict=True)):
        if lk not in CLASSIFIER_LINKS or cls[c] is not None:
            if lk == "linear" and Y2.dtype.kind not in "biuf" and not _numbers(Y2[:, c]):
                raise ValueError(
                    f"{owner}: Unknown label type: target {k} uses the linear link but Y "
                    f"column {c} holds {Y2.dtype} labels; regression needs numbers"
                )
            continue
        if classes is not None:
            cls[c] = _given_classes(classes, c, q, f"target {k} ({lk})", owner)
        else:
            col = own_labels(Y2[:, c])
            cls[c] = _zero_one_classes(col)
            if cls[c] is None:
                try:
                    check_classification_targets(col)  # "Unknown label type" for reals
                except ValueError as e:
                    what = f"Y column {c}" if q > 1 else "y"
                    raise ValueError(
                        f"{owner}: target {k} uses the {lk} link but {what} is not a set of "
                        f"class labels ({e}); give that column labels (one type: strings or "
                        "integers), or use the linear link for values") from e
                cls[c] = np.unique(col)
    for k, (lk, c) in enumerate(zip(links, tm, strict=True)):
        if lk not in CLASSIFIER_LINKS:
            continue
        what = f"Y column {c}" if q > 1 else "y"
        found = f"{len(cls[c])} class{'' if len(cls[c]) == 1 else 'es'}: {cls[c][:10].tolist()}"
        if lk in ("logistic", "svm") and len(cls[c]) != 2:
            more = (f". Only binary classification is supported by the {lk} link: use "
                    "link='softmax' for more classes") if len(cls[c]) > 2 else ""
            raise ValueError(
                f"{owner}: target {k} ({lk}) needs exactly 2 classes but {what} has {found}"
                f"{more}"
            )
        if lk == "softmax" and len(cls[c]) < 2:
            raise ValueError(
                f"{owner}: target {k} (softmax) needs at least 2 classes but {what} has {found}"
            )
    encodings: list[tuple[int, str]] = []
    enc_col = np.empty(tm.size, dtype=np.int64)
    for k, (lk, c) in enumerate(zip(links, tm, strict=True)):
        key = (int(c), _FAMILY[lk])
        if key not in encodings:
            encodings.append(key)
        enc_col[k] = encodings.index(key)
    return Targets(links, tm, enc_col, encodings, cls, q, y_1d)


def own_labels(col: np.ndarray) -> np.ndarray:
    """A label column as its own values' type: an object column (one column of a mixed
    DataFrame) holding only integers or booleans becomes an integer / boolean array, as
    that column alone would be; any other column is returned as it is."""
    if col.dtype != object or not len(col):
        return col
    if all(isinstance(v, (int, np.integer, bool, np.bool_)) for v in col):
        return np.asarray(col.tolist())
    return col


def _numbers(col: np.ndarray) -> bool:
    """Whether an object column holds only numbers (it then trains as float)."""
    try:
        return bool(np.isfinite(np.asarray(col, dtype=np.float64)).all())
    except (TypeError, ValueError):
        return False


def _per_column(classes: Any, q: int) -> bool:
    """Whether ``classes`` holds one entry per data column: an array of labels, or None
    for a column no classifier target learns (a linear one). An object array of plain
    labels (``np.unique`` of string labels) is one set of labels for every column."""
    return (
        isinstance(classes, (list, tuple, np.ndarray))
        and (not isinstance(classes, np.ndarray) or classes.dtype == object)
        and len(classes) == q
        and all(c is None or isinstance(c, (list, tuple, np.ndarray)) for c in classes)
        and any(c is not None for c in classes)
    )


def _given_classes(classes: Any, c: int, q: int, what: str, owner: str) -> np.ndarray:
    """The sorted labels ``classes`` gives data column ``c`` (learned by ``what``)."""
    given = classes[c] if _per_column(classes, q) else classes
    if given is None:
        raise ValueError(f"{owner}: classes gives no labels for Y column {c}, which {what} "
                         "learns: give that column's labels")
    try:
        return np.unique(np.asarray(given))
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"{owner}: classes must be the labels of every classifier column, or one array "
            f"of labels per Y column ({q}; None for a linear one); got {classes!r}") from e


def same_classes(t: Targets, classes: Any) -> bool:
    """Whether a later ``partial_fit`` call's ``classes`` (labels for every classifier
    column, or one array per data column, as :func:`resolve` reads them) name each
    classifier column's classes of ``t``, in any order."""
    for c, known in enumerate(t.classes):
        if known is None:
            continue
        try:
            given = _given_classes(classes, c, t.q, "", "")
            if given.shape != known.shape or not (given == known).all():
                return False
        except (TypeError, ValueError):  # none, labels of another type, or ragged
            return False
    return True


def class_index(col: np.ndarray, classes: np.ndarray, what: str) -> np.ndarray:
    """Each label's index in ``classes``; ValueError naming unseen labels."""
    if (
        classes.dtype.kind in "biuf"
        and col.dtype.kind in "biuf"
        and len(classes) == int(classes[-1]) + 1
        and classes[0] == 0
        and np.array_equal(classes, np.arange(len(classes)))
    ):
        ok = (col >= 0) & (col < len(classes)) & (col == np.floor(col))
        if ok.all():
            return col.astype(np.int64)
        bad = np.unique(col[~ok])[:5].tolist()
        raise ValueError(
            f"{what} has label(s) {bad} outside 0..{len(classes) - 1} (the {len(classes)} "
            "classes seen in fit, or given as classes=)"
        )
    idx = np.searchsorted(classes, col)
    idx_c = np.minimum(idx, len(classes) - 1)
    ok = classes[idx_c] == col
    if not ok.all():
        bad = np.unique(col[~ok])[:5].tolist()
        raise ValueError(
            f"{what} has label(s) {bad} not among the classes {classes[:20].tolist()} seen in "
            "fit (or given as classes=)"
        )
    return idx_c


def encode(t: Targets, Y2: np.ndarray, dtype: Any) -> np.ndarray:
    """The float n x (encoded columns) training targets for ``Y2``."""
    out = np.empty((Y2.shape[0], len(t.encodings)), dtype=dtype, order="F")
    Y2 = np.asfortranarray(Y2)  # read and written a column at a time
    for j, (c, fam) in enumerate(t.encodings):
        col = Y2[:, c]
        if fam == "value":
            out[:, j] = col
            continue
        idx = class_index(own_labels(col), t.classes[c], f"Y column {c}" if t.q > 1 else "y")
        if fam == "pm1":
            out[:, j] = 2.0 * idx - 1.0
        else:  # bin01 and class: the class index
            out[:, j] = idx
    return np.ascontiguousarray(out)
