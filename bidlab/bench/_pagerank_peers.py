"""The PageRank benchmark's systems, each timed from taking the CSR adjacency to the scores.

Every function takes the adjacency ``A`` (rows = sources, duplicates summed into weights)
and the L1 stopping threshold ``l1`` (an iteration whose L1 change is below it ends the
run; networkx's ``tol`` is ``l1 / n``), and returns ``(scores, iterations, parts)``:
``parts`` times the steps inside the run (e.g. building a peer's graph object).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp

DAMPING = 0.85

__all__ = ["DAMPING", "bidlab_pr", "fast_pagerank_pr", "igraph_pr", "networkx_graph",
           "networkx_pr", "scipy_pagerank"]


def scipy_pagerank(A: sp.csr_matrix, tol: float, max_iter: int = 1000) -> tuple[np.ndarray, int]:
    """networkx's scipy iteration: uniform start and teleport, dangling mass uniform; stops
    when the L1 change is below ``n * tol``."""
    n = A.shape[0]
    out = np.asarray(A.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros(n), where=out != 0)
    P = sp.diags(inv) @ A
    dangling = out == 0
    p = np.full(n, 1.0 / n)
    x = p.copy()
    for it in range(max_iter):
        last = x
        x = DAMPING * (last @ P + last[dangling].sum() * p) + (1 - DAMPING) * p
        if np.abs(x - last).sum() < n * tol:
            return x, it + 1
    return x, max_iter


def bidlab_pr(A: sp.csr_matrix, l1: float) -> tuple[np.ndarray, int, dict[str, float]]:
    from bidlab.models import PageRank

    est = PageRank(damping=DAMPING, tol=l1 / A.shape[0], max_iter=1000).fit(A)
    return est.scores_, est.n_iter_, {}


def scipy_pr(A: sp.csr_matrix, l1: float) -> tuple[np.ndarray, int, dict[str, float]]:
    x, it = scipy_pagerank(A, l1 / A.shape[0])
    return x, it, {}


def networkx_graph(A: sp.csr_matrix) -> Any:
    import networkx as nx

    return nx.from_scipy_sparse_array(A, create_using=nx.DiGraph)


def networkx_pr(A: sp.csr_matrix, l1: float) -> tuple[np.ndarray, int, dict[str, float]]:
    """``networkx.pagerank`` on a ``DiGraph`` built from ``A`` (the build is part of it)."""
    import networkx as nx

    t0 = time.perf_counter()
    G = networkx_graph(A)
    t1 = time.perf_counter()
    n = A.shape[0]
    s = nx.pagerank(G, alpha=DAMPING, tol=l1 / n, max_iter=1000)
    t2 = time.perf_counter()
    return np.array([s[i] for i in range(n)]), -1, {"build_s": t1 - t0, "pagerank_s": t2 - t1}


def igraph_pr(A: sp.csr_matrix, l1: float) -> tuple[np.ndarray, int, dict[str, float]]:
    """igraph's PRPACK (a direct solve: ``l1`` does not apply) on a ``Graph`` built from
    ``A``'s edges (and weights when any differs from 1)."""
    import igraph

    t0 = time.perf_counter()
    n = A.shape[0]
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(A.indptr))
    # a list of (source, target) tuples: the quickest input of the ones tried (a numpy
    # n x 2 array, a list of lists)
    g = igraph.Graph(n=n, edges=list(zip(src.tolist(), A.indices.tolist(), strict=True)),
                     directed=True)
    weighted = bool((A.data != 1).any())
    if weighted:
        g.es["weight"] = A.data
    t1 = time.perf_counter()
    x = g.pagerank(damping=DAMPING, directed=True, weights="weight" if weighted else None,
                   implementation="prpack")
    t2 = time.perf_counter()
    return np.asarray(x), -1, {"build_s": t1 - t0, "pagerank_s": t2 - t1}


def fast_pagerank_pr(A: sp.csr_matrix, l1: float) -> tuple[np.ndarray, int, dict[str, float]]:
    """``fast_pagerank.pagerank_power`` on ``A`` (CSR, taken directly); its rule stops when
    the L2 change is below ``tol``: given ``l1`` (an L2 change is at most the L1 change, so
    this rule is as loose or looser)."""
    import fast_pagerank

    x = fast_pagerank.pagerank_power(A, p=DAMPING, tol=l1, max_iter=1000)
    return np.asarray(x).reshape(-1), -1, {}
