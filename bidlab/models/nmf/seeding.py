"""NMF's NNDSVDa start (Boutsidis and Gallopoulos, 2008), as scikit-learn computes it.

From a truncated SVD ``X ~ U S V`` (scikit-learn's ``randomized_svd``), each pair of
singular vectors is split into its positive and negative parts and the larger product
kept, giving nonnegative ``W`` and ``H`` that start close to the best rank-k fit; the zeros
left are filled with the mean of ``X`` (the "a" variant), so multiplicative updates can
move every entry.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.extmath import randomized_svd

__all__ = ["nndsvda"]


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
