"""Synthetic sparse GLM problems with planted weights (regression, logistic, softmax).

Rows have exactly ``nnz_per_row`` distinct features whose popularity follows a power law
(a few features in most rows, a long tail of rare ones, as in text or click logs). Targets
come from planted weights ``W`` through the link, so a trained GLM can be checked against
``W`` and against the Bayes accuracy. 200,000 x 50,000 with 50 non-zeros per row (10M)
generates in a few seconds.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from bidlab.datasets.sampling import distinct_sorted_rows, powerlaw_sampler

LINKS = ("linear", "logistic", "softmax")


class GLMData(NamedTuple):
    """A planted GLM problem; unpacks as ``X, Y, W``.

    ``X``: n x d CSR features. ``Y``: n x n_targets float (linear: real values; logistic:
    0/1), or for softmax an (n,) int64 vector of class ids. ``W``: d x n_targets (or
    d x classes) planted weights.
    """

    X: sp.csr_matrix
    Y: np.ndarray
    W: np.ndarray


def _softmax_sample(Z: np.ndarray, rng: np.random.Generator, chunk: int = 1 << 16) -> np.ndarray:
    """One class per row with P(c) = softmax(Z[i])[c], via the Gumbel-max trick."""
    out = np.empty(Z.shape[0], dtype=np.int64)
    for start in range(0, Z.shape[0], chunk):
        z = Z[start : start + chunk]
        out[start : start + chunk] = np.argmax(z + rng.gumbel(size=z.shape), axis=1)
    return out


def synthetic_glm(
    n: int = 200_000,
    d: int = 50_000,
    nnz_per_row: int = 50,
    *,
    n_targets: int = 1,
    classes: int | None = None,
    link: str | None = None,
    powerlaw: bool | float = True,
    values: str = "binary",
    signal: float = 2.0,
    noise: float = 0.1,
    seed: int = 0,
    dtype: np.dtype | type = np.float32,
) -> GLMData:
    """Draw a sparse GLM problem ``(X, Y, W)`` (deterministic for a seed).

    Parameters
    ----------
    n, d, nnz_per_row
        rows, features, distinct non-zeros per row (<= d / 2).
    n_targets
        independent targets for ``linear``/``logistic``.
    classes
        number of classes; implies ``link="softmax"``.
    link
        ``"linear"``, ``"logistic"`` (default) or ``"softmax"``.
    powerlaw
        True for feature popularity ~ 1/(j+1), a float for another exponent,
        False for uniform features.
    values
        ``"binary"`` (all 1, like a9a) or ``"lognormal"`` (positive, varied).
    signal
        standard deviation of each target's margin ``X @ W`` (W is scaled to it).
    noise
        standard deviation of the Gaussian noise added for ``linear``.

    Examples
    --------
    >>> from bidlab.datasets import synthetic_glm
    >>> X, y, w = synthetic_glm(1000, 200, 10, seed=0)
    >>> X.shape
    (1000, 200)
    """
    if link is None:
        link = "softmax" if classes is not None else "logistic"
    if link not in LINKS:
        raise ValueError(f"link must be one of {LINKS}, got {link!r}")
    if link == "softmax":
        if classes is None or classes < 2:
            raise ValueError(f"link='softmax' needs classes >= 2, got classes={classes}")
        n_out = classes
    else:
        if classes is not None:
            raise ValueError(f"classes={classes} needs link='softmax', got link={link!r}")
        if n_targets < 1:
            raise ValueError(f"n_targets must be >= 1, got {n_targets}")
        n_out = n_targets
    if values not in ("binary", "lognormal"):
        raise ValueError(f"values must be 'binary' or 'lognormal', got {values!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    exponent = 1.0 if powerlaw is True else 0.0 if powerlaw is False else float(powerlaw)
    cols = distinct_sorted_rows(n, nnz_per_row, d, powerlaw_sampler(d, exponent, rng))
    nnz = n * nnz_per_row
    if values == "binary":
        data = np.ones(nnz, dtype=dtype)
    else:
        data = rng.lognormal(0.0, 0.5, size=nnz).astype(dtype)
    index_dtype = np.int32 if max(nnz, d) < 2**31 else np.int64
    indptr = np.arange(0, nnz + 1, nnz_per_row, dtype=index_dtype)
    X = sp.csr_matrix((data, cols.ravel().astype(index_dtype), indptr), shape=(n, d))
    X.has_sorted_indices = True
    del cols

    W = rng.standard_normal((d, n_out)).astype(dtype)
    Z = np.asarray(X @ W, dtype=np.float64)
    scale = signal / np.maximum(Z.std(axis=0), 1e-12)
    W *= scale.astype(dtype)
    Z *= scale
    if link == "linear":
        Y = (Z + noise * rng.standard_normal(Z.shape)).astype(dtype)
    elif link == "logistic":
        with np.errstate(over="ignore"):  # exp(-z) = inf just means P(y=1) = 0
            Y = (rng.random(Z.shape) * (1.0 + np.exp(-Z)) < 1.0).astype(dtype)
    else:
        Y = _softmax_sample(Z, rng)
    return GLMData(X, Y, W)
