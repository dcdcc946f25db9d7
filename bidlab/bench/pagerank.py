"""``python -m bidlab.bench pagerank [--json] [--quick] [--repeats N] [--scale S]
[--big-scale S] [--l1 L] [--gpu]``: PageRank against networkx, igraph (PRPACK), fast_pagerank and
a scipy power iteration, on the SNAP graphs and generated R-MAT graphs.

Graphs: the three SNAP graphs of the shared data folder when it is there (ca-GrQc,
email-Eu-core, wiki-Vote); an R-MAT graph of ``2**scale`` vertices with about 2 M edges
(default scale 17, 17 edges per vertex drawn, duplicates summed into weights; Graph500's
quadrant probabilities 0.57 / 0.19 / 0.19 / 0.05) measured against every peer; and one of
``2**big_scale`` vertices with 22 edges per vertex drawn (default 20: over 20 M edges)
against igraph, fast_pagerank and scipy only (networkx's graph objects do not fit this
machine's memory at that size).

Systems, damping 0.85, each timed whole from taking the CSR adjacency to the scores
(:mod:`bidlab.bench._pagerank_peers`): bidlab ``PageRank().fit(A)`` (Gauss-Seidel sweeps
on graphs of up to ``GAUSS_SEIDEL_EDGES`` edges, power iterations above); networkx
``pagerank`` including building its ``DiGraph`` from ``A`` (the build is reported too);
igraph's PRPACK including building its ``Graph`` (a direct solve); fast_pagerank's
``pagerank_power``; networkx's iteration written on scipy. Iterative systems stop when an
iteration's L1 change is below ``--l1`` (networkx's ``tol`` = l1 / n; fast_pagerank's own
rule, an L2 change below l1, is as loose or looser).

Same scores: the reference is ``networkx.pagerank`` at ``tol = 1e-12 / n`` (its scipy
iteration where networkx is left out); each system's L1 distance to it must be <= 1e-6.
Systems take turns, ``--repeats`` times (once on the large graph), after one bidlab run on
a tiny graph (numba compiles once per process: warm figures); medians are reported, with
speed ratios.

``--gpu`` adds ``PageRank(device="gpu")`` on every graph with the adjacency already on the
device: power iterations (float32 and float64), the clock stopped after the device has
finished, edges per second per iteration (edges x iterations / seconds; target 1e9) and
the L1 distance to the same reference.
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.bench import _pagerank_peers as peers
from bidlab.bench._common import available, emit, log, machine, print_targets, require_gpu, target

DAMPING = peers.DAMPING
SAME = 1e-6  # largest L1 distance to the reference
rmat_probs = (0.57, 0.19, 0.19)
scipy_pagerank = peers.scipy_pagerank


def rmat(scale: int, edge_factor: int = 16, seed: int = 0,
         probs: tuple[float, float, float] = rmat_probs) -> sp.csr_matrix:
    """An R-MAT graph: ``2**scale`` vertices, ``edge_factor`` edges per vertex drawn
    (duplicates summed into weights), as a CSR adjacency (rows = sources)."""
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
        del r, down, right
    A = sp.csr_matrix((np.ones(m), (src, dst)), shape=(n, n))
    A.sum_duplicates()
    return A


def graphs(quick: bool, scale: int, big_scale: int | None) -> list[tuple[str, Any, bool]]:
    """(name, a function making the adjacency, whether networkx runs on it)."""
    from bidlab.datasets.graphs import load_snap_edges
    from bidlab.datasets.paths import find_shared_data_dir

    out: list[tuple[str, Any, bool]] = []
    folder = find_shared_data_dir()
    if folder is not None and not quick:
        for name, rel in (("ca-GrQc", "snap-ca-grqc/ca-GrQc.txt"),
                          ("email-Eu-core", "snap-email-eu-core/email-Eu-core.txt.gz"),
                          ("wiki-Vote", "snap-wiki-vote/wiki-Vote.txt")):
            if (folder / rel).is_file():
                out.append((name, lambda p=folder / rel: load_snap_edges(p).A, True))
    elif folder is None:
        log("shared data folder not found: the SNAP graphs are left out")
    out.append((f"rmat-{scale}", lambda: rmat(scale, 17), True))
    if big_scale is not None:
        out.append((f"rmat-{big_scale}", lambda: rmat(big_scale, 22), False))
    return out


def _systems(with_nx: bool) -> dict[str, Any]:
    sy = {"bidlab": peers.bidlab_pr, "scipy": peers.scipy_pr}
    if with_nx and available("networkx"):
        sy["networkx"] = peers.networkx_pr
    if available("igraph"):
        sy["igraph"] = peers.igraph_pr
    if available("fast_pagerank"):
        sy["fast_pagerank"] = peers.fast_pagerank_pr
    return sy


def reference(A: sp.csr_matrix, with_nx: bool) -> tuple[np.ndarray, str]:
    n = A.shape[0]
    if with_nx and available("networkx"):
        import networkx as nx

        s = nx.pagerank(peers.networkx_graph(A), alpha=DAMPING, tol=1e-12 / n, max_iter=10000)
        return np.array([s[i] for i in range(n)]), "networkx tol 1e-12/n"
    return scipy_pagerank(A, 1e-12 / n, max_iter=10000)[0], "scipy iteration tol 1e-12/n"


def measure(name: str, A: sp.csr_matrix, with_nx: bool, l1: float,
            repeats: int) -> dict[str, Any]:
    systems = _systems(with_nx)
    ref, ref_name = reference(A, with_nx)
    row: dict[str, Any] = {"graph": name, "vertices": int(A.shape[0]), "edges": int(A.nnz),
                           "reference": ref_name}
    times: dict[str, list[float]] = {s: [] for s in systems}
    parts: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    last: dict[str, tuple[np.ndarray, int]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rep in range(repeats):
            order = list(systems) if rep % 2 == 0 else list(reversed(systems))
            for s in order:
                t0 = time.perf_counter()
                x, it, part = systems[s](A, l1)
                times[s].append(time.perf_counter() - t0)
                parts[s].append(part)
                last[s] = (x, it)
                log(f"  {name} {s}: {times[s][-1]:.4f} s")
    for s in systems:
        med = {k: round(float(np.median([p[k] for p in parts[s]])), 5) for k in parts[s][0]}
        row[s] = {"seconds": round(float(np.median(times[s])), 5), "iterations": last[s][1],
                  "l1_to_reference": float(np.abs(last[s][0] - ref).sum()),
                  "runs_s": [round(t, 5) for t in times[s]], **med}
        if s != "bidlab":
            row[f"bidlab_x_{s}"] = round(row[s]["seconds"] / row["bidlab"]["seconds"], 3)
    return row


def gpu_rate(name: str, A: sp.csr_matrix, l1: float, ref: np.ndarray) -> dict[str, Any]:
    """PageRank on the GPU from an adjacency already there: edges per second per
    iteration, each float type, median of three warm runs."""
    from bidlab import backend
    from bidlab.models import PageRank

    cp = backend.cupy()
    Ad = backend.to_device(A)
    row: dict[str, Any] = {"graph": name, "edges": int(A.nnz)}
    for dtype in (np.float32, np.float64):
        def fit(Ad: Any = Ad, dtype: Any = dtype) -> Any:
            return PageRank(damping=DAMPING, tol=l1 / A.shape[0], max_iter=1000,
                            method="power", dtype=dtype).fit(Ad)

        fit()  # compiles, pool
        times, est = [], None
        for _ in range(3):
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            est = fit()
            cp.cuda.Device().synchronize()
            times.append(time.perf_counter() - t0)
        t = float(np.median(times))
        it = int(est.n_iter_)
        x = np.asarray(backend.to_host(est.scores_), np.float64)
        row[np.dtype(dtype).name] = {
            "seconds": round(t, 5), "iterations": it,
            "edges_per_s_per_iteration": A.nnz * it / t,
            "l1_to_reference": float(np.abs(x - ref).sum())}
        log(f"  {name} bidlab GPU {np.dtype(dtype).name}: {t:.4f} s, {it} iterations, "
            f"{A.nnz * it / t / 1e9:.2f} G edges/s per iteration")
    return row


def run(quick: bool, repeats: int, scale: int, big_scale: int | None,
        l1: float, gpu: bool = False) -> dict[str, Any]:
    from bidlab.kern import standin

    peers.bidlab_pr(rmat(6), l1)  # compile the kernels first: warm figures only
    standin.wait()  # (the sweep kernel, compiled in the background on a fresh install)
    peers.bidlab_pr(rmat(6), l1)
    rows, gpu_rows = [], []
    for name, make, with_nx in graphs(quick, scale, big_scale):
        A = make()
        log(f"{name}: {A.shape[0]:,} vertices, {A.nnz:,} edges")
        rows.append(measure(name, A, with_nx, l1, repeats if with_nx else 1))
        if gpu:
            gpu_rows.append(gpu_rate(name, A, l1, reference(A, False)[0]))
        del A
    targets = []
    for r in rows:
        for peer, goal in (("networkx", 10.0), ("igraph", 2.0)):
            if f"bidlab_x_{peer}" in r:
                targets.append(target(f"{r['graph']}: bidlab speed / {peer}",
                                      r[f"bidlab_x_{peer}"], goal))
        targets.append(target(f"{r['graph']}: bidlab L1 to the reference",
                              r["bidlab"]["l1_to_reference"], SAME, at_most=True))
    for g in gpu_rows:
        best = max(g[t]["edges_per_s_per_iteration"] for t in ("float32", "float64"))
        targets.append(target(f"{g['graph']}: bidlab GPU edges per second per iteration",
                              best, 1e9))
        targets.append(target(f"{g['graph']}: bidlab GPU float64 L1 to the reference",
                              g["float64"]["l1_to_reference"], SAME, at_most=True))
    out = {"benchmark": "pagerank", "l1": l1, "damping": DAMPING, "repeats": repeats,
           "graphs": rows, "targets": targets}
    if gpu:
        out["gpu"] = gpu_rows
    return out


def _report(res: dict[str, Any]) -> None:
    print(f"== PageRank, damping {res['damping']}, stop at L1 change < {res['l1']:g}; "
          f"medians of {res['repeats']} runs; L1 to the reference must be <= {SAME:g}")
    for r in res["graphs"]:
        print(f"-- {r['graph']}: {r['vertices']:,} vertices, {r['edges']:,} edges "
              f"(reference: {r['reference']})")
        for s in ("bidlab", "scipy", "networkx", "igraph", "fast_pagerank"):
            if s in r:
                extra = (f"  (build {r[s]['build_s']:.3f} s)" if "build_s" in r[s] else "")
                ratio = f"  bidlab x{r[f'bidlab_x_{s}']:.2f}" if s != "bidlab" else ""
                print(f"  {s:<13} {r[s]['seconds']:>9.4f} s  L1 {r[s]['l1_to_reference']:.1e}"
                      f"{ratio}{extra}")
    for g in res.get("gpu", []):
        for t in ("float32", "float64"):
            r = g[t]
            print(f"  GPU {g['graph']} {t}: {r['seconds']:.4f} s, {r['iterations']} "
                  f"iterations, {r['edges_per_s_per_iteration'] / 1e9:.2f} G edges/s "
                  f"per iteration, L1 {r['l1_to_reference']:.1e}")
    print_targets(res["targets"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bidlab.bench pagerank",
                                     description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true",
                        help="only a small R-MAT graph (scale 12 unless --scale), one run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per system")
    parser.add_argument("--scale", type=int, default=None,
                        help="R-MAT graph of 2**scale vertices (default 17; 12 with --quick)")
    parser.add_argument("--big-scale", type=int, default=20,
                        help="the large R-MAT graph's scale (0: none; never with --quick)")
    parser.add_argument("--l1", type=float, default=1e-7,
                        help="stop when an iteration's L1 change is below this")
    parser.add_argument("--gpu", action="store_true",
                        help="add PageRank on the GPU (needs CuPy and a CUDA device)")
    args = parser.parse_args(argv)
    require_gpu(parser, args.gpu)
    scale = args.scale if args.scale is not None else (12 if args.quick else 17)
    big = None if args.quick or not args.big_scale else args.big_scale
    for s in (scale, big):
        if s is not None and not 1 <= s <= 22:
            parser.error(f"R-MAT scales must be in 1..22; got {s}")
    res = run(args.quick, 1 if args.quick else max(1, args.repeats), scale, big, args.l1,
              gpu=args.gpu)
    res["machine"] = machine()
    return emit(res, args.json, _report)


if __name__ == "__main__":
    raise SystemExit(main())
