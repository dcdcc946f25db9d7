"""NMF's input checks: the data and its observed entries, as the matrices a source streams.

A dense ``X`` may hold NaN where an entry is missing (and may also take a boolean ``mask``,
True = observed); a sparse ``X`` takes a ``mask`` of its shape (dense or sparse, True =
observed), without which every entry, stored or not, is observed. A mask holds 0 / 1 or
False / True only, dense or sparse alike (a sparse mask's stored 2 is refused, as a dense
one's is). With the Frobenius loss, observed values whose norm overflows its arithmetic (beyond
``sqrt(finfo(dtype).max) / 2``, about 9.2e18 in float32) are refused: rescale them.
:func:`prepare` returns the aligned matrices of :mod:`bidlab.models.nmf.steps`' kinds:
``(X,)`` when every entry counts, ``(X with zeros where missing, 0 / 1 mask)`` for a dense
``X`` with missing entries, ``(X at the observed entries, ones there)`` (two CSR matrices
of one pattern) for a sparse ``X`` with a mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.models.validation import unwrap

__all__ = ["Prepared", "prepare", "unwrap", "ratings_input"]


@dataclass
class Prepared:
    """The matrices to stream, which entries count, and their mean (for the start)."""

    mats: tuple[Any, ...]
    kind: str
    mean: float

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.mats[0].shape)  # type: ignore[return-value]


def ratings_input(X: Any, mask: Any) -> tuple[Any, Any]:
    """A :class:`bidlab.datasets.Ratings` (``load_movielens``, ``read_ratings_csv``) as its
    users x items CSR with its stored entries, the ratings, as the observed ones (unless a
    ``mask`` is given), as ``bidlab train nmf`` reads a ratings file; anything else as it
    is."""
    if not (hasattr(X, "user_ids") and hasattr(X, "item_ids")
            and sp.issparse(getattr(X, "X", None))):
        return X, mask
    R = sp.csr_matrix(X.X)
    if mask is None:
        mask = sp.csr_matrix((np.ones(R.nnz, bool), R.indices, R.indptr), shape=R.shape)
    return R, mask


def _bad_position(name: str, what: str, rows: np.ndarray, cols: np.ndarray, fix: str) -> None:
    order = np.lexsort((cols, rows))
    r, c = int(rows[order[0]]), int(cols[order[0]])
    raise ValueError(f"{name}: X has {rows.size} {what} (the first at row {r}, column {c}): "
                     f"{fix}")


def _check_values(name: str, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
    """Refuse infinite or negative observed values (NaN was dealt with before)."""
    bad = ~np.isfinite(vals)
    if bad.any():
        _bad_position(name, "infinite observed entries", rows[bad], cols[bad],
                      "NMF needs finite values; mark them missing (NaN, or False in mask) "
                      "or replace them")
    neg = vals < 0
    if neg.any():
        _bad_position(f"Negative values in data passed to {name}", "negative entries",
                      rows[neg], cols[neg],
                      "NMF factors nonnegative data; shift or clip X (e.g. X - X.min()), or "
                      "mark those entries missing")


def _check_coverage(name: str, row_counts: np.ndarray, col_counts: np.ndarray | None,
                    need_rows: bool = True) -> None:
    """Refuse rows (unless ``need_rows`` is False) and columns (unless ``col_counts`` is
    None) with no observed entry, and always an ``X`` with no observed entry at all."""
    for what, counts in (("row", row_counts if need_rows else None), ("column", col_counts)):
        if counts is None:
            continue
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            plural = "rows" if what == "row" else "columns"
            raise ValueError(f"{name}: {empty.size} {plural} of X have no observed entry "
                             f"(the first is {what} {int(empty[0])}): nothing can be learned "
                             f"about them; drop those {plural} or observe some of their "
                             "entries")
    if not row_counts.any():
        raise ValueError(f"{name}: X has no observed entry (every entry is NaN or masked "
                         "out), so there is nothing to score; pass rows with observed "
                         "entries")


def _dense_mask(name: str, mask: Any, shape: tuple[int, int]) -> np.ndarray:
    m = mask.toarray() if sp.issparse(mask) else np.asarray(mask)
    if m.shape != shape:
        raise ValueError(f"{name}: mask has shape {m.shape} but X has shape {shape}: give "
                         "one True (observed) / False (missing) per entry of X")
    if m.dtype != bool:
        _check_mask_values(name, m)
        m = m.astype(bool)
    return m


def _check_mask_values(name: str, values: np.ndarray) -> None:
    """Refuse a mask's values other than 0 and 1 (False / True), dense or sparse alike."""
    if not np.isin(values, (0, 1)).all():
        raise ValueError(f"{name}: mask must be boolean (True = observed); got values "
                         "other than 0 and 1")


def _check_scale(name: str, vals: np.ndarray, dtype: np.dtype) -> None:
    """Refuse observed values whose Frobenius norm is beyond ``sqrt(finfo(dtype).max) / 2``
    (about 9.2e18 in float32, 6.7e153 in float64): the reconstruction error (a sum of
    squares) and the updates' products overflow to inf and NaN."""
    if not vals.size:
        return
    limit = float(np.sqrt(np.finfo(dtype).max)) / 2
    big = float(np.abs(vals).max())
    if big == 0.0 or big * np.sqrt(vals.size) <= limit:
        return
    norm = big * float(np.sqrt(np.square(vals / big, dtype=np.float64).sum()))
    if norm > limit:
        also = " or pass dtype=numpy.float64" if dtype == np.float32 else ""
        raise ValueError(f"{name}: X's observed values have a norm of {norm:.3g} (the "
                         f"largest {big:.3g}), beyond the {limit:.3g} that {dtype} "
                         "arithmetic can factorise (its sums of squares and products would "
                         "overflow to inf and NaN): rescale X, e.g. X / X.max() (and the "
                         f"factors back){also}")


def prepare(name: str, X: Any, mask: Any, dtype: np.dtype, columns: bool = True,
            need_rows: bool = True, loss: str = "frobenius") -> Prepared:
    """Check ``X`` (n x d, host dense or sparse, converted to ``dtype``) and its ``mask``;
    return what to stream (see the module doc). Errors name the problem and the fix.
    ``columns``: refuse columns with no observed entry (training learns each column's
    components; ``transform`` and ``score`` keep the components and take any column).
    ``need_rows``: refuse rows with no observed entry (``score`` takes them: they add
    nothing to its loss); an ``X`` with no observed entry at all is always refused.
    ``loss``: the Frobenius loss refuses values whose squares overflow (the KL loss's
    arithmetic stays within the values' scale)."""
    if sp.issparse(X):
        return _prepare_sparse(name, sp.csr_matrix(X, dtype=dtype), mask, columns, need_rows,
                               loss)
    X = np.asarray(X, dtype=dtype)
    if X.ndim != 2 or X.size == 0:
        raise ValueError(f"{name}: X must be a non-empty 2-D array (samples x features); got "
                         f"shape {X.shape}")
    observed = ~np.isnan(X)
    if mask is not None:
        observed &= _dense_mask(name, mask, X.shape)
    rows, cols = np.nonzero(observed)
    vals = X[rows, cols]
    _check_values(name, rows, cols, vals)
    _check_coverage(name, observed.sum(axis=1), observed.sum(axis=0) if columns else None,
                    need_rows)
    if loss == "frobenius":
        _check_scale(name, vals, X.dtype)
    total = float(vals.sum(dtype=np.float64))
    mean = total / max(rows.size, 1)
    if observed.all():
        return Prepared((np.ascontiguousarray(X),), "dense", mean)
    X0 = np.where(observed, X, 0).astype(dtype)
    return Prepared((X0, observed.astype(dtype)), "masked", mean)


def _prepare_sparse(name: str, X: sp.csr_matrix, mask: Any, columns: bool,
                    need_rows: bool = True, loss: str = "frobenius") -> Prepared:
    X = X.copy()
    X.sum_duplicates()
    X.sort_indices()
    n, d = X.shape
    if n == 0 or d == 0:
        raise ValueError(f"{name}: X must be non-empty (samples x features); got shape "
                         f"{X.shape}")
    if mask is None:
        rows = np.repeat(np.arange(n), np.diff(X.indptr))
        if np.isnan(X.data).any():
            bad = np.isnan(X.data)
            _bad_position(name, "NaN entries", rows[bad], X.indices[bad],
                          "a sparse X marks missing entries with mask= (True = observed, "
                          "False = missing), not NaN")
        _check_values(name, rows, X.indices, X.data)
        if loss == "frobenius":
            _check_scale(name, X.data, X.dtype)
        mean = float(X.data.sum(dtype=np.float64)) / (n * d)
        return Prepared((X,), "sparse", mean)
    if sp.issparse(mask):
        M = sp.csr_matrix(mask)
        if M.shape != X.shape:
            raise ValueError(f"{name}: mask has shape {M.shape} but X has shape {X.shape}: "
                             "give one True (observed) / False (missing) per entry of X")
        if M.dtype != bool:  # as a dense mask: 0 / 1 only (a 2 is not "True")
            _check_mask_values(name, M.data)
        M = sp.csr_matrix(M, dtype=bool)
    else:
        M = sp.csr_matrix(_dense_mask(name, mask, X.shape))
    M.eliminate_zeros()
    M.sort_indices()
    rows = np.repeat(np.arange(n), np.diff(M.indptr))
    cols = M.indices
    vals = np.asarray(X[rows, cols]).ravel().astype(X.dtype) if rows.size else np.zeros(0)
    if np.isnan(vals).any():
        bad = np.isnan(vals)
        _bad_position(name, "NaN entries outside the mask's missing ones", rows[bad],
                      cols[bad], "mark them missing (False in mask) or give their values")
    _check_values(name, rows, cols, vals)
    _check_coverage(name, np.diff(M.indptr),
                    np.bincount(cols, minlength=d) if columns else None, need_rows)
    if loss == "frobenius":
        _check_scale(name, vals, X.dtype)
    indptr, indices = M.indptr.astype(np.int64), cols.astype(np.int32)
    O = sp.csr_matrix((vals.astype(X.dtype), indices, indptr), shape=X.shape)
    ones = sp.csr_matrix((np.ones(vals.size, X.dtype), indices.copy(), indptr.copy()),
                         shape=X.shape)
    mean = float(vals.sum(dtype=np.float64)) / max(vals.size, 1)
    return Prepared((O, ones), "stored", mean)
