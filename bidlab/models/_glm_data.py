"""Input checks shared by GLM and KMeans: features to CSR / dense on one backend, finite.

Messages name the problem and the fix, and both numbers in a mismatch ("X has 10 features
but GLM was fitted with 12 ...").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

import bidlab as bl
from bidlab import backend


def device_xp(device: str) -> Any:
    """numpy for ``"cpu"``, cupy for ``"gpu"`` (ImportError explaining the gpu extra)."""
    return np if device == "cpu" else backend.cupy()


def _unwrap(X: Any) -> Any:
    if isinstance(X, bl.SMat):
        return X.csr
    if isinstance(X, bl.Mat):
        return X.data
    if hasattr(X, "X") and hasattr(X, "vocab"):  # a bidlab.datasets.Corpus
        return X.X
    return X


def _first_bad(indptr: Any, indices: Any, bad: Any) -> tuple[int, int]:
    p = int(np.flatnonzero(np.asarray(backend.to_host(bad)))[0])
    row = int(np.searchsorted(np.asarray(backend.to_host(indptr)), p, side="right") - 1)
    return row, int(backend.to_host(indices[p : p + 1])[0])


def as_features(
    X: Any, *, owner: str, dtype: Any, xp: Any, sparse: bool | None = True
) -> Any:
    """X (samples x features) as a CSR (``sparse=True``), a C-ordered dense array
    (``sparse=False``) or whichever it already is (``None``), on ``xp``'s backend.

    Raises ValueError on NaN / infinite values (naming the first one's row and column), on
    arrays that are not 2-D and on empty matrices.
    """
    X = _unwrap(X)
    if isinstance(X, (list, tuple)):
        X = np.asarray(X)
    if not (backend.is_sparse(X) or hasattr(X, "shape")):
        raise TypeError(
            f"{owner}: X must be a 2-D array or sparse matrix (samples x features); got "
            f"{type(X).__name__}"
        )
    if len(X.shape) != 2:
        raise ValueError(
            f"{owner}: X must be 2-D (samples x features); got shape {tuple(X.shape)}: "
            "reshape a single sample with x.reshape(1, -1)"
        )
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(
            f"{owner}: X is empty (shape {tuple(X.shape)}); need >= 1 sample and 1 feature"
        )
    on_gpu = xp is not np
    want_sparse = backend.is_sparse(X) if sparse is None else sparse
    if want_sparse:
        if on_gpu:
            X = backend.to_device(X if backend.is_sparse(X) else sp.csr_matrix(np.asarray(X)))
            X = X.tocsr().astype(dtype)
        else:
            X = backend.to_host(X)
            if not backend.is_sparse(X) and getattr(X, "dtype", np.float64).kind not in "biuf":
                raise TypeError(f"{owner}: X must hold numbers; got dtype {X.dtype}")
            X = sp.csr_matrix(X, dtype=dtype)
        X.sum_duplicates()
        bad = ~xp.isfinite(X.data)
        if bool(bad.any()):
            r, c = _first_bad(X.indptr, X.indices, bad)
            raise ValueError(
                f"{owner}: X contains NaN or infinity (first at row {r}, column {c}): remove "
                "or impute those values first"
            )
        return X
    if backend.is_sparse(X):
        X = X.toarray()
    X = xp.ascontiguousarray(xp.asarray(X if on_gpu else backend.to_host(X), dtype=dtype))
    finite = xp.isfinite(X)
    if not bool(finite.all()):
        r, c = (int(v) for v in np.argwhere(~np.asarray(backend.to_host(finite)))[0])
        raise ValueError(
            f"{owner}: X contains NaN or infinity (first at row {r}, column {c}): remove or "
            "impute those values first"
        )
    return X


def check_n_features(owner: str, X: Any, n_features: int) -> None:
    if X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} features but {owner} was fitted with {n_features}: use the "
            "same columns (e.g. the same vectorizer vocabulary) as in fit"
        )
