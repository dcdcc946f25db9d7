"""``python -m bidlab.bench sfa [--json] [--quick] [--scale S] [--factors 64,256] [--gpu]``:
SFA (ALS by conjugate gradient) against implicit's CG ALS, and explicit ratings beside a
biases-only baseline.

Workloads:

* **MovieLens-small, implicit view** (610 users x 9,724 movies; every rating one
  interaction): a fixed-seed per-user split holds out 20 % of each user's ratings;
* **a generated matrix of MovieLens-20M's shape**: ``138,000 x 27,000`` with 20 M
  interactions times ``--scale`` (rows and columns times ``sqrt(scale)``), users' activity
  and items' popularity power laws (Zipf exponents 0.9 and 1.1), counts as values, the
  same per-user split;
* **MovieLens-small, explicit ratings**: test RMSE of ``SFA(feedback="explicit")`` beside a
  biases-only model (``mu + b_u + c_j``, L2, 20 alternating exact sweeps).

Both ALS implementations get the same objective: implicit's confidence is the value it is
given, so it gets ``1 + alpha r`` with its ``alpha = 1`` (bidlab: ``alpha`` with its
``c = 1 + alpha r``), the same factors, regularisation (implicit's default 0.01),
iterations and three CG steps (implicit's fixed count), float32, all cores (implicit's
BLAS on one thread, as it advises; bidlab's small products likewise). Each is timed
whole (``fit``: input checks, start, the sweeps) after a one-sweep warm-up fit (numba
compiles); the seconds per iteration are the fit's time over its iterations. p@10 (and
MAP@10, NDCG@10) are computed by one function (:mod:`bidlab.models.sfa.metrics`) for both,
training items left out, over the users with held-out items (at most 3,000, the same ones).
Targets: p@10 at least implicit's, seconds per iteration at most half implicit's.

``--gpu`` adds ``SFA(device="gpu")`` on the generated matrix at each of ``--factors`` (the
same split, settings and warm-up; the clock stops after the device has finished): seconds
per iteration against the CPU fit's in the same run, p@10 beside it, and the target of
0.3 s per iteration at 256 factors on the full-size matrix (``--scale 1``; implicit's
published A6000 figure for MovieLens-20M).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.bench._common import available, emit, log, machine, print_targets, require_gpu, target


def _split(X: sp.csr_matrix, seed: int = 0) -> Any:
    from bidlab.datasets.movielens import Ratings

    return Ratings(X, np.arange(X.shape[0]), np.arange(X.shape[1])).split(0.2, seed=seed)


def generated(scale: float, seed: int = 0) -> sp.csr_matrix:
    """The power-law users x items counts (see the module doc)."""
    rng = np.random.default_rng(seed)
    n, d = int(138_000 * scale ** 0.5), int(27_000 * scale ** 0.5)
    nnz = int(20_000_000 * scale)
    pu = 1.0 / np.arange(1, n + 1) ** 0.9
    pi = 1.0 / np.arange(1, d + 1) ** 1.1
    users = rng.choice(n, nnz, p=pu / pu.sum())
    items = rng.permutation(d)[rng.choice(d, nnz, p=pi / pi.sum())]
    X = sp.csr_matrix((np.ones(nnz, np.float32), (users, items)), shape=(n, d))
    X.sum_duplicates()
    keep = np.flatnonzero(np.diff(X.indptr))
    return X[keep]


def _ours(train: sp.csr_matrix, k: int, l2: float, alpha: float, iters: int) -> Any:
    from bidlab.models import SFA

    return SFA(k, feedback="implicit", l2=l2, alpha=alpha, n_cg=3, max_iter=iters,
               random_state=0, dtype=np.float32)


def _peer(k: int, l2: float, iters: int) -> Any:
    from implicit.cpu.als import AlternatingLeastSquares

    return AlternatingLeastSquares(factors=k, regularization=l2, alpha=1.0, iterations=iters,
                                   use_cg=True, calculate_training_loss=False,
                                   random_state=0, dtype=np.float32)


def implicit_case(name: str, X: sp.csr_matrix, k: int, iters: int, l2: float = 0.01,
                  alpha: float = 1.0) -> dict[str, Any]:
    """Both ALS on one implicit workload: seconds per iteration and ranking metrics."""
    from bidlab.models.sfa.metrics import ranking_metrics

    parts = _split(X)
    train, test = parts.train.astype(np.float32), parts.test
    conf = train.copy()
    conf.data = 1.0 + alpha * conf.data
    users = np.flatnonzero(np.diff(test.indptr))
    users = np.sort(np.random.default_rng(1).choice(users, min(3000, users.size), False))
    log(f"{name}: {X.shape[0]} x {X.shape[1]}, {train.nnz} training nonzeros; k={k}, "
        f"{iters} iterations")
    from threadpoolctl import threadpool_limits

    _ours(train, k, l2, alpha, 1).fit(train)
    with threadpool_limits(1, "blas"):  # implicit's advice (it warns otherwise)
        _peer(k, l2, 1).fit(conf, show_progress=False)
    t0 = time.perf_counter()
    ours = _ours(train, k, l2, alpha, iters).fit(train)
    t_ours = (time.perf_counter() - t0) / iters
    with threadpool_limits(1, "blas"):
        t0 = time.perf_counter()
        peer = _peer(k, l2, iters)
        peer.fit(conf, show_progress=False)
        t_peer = (time.perf_counter() - t0) / iters
    U, V = ours.user_factors_, ours.item_factors_
    PU, PV = np.asarray(peer.user_factors), np.asarray(peer.item_factors)
    m_ours = ranking_metrics(lambda u: U[u] @ V.T, train, test, 10, users)
    m_peer = ranking_metrics(lambda u: PU[u] @ PV.T, train, test, 10, users)
    log(f"  bidlab {t_ours:.3f} s/iter {m_ours}; implicit {t_peer:.3f} s/iter {m_peer}")
    return {"workload": name, "shape": list(X.shape), "train_nnz": int(train.nnz), "k": k,
            "iterations": iters, "bidlab_s_per_iter": t_ours, "implicit_s_per_iter": t_peer,
            "time_ratio": t_ours / t_peer, "bidlab": m_ours, "implicit": m_peer}


def gpu_case(name: str, X: sp.csr_matrix, k: int, iters: int, l2: float = 0.01,
             alpha: float = 1.0) -> dict[str, Any]:
    """``SFA(device="gpu")`` on one implicit workload: seconds an iteration past the first
    (fits of 1 and ``1 + iters`` iterations, device synchronised; the first holds the
    setup: validation, the copy to the device, the item-major ratings), the whole fit, and
    the ranking metrics of :func:`implicit_case`."""
    from bidlab import backend
    from bidlab.models.sfa.metrics import ranking_metrics

    if not backend.gpu_available():
        return {"workload": name, "k": k, "skipped": "no GPU (CuPy with a CUDA device) here"}
    cp = backend.cupy()
    parts = _split(X)
    train, test = parts.train.astype(np.float32), parts.test
    users = np.flatnonzero(np.diff(test.indptr))
    users = np.sort(np.random.default_rng(1).choice(users, min(3000, users.size), False))
    _ours(train, k, l2, alpha, 1).set_params(device="gpu").fit(train)  # compiles, pool

    def timed(n: int) -> tuple[float, Any]:
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        est = _ours(train, k, l2, alpha, n).set_params(device="gpu").fit(train)
        cp.cuda.Device().synchronize()
        return time.perf_counter() - t0, est

    first, _ = timed(1)
    whole, est = timed(1 + iters)
    t = (whole - first) / iters
    U, V = backend.to_host(est.user_factors_), backend.to_host(est.item_factors_)
    m = ranking_metrics(lambda u: U[u] @ V.T, train, test, 10, users)
    log(f"{name} on the GPU: k={k}: {t:.3f} s an iteration past the first; a fit of "
        f"{1 + iters} iterations {whole:.3f} s, of 1 {first:.3f} s; {m}")
    return {"workload": name, "shape": list(X.shape), "train_nnz": int(train.nnz), "k": k,
            "iterations": 1 + iters, "gpu_s_per_iter": t, "gpu_fit_s": whole,
            "gpu_one_iteration_fit_s": first, "bidlab_gpu": m}


def biases_only(train: sp.csr_matrix, l2: float, sweeps: int = 20) -> Any:
    """``mu + b_u + c_j`` fitted by alternating exact sweeps; returns a predict function."""
    mu = float(train.data.mean())
    rows = np.repeat(np.arange(train.shape[0]), np.diff(train.indptr))
    cols = train.indices
    bu, ci = np.zeros(train.shape[0]), np.zeros(train.shape[1])
    nu, ni = np.bincount(rows, minlength=bu.size), np.bincount(cols, minlength=ci.size)
    for _ in range(sweeps):
        bu = np.bincount(rows, train.data - mu - ci[cols], bu.size) / (nu + l2)
        ci = np.bincount(cols, train.data - mu - bu[rows], ci.size) / (ni + l2)
    return lambda u, i: mu + bu[u] + ci[i]


def explicit_case(k: int, iters: int, l2: Any = "auto",
                  biases_l2: float = 10.0) -> dict[str, Any]:
    """Explicit MovieLens-small: ``SFA(k, l2=l2)`` against the biases alone (L2
    ``biases_l2`` on each bias)."""
    from bidlab.datasets import load_movielens
    from bidlab.models import SFA
    from bidlab.models.sfa.metrics import rmse

    parts = load_movielens().split(0.2, seed=0)
    test = parts.test
    users = np.repeat(np.arange(test.shape[0]), np.diff(test.indptr))
    t0 = time.perf_counter()
    est = SFA(k, l2=l2, max_iter=iters, random_state=0, dtype=np.float32).fit(parts.train)
    t = time.perf_counter() - t0
    ours = rmse(test.data, est.predict(users, test.indices))
    base = rmse(test.data, biases_only(parts.train, biases_l2)(users, test.indices))
    log(f"explicit MovieLens-small: SFA(k={k}, l2={l2}) test RMSE {ours:.4f} "
        f"({t:.2f} s); biases only {base:.4f}")
    return {"k": k, "l2": l2, "iterations": iters, "sfa_rmse": ours, "biases_rmse": base,
            "fit_s": t}


def run(quick: bool, scale: float, factors: list[int], iters: int,
        gpu: bool = False) -> dict[str, Any]:
    from bidlab.datasets import load_movielens

    cases, gpu_cases = [], []
    peer = available("implicit") is not None
    if not peer:
        log("implicit is not installed: the cases against it are left out "
            "(pip install 'bidlab[bench]')")
    ml = load_movielens()
    if peer:
        cases.append(implicit_case("MovieLens-small implicit", ml.implicit(), 64, iters))
    if not quick or gpu:
        G = generated(scale)
        for k in factors:
            name = f"generated x{scale:g}"
            if not quick and peer:
                cases.append(implicit_case(name, G, k, max(2, iters // 5)))
            if gpu:
                gpu_cases.append(gpu_case(name, G, k, max(2, iters // 5)))
    explicit = explicit_case(32, iters)
    targets = []
    for c in cases:
        targets.append(target(f"{c['workload']} k={c['k']}: p@10 bidlab - implicit",
                              c["bidlab"]["p@10"] - c["implicit"]["p@10"], 0.0))
        targets.append(target(f"{c['workload']} k={c['k']}: s/iter bidlab / implicit",
                              c["time_ratio"], 0.5, at_most=True))
    targets.append(target("explicit RMSE: biases-only - SFA", explicit["biases_rmse"]
                          - explicit["sfa_rmse"], 0.0))
    for g in gpu_cases:
        cpu = next((c for c in cases if c["workload"] == g["workload"] and c["k"] == g["k"]),
                   None)
        if "skipped" in g:
            continue
        if cpu is not None:
            g["cpu_s_per_iter"] = cpu["bidlab_s_per_iter"]
            g["gpu_over_cpu"] = g["gpu_s_per_iter"] / cpu["bidlab_s_per_iter"]
        if g["k"] == 256 and scale >= 1.0:
            targets.append(target(f"{g['workload']} k=256 on the GPU: s/iter past the first",
                                  g["gpu_s_per_iter"], 0.3, at_most=True))
    out = {"benchmark": "sfa", "machine": machine(), "implicit_cases": cases,
           "explicit": explicit, "targets": targets}
    if gpu:
        out["gpu_cases"] = gpu_cases
    return out


def _report(r: dict[str, Any]) -> None:
    print(f"SFA vs implicit CG ALS ({r['machine']['cpu']}, {r['machine']['cpus']} CPUs)")
    print(f"{'workload':<28}{'k':>5}{'bidlab s/it':>13}{'implicit s/it':>15}{'ratio':>7}"
          f"{'p@10 ours':>11}{'p@10 impl':>11}")
    for c in r["implicit_cases"]:
        print(f"{c['workload']:<28}{c['k']:>5}{c['bidlab_s_per_iter']:>13.3f}"
              f"{c['implicit_s_per_iter']:>15.3f}{c['time_ratio']:>7.2f}"
              f"{c['bidlab']['p@10']:>11.4f}{c['implicit']['p@10']:>11.4f}")
    for g in r.get("gpu_cases", []):
        if "skipped" in g:
            print(f"GPU {g['workload']} k={g['k']}: skipped ({g['skipped']})")
        else:
            print(f"GPU {g['workload']} k={g['k']}: {g['gpu_s_per_iter']:.3f} s/iter past the "
                  f"first (fit {g['gpu_fit_s']:.3f} s) "
                  f"(CPU {g.get('cpu_s_per_iter', float('nan')):.3f}), "
                  f"p@10 {g['bidlab_gpu']['p@10']:.4f}")
    e = r["explicit"]
    print(f"explicit MovieLens-small: SFA(k={e['k']}, l2={e['l2']}) RMSE {e['sfa_rmse']:.4f}, "
          f"biases only {e['biases_rmse']:.4f}")
    print_targets(r["targets"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bidlab.bench sfa", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--quick", action="store_true", help="MovieLens-small only, 3 iterations")
    p.add_argument("--scale", type=float, default=1.0,
                   help="the generated matrix's nonzeros as a share of 20 M (default 1)")
    p.add_argument("--factors", default="64,256", help="factors on the generated matrix")
    p.add_argument("--iters", type=int, default=15, help="iterations on MovieLens-small")
    p.add_argument("--gpu", action="store_true",
                   help="add SFA(device='gpu') on the generated matrix (needs CuPy and a GPU)")
    a = p.parse_args(argv)
    require_gpu(p, a.gpu)
    factors = [int(x) for x in a.factors.split(",") if x]
    result = run(a.quick, a.scale, factors, 3 if a.quick else a.iters, gpu=a.gpu)
    return emit(result, a.json, _report)


if __name__ == "__main__":
    raise SystemExit(main())
