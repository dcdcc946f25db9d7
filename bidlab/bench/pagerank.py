"""``python -m bidlab.bench pagerank [--json] [--quick] [--repeats N] [--scale S]``: PageRank
against networkx and a scipy power iteration, on the SNAP graphs and an R-MAT graph.

Graphs: the three SNAP graphs of the shared data folder when it is there (ca-GrQc,
email-Eu-core, wiki-Vote) and a generated R-MAT graph (``2**scale`` vertices, 16 edges per
vertex, Graph500's quadrant probabilities 0.57 / 0.19 / 0.19 / 0.05, duplicates summed).

Systems, all at the same tolerance (``tol``, networkx's rule: L1 change below ``n * tol``)
and damping 0.85, each timed from taking the input to the scores:

* ``bidlab``: ``PageRank(tol=tol).fit(A)`` from the CSR adjacency (checks, the transition
  built once, the learner, every iteration);
* ``scipy``: networkx's iteration written out on ``scipy.sparse`` (transition built from
  ``A``, then ``x @ P`` per iteration);
* ``networkx``: ``networkx.pagerank(G)`` on a ``DiGraph`` built beforehand (the build is
  reported apart as ``networkx_build_s``), when networkx is installed.

Each system runs ``--repeats`` times, taking turns, after one bidlab run on a tiny graph
(numba compiles its kernels once per process: the figures are warm); medians are reported,
with the iterations and the L1 distance of the scores to the scipy ones.
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.bench._common import emit, log, machine

DAMPING = 0.85


def rmat(scale: int, edge_factor: int = 16, seed: int = 0,
         probs: tuple[float, float, float] = (0.57, 0.19, 0.19)) -> sp.csr_matrix:
    """An R-MAT graph: ``2**scale`` vertices, ``edge_factor`` edges per vertex (duplicates
    summed into weights), as a CSR adjacency (rows = sources)."""
    rng = np.random.default_rng(seed)
    n, m = 1 << scale, edge_factor << scale
    a, b, c = probs
    src = np.zeros(m, np.int64)
    dst = np.zeros(m, np.int64)
    for level in range(scale):
        r = rng.random(m)
        down = r >= a + b  # quadrants c or d: the source's bit is set
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)  # b or d: the target's bit
        src |= down.astype(np.int64) << level
        dst |= right.astype(np.int64) << level
    A = sp.csr_matrix((np.ones(m), (src, dst)), shape=(n, n))
    A.sum_duplicates()
    return A


def scipy_pagerank(A: sp.csr_matrix, tol: float, max_iter: int = 1000) -> tuple[np.ndarray, int]:
    """networkx's scipy iteration: uniform start and teleport, dangling mass uniform."""
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


def graphs(quick: bool, scale: int) -> list[tuple[str, sp.csr_matrix]]:
    """(name, adjacency) of each graph measured."""
    from bidlab.datasets.graphs import load_snap_edges
    from bidlab.datasets.paths import find_shared_data_dir

    out = []
    folder = find_shared_data_dir()
    if folder is not None and not quick:
        for name, rel in (("ca-GrQc", "snap-ca-grqc/ca-GrQc.txt"),
                          ("email-Eu-core", "snap-email-eu-core/email-Eu-core.txt.gz"),
                          ("wiki-Vote", "snap-wiki-vote/wiki-Vote.txt")):
            if (folder / rel).is_file():
                out.append((name, load_snap_edges(folder / rel).A))
    elif folder is None:
        log("shared data folder not found: the SNAP graphs are left out")
    out.append((f"rmat-{scale}", rmat(scale)))
    return out


def _networkx() -> Any:
    try:
        import networkx

        return networkx
    except ImportError:
        return None


def measure(name: str, A: sp.csr_matrix, tol: float, repeats: int) -> dict[str, Any]:
    from bidlab.models import PageRank

    nx = _networkx()
    G = None
    row: dict[str, Any] = {"graph": name, "vertices": int(A.shape[0]), "edges": int(A.nnz)}
    if nx is not None:
        t0 = time.perf_counter()
        G = nx.from_scipy_sparse_array(A, create_using=nx.DiGraph)
        row["networkx_build_s"] = round(time.perf_counter() - t0, 4)
    systems = {
        "bidlab": lambda: _bidlab(PageRank, A, tol),
        "scipy": lambda: scipy_pagerank(A, tol),
    }
    if G is not None:
        systems["networkx"] = lambda: _nx(nx, G, A.shape[0], tol)
    times: dict[str, list[float]] = {s: [] for s in systems}
    last: dict[str, tuple[np.ndarray, int]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeats):
            for s, run in systems.items():
                t0 = time.perf_counter()
                last[s] = run()
                times[s].append(time.perf_counter() - t0)
    ref = last["scipy"][0]
    for s in systems:
        row[s] = {"seconds": round(float(np.median(times[s])), 5), "iterations": last[s][1],
                  "l1_to_scipy": float(np.abs(last[s][0] - ref).sum())}
    row["bidlab_speedup_vs_scipy"] = round(row["scipy"]["seconds"] / row["bidlab"]["seconds"], 3)
    if "networkx" in row:
        row["bidlab_speedup_vs_networkx"] = round(
            row["networkx"]["seconds"] / row["bidlab"]["seconds"], 3)
    return row


def _bidlab(cls: Any, A: sp.csr_matrix, tol: float) -> tuple[np.ndarray, int]:
    est = cls(damping=DAMPING, tol=tol, max_iter=1000).fit(A)
    return est.scores_, est.n_iter_


def _nx(nx: Any, G: Any, n: int, tol: float) -> tuple[np.ndarray, int]:
    scores = nx.pagerank(G, alpha=DAMPING, tol=tol, max_iter=1000)
    return np.array([scores[i] for i in range(n)]), -1


def run(quick: bool, repeats: int, scale: int, tol: float) -> dict[str, Any]:
    from bidlab.models import PageRank

    _bidlab(PageRank, rmat(6), tol)  # compile the kernels first: warm figures only
    rows = []
    for name, A in graphs(quick, scale):
        log(f"{name}: {A.shape[0]:,} vertices, {A.nnz:,} edges")
        rows.append(measure(name, A, tol, repeats))
    return {"benchmark": "pagerank", "tol": tol, "damping": DAMPING, "repeats": repeats,
            "networkx": _networkx() is not None, "graphs": rows}


def _report(res: dict[str, Any]) -> None:
    print(f"== PageRank, tol {res['tol']:g}, damping {res['damping']}; medians of "
          f"{res['repeats']} runs" + ("" if res["networkx"] else "; networkx not installed"))
    for r in res["graphs"]:
        print(f"-- {r['graph']}: {r['vertices']:,} vertices, {r['edges']:,} edges")
        for s in ("bidlab", "scipy", "networkx"):
            if s in r:
                print(f"  {s:<9} {r[s]['seconds']:>9.4f} s  {r[s]['iterations']:>4} iterations"
                      f"  L1 to scipy {r[s]['l1_to_scipy']:.2e}")
        print(f"  bidlab x{r['bidlab_speedup_vs_scipy']:.2f} vs scipy"
              + (f", x{r['bidlab_speedup_vs_networkx']:.2f} vs networkx"
                 if "bidlab_speedup_vs_networkx" in r else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bidlab.bench pagerank",
                                     description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true",
                        help="only a small R-MAT graph (scale 12 unless --scale), one run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per system")
    parser.add_argument("--scale", type=int, default=None,
                        help="R-MAT graph of 2**scale vertices (default 18; 12 with --quick)")
    parser.add_argument("--tol", type=float, default=1e-6, help="tolerance of every system")
    args = parser.parse_args(argv)
    scale = args.scale if args.scale is not None else (12 if args.quick else 18)
    if not 1 <= scale <= 26:
        parser.error(f"--scale must be in 1..26; got {scale}")
    res = run(args.quick, 1 if args.quick else max(1, args.repeats), scale, args.tol)
    res["machine"] = machine()
    return emit(res, args.json, _report)


if __name__ == "__main__":
    raise SystemExit(main())
