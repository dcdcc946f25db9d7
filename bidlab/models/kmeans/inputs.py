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

__all__ = ["KMeansInputs", "valid_init", "valid_dtype", "safe_magnitude"]


def valid_init(x: Any) -> bool:
    """Whether ``x`` is an ``init`` KMeans takes: a method's name, k x d centres, or a
    callable ``init(X, n_clusters, random_state)`` returning them (scikit-learn's)."""
    if isinstance(x, str):
        return x in ("k-means++", "k-means||", "random")
    return len(np.shape(x)) == 2 or callable(x)


def safe_magnitude(dtype: Any, d: int) -> float:
    """The largest magnitude of the entries of rows and centres of ``d`` features whose
    squared distances (sums of ``d`` squares of differences) stay finite in ``dtype``."""
    return float(np.sqrt(np.finfo(dtype).max / (4.0 * max(d, 1))))


def _given_value(given: Any, r: int, c: int) -> float | None:
    """The entry (``r``, ``c``) of the data as the caller gave it (before any conversion),
    as a float; None when it cannot be read."""
    try:
        row = given[r]
        if backend.is_sparse(row):
            row = row.toarray()
        if backend.is_cupy_array(row):
            row = backend.to_host(row)
        return float(np.asarray(row, dtype=np.float64).reshape(-1)[c])
    except Exception:  # an error message's detail only: any input it cannot index
        return None


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
        X = given = unwrap(X)
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
            v = _given_value(given, r, c) if given is not X else None
            if v is not None and math.isfinite(v):  # finite as given: too large for the dtype
                raise ValueError(self._too_large(v, vals.dtype, X.shape[1], fitted,
                                                 at=f" (row {r}, column {c})"))
            raise ValueError(f"KMeans: X contains NaN or infinity (first at row {r}, column "
                             f"{c}): remove or impute those values first")
        # squared distances sum d squares: past this they overflow the dtype
        if vals.size and max(-low, high) > safe_magnitude(vals.dtype, X.shape[1]):
            raise ValueError(self._too_large(max(-low, high), vals.dtype, X.shape[1], fitted))
        if backend.is_sparse(X) and not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        if self.device == "gpu" and not on_gpu:
            X = backend.to_device(X)
        return X

    def _too_large(self, amax: float, dtype: Any, d: int, fitted: bool, at: str = "") -> str:
        """The error of data whose values reach ``amax``: too large for squared distances
        in ``dtype``, and what to do; ``at``: where a finite value given became infinite
        when converted to ``dtype``."""
        dtype = np.dtype(dtype)
        what = (f"X holds {amax:.3g}{at}, beyond the range of {dtype} (its values become "
                "infinite there; as given they are finite)" if at else
                f"X has values up to {amax:.3g} (finite)")
        fix = "scale X (e.g. divide it by its largest magnitude)"
        if dtype != np.float64:
            fix += (", or fit a model in float64 (dtype=np.float64) and use it" if fitted
                    else ", or compute in float64: pass float64 data or dtype=np.float64")
        held = ("the model computes in" if fitted else "KMeans computes in") + f" {dtype}"
        return (f"KMeans: {what}, too large: its squared distances overflow {dtype} ({held}; "
                f"the largest safe magnitude for {d} features is "
                f"{safe_magnitude(dtype, d):.3g}): {fix}")

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

    def _check_k(self, n: int, d: int, dtype: Any = None) -> None:
        k = self.n_clusters
        if k > n:
            raise ValueError(f"KMeans needs at least n_clusters={k} samples but got "
                             f"n_samples={n}: use n_clusters <= {n} or give more data")
        if not isinstance(self.init, str) and not callable(self.init):
            self._checked_centres(self.init, d, "init", dtype)

    def _start(self, X: Any, rng: np.random.Generator) -> Any:
        """``init`` for one run on the checked data ``X``: a method's name or the given
        centres as they are, or the centres a callable ``init`` returns for ``X``,
        ``n_clusters`` and a ``numpy.random.RandomState`` drawn from ``rng`` (checked as
        given centres are)."""
        init = self.init
        if isinstance(init, str) or not callable(init):
            return init
        rs = np.random.RandomState(int(rng.integers(2**31 - 1)))
        C = init(X, self.n_clusters, rs)
        return self._checked_centres(C, X.shape[1], f"the callable init {init!r} returned",
                                     X.dtype)

    def _checked_centres(self, init: Any, d: int, what: str, dtype: Any = None) -> Any:
        """``init`` as starting centres (sparse ones as their dense array), after checking
        that it holds ``n_clusters`` x ``d`` finite numbers, small enough for squared
        distances in ``dtype`` (when given); ``what`` names it in the errors."""
        k = self.n_clusters
        # sparse centres (rows of a CSR X) are taken as their dense k x d array
        init = init.toarray() if backend.is_sparse(init) else init
        try:
            C = np.asarray(backend.to_host(init)) if backend.is_cupy_array(
                init) else np.asarray(init)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{what} is not an array of starting centres ({err}): give "
                            f"an n_clusters x n_features array") from err
        if C.ndim != 2 and (isinstance(init, (str, bytes)) or C.dtype.kind not in "biuf"):
            shown = repr(init)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise TypeError(f"{what} a {type(init).__name__} ({shown}), not starting "
                            f"centres: give an n_clusters x n_features array of numbers, "
                            f"shape ({k}, {d})")
        if C.shape != (k, d):
            raise ValueError(f"{what} has shape {C.shape} but n_clusters={k} "
                             f"centres of {d} features need shape ({k}, {d})")
        if C.dtype.kind not in "biuf":
            raise TypeError(f"{what} must hold numbers (the starting centres); got dtype "
                            f"{C.dtype}")
        bad = ~np.isfinite(C)
        if bad.any():
            r, c = map(int, np.argwhere(bad)[0])
            raise ValueError(f"{what} holds NaN or infinity (first at centre {r}, feature "
                             f"{c}): give finite starting centres, or init='k-means++'")
        amax = float(np.abs(C).max(initial=0.0))
        if dtype is not None and amax > safe_magnitude(dtype, d):
            raise ValueError(f"{what} has values up to {amax:.3g}, too large for squared "
                             f"distances in {np.dtype(dtype)} (largest safe magnitude "
                             f"{safe_magnitude(dtype, d):.3g}): give centres on the scale "
                             "of the data")
        return init
