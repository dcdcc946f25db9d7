"""NMF's starts: :func:`start` picks one for ``init`` (scikit-learn's random draws, NNDSVDa
or the given factors); :func:`nndsvda` is the NNDSVDa start (Boutsidis and Gallopoulos,
2008), as scikit-learn computes it.

From a truncated SVD ``X ~ U S V`` (scikit-learn's ``randomized_svd``), each pair of
singular vectors is split into its positive and negative parts and the larger product
kept, giving nonnegative ``W`` and ``H`` that start close to the best rank-k fit; the zeros
left are filled with the mean of ``X`` (the "a" variant), so multiplicative updates can
move every entry.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.extmath import randomized_svd

__all__ = ["nndsvda", "start"]


def _norm(x: np.ndarray) -> float:
    return float(np.sqrt(np.dot(x, x)))


def nndsvda(X: Any, k: int, mean: float, random_state: Any) -> tuple[np.ndarray, np.ndarray]:
    """Initial (W, H) of ``X`` (n x d, dense or CSR, complete) for k components;
    ``mean``: the mean of ``X`` (the fill value of the zeros left)."""
    U, S, V = randomized_svd(X, k, random_state=random_state)
    W, H = np.zeros_like(U), np.zeros_like(V)
    W[:, 0] = np.sqrt(S[0]) * np.abs(U[:, 0])
    H[0, :] = np.sqrt(S[0]) * np.abs(V[0, :])
    for j in range(1, k):
        x, y = U[:, j], V[j, :]
        xp, yp = np.maximum(x, 0), np.maximum(y, 0)
        xn, yn = np.abs(np.minimum(x, 0)), np.abs(np.minimum(y, 0))
        xpn, ypn, xnn, ynn = _norm(xp), _norm(yp), _norm(xn), _norm(yn)
        if xpn * ypn > xnn * ynn:
            u, v, sigma = xp / xpn, yp / ypn, xpn * ypn
        else:
            u, v, sigma = xn / xnn, yn / ynn, xnn * ynn
        lbd = np.sqrt(S[j] * sigma)
        W[:, j] = lbd * u
        H[j, :] = lbd * v
    W[W < 1e-6] = 0
    H[H < 1e-6] = 0
    W[W == 0] = mean
    H[H == 0] = mean
    return W, H


def _refuse_zeros(what: str, a: np.ndarray) -> None:
    """Refuse an all-zero start (as scikit-learn does): multiplicative updates never move
    a zero, so the factors would stay 0 (coordinate descent starts degenerate)."""
    if a.size and not a.any():
        raise ValueError(f"NMF: {what} is all zeros, which the updates never leave (the "
                         "factors would stay 0): give one with positive entries, or use "
                         "init='random' or 'nndsvda'")


def start(init: Any, data: Any, k: int, W: Any, H: Any,
          random_state: Any) -> tuple[Any, Any]:
    """The initial (W, H): scikit-learn's random draws or NNDSVDa start, the given
    ones, or (None, H)."""
    n, d = data.shape
    dtype = data.mats[0].dtype
    if isinstance(init, str) and init == "custom":
        if W is None or H is None:
            raise ValueError("NMF: init='custom' needs the initial factors: fit(X, W=..., "
                             "H=...) or, for a first partial_fit, partial_fit(X, W=..., "
                             "H=...)")
        W, H = np.asarray(W, dtype), np.asarray(H, dtype)
        for what, a, shape in (("W", W, (n, k)), ("H", H, (k, d))):
            if a.shape != shape:
                raise ValueError(f"NMF: the initial {what} has shape {a.shape}; it needs "
                                 f"{shape}")
            if not np.isfinite(a).all() or (a < 0).any():
                raise ValueError(f"NMF: the initial {what} must be finite and >= 0")
            _refuse_zeros(f"the initial {what}", a)
        return W, H
    if not isinstance(init, str):
        H = np.asarray(init, dtype)
        if H.shape != (k, d):
            raise ValueError(f"NMF: init has shape {H.shape} but {k} components of {d} "
                             f"features need shape ({k}, {d})")
        if not np.isfinite(H).all() or (H < 0).any():
            raise ValueError("NMF: the initial components must be finite and >= 0")
        _refuse_zeros("init, the initial components,", H)
        return None, H
    if init == "nndsvda":
        X = data.mats[0]
        if data.kind == "masked":  # the missing entries at the observed mean
            X = np.where(data.mats[1] > 0, X, dtype.type(data.mean))
        W, H = nndsvda(X, k, data.mean, random_state)
        return W.astype(dtype), H.astype(dtype)
    avg = math.sqrt(data.mean / k)
    rng = random_state
    if not isinstance(rng, np.random.Generator):
        rng = check_random_state(rng)
    H = np.abs(avg * rng.standard_normal(size=(k, d)).astype(dtype, copy=False))
    W = np.abs(avg * rng.standard_normal(size=(n, k)).astype(dtype, copy=False))
    return W, H
