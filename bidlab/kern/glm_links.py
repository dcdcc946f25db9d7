"""GLM link steps fused into one pass over the margins (numba, CPU).

The logistic step with its loss as numpy ufuncs is five passes over the n x T margins
(``logaddexp``, a product, a difference, ``expit``, a difference) and a column sum; this
kernel makes one, reading each margin once and writing ``dL/dE`` in its place. The
oracle is :meth:`bidlab.models.glm.links.LinkStep`'s ufunc sequence (tests compare them).
"""

from __future__ import annotations

import numba
import numpy as np

from bidlab.kern.standin import stand_in

__all__ = ["logistic_step"]


@numba.njit(fastmath=True, error_model="numpy", cache=True, nogil=True)
def _logistic(E, Y, c0, c1, k0, col_loss, w, with_loss, weighted):  # pragma: no cover
    n = E.shape[0]
    for c in range(c1 - c0):
        col_loss[c] = 0.0
    for i in range(n):
        wi = w[i, 0] if weighted else 1.0
        for c in range(c1 - c0):
            e = E[i, c0 + c]
            y = Y[i, k0 + c]
            z = np.exp(-abs(e))  # in (0, 1]: no overflow either side
            if with_loss:
                col_loss[c] += (np.log1p(z) + max(e, 0.0) - y * e) * wi
            p = 1.0 / (1.0 + z)
            E[i, c0 + c] = (p if e >= 0 else 1.0 - p) - y


@stand_in(_logistic)
def _logistic_arrays(E, Y, c0, c1, k0, col_loss, w, with_loss, weighted):  # noqa: ANN001
    """:func:`_logistic` in numpy, run while it compiles (:mod:`bidlab.kern.standin`)."""
    e = E[:, c0:c1]
    y = Y[:, k0:k0 + (c1 - c0)]
    z = np.exp(-np.abs(e))
    if with_loss:
        terms = np.log1p(z) + np.maximum(e, 0.0) - y * e
        if weighted:
            terms = terms * w[:, :1]
        col_loss[: c1 - c0] = terms.sum(axis=0)
    p = 1.0 / (1.0 + z)
    e[...] = np.where(e >= 0, p, 1.0 - p) - y


def logistic_step(E: np.ndarray, Y: np.ndarray, c0: int, c1: int, k0: int,
                  col_loss: np.ndarray, weights: np.ndarray | None, with_loss: bool) -> None:
    """Columns ``c0:c1`` of the margins ``E`` (n x T, C-ordered) -> ``sigmoid(E) - y`` in
    place, ``y`` the columns ``k0:`` of ``Y`` (0 / 1); with ``with_loss``, ``col_loss``
    (float64, c1 - c0) gets each column's (weighted) log loss sum.

    Examples
    --------
    >>> E = np.array([[0.0, 2.0]]); Y = np.array([[1.0, 0.0]])
    >>> loss = np.zeros(2)
    >>> logistic_step(E, Y, 0, 2, 0, loss, None, True)
    >>> np.round(E, 4).tolist(), np.round(loss, 4).tolist()
    ([[-0.5, 0.8808]], [0.6931, 2.1269])
    """
    w = weights if weights is not None else np.ones((1, 1), E.dtype)
    _logistic(E, Y, c0, c1, k0, col_loss, w, with_loss, weights is not None)
