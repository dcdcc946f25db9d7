"""Empty clusters of a Lloyd pass: the pass's farthest rows are kept as it goes, and a
cluster left empty at its end takes one of them.

The reservoir holds, for the ``R`` rows farthest from their centres so far, their squared
distance ``d``, row id ``row``, label ``lab``, weight ``w`` and data ``x``: a list of
float64 rows, dense or (for CSR input) their columns and values, so keeping and dropping rows
moves references, never an ``R x d`` block (on 56,000-column TF-IDF rows, 14 MB a block).
Only a block's rows beyond the nearest kept one are ranked (after the first block, a
handful).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.kmeans_lloyd import farthest
from bidlab.models.kmeans.bounds import RowBounds
from bidlab.models.kmeans.distances import dense_rows

__all__ = ["keep_farthest", "reseed_empty"]


def keep_farthest(res: dict[str, Any] | None, X: Any, lab: Any, dist: Any, w: Any,
                  ids: Any, R: int, xp: Any) -> dict[str, Any] | None:
    """The reservoir ``res`` (None: empty) with a block's rows added: ``X`` its rows,
    ``lab`` their labels, ``dist`` their squared distances, ``w`` their weights (None: 1),
    ``ids`` their row ids (host); it keeps the ``R`` farthest.

    Example::

        res = None
        for block in blocks:
            res = keep_farthest(res, X, lab, dist, None, block.ids, 32, np)
    """
    floor = -math.inf if res is None or res["d"].shape[0] < R else float(res["d"].min())
    if xp is np:  # one pass of a kernel, no temporaries of the block's size
        cand = farthest(dist, w, floor, R)
    else:
        cand = xp.flatnonzero(dist > floor)
        if w is not None:
            cand = cand[w[cand] > 0]
    n_c = int(cand.shape[0])
    if n_c == 0:
        return res
    score = dist[cand].astype(np.float64)
    take = min(R, n_c)
    if take < n_c:
        top = xp.argpartition(-score, take - 1)[:take]
        cand, score = cand[top], score[top]
    rows = ids[cand] if xp is np else xp.asarray(ids[backend.to_host(cand)])
    new = {"d": score, "row": rows, "lab": lab[cand],
           "w": (xp.ones(take, np.float64) if w is None else w[cand].astype(np.float64)),
           "x": _rows(X, cand)}
    if res is not None:
        new = {key: (res[key] + new[key] if key == "x" else xp.concatenate([res[key], new[key]]))
               for key in new}
    if new["d"].shape[0] > R:
        keep = xp.argpartition(-new["d"], R - 1)[:R]
        kept = backend.to_host(keep).tolist()
        new = {key: ([v[i] for i in kept] if key == "x" else v[keep]) for key, v in new.items()}
    return new


def _rows(X: Any, cand: Any) -> list[Any]:
    """Rows ``cand`` of ``X``: float64 1-D arrays, or for CSR rows (columns, values) pairs
    of array views (a 1-row matrix each cost 50 us to make)."""
    if backend.is_sparse(X):
        rows = X[cand]
        ptr = backend.to_host(rows.indptr).tolist()
        return [(rows.indices[a:b], rows.data[a:b]) for a, b in zip(ptr, ptr[1:], strict=False)]
    return list(dense_rows(X, cand).astype(np.float64))


def _dense(x: Any, d: int, xp: Any) -> Any:
    """A kept row as a dense float64 vector."""
    if not isinstance(x, tuple):
        return x
    out = xp.zeros(d, np.float64)
    if xp is np:  # repeated columns (a CSR row not in canonical form) add up
        np.add.at(out, x[0], x[1])
    else:
        import cupyx

        cupyx.scatter_add(out, x[0], x[1].astype(np.float64))
    return out


def reseed_empty(res: dict[str, Any] | None, S: Any, N: Any, rows: RowBounds,
                 comm: Any = None) -> int:
    """An empty cluster (``N`` <= 0) takes the farthest kept row whose own cluster can
    spare it: the pass's sums ``S`` and weights ``N`` and the row's label and bounds in
    ``rows`` are moved with it. Returns how many clusters were re-seeded.

    On several ranks (``comm``; ``S`` and ``N`` the totals over all of them, the same on
    every rank) the candidates are every rank's kept rows, ranked together, so every rank
    makes the same choices, as one process on all the rows would; a rank moves the labels
    of the rows it holds only, and the rows taken reach the others by one allreduce."""
    xp = backend.namespace(N)
    empty = backend.to_host(xp.flatnonzero(N <= 0)).tolist()
    if not empty:
        return 0
    if comm is not None:
        return _reseed_ranks(res, S, N, rows, comm, empty, xp)
    if res is None:
        return 0
    order = np.argsort(-np.asarray(backend.to_host(res["d"])), kind="stable").tolist()
    picks = _picks(order, empty, backend.to_host(res["lab"]), backend.to_host(res["w"]),
                   backend.to_host(N).astype(np.float64))
    for j, q, old, wq in picks:
        _move(S, N, _dense(res["x"][q], S.shape[1], xp), j, old, wq)
        _relabel(rows, int(res["row"][q]), j)
    return len(picks)


def _picks(order: list[int], empty: list[int], lab: Any, w: Any,
           N: np.ndarray) -> list[tuple[int, int, int, float]]:
    """(cluster, candidate, its old cluster, its weight) for each empty cluster, taking the
    candidates in ``order`` (farthest first) whose cluster can spare them (``N``, host
    float64, is updated as they move)."""
    out, taken = [], 0
    for j in empty:
        while taken < len(order):
            q = order[taken]
            taken += 1
            old, wq = int(lab[q]), float(w[q])
            if N[old] > wq:
                break
        else:
            break
        N[old] -= wq
        N[j] = wq
        out.append((j, q, old, wq))
    return out


def _move(S: Any, N: Any, x: Any, j: int, old: int, wq: float) -> None:
    S[old] -= (wq * x).astype(S.dtype)
    N[old] -= wq
    S[j] = (wq * x).astype(S.dtype)
    N[j] = wq


def _relabel(rows: RowBounds, r: int, j: int) -> None:
    rows.column("labels")[r] = j
    rows.column("u")[r] = 0  # it is its centre now
    rows.column("lo")[r] = 0  # and its old centre may be the nearest other


def _reseed_ranks(res: dict[str, Any] | None, S: Any, N: Any, rows: RowBounds, comm: Any,
                  empty: list[int], xp: Any) -> int:
    """:func:`reseed_empty` over ranks: every rank's kept rows' (distance, label, weight)
    gathered by one allreduce (each rank fills its own slots), the same picks made on
    every rank (farthest first; ties by rank, then slot), then the picked rows' data by a
    second allreduce (their ranks fill them in)."""
    R = max(1, len(empty))  # at most one row a cluster: each rank offers its R farthest
    meta = np.zeros((comm.size, R, 4))  # (kept, distance, label, weight)
    if res is not None:
        d = np.asarray(backend.to_host(res["d"]), np.float64)
        mine = np.argsort(-d, kind="stable")[:R]
        meta[comm.rank, : mine.size] = np.stack(
            [np.ones(mine.size), d[mine], np.asarray(backend.to_host(res["lab"]))[mine],
             np.asarray(backend.to_host(res["w"]), np.float64)[mine]], axis=1)
    buf = xp.asarray(meta)
    comm.allreduce([buf], "sum")
    meta = np.asarray(backend.to_host(buf))
    flat = meta.reshape(-1, 4)
    kept = np.flatnonzero(flat[:, 0] > 0)
    order = kept[np.argsort(-flat[kept, 1], kind="stable")].tolist()
    picks = _picks(order, empty, flat[:, 2], flat[:, 3], backend.to_host(N).astype(np.float64))
    if not picks:
        return 0
    data = xp.zeros((len(picks), S.shape[1]), np.float64)
    for i, (_, q, _, _) in enumerate(picks):
        if q // R == comm.rank:
            data[i] = _dense(res["x"][int(mine[q % R])], S.shape[1], xp)
    comm.allreduce([data], "sum")
    for i, (j, q, old, wq) in enumerate(picks):
        _move(S, N, data[i], j, old, wq)
        if q // R == comm.rank:
            _relabel(rows, int(res["row"][int(mine[q % R])]), j)
    return len(picks)
