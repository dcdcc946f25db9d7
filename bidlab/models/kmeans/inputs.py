"""The checks :class:`~bidlab.models.kmeans.KMeans` makes of what it is given: the data
(dense or CSR, numpy or CuPy, finite, no overflowing squared distances) and the sample
weights. A mixin of the estimator: it reads the estimator's ``dtype``, ``device`` and, once
fitted, ``model_`` and ``n_features_in_``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.utils.validation import validate_data

from bidlab import backend
from bidlab.models.validation import unwrap

__all__ = ["KMeansInputs", "valid_init", "valid_dtype"]


def valid_init(x: Any) -> bool:
    """Whether ``x`` is an ``init`` KMeans takes: a method's name or k x d centres."""
    if isinstance(x, str):
        return x in ("k-means++", "k-means||", "random")
    return len(np.shape(x)) == 2


def valid_dtype(x: Any) -> bool:
    """Whether ``x`` names float32 or float64."""
    try:
        return np.dtype(x) in (np.float32, np.float64)
    except TypeError:
        return False


class KMeansInputs:
    """Input checks of the KMeans estimator (see the module doc)."""

    def _data(self, X: Any, reset: bool) -> Any:
        """X as float CSR / C-ordered dense on the estimator's device, checked."""
        X = unwrap(X)
        self._check_structure(X)
        fitted = getattr(self, "model_", None) is not None and not reset
        if fitted:
            want: Any = self.model_.modelmats[0].dtype
        elif self.dtype is not None:
            want = np.dtype(self.dtype)
        else:
            want = [np.float64, np.float32]
        on_gpu = backend.is_cupy_array(X.data if backend.is_sparse(X) and hasattr(X, "data")
                                       else X)
        if on_gpu:
            X = self._gpu_data(X, want, reset)
        else:
            X = validate_data(self, X, accept_sparse="csr", dtype=want, order="C",
                              ensure_all_finite=False, reset=reset)
        xp = backend.namespace(X.data if backend.is_sparse(X) else X)
        vals = X.data if backend.is_sparse(X) else X
        # two reductions, no temporaries of the data's size: NaN and inf reach the extremes
        low, high = (float(xp.min(vals)), float(xp.max(vals))) if vals.size else (0.0, 0.0)
        if not (math.isfinite(low) and math.isfinite(high)):
            finite = xp.isfinite(vals)
            if backend.is_sparse(X):
                p = int(np.flatnonzero(~np.asarray(backend.to_host(finite)))[0])
                indptr = np.asarray(backend.to_host(X.indptr))
                r = int(np.searchsorted(indptr, p, side="right") - 1)
                c = int(backend.to_host(X.indices[p : p + 1])[0])
            else:
                r, c = (int(v) for v in np.argwhere(~np.asarray(backend.to_host(finite)))[0])
            raise ValueError(f"KMeans: X contains NaN or infinity (first at row {r}, column "
                             f"{c}): remove or impute those values first")
        if vals.size:
            # squared distances sum d squares: past this they overflow the dtype
            big = float(np.sqrt(np.finfo(vals.dtype).max / (4.0 * max(X.shape[1], 1))))
            amax = max(-low, high)
            if amax > big:
                raise ValueError(
                    f"KMeans: X has values up to {amax:.3g}, whose squared distances overflow "
                    f"{vals.dtype} (largest safe magnitude here {big:.3g}): rescale X"
                    + (", or pass float64 data / dtype=np.float64"
                       if vals.dtype != np.float64 else ""))
        if backend.is_sparse(X) and not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        if self.device == "gpu" and not on_gpu:
            X = backend.to_device(X)
        return X

    def _gpu_data(self, X: Any, want: Any, reset: bool) -> Any:
        if len(X.shape) != 2 or X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"KMeans: X must be a non-empty 2-D array (samples x features); "
                             f"got shape {tuple(X.shape)}")
        dtype = want if not isinstance(want, list) else (
            X.dtype if X.dtype in (np.float32, np.float64) else np.float64)
        X = X.tocsr().astype(dtype) if backend.is_sparse(X) else backend.cupy().ascontiguousarray(
            X, dtype=dtype)
        if reset:
            self.n_features_in_ = int(X.shape[1])
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but KMeans is expecting "
                             f"{self.n_features_in_} features as input.")
        return X

    def _weights(self, sample_weight: Any, n: int) -> Any:
        """Sample weights as a float64 (n,) array on the device, or None."""
        if sample_weight is None:
            return None
        w = np.asarray(backend.to_host(sample_weight), dtype=np.float64)
        if w.ndim == 0:
            w = np.full(n, float(w))
        if w.shape != (n,):
            raise ValueError(f"sample_weight.shape == {w.shape}, expected ({n},): one weight "
                             "per sample")
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError("sample_weight must be finite and >= 0")
        if w.sum() <= 0:
            raise ValueError("sample_weight is zero for every sample: give some samples a "
                             "positive weight")
        w = np.array(w, copy=True)
        return w if self.device == "cpu" else backend.to_device(w)

    def _check_k(self, n: int, d: int) -> None:
        k = self.n_clusters
        if k > n:
            raise ValueError(f"KMeans needs at least n_clusters={k} samples but got "
                             f"n_samples={n}: use n_clusters <= {n} or give more data")
        # sparse centres (rows of a CSR X) are taken as their dense k x d array
        init = self.init.toarray() if backend.is_sparse(self.init) else self.init
        if not isinstance(init, str) and tuple(np.shape(init)) != (k, d):
            raise ValueError(f"init has shape {tuple(np.shape(init))} but n_clusters={k} "
                             f"centres of {d} features need shape ({k}, {d})")
        if not isinstance(init, str):
            C = np.asarray(backend.to_host(init)) if backend.is_cupy_array(
                init) else np.asarray(init)
            if C.dtype.kind not in "biuf":
                raise TypeError(f"init must hold numbers (the starting centres); got dtype "
                                f"{C.dtype}")
            bad = ~np.isfinite(C)
            if bad.any():
                r, c = map(int, np.argwhere(bad)[0])
                raise ValueError(f"init holds NaN or infinity (first at centre {r}, feature "
                                 f"{c}): give finite starting centres, or init='k-means++'")
