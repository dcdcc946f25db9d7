"""PageRank's input: the adjacency matrix checked, and the transition built from it once.

The adjacency ``A`` has one row per source vertex (``A[i, j]``: the weight of the edge
``i -> j``). The transition ``P`` shares ``A``'s ``indices`` and ``indptr`` (no copy of the
structure) and holds ``A[i, j] / sum_j A[i, j]``; a row that sums to 0 (no out-edge) is a
dangling vertex. Everything is xp-generic: a scipy / CuPy CSR matrix stays where it is.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.mat import validate_csr
from bidlab.models.validation import unwrap

__all__ = ["as_adjacency", "transition", "vertex_weights"]


def as_adjacency(G: Any, dtype: Any, *, square: bool = True, directed: bool = True,
                 device: str | None = None) -> Any:
    """``G`` as a canonical float CSR matrix (scipy or CuPy), checked.

    Taken as is when it is a CSR matrix of the float type asked for with sorted, unique
    entries; another sparse format, a dense array or a duplicate-laden CSR is converted
    (duplicates summed). ``square=False`` accepts a block of rows of a larger graph (an
    m x n matrix with m <= n). ``directed=False`` makes each stored edge undirected: the
    graph becomes ``maximum(A, A.T)``.
    """
    G = unwrap(G)
    if isinstance(G, (list, tuple)):  # nested lists: a dense adjacency
        G = np.asarray(G)
    shape = getattr(G, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError(f"PageRank: the graph must be a 2-D adjacency matrix (rows = source "
                         f"vertices); got {type(G).__name__} of shape {shape}")
    m, n = int(shape[0]), int(shape[1])
    if m == 0 or n == 0:
        raise ValueError(f"PageRank: the graph is empty (shape {m} x {n}): give a graph with "
                         "at least one vertex")
    if square and m != n:
        edges = (" (an edge list, one row per edge? build the adjacency from it: "
                 "scipy.sparse.csr_matrix((weights, (sources, targets)), shape=(n, n)), or "
                 "read the file with bidlab.datasets.graphs.load_snap_edges)"
                 if n in (2, 3) and m > n else "")
        raise ValueError(f"PageRank: the adjacency matrix must be square (n x n, rows = "
                         f"source vertices, columns = targets); got {m} x {n}{edges}")
    if not square and m > n:
        raise ValueError(f"PageRank: a block of rows of an n x n graph has at most n rows; "
                         f"got {m} x {n}")
    if backend.is_sparse(G) and not hasattr(G, "data"):  # a DOK matrix has no data array
        G = G.tocsr()
    data = G.data if backend.is_sparse(G) else G
    on_gpu = backend.is_cupy_array(data)
    if backend.is_sparse(G):
        csp = backend.sparse_module(backend.cupy() if on_gpu else np)
        if getattr(G, "format", None) != "csr":
            G = csp.csr_matrix(G)
        else:
            validate_csr(G, "PageRank: the graph")
    else:
        xp = backend.cupy() if on_gpu else np
        csp = backend.sparse_module(xp)
        dense = xp.asarray(G)
        if dense.dtype.kind not in "biuf":
            raise TypeError(f"PageRank: edge weights must be numbers; got {dense.dtype}")
        # (float64 for integers, booleans and float16, which scipy.sparse does not hold)
        G = csp.csr_matrix(dense if dense.dtype.kind == "f" and dense.dtype.itemsize >= 4
                           else dense.astype(np.float64))
    if sp.issparse(G) and G.dtype.kind not in "biuf":
        raise TypeError(f"PageRank: edge weights must be numbers; got {G.dtype}")
    if G.dtype != dtype:
        G = _cast(G, dtype)
    xp = backend.namespace(G.data)
    vals = G.data
    if vals.size:
        if not bool(xp.isfinite(vals).all()):
            raise ValueError("PageRank: the graph has NaN or infinite edge weights: remove "
                             "or replace them")
        neg = vals < 0
        if bool(neg.any()):
            p = int(backend.to_host(xp.flatnonzero(neg)[:1])[0])
            indptr = np.asarray(backend.to_host(G.indptr))
            r = int(np.searchsorted(indptr, p, side="right") - 1)
            c = int(backend.to_host(G.indices[p : p + 1])[0])
            raise ValueError(f"PageRank: edge weights must be >= 0; the graph has "
                             f"{int(neg.sum())} negative weights (first: edge {r} -> {c}, "
                             f"{float(backend.to_host(vals[p:p + 1])[0]):g}): a negative "
                             "weight is no transition probability; drop or shift them")
    if not directed:
        if not square:
            raise ValueError("PageRank: directed=False needs the whole graph (a square "
                             "adjacency), not a block of its rows")
        # G.T as CSR: CuPy before 14.2 takes only a CSR operand in maximum (a CSC one
        # raises NotImplementedError); scipy converts it to CSR all the same
        G = G.maximum(G.T.tocsr()).tocsr()
    if not G.has_canonical_format:
        G = G.copy()
        G.sum_duplicates()
    _check_out_weights(G)
    G = _scale_tiny_rows(G)
    if device == "gpu" and not on_gpu:
        G = backend.to_device(G)
    elif device == "cpu" and on_gpu:
        G = backend.to_host(G)
    return G


def _cast(G: Any, dtype: Any) -> Any:
    """``G`` as ``dtype``, refusing a cast to a narrower float type that would change the
    graph: a finite weight past the type's range (it would read as inf), or a vertex all
    of whose positive out-weights round to 0 (it would turn dangling, silently)."""
    src = G.data
    with np.errstate(over="ignore", under="ignore"):
        G = G.astype(dtype)
    if src.dtype.kind != "f" or src.dtype.itemsize <= G.dtype.itemsize or not src.size:
        return G
    xp = backend.namespace(src)
    info = np.finfo(G.dtype)
    if bool((xp.isfinite(src) & ~xp.isfinite(G.data)).any()):
        raise ValueError(f"PageRank: some edge weights are past the largest {G.dtype} "
                         f"({float(info.max):.3g}): scale the edge weights down (PageRank "
                         "reads only each vertex's weights relative to its out-weight) or "
                         "use dtype=float64")
    if not bool(((src > 0) & (G.data == 0)).any()):
        return G
    csp = backend.sparse_module(xp)
    count = [xp.asarray(csp.csr_matrix(((v > 0).astype(np.float64), G.indices, G.indptr),
                                       shape=G.shape).sum(axis=1)).reshape(-1)
             for v in (src, G.data)]
    emptied = (count[0] > 0) & (count[1] == 0)
    if bool(emptied.any()):
        v = int(backend.to_host(xp.flatnonzero(emptied)[:1])[0])
        raise ValueError(f"PageRank: the out-weights of vertex {v} are all below the "
                         f"smallest {G.dtype} ({float(info.smallest_subnormal):.3g}) and "
                         "round to 0 (it would turn dangling): scale the edge weights up "
                         "(PageRank reads only each vertex's weights relative to its "
                         "out-weight) or use dtype=float64")
    return G


def _check_out_weights(G: Any) -> None:
    """Refuse a graph whose out-weight sums overflow its float type (they would turn
    into inf, and the transition from such a vertex into 0: scores silently wrong). Only
    a graph whose largest weight times its longest row could overflow is summed."""
    if not G.nnz:
        return
    xp = backend.namespace(G.data)
    top = float(np.finfo(G.dtype).max)
    longest = int(xp.max(xp.diff(G.indptr)))
    if float(xp.max(G.data)) * longest <= top:
        return
    with np.errstate(over="ignore"):
        out = xp.asarray(G.sum(axis=1)).reshape(-1)
    if not bool(xp.isfinite(out).all()):
        v = int(backend.to_host(xp.flatnonzero(~xp.isfinite(out))[:1])[0])
        raise ValueError(f"PageRank: the out-weights of vertex {v} sum past the largest "
                         f"{G.dtype} ({top:.3g}): scale the edge weights down (PageRank "
                         "reads only each vertex's weights relative to its out-weight)")


def _scale_tiny_rows(G: Any) -> Any:
    """``G`` with each row whose out-weight is so small (subnormal) that its inverse
    overflows to inf scaled up by a power of 2 (exact): PageRank reads only each vertex's
    weights relative to its out-weight. A copy where a row is scaled, else ``G`` itself;
    only a graph with such a tiny weight is summed."""
    if not G.nnz:
        return G
    xp = backend.namespace(G.data)
    small = 1.0 / float(np.finfo(G.dtype).max)
    vals = G.data
    if not bool(((vals > 0) & (vals < small)).any()):
        return G
    out = xp.asarray(G.sum(axis=1, dtype=np.float64)).reshape(-1)
    tiny = (out > 0) & (out < small)
    if not bool(tiny.any()):
        return G
    up = float(np.ldexp(1.0, int(np.finfo(G.dtype).maxexp) // 2))
    row = xp.searchsorted(G.indptr, xp.arange(G.nnz, dtype=G.indptr.dtype), side="right") - 1
    G = G.copy()
    G.data[...] = xp.where(tiny[row], vals * G.dtype.type(up), vals)
    return G


def transition(A: Any) -> tuple[Any, Any]:
    """The row-stochastic transition of the CSR adjacency ``A`` (m x n) and the m x 2 row
    table ``[dangling, 1]`` (1.0 where row ``i`` has no out-weight).

    ``P`` shares ``A.indices`` and ``A.indptr``; its values are ``A[i, j] / out(i)`` (0 in a
    dangling row, whose stored entries all weigh 0).
    """
    xp = backend.namespace(A.data)
    m = A.shape[0]
    out = xp.asarray(A.sum(axis=1)).reshape(-1)
    dangling = out == 0
    inv = xp.where(dangling, 0.0, 1.0 / xp.where(dangling, 1.0, out)).astype(A.dtype)
    # each stored entry's row (searchsorted, not repeat: CuPy's repeat takes no array)
    row = xp.searchsorted(A.indptr, xp.arange(A.nnz, dtype=A.indptr.dtype), side="right") - 1
    vals = A.data * inv[row]
    csp = backend.sparse_module(xp)
    P = csp.csr_matrix((vals, A.indices, A.indptr), shape=A.shape, copy=False)
    rows = xp.ones((m, 2), dtype=A.dtype)
    rows[:, 0] = dangling.astype(A.dtype)
    return P, rows


def vertex_weights(v: Any, n: int, what: str) -> np.ndarray | None:
    """A personalisation / dangling distribution as a host float64 (n,) array summing to 1
    (None stays None). ``v``: a length-n array, or a dict {vertex index: weight} (missing
    vertices weigh 0)."""
    if v is None:
        return None
    if isinstance(v, dict):
        w = np.zeros(n)
        for key, val in v.items():
            if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
                raise ValueError(f"PageRank: {what} keys must be vertex indices 0..{n - 1}; "
                                 f"got {key!r}")
            if not 0 <= int(key) < n:
                raise ValueError(f"PageRank: {what} names vertex {int(key)}, out of range for "
                                 f"a graph of {n} vertices (indices 0..{n - 1}); map "
                                 "original ids with EdgeList.index_of()")
            w[int(key)] = _weight(val, what)
    else:
        w = np.asarray(backend.to_host(v))
        if w.dtype.kind not in "biuf":
            w = np.array([_weight(x, what) for x in w.reshape(-1).tolist()], dtype=np.float64)
        w = w.astype(np.float64).reshape(-1)
        if w.shape[0] != n:
            raise ValueError(f"PageRank: {what} has {w.shape[0]} entries but the graph has "
                             f"{n} vertices: give one weight per vertex, or a dict "
                             "{vertex index: weight}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"PageRank: {what} weights must be finite and >= 0")
    top = float(w.max())
    if top <= 0:
        raise ValueError(f"PageRank: {what} weights are all 0: give some vertex a positive "
                         "weight")
    w = w / top  # (the largest is 1 first: a sum of huge weights would overflow to inf)
    return w / w.sum()


def _weight(val: Any, what: str) -> float:
    """One personalisation / dangling weight as a float (a real number only)."""
    if isinstance(val, (numbers.Real, np.bool_)):
        return float(val)
    raise ValueError(f"PageRank: {what} weights must be real numbers; got {val!r}")
