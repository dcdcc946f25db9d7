"""``python -m bidlab.bench kmeans [--json] [--quick]``: k-means per iteration vs scikit-learn.

Workload (the issue's): 200,000 x 256 float32 points (Gaussian blobs around 256 centres),
k = 256. bidlab and scikit-learn start from the *same* initial centres, run the same number
of Lloyd iterations with ``tol=0``, and must end at the same inertia. Time per iteration is
``(t(N iterations) - t(1 iteration)) / (N - 1)``, which cancels set-up and the final
assignment pass. Rows: bidlab with Hamerly pruning (the default; identical assignments),
bidlab plain GEMM Lloyd, scikit-learn ``lloyd`` and ``elkan``; then minibatch k-means
against ``MiniBatchKMeans``. The machine's SGEMM GFLOP/s is measured in the same run and
each Lloyd row reports its *effective* GFLOP/s (2 n d k per iteration / time), so pruned
runs can exceed the GEMM rate: they skip work instead of doing it faster.
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


def _per_iteration(make, X, iters: int) -> dict[str, Any]:
    t1, _ = _timed(lambda: make(1).fit(X))
    tn, est = _timed(lambda: make(iters).fit(X))
    return {"per_iter_s": (tn - t1) / (iters - 1), "total_s": tn, "inertia": float(est.inertia_),
            "n_iter": int(est.n_iter_), "est": est}


def run(quick: bool) -> dict[str, Any]:
    from sklearn.cluster import KMeans as SKKMeans
    from sklearn.cluster import MiniBatchKMeans

    from bidlab.datasets import blobs
    from bidlab.models.kmeans import KMeans

    n, d, k, iters = (40_000, 256, 256, 4) if quick else (200_000, 256, 256, 8)
    X, _, _ = blobs(n, d, k, spread=4.0, seed=0)
    init = X[np.random.default_rng(0).choice(n, k, replace=False)].copy()
    flops = 2.0 * n * d * k
    peak = sgemm_gflops(2048 if quick else 4096)
    rows = []

    def ours(bounds: bool):
        return lambda it: KMeans(k, init=init, max_iter=it, tol=0, bounds=bounds)

    def theirs(algorithm: str):
        return lambda it: SKKMeans(k, init=init, n_init=1, max_iter=it, tol=0,
                                   algorithm=algorithm)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for warm in (ours(True), ours(False), theirs("lloyd"), theirs("elkan")):
            warm(2).fit(X[: 8 * k])  # compile numba kernels, start thread pools
        results = {
            "bidlab KMeans (Hamerly-pruned Lloyd)": _per_iteration(ours(True), X, iters),
            "bidlab KMeans (plain GEMM Lloyd)": _per_iteration(ours(False), X, iters),
            "sklearn KMeans(lloyd)": _per_iteration(theirs("lloyd"), X, iters),
            "sklearn KMeans(elkan)": _per_iteration(theirs("elkan"), X, iters),
        }
    ref = results["sklearn KMeans(lloyd)"]
    for name, r in results.items():
        row = {
            "system": name,
            "per_iter_s": round(r["per_iter_s"], 4),
            "effective_gflops": round(flops / r["per_iter_s"] / 1e9, 1),
            "fraction_of_sgemm": round(flops / r["per_iter_s"] / 1e9 / peak, 3),
            "speedup_vs_sklearn_lloyd": round(ref["per_iter_s"] / r["per_iter_s"], 3),
            "inertia": r["inertia"],
            "inertia_ratio_vs_sklearn": round(r["inertia"] / ref["inertia"], 7),
            "n_iter": r["n_iter"],
        }
        est = r["est"]
        if hasattr(est, "distance_evaluations_"):
            row["distances_computed_fraction"] = round(
                est.distance_evaluations_ / (n * k * (r["n_iter"] + 1)), 3
            )
        rows.append(row)
    pruned = rows[0]
    # minibatch
    mb_rows = []
    t, est = _timed(lambda: KMeans(k, init=init, algorithm="minibatch", batch_size=4096,
                                   max_iter=2, random_state=0).fit(X))
    mb_rows.append({"system": "bidlab KMeans(minibatch, 2 passes)", "wall_s": round(t, 3),
                    "inertia": float(est.inertia_)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps = 2 * -(-n // 4096)
        t, est = _timed(lambda: MiniBatchKMeans(k, init=init, n_init=1, batch_size=4096,
                                                max_iter=2, max_no_improvement=None, tol=0,
                                                random_state=0).fit(X))
    mb_rows.append({"system": f"sklearn MiniBatchKMeans(2 passes = {steps} steps)",
                    "wall_s": round(t, 3), "inertia": float(est.inertia_)})
    return {
        "workload": f"blobs {n} x {d} float32, k={k}, {iters} iterations from one init",
        "sgemm_gflops": round(peak, 1),
        "lloyd": rows,
        "minibatch": mb_rows,
        "target": {
            "goal": ">= 1.3x scikit-learn's speed per iteration at equal inertia "
            "(>= 0.55 of SGEMM GFLOP/s)",
            "speedup": pruned["speedup_vs_sklearn_lloyd"],
            "plain_gemm_speedup": rows[1]["speedup_vs_sklearn_lloyd"],
            "plain_gemm_fraction_of_sgemm": rows[1]["fraction_of_sgemm"],
            "met": bool(
                pruned["speedup_vs_sklearn_lloyd"] >= 1.3
                and abs(pruned["inertia_ratio_vs_sklearn"] - 1) < 1e-4
            ),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bidlab.bench kmeans", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    # numba's OpenMP workers and OpenBLAS's threads share the cores; OpenMP workers that
    # spin after a parallel region steal the BLAS threads' time (kernels measured 5-8x
    # slower here). Must be set before numba's first parallel launch.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    res = run(args.quick)
    res["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"== k-means: {res['workload']}; SGEMM {res['sgemm_gflops']} GFLOP/s")
    for r in res["lloyd"]:
        print(
            f"  {r['system']:<40} {r['per_iter_s']:>8.4f} s/iter  {r['effective_gflops']:>7.1f} "
            f"GFLOP/s eff ({r['fraction_of_sgemm']:.2f} of SGEMM)  "
            f"x{r['speedup_vs_sklearn_lloyd']:.2f}"
            f"  inertia ratio {r['inertia_ratio_vs_sklearn']:.7f}"
        )
    for r in res["minibatch"]:
        print(f"  {r['system']:<40} {r['wall_s']:>8.3f} s  inertia {r['inertia']:.6g}")
    print(f"  target: {json.dumps(res['target'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
