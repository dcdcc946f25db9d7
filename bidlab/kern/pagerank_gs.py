"""One Gauss-Seidel sweep of PageRank over the in-edges, in place: numba on the CPU, serial.

PageRank's scores are the fixed point of the power iteration's map (networkx's, with the
teleport weighted by the total, as :mod:`bidlab.kern.pagerank` computes it)::

    x[j] = d * (sum over in-edges (i -> j) of w_ij * x[i] / out(i)
                + (sum of x over dangling vertices) * u[j]) + (1 - d) * sum(x) * p[j]

(``d`` the damping, ``out(i)`` vertex ``i``'s out-weight, ``u`` the dangling and ``p``
the teleport distribution), scaled to sum 1. A sweep visits the vertices in index order
and solves each one's equation for ``x[j]`` from the newest values of all the others: the
sources already visited this sweep, and the dangling mass and the total kept up to date as
vertices change. ``own[j]``, the coefficient of ``x[j]`` in its own equation (a self-loop,
the dangling term of a dangling vertex, its share of the teleport), is moved to the
left-hand side (but for an absorbing vertex: :data:`ABSORBING`). The in-edge lists are
those of :func:`bidlab.kern.pagerank.in_edges`;
``y[i] = x[i] / out(i)`` (0 for a dangling vertex) is kept in step with ``x``. The total
is not held at 1 (that would slow the sweeps down to the damping's rate on well-connected
graphs): the caller scales the result.

Why it may stop where the power iteration does: the map's columns sum to 1, so after a
sweep of L1 change ``delta`` to a total ``s`` the power iteration's change at the swept
scores scaled to sum 1 is at most ``delta / s`` (each term still on an old value is one of
the later vertices' changes), and those scores lie within ``delta / (s * (1 - d))`` of the
solution in L1. A sweep with ``delta / s < d * c`` thus gives the bound ``d * c / (1 - d)``
that the power iteration's rule gives its last iterate when its change is ``c``.

The sweep is serial (each vertex reads the values written before it): it pays where a
graph is small enough that a parallel pass's start-up and the number of passes dominate
(:mod:`bidlab.models.graph.estimator` chooses by the edge count).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab.kern.pagerank import in_sum
from bidlab.kern.standin import stand_in

__all__ = ["ABSORBING", "gauss_seidel_sweep", "own_weights"]

#: a vertex whose own coefficient is at least this keeps (nearly) all of its own mass: all
#: its out-weight returns to it (a self-loop only, or dangling with all of ``u`` on it) and
#: all the teleport lands on it. Its equation cannot be solved for ``x[j]``, so it takes
#: the power iteration's step instead (it absorbs what flows in)
ABSORBING = 1.0 - 1e-9


@numba.njit(cache=True, nogil=True)
def gauss_seidel_sweep(indptr, indices, weights, inv, own, x, y, d, dangling, total, u,
                       p):  # pragma: no cover - compiled
    """One sweep (module doc) over every vertex in index order, updating ``x`` and ``y``
    in place. ``dangling`` and ``total``: the mass of ``x`` on dangling vertices and its
    sum at the start. Returns the new dangling mass, the new total and the sweep's L1
    change, each summed in float64 in index order."""
    n = x.shape[0]
    weighted = weights.shape[0] > 0
    teleport = 1.0 - d
    running = dangling  # the dangling mass and the total of the newest values
    mass = total
    new_dangling = 0.0
    new_total = 0.0
    change = 0.0
    for j in range(n):
        s = in_sum(indptr, indices, weights, y, j, weighted)
        old = x[j]
        c = own[j]
        v = d * (s + running * u[j]) + teleport * mass * p[j]
        if c < ABSORBING:
            v = (v - c * old) / (1.0 - c)
        x[j] = v
        v = x[j]  # the stored value (float32 scores round here)
        y[j] = v * inv[j]
        if inv[j] == 0.0:
            running += v - old
            new_dangling += v
        mass += v - old
        new_total += v
        change += abs(v - old)
    return new_dangling, new_total, change


@stand_in(gauss_seidel_sweep)
def _sweep_loop(indptr: Any, indices: Any, weights: Any, inv: Any, own: Any, x: Any, y: Any,
                d: float, dangling: float, total: float, u: Any,
                p: Any) -> tuple[float, float, float]:
    """:func:`gauss_seidel_sweep` in Python (the same sums in the same order; slow: the
    in-edge engine runs power iterations instead while the kernel compiles)."""
    weighted = weights.shape[0] > 0
    running, mass = float(dangling), float(total)
    new_dangling, new_total, change = 0.0, 0.0, 0.0
    for j in range(x.shape[0]):
        lo, hi = int(indptr[j]), int(indptr[j + 1])
        src = indices[lo:hi]
        terms = weights[lo:hi] * y[src] if weighted else y[src].astype(np.float64)
        s = 0.0
        for t in terms.tolist():
            s += t
        old = float(x[j])
        c = float(own[j])
        v = d * (s + running * float(u[j])) + (1.0 - d) * mass * float(p[j])
        x[j] = (v - c * old) / (1.0 - c) if c < ABSORBING else v
        v = float(x[j])
        y[j] = v * inv[j]
        if inv[j] == 0.0:
            running += v - old
            new_dangling += v
        mass += v - old
        new_total += v
        change += abs(v - old)
    return new_dangling, new_total, change


def own_weights(A: Any, inv: np.ndarray, u: np.ndarray, p: np.ndarray, d: float) -> np.ndarray:
    """``own[j]``: the coefficient of ``x[j]`` in vertex ``j``'s own equation (module doc),
    ``d * (A[j, j] / out(j) + (u[j] if j is dangling)) + (1 - d) * p[j]``, a float64 (n,)
    array; ``A`` the CSR adjacency, ``inv`` 1 / out-weight (0 when dangling), ``u`` and
    ``p`` the dangling and teleport distributions.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    >>> inv = np.array([0.5, 1.0, 0.0])  # vertex 0 has a self-loop, vertex 2 is dangling
    >>> u = p = np.full(3, 1 / 3)
    >>> own_weights(A, inv, u, p, 0.85).round(4).tolist()
    [0.475, 0.05, 0.3333]
    """
    own = np.asarray(A.diagonal(), dtype=np.float64) * inv
    own += np.where(inv == 0.0, u, 0.0)
    own *= d
    own += (1.0 - d) * np.asarray(p, dtype=np.float64)
    return own
