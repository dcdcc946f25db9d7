"""``python -m bidlab.bench kmeans [--json] [--quick] [--repeats N] [--per-iteration]``:
k-means against scikit-learn.

By default: the whole ``fit`` with default settings of both, k-means++ start and stopping
rule included, on blobs of d in {2, 16, 32, 96, 256} x k in {8, 64, 256} and on a9a, 5
seeds each (:mod:`bidlab.bench._kmeans_fit`; ``--quick``: d in {2, 16}, k in {8, 64}, 2
seeds, 20,000 rows).

``--per-iteration``: the time of one Lloyd iteration from the same start, and minibatch
runs to their early stop. Two workloads, float32:

* ``blobs``: 200,000 x 256 Gaussian blobs around 256 well-separated centres, k = 256,
  8 iterations. Hamerly's bounds skip most distances after the first passes.
* ``overlapping``: 120,000 x 96 points around 200 centres whose spread equals the noise
  (centre scale 1, noise 1), k = 200, 15 iterations. The bounds skip far fewer rows, so
  the GEMM path itself is measured.

bidlab and scikit-learn start from the *same* initial centres, run the same number of
Lloyd iterations with ``tol=0`` and must end at the same inertia. Time per iteration is
``(t(N iterations) - t(1 iteration)) / (N - 1)``, which cancels set-up and the final
assignment pass; each system runs ``--repeats`` times, the systems taking turns, and the
medians are reported. Rows: bidlab with Hamerly pruning (the default), bidlab plain GEMM
Lloyd (``bounds=False``), scikit-learn ``lloyd`` and ``elkan``. The machine's SGEMM
GFLOP/s is measured in the same run and each Lloyd row reports its *effective* GFLOP/s
(2 n d k per iteration / time), so pruned runs can exceed the GEMM rate: they skip work
instead of doing it faster. Minibatch: bidlab ``KMeans(algorithm="minibatch")`` against
``MiniBatchKMeans``, both with 4096-row minibatches, up to 100 passes and their default
early stop.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from typing import Any

import numpy as np


def sgemm_gflops(n: int = 4096, repeats: int = 5) -> float:
    """This machine's float32 GEMM rate (numpy's BLAS, all its threads), best of runs."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    C = np.empty((n, n), np.float32)
    np.matmul(A, B, out=C)
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.matmul(A, B, out=C)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best / 1e9


def _timed(fit) -> tuple[float, Any]:
    t0 = time.perf_counter()
    est = fit()
    return time.perf_counter() - t0, est


def workloads(quick: bool) -> list[dict[str, Any]]:
    """The two workloads: name, data, k, iterations, initial centres (rows of the data)."""
    from bidlab.datasets import blobs

    out = []
    for name, n, d, k, iters, kw in (
        ("blobs", 200_000, 256, 256, 8, {"spread": 4.0, "seed": 0}),
        ("overlapping", 120_000, 96, 200, 15,
         {"spread": 1.0, "center_scale": 1.0, "seed": 2611}),
    ):
        if quick:
            n, iters = n // 5, min(iters, 4)
        X, _, _ = blobs(n, d, k, **kw)
        init = X[np.random.default_rng(kw["seed"]).choice(n, k, replace=False)].copy()
        out.append({"name": name, "X": X, "k": k, "iters": iters, "init": init,
                    "text": f"{name}: {n:,} x {d} float32, k={k}, {iters} iterations"})
    return out


def _lloyd_rows(w: dict[str, Any], repeats: int, peak: float) -> list[dict[str, Any]]:
    from sklearn.cluster import KMeans as SKKMeans

    from bidlab.models.kmeans import KMeans

    X, k, init, iters = w["X"], w["k"], w["init"], w["iters"]
    n, d = X.shape

    def ours(bounds: bool):
        return lambda it: KMeans(k, init=init, max_iter=it, tol=0, bounds=bounds)

    def theirs(algorithm: str):
        return lambda it: SKKMeans(k, init=init, n_init=1, max_iter=it, tol=0,
                                   algorithm=algorithm)

    systems = {
        "bidlab KMeans (Hamerly-pruned Lloyd)": ours(True),
        "bidlab KMeans (plain GEMM Lloyd)": ours(False),
        "sklearn KMeans(lloyd)": theirs("lloyd"),
        "sklearn KMeans(elkan)": theirs("elkan"),
    }
    per: dict[str, list[float]] = {name: [] for name in systems}
    last: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for make in systems.values():
            make(2).fit(X[: 8 * k])  # compile numba kernels, start thread pools
            make(1).fit(X)  # full-size blocks: the kernels' thread choice learns them
        for _ in range(repeats):
            for name, make in systems.items():
                t1, _ = _timed(lambda make=make: make(1).fit(X))
                tn, est = _timed(lambda make=make: make(iters).fit(X))
                per[name].append((tn - t1) / (iters - 1))
                last[name] = est
    secs = {name: float(np.median(v)) for name, v in per.items()}
    best_sk = min(secs["sklearn KMeans(lloyd)"], secs["sklearn KMeans(elkan)"])
    ref_inertia = float(last["sklearn KMeans(lloyd)"].inertia_)
    flops = 2.0 * n * d * k
    rows = []
    for name, s in secs.items():
        est = last[name]
        row = {
            "system": name,
            "per_iter_s": round(s, 4),
            "effective_gflops": round(flops / s / 1e9, 1),
            "fraction_of_sgemm": round(flops / s / 1e9 / peak, 3),
            "speedup_vs_best_sklearn": round(best_sk / s, 3),
            "inertia_ratio_vs_sklearn": round(float(est.inertia_) / ref_inertia, 7),
            "n_iter": int(est.n_iter_),
            "runs_s_per_iter": [round(v, 4) for v in per[name]],
        }
        if hasattr(est, "distance_evaluations_"):
            row["distances_computed_fraction"] = round(
                est.distance_evaluations_ / (n * k * (row["n_iter"] + 1)), 3)
        rows.append(row)
    return rows


def _minibatch_rows(w: dict[str, Any], repeats: int) -> list[dict[str, Any]]:
    from sklearn.cluster import MiniBatchKMeans

    from bidlab.models.kmeans import KMeans

    X, k, init = w["X"], w["k"], w["init"]
    systems = {
        "bidlab KMeans(minibatch)": lambda: KMeans(
            k, init=init, algorithm="minibatch", batch_size=4096, max_iter=100,
            random_state=0),
        "sklearn MiniBatchKMeans": lambda: MiniBatchKMeans(
            k, init=init, n_init=1, batch_size=4096, max_iter=100, random_state=0),
    }
    times: dict[str, list[float]] = {name: [] for name in systems}
    last: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeats):
            for name, make in systems.items():
                t, est = _timed(lambda make=make: make().fit(X))
                times[name].append(t)
                last[name] = est
    return [{"system": name, "wall_s": round(float(np.median(times[name])), 3),
             "steps": int(last[name].n_steps_), "n_iter": int(last[name].n_iter_),
             "inertia": float(last[name].inertia_)} for name in systems]


def run(quick: bool, repeats: int = 3) -> dict[str, Any]:
    peak = sgemm_gflops(2048 if quick else 4096)
    results = {}
    for w in workloads(quick):
        results[w["name"]] = {"workload": w["text"], "lloyd": _lloyd_rows(w, repeats, peak),
                              "minibatch": _minibatch_rows(w, repeats)}
    speed = {name: r["lloyd"][0]["speedup_vs_best_sklearn"] for name, r in results.items()}
    same = all(abs(r["lloyd"][0]["inertia_ratio_vs_sklearn"] - 1) < 1e-4
               for r in results.values())
    return {
        "sgemm_gflops": round(peak, 1),
        "repeats": repeats,
        "workloads": results,
        "target": {
            "goal": ">= 1.3x the faster scikit-learn algorithm (lloyd or elkan) per "
            "iteration on both workloads, at equal inertia",
            "pruned_speedup": speed,
            "plain_gemm_speedup": {name: r["lloyd"][1]["speedup_vs_best_sklearn"]
                                   for name, r in results.items()},
            "met": bool(same and min(speed.values()) >= 1.3),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bidlab.bench kmeans", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--repeats", type=int, default=3,
                        help="per-iteration runs per system, taking turns (medians)")
    parser.add_argument("--per-iteration", action="store_true",
                        help="time one Lloyd iteration from the same start instead")
    args = parser.parse_args(argv)
    # numba's OpenMP workers and OpenBLAS's threads share the cores; OpenMP workers that
    # spin after a parallel region steal the BLAS threads' time (kernels measured 5-8x
    # slower here). Must be set before numba's first parallel launch.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not args.per_iteration:
        return _whole_fit(args.quick, args.json)
    res = run(args.quick, max(1, args.repeats))
    res["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"== k-means; SGEMM {res['sgemm_gflops']} GFLOP/s; medians of {res['repeats']} runs")
    for r in res["workloads"].values():
        print(f"-- {r['workload']}")
        for row in r["lloyd"]:
            print(
                f"  {row['system']:<38} {row['per_iter_s']:>8.4f} s/iter "
                f"{row['effective_gflops']:>7.1f} GFLOP/s eff ({row['fraction_of_sgemm']:.2f} "
                f"of SGEMM)  x{row['speedup_vs_best_sklearn']:.2f} vs best sklearn  "
                f"inertia ratio {row['inertia_ratio_vs_sklearn']:.7f}"
                + (f"  distances {row['distances_computed_fraction']:.2f}"
                   if "distances_computed_fraction" in row else ""))
        for row in r["minibatch"]:
            print(f"  {row['system']:<38} {row['wall_s']:>8.3f} s  {row['steps']} steps "
                  f"({row['n_iter']} passes)  inertia {row['inertia']:.6g}")
    print(f"  target: {json.dumps(res['target'])}")
    return 0


def _whole_fit(quick: bool, as_json: bool) -> int:
    from bidlab.bench._common import emit, machine, print_targets
    from bidlab.bench._kmeans_fit import fit_grid, report_rows

    if quick:
        res = fit_grid(dims=(2, 16), ks=(8, 64), seeds=2, rows={2: 20_000, 16: 20_000})
    else:
        res = fit_grid()
    res = {"benchmark": "kmeans", "machine": machine(), **res}

    def report(r: dict[str, Any]) -> None:
        print("\n".join(report_rows(r)))
        print_targets(r["targets"])

    return emit(res, as_json, report)


if __name__ == "__main__":
    raise SystemExit(main())
