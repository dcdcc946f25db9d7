"""SFA's input checks: ratings as a users x items CSR of the observed entries.

A sparse input's stored entries are the observed ones (an explicit zero rating is a stored
zero); a dense input marks missing entries with NaN. For implicit feedback a zero count is
no interaction, stored or not (a dense count matrix's zeros included). Duplicate stored
(user, item) pairs are refused, in a COO matrix as in a CSR one (a loader decides which
rating counts, e.g. the latest, :func:`bidlab.datasets.load_movielens`). Build the matrix
from the triples as a COO, ``sp.coo_matrix((ratings, (users, items)))``, not as
``sp.csr_matrix((ratings, (users, items)))``: scipy sums a CSR's duplicate triples while
building it, before any check can see them (a 4 and a 5 become a 9). Users (rows) with
no observed entry are refused: nothing can be learned about them; items (columns) with
none are allowed and keep zero factors (their predictions are the global mean plus the
user's bias). Complex values are refused (an array's or any column's of a DataFrame), and
so are values beyond ``finfo(dtype).max ** 0.25`` in magnitude (about 4.3e9 in float32,
1.2e77 in float64), whose sums and products overflow: rescale such ratings.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.models.validation import unwrap

__all__ = ["ratings_csr", "check_ids", "check_counts"]


def ratings_csr(name: str, X: Any, dtype: Any, *, n_items: int | None = None,
                allow_empty_rows: bool = False, implicit: bool = False) -> sp.csr_matrix:
    """``X`` as a canonical CSR of ``dtype``; errors name the problem and the fix.

    Parameters
    ----------
    name : str
        The estimator's name, the start of each error message.
    X : sparse matrix, Ratings or array_like
        Users x items: a :class:`bidlab.datasets.Ratings` (``load_movielens()``, a ratings
        CSV), any scipy sparse format or a pandas DataFrame of sparse columns
        filled with 0 (its stored entries are the observed ratings), or dense with NaN
        where missing. Duplicate (user, item) entries are
        refused, a COO's included; a CSR built from triples,
        ``sp.csr_matrix((ratings, (users, items)))``, has summed its duplicates before
        it gets here, so build it as ``sp.coo_matrix`` instead.
    dtype : dtype
        The dtype of the result.
    n_items : int, optional
        The number of items (columns) ``X`` must have.
    allow_empty_rows : bool
        Accept users (rows) with no observed entry.
    implicit : bool
        Implicit feedback: a zero count is no interaction (preference 0, confidence 1,
        as an entry not stored), so stored zeros (and a dense input's zeros) are dropped.

    Returns
    -------
    scipy.sparse.csr_matrix
        Sorted indices, no duplicates, every stored value finite.
    """
    if hasattr(X, "user_ids") and hasattr(X, "item_ids") and sp.issparse(getattr(X, "X", None)):
        X = X.X  # a bidlab.datasets Ratings: its stored entries are the ratings
    X = unwrap(X)
    if _zero_filled_sparse_frame(X):  # its stored entries are the observed ones
        X = X.sparse.to_coo()
    if backend.is_cupy_array(getattr(X, "data", X)):
        X = backend.to_host(X)
    if getattr(getattr(X, "dtype", None), "kind", None) == "c" or _complex_frame(X) or (
            isinstance(X, (list, tuple)) and np.iscomplexobj(X)):
        raise ValueError(f"{name}: X holds complex values; ratings are real numbers: pass "
                         "the real part (X.real) or the magnitude (abs(X))")
    if sp.issparse(X):
        if X.format == "coo":  # converting to CSR would sum the duplicates
            copy = X.copy()
            copy.sum_duplicates()
            _refuse_duplicates(name, X.nnz - copy.nnz)
        S = sp.csr_matrix(X)
        if S.has_canonical_format is False:
            copy = S.copy()
            copy.sort_indices()
            before = copy.nnz
            copy.sum_duplicates()
            _refuse_duplicates(name, before - copy.nnz)
            S = copy
        S = S.astype(dtype)
    else:
        if hasattr(X, "dtypes") and hasattr(X, "to_numpy"):  # a pandas frame: pd.NA too
            A = X.to_numpy(dtype=dtype, na_value=np.nan)
        else:
            A = np.asarray(X, dtype=dtype)
        if A.ndim != 2:
            raise ValueError(f"{name}: X must be 2-D (users x items); got shape {A.shape}")
        observed = ~np.isnan(A)
        S = _dense_to_csr(A, observed)
    n, d = S.shape
    if n == 0 or d == 0:
        raise ValueError(f"{name}: X must be non-empty (users x items); got shape {S.shape}")
    if n_items is not None and d != n_items:
        raise ValueError(f"{name}: X has {d} items (columns) but the model was fitted on "
                         f"{n_items}")
    bad = ~np.isfinite(S.data)
    if bad.any():
        rows = np.repeat(np.arange(n), np.diff(S.indptr))
        p = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}: X holds {int(bad.sum())} NaN or infinite observed "
                         f"entries (the first at user {int(rows[p])}, item "
                         f"{int(S.indices[p])}): drop them from the sparse matrix")
    _check_scale(name, S)
    if implicit and S.nnz and not S.data.all():  # a zero count: no interaction
        S = S.copy()
        S.eliminate_zeros()
    if not allow_empty_rows:
        empty = np.flatnonzero(np.diff(S.indptr) == 0)
        if empty.size:
            what = "nonzero count" if implicit else "observed entry"
            raise ValueError(f"{name}: {empty.size} users (rows) of X have no {what} "
                             f"(the first is row {int(empty[0])}): nothing can be "
                             "learned about them; drop those rows")
    return S


def check_counts(name: str, S: sp.csr_matrix, feedback: str) -> None:
    """Refuse negative values for implicit feedback (the confidence ``1 + alpha r`` of a
    stored count must stay positive)."""
    if feedback == "implicit" and S.nnz and S.data.min() < 0:
        raise ValueError(f"{name}: implicit feedback needs counts >= 0 (confidence "
                         "1 + alpha r); use feedback='explicit' for signed ratings")


def _zero_filled_sparse_frame(X: Any) -> bool:
    """Whether ``X`` is a pandas DataFrame of sparse columns that leave out zeros (a NaN
    fill reads as a dense matrix with NaN where missing)."""
    dtypes = getattr(X, "dtypes", None)
    return (getattr(X, "ndim", 0) == 2 and hasattr(X, "sparse") and dtypes is not None
            and all(getattr(dt, "fill_value", None) == 0 for dt in dtypes))


def _complex_frame(X: Any) -> bool:
    """Whether ``X`` is a pandas DataFrame with a complex column (a frame has no one
    ``dtype`` to check; a sparse column's values are its ``subtype``)."""
    dtypes = getattr(X, "dtypes", None)
    if getattr(X, "ndim", 0) != 2 or dtypes is None or hasattr(X, "dtype"):
        return False
    return any(getattr(getattr(d, "subtype", d), "kind", None) == "c" for d in dtypes)


def _check_scale(name: str, S: sp.csr_matrix) -> None:
    """Refuse ratings beyond ``finfo(dtype).max ** 0.25`` in magnitude (about 4.3e9 in
    float32, 1.2e77 in float64): the conjugate-gradient steps form cubes of the ratings'
    scale, which overflow to inf and leave NaN factors and predictions."""
    if not S.nnz:
        return
    limit = float(np.finfo(S.dtype).max) ** 0.25
    big = float(np.abs(S.data).max())
    if big > limit:
        also = " or pass dtype=numpy.float64" if S.dtype == np.float32 else ""
        raise ValueError(f"{name}: X holds values as large as {big:.3g}, beyond the "
                         f"{limit:.3g} that {S.dtype} arithmetic can factorise (its sums "
                         "and products would overflow to inf and NaN): rescale X, e.g. "
                         f"X / abs(X).max() (and the predictions back){also}")


def _refuse_duplicates(name: str, n_duplicates: int) -> None:
    if n_duplicates:
        raise ValueError(f"{name}: X stores {n_duplicates} duplicate (user, item) entries; "
                         "keep one rating per pair (e.g. the latest) before fitting")


def _dense_to_csr(A: np.ndarray, observed: np.ndarray) -> sp.csr_matrix:
    rows, cols = np.nonzero(observed)
    return sp.csr_matrix((A[rows, cols], (rows, cols)), shape=A.shape)


def check_ids(name: str, what: str, ids: Any, n: int) -> np.ndarray:
    """``ids`` as an int64 array, each in ``[0, n)``.

    Parameters
    ----------
    name : str
        The estimator's name, the start of each error message.
    what : str
        ``"user"`` or ``"item"``.
    ids : int or array_like of int
        The ids; integral floats (``1.0``) are taken as integers.
    n : int
        The number of users (or items) the model has.

    Returns
    -------
    numpy.ndarray
        The ids, int64, 1-D.

    Raises
    ------
    ValueError
        When an id is not an integer, or out of range (naming the first such id).
    """
    a = np.asarray(ids)
    if a.dtype.kind in "fO" and not isinstance(ids, np.ndarray):
        exact = np.asarray(ids, dtype=object)  # a list mixing small ints and ints >= 2**63
        if exact.size and _python_ints(exact):  # becomes floats: keep the ints as given
            a = exact
    if a.dtype.kind == "O" and _python_ints(a):  # ints beyond int64 and uint64
        flat = a.reshape(-1)
        out = np.array([x < 0 or x >= n for x in flat], bool)
    elif a.dtype.kind not in "iuf":
        raise ValueError(f"{name}: {what} ids must be integers; got {a.dtype} "
                         f"({_short(ids)})")
    else:
        if a.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                bad = (np.mod(a, 1) != 0).reshape(-1)
            if bad.any():
                raise ValueError(f"{name}: {what} ids must be integers; got {a.dtype} "
                                 f"{float(a.reshape(-1)[bad][0])}")
        flat = a.reshape(-1)
        out = (flat < 0) | (flat >= n)  # before the int64 conversion: ids >= 2**63
        # (uint64, floats) would wrap to other numbers
    if out.any():
        raise ValueError(f"{name}: {what} id {int(flat[out][0])} is out of range: the "
                         f"model has {n} {what}s (ids 0..{n - 1}); fold new {what}s in "
                         f"with partial_fit_{what}s")
    return flat.astype(np.int64)


def _python_ints(a: np.ndarray) -> bool:
    """Whether the object array ``a`` holds only Python (or numpy) integers, no bools."""
    return all(isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))
               for x in a.reshape(-1))


def _short(x: Any) -> str:
    r = repr(x)
    return r if len(r) <= 40 else r[:37] + "..."
