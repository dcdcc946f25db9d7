"""Moving dense rows near the origin before their k-means distances are taken.

Distances by GEMM, ``||x||^2 - 2 x.c + ||c||^2``, lose what the rows' and centres' common
offset holds: float32 rows around 10,000 that spread by 1 keep no digit of their distances
(scikit-learn's ``KMeans`` centres the data for this reason). Distances do not change when
rows and centres move together, so ``fit`` trains on dense rows less their mean when they
lie farther from the origin than they spread (:func:`data_shift`, a copy of ``X``), and
``predict`` / ``score`` / ``transform`` move each block of rows and the centres by the
centres' mean when the centres lie farther from the origin than they spread
(:func:`centre_shift`). CSR rows are taken as they are (a shift would fill them).

A live learner (``KMeans.learner``, ``fit_learner``) and ``partial_fit`` train on the rows
less the same shift, kept as the model's ``origin``: its centres are measured from that
point while it trains (:func:`set_origin`), and :func:`data_centres` gives them in the
data's coordinates (``cluster_centers_``, ``predict``, ``transform``, ``score``). A
learner's checkpoint keeps the ``origin`` beside the centres, and a learner that loads one
measures them from its own (the same centres in the data's coordinates); the ranks of a
distributed learner agree on one (:mod:`bidlab.models.kmeans.shared_origin`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.kmeans import row_norms_sq

__all__ = ["data_shift", "centre_shift", "far_point", "moved", "unshift", "host_origin",
           "rows_less", "data_centres", "set_origin"]


def _mean_if_far(A: Any, sq_norms: Any) -> Any:
    """The column mean of dense ``A`` (float64, on its device; each entry rounded to half
    ``A``'s mantissa bits) when its squared norm exceeds the rows' total variance
    (``sq_norms``: the rows' squared norms); else None."""
    n = A.shape[0]
    if n == 0:
        return None
    total = A.sum(axis=0, dtype=np.float64)
    return far_point(total, n, float(sq_norms.sum(dtype=np.float64)), A.dtype)


def far_point(total: Any, n: float, sq_total: float, dtype: Any) -> Any:
    """The mean ``total / n`` of ``n`` rows (float64, on ``total``'s device; each entry
    rounded to half ``dtype``'s mantissa bits) when its squared norm exceeds the rows'
    total variance (``sq_total``: the sum of their squared norms); else None."""
    if n <= 0:
        return None
    xp = backend.namespace(total)
    mean = total / n
    mm = float((mean * mean).sum())
    spread = sq_total / n - mm
    if not mm > max(spread, 0.0):
        return None
    # half the mantissa's bits kept: rows near the shift move exactly (a cluster of equal
    # rows comes back as that row to the bit), and 2 ** -half of the offset is left
    half = np.finfo(dtype).nmant // 2
    mean = np.asarray(backend.to_host(mean))
    _, e = np.frexp(mean)
    q = np.ldexp(1.0, e - half)
    return xp.asarray(np.round(mean / q) * q)


def data_shift(X: Any) -> Any:
    """What ``fit`` subtracts from the rows of ``X`` (float64, (d,)), or None.

    The column mean of dense ``X`` (to half its mantissa bits) when its rows lie farther
    from the origin than they spread (the squared norm of their mean above their total
    variance); None for CSR rows and for rows around the origin (no copy is made then).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1e4, 0.0], [1e4 + 2, 2.0]], np.float32)
    >>> data_shift(X).tolist(), data_shift(X - X.mean(axis=0))
    ([10000.0, 1.0], None)
    """
    if backend.is_sparse(X):
        return None
    return _mean_if_far(X, row_norms_sq(X))


def centre_shift(X: Any, C: Any) -> Any:
    """The point, in ``C``'s dtype, that ``X``'s rows and the centres ``C`` are moved by
    before their distances are taken (the centres' mean, when they lie farther from the
    origin than they spread), or None (CSR rows, centres around the origin).

    Examples
    --------
    >>> import numpy as np
    >>> C = np.array([[1e4, 0.0], [1e4 + 2, 2.0]], np.float32)
    >>> centre_shift(C, C).tolist(), centre_shift(C, C - C.mean(axis=0))
    ([10000.0, 1.0], None)
    """
    if backend.is_sparse(X):
        return None
    s = _mean_if_far(C, backend.namespace(C).einsum("ij,ij->i", C, C))
    return None if s is None else s.astype(C.dtype)


def moved(init: Any, shift: Any) -> Any:
    """``init`` for rows moved by ``shift``: given centres less ``shift`` (a float64 host
    array), a method name (or no shift) as it is."""
    if shift is None or isinstance(init, str):
        return init
    C = init.toarray() if backend.is_sparse(init) else init
    return np.asarray(backend.to_host(C), np.float64) - np.asarray(backend.to_host(shift))


def unshift(model: Any, shift: Any) -> None:
    """Move a k-means model trained on rows less ``shift`` back to the rows as given: its
    centres and start centres plus ``shift`` (:func:`set_origin` from ``shift`` to none)."""
    model.origin = host_origin(shift)
    set_origin(model, None)


def host_origin(shift: Any) -> Any:
    """``shift`` (on any device) as a model's ``origin``: a float64 host array, or None."""
    return None if shift is None else np.asarray(backend.to_host(shift), np.float64)


def rows_less(X: Any, shift: Any) -> Any:
    """Dense ``X``'s rows less ``shift`` (a copy, on ``X``'s device and in its dtype), or
    ``X`` itself when ``shift`` is None."""
    if shift is None:
        return X
    return X - backend.namespace(X).asarray(shift).astype(X.dtype)


def data_centres(model: Any) -> Any:
    """``model``'s centres in the data's coordinates, on its device and in its dtype: the
    live centres themselves when it has no ``origin``, else the centres plus ``origin``
    (a new k x d array)."""
    C = model.modelmats[0].data
    origin = model.origin
    if origin is None:
        return C
    xp = backend.namespace(C)
    return (C.astype(np.float64) + xp.asarray(origin)).astype(C.dtype)


def set_origin(model: Any, origin: Any, start: bool = True) -> None:
    """Measure ``model``'s centres (and, with ``start``, its start centres) from ``origin``
    (a float64 host array (d,), or None for the data's own origin) from now on: what they
    are in the data's coordinates does not change. Rows given to it must then be less
    ``origin``. The model's other state measured from its origin (a Lloyd pass's sums so
    far) moves with them (``model.frame_moved``)."""
    old = model.origin
    d = model.start_centers.shape[1]
    step = (np.zeros(d) if old is None else np.asarray(old, np.float64)) - (
        np.zeros(d) if origin is None else np.asarray(origin, np.float64))
    if model.modelmats:
        C = model.modelmats[0].data
        xp = backend.namespace(C)
        C[...] = (C.astype(np.float64) + xp.asarray(step)).astype(C.dtype)
        model.frame_moved(step)
    if start:
        S = model.start_centers
        S[...] = (S.astype(np.float64) + step).astype(S.dtype)
    model.origin = None if origin is None else np.array(origin, np.float64)
