"""Graph loaders: SNAP edge lists and Matrix Market files, as sparse adjacency matrices.

An adjacency matrix has one row per source vertex and one column per target vertex
(``A[i, j]`` is the weight of the edge ``i -> j``), which is what
:class:`bidlab.models.PageRank` takes. Reading is bounded (:mod:`bidlab._bounded_io`): a
FIFO or device is refused, a gzip file is capped at the decompressed-size limit.

Real data: the SNAP graphs in the shared data folder (``snap-ca-grqc``,
``snap-email-eu-core``, ``snap-wiki-vote``), found through
:func:`bidlab.datasets.paths.shared_data_dir`.
"""

from __future__ import annotations

import codecs
import io
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse as sp

from bidlab._bounded_io import check_budget, read_data

__all__ = ["EdgeList", "load_snap_edges", "load_matrix_market"]


@dataclass
class EdgeList:
    """A graph read from an edge list.

    Attributes
    ----------
    A
        the n x n adjacency matrix (``scipy.sparse.csr_matrix``, rows = source vertices);
        a self-loop is kept. Directed, an edge listed twice has weight 2 (duplicates are
        summed); undirected, each pair of vertices is one edge however often and
        whichever way it is listed (:func:`load_snap_edges`).
    ids
        the original id of each of the n vertices (``ids[i]`` is vertex ``i``'s id in
        the file), sorted.
    """

    A: sp.csr_matrix
    ids: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.A.shape[0])

    @property
    def n_edges(self) -> int:
        """Stored entries of ``A`` (after merging duplicates; undirected: each edge
        twice, a self-loop once)."""
        return int(self.A.nnz)

    def index_of(self) -> dict[int, int]:
        """The map original id -> dense index (0..n-1)."""
        return {int(v): i for i, v in enumerate(self.ids)}


def load_snap_edges(path: str | os.PathLike, *, directed: bool = True,
                    dtype: Any = np.float64, cap: int | None = None) -> EdgeList:
    """Read a SNAP edge list: ``#`` comment lines, then ``source target [weight]`` per line,
    tab or space separated (CRLF line ends and gzip compression are fine; ``#`` after an
    edge starts a comment). Either every edge has a weight or none has.

    Vertex ids may be any non-negative integers, sparse or not: they are remapped to dense
    indices ``0..n-1`` in increasing id order, and ``EdgeList.ids`` maps them back. Every
    vertex that appears in an edge is a vertex of the graph.

    Parameters
    ----------
    path
        the file (plain or gzip).
    directed
        False reads each line as an undirected edge, as networkx's ``Graph`` (and
        igraph's undirected graph, simplified) reads an edge list: each pair of
        vertices is one edge, whichever way and however often it is listed (a file
        that lists both directions, or a reciprocal pair), of weight 1, or the weight
        of its last line; both directions are stored (a self-loop once). True: each
        line is an edge ``source -> target``, and an edge listed more than once has the
        sum of its weights.
    dtype
        float type of the weights.
    cap
        decompressed-size cap in bytes (default: :func:`bidlab._bounded_io.max_decompressed`).

    Returns
    -------
    EdgeList
        ``A``: n x n CSR, ``ids``: original ids.
    """
    raw = read_data(path, cap, "SNAP edge list").removeprefix(codecs.BOM_UTF8)
    # a '#' starts a comment, on a line of its own or after an edge (as networkx reads it)
    rows = [e for ln in raw.splitlines() if (e := ln.split(b"#", 1)[0]).strip()]
    if not rows:
        raise ValueError(f"{path}: no edges (only comments or blank lines): a SNAP edge list "
                         "has one 'source<TAB>target' line per edge")
    ncol = len(rows[0].split())
    if ncol not in (2, 3):
        raise ValueError(f"{path}: the first edge line has {ncol} fields "
                         f"({rows[0][:80]!r}); expected 'source target' or 'source target "
                         "weight'")
    odd = next((r for r, ln in enumerate(rows) if len(ln.split()) != ncol), None)
    if odd is not None:  # else a weight column would be read for some edges only, or none
        raise ValueError(f"{path}: not a SNAP edge list: line {_file_line(raw, odd)} "
                         f"({rows[odd][:80]!r}) has {len(rows[odd].split())} fields but "
                         "the first edge line has "
                         f"{ncol}: give every edge a weight, or none")
    check_budget(path, "its edges", len(rows) * 48,
                 fix="load a smaller graph or raise $BIDLAB_MEMORY_BUDGET")
    body = b"\n".join(rows)
    try:  # ids as int64 (exact however large), weights as float64
        ends = np.loadtxt(io.BytesIO(body), dtype=np.int64, usecols=(0, 1), ndmin=2)
        w = (np.loadtxt(io.BytesIO(body), dtype=np.float64, usecols=(2,), ndmin=1)
             if ncol == 3 else np.ones(len(rows)))
    except ValueError as exc:
        bad = _unreadable_edge(rows, ncol)
        at = (f"line {_file_line(raw, bad)} holds {rows[bad].strip()[:80]!r}" if bad is not None
              else str(exc))
        raise ValueError(f"{path}: not a SNAP edge list ({at}); every non-comment line must "
                         f"hold {ncol} fields: two integer vertex ids"
                         + (" and a weight" if ncol == 3 else "")) from None
    if (ends < 0).any():
        bad = int(np.flatnonzero((ends < 0).any(axis=1))[0])
        raise ValueError(f"{path}: line {_file_line(raw, bad)} ({rows[bad][:80]!r}) has a "
                         "negative vertex id: ids must be non-negative integers")
    if not np.isfinite(w).all():
        raise ValueError(f"{path}: some edge weights are NaN or infinite")
    src, dst = ends[:, 0], ends[:, 1]
    ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n = int(ids.shape[0])
    i, j = inv[: len(rows)], inv[len(rows):]
    if not directed:
        i, j, w = _undirected(i, j, w, n)
    A = sp.csr_matrix((w.astype(dtype), (i, j)), shape=(n, n))
    A.sum_duplicates()
    return EdgeList(A, ids)


def _undirected(i: np.ndarray, j: np.ndarray, w: np.ndarray,
                n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges ``i -- j`` as an undirected graph's, networkx's ``Graph`` rule: each
    unordered pair (a self-loop included) is one edge, whichever way and however often it
    is listed, of the weight its last line gives (1 without weights); stored both ways,
    a self-loop once."""
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    key = lo.astype(np.int64) * n + hi
    _, first = np.unique(key[::-1], return_index=True)  # each pair's last line
    keep = np.sort(key.shape[0] - 1 - first)
    lo, hi, w = lo[keep], hi[keep], w[keep]
    two = lo != hi
    return (np.concatenate([lo, hi[two]]), np.concatenate([hi, lo[two]]),
            np.concatenate([w, w[two]]))


def _file_line(raw: bytes, edge: int) -> int:
    """The 1-based line of the file that holds edge line ``edge`` (0-based; comment and
    blank lines skipped, as :func:`load_snap_edges` reads them)."""
    for no, ln in enumerate(raw.splitlines(), start=1):
        if ln.split(b"#", 1)[0].strip():
            if edge == 0:
                return no
            edge -= 1
    return 0


def _unreadable_edge(rows: list[bytes], ncol: int) -> int | None:
    """The index of the first edge line whose ids are not int64 integers or whose weight is
    not a number, or None."""
    for r, ln in enumerate(rows):
        fields = ln.split()
        try:
            if any(not -2**63 <= int(f) < 2**63 for f in fields[:2]):
                return r
            if ncol == 3:
                float(fields[2])
        except ValueError:
            return r
    return None


def load_matrix_market(path: str | os.PathLike, *, dtype: Any = np.float64,
                       cap: int | None = None) -> sp.csr_matrix:
    """Read a Matrix Market file (``scipy.io.mmread``; plain or gzip) as a CSR matrix.

    A ``symmetric`` file comes back with both triangles; a ``pattern`` file has weights 1.
    A ``complex`` file needs a complex ``dtype`` (a ValueError otherwise, rather than
    dropping the imaginary parts).
    """
    raw = read_data(path, cap, "Matrix Market file").removeprefix(codecs.BOM_UTF8)
    try:
        M = scipy.io.mmread(io.BytesIO(raw))
    except (ValueError, IndexError, TypeError) as exc:
        raise ValueError(f"{path}: not a Matrix Market file ({exc})") from None
    if np.iscomplexobj(M) and not np.issubdtype(np.dtype(dtype), np.complexfloating):
        raise ValueError(f"{path}: a complex Matrix Market matrix; pass dtype=np.complex128 "
                         f"(dtype={np.dtype(dtype).name} would drop the imaginary parts)")
    if not sp.issparse(M):
        M = sp.csr_matrix(np.asarray(M))
    return sp.csr_matrix(M, dtype=dtype)
