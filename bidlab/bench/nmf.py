"""``python -m bidlab.bench nmf [--json] [--quick] [--repeats N] [--iters N]``: NMF on the
KOS counts against scikit-learn, to scikit-learn's final objective.

Workload: the KOS blog corpus (3,430 documents x 6,906 words, 353,160 nonzeros, CSR,
float32) from the shared data folder, k = 20 components, Frobenius loss, scikit-learn's
random start (``init="random"``, ``random_state=0``; bidlab draws the same start).

The objective to reach is scikit-learn's ``NMF(solver="mu")`` reconstruction error after
``--iters`` iterations (``tol=0``). Each system's time to reach it:

* bidlab ``NMF(method="batch")``: the same iterates as scikit-learn's ``mu`` (one
  multiplicative step of the components per pass), so it runs the same iterations;
* scikit-learn ``NMF(solver="mu")``: the reference, ``--iters`` iterations;
* scikit-learn ``NMF(solver="cd")``: the fewest of 1, 2, 3, 5, 8, 13, ... iterations
  whose error is at most the target (each tried from the start, the time of that run).

Each run is timed whole (input checks, the start, the iterations, the final error);
systems take turns, ``--repeats`` times, and medians are reported. A bidlab fit of two
iterations runs first, so numba's compilation is not in the figures. The target: bidlab
at least 1.0x scikit-learn ``mu`` at the same objective. ``--quick`` runs 10 iterations
once (a smoke run; the figures worth reporting come from the defaults).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from typing import Any

import numpy as np

from bidlab.bench._common import emit, log, machine, print_targets, target


def _timed(make: Any, X: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    est = make().fit(X)
    return time.perf_counter() - t0, est


def _cd_steps(limit: int) -> list[int]:
    steps, a, b = [], 1, 2
    while a <= limit:
        steps.append(a)
        a, b = b, a + b
    return steps if steps[-1] == limit else [*steps, limit]


def run(iters: int, repeats: int, k: int = 20) -> dict[str, Any]:
    from sklearn.decomposition import NMF as SkNMF

    from bidlab.datasets import load_kos
    from bidlab.models import NMF

    X = load_kos(dtype=np.float32).X
    log(f"KOS {X.shape[0]} x {X.shape[1]}, {X.nnz} nonzeros; k={k}, {iters} iterations")

    def ours() -> Any:
        return NMF(k, init="random", random_state=0, max_iter=iters, tol=0.0)

    def mu() -> Any:
        return SkNMF(k, init="random", solver="mu", random_state=0, max_iter=iters, tol=0.0)

    def cd(n: int) -> Any:
        return lambda: SkNMF(k, init="random", solver="cd", random_state=0, max_iter=n,
                             tol=0.0)

    times: dict[str, list[float]] = {"bidlab NMF(batch)": [], "sklearn NMF(mu)": [],
                                     "sklearn NMF(cd)": []}
    errors: dict[str, float] = {}
    cd_iters = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarning at tol=0
        NMF(k, init="random", random_state=0, max_iter=2).fit(X)  # numba compiles
        for _ in range(repeats):
            for name, make in (("bidlab NMF(batch)", ours), ("sklearn NMF(mu)", mu)):
                t, est = _timed(make, X)
                times[name].append(t)
                errors[name] = float(est.reconstruction_err_)
                log(f"  {name}: {t:.3f} s, error {errors[name]:.6g}")
            goal = errors["sklearn NMF(mu)"]
            for n in _cd_steps(iters) if cd_iters is None else [cd_iters]:
                t, est = _timed(cd(n), X)
                if est.reconstruction_err_ <= goal * (1 + 1e-6) or n == iters:
                    cd_iters = n
                    times["sklearn NMF(cd)"].append(t)
                    errors["sklearn NMF(cd)"] = float(est.reconstruction_err_)
                    log(f"  sklearn NMF(cd): {n} iterations, {t:.3f} s, error "
                        f"{errors['sklearn NMF(cd)']:.6g}")
                    break
    secs = {name: float(np.median(v)) for name, v in times.items()}
    goal = errors["sklearn NMF(mu)"]
    rows = [{"system": name, "seconds": round(s, 4), "error": errors[name],
             "reached": bool(errors[name] <= goal * (1 + 1e-6)),
             "iterations": cd_iters if name.endswith("(cd)") else iters,
             "runs_s": [round(v, 4) for v in times[name]]} for name, s in secs.items()]
    speed = secs["sklearn NMF(mu)"] / secs["bidlab NMF(batch)"]
    same = abs(errors["bidlab NMF(batch)"] / goal - 1) < 1e-4
    return {
        "benchmark": "nmf",
        "workload": f"KOS {X.shape[0]} x {X.shape[1]} CSR float32, k={k}, Frobenius, "
        f"to scikit-learn mu's error after {iters} iterations",
        "target_error": goal,
        "repeats": repeats,
        "rows": rows,
        "targets": [target("bidlab batch / sklearn mu speed at the same objective",
                           speed if same else None, 1.0),
                    target("bidlab batch / sklearn cd speed to mu's objective",
                           secs["sklearn NMF(cd)"] / secs["bidlab NMF(batch)"], 1.0)],
    }


def _report(res: dict[str, Any]) -> None:
    print(f"== NMF: {res['workload']}; target error {res['target_error']:.6g}; medians of "
          f"{res['repeats']} runs")
    for row in res["rows"]:
        print(f"  {row['system']:<20} {row['seconds']:>8.3f} s  {row['iterations']:>4} "
              f"iterations  error {row['error']:.6g}"
              + ("" if row["reached"] else "  (target not reached)"))
    print_targets(res["targets"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bidlab.bench nmf", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true", help="10 iterations, one run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per system (medians)")
    parser.add_argument("--iters", type=int, default=200, help="scikit-learn mu iterations")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the other benchmarks
    iters, repeats = (10, 1) if args.quick else (max(2, args.iters), max(1, args.repeats))
    res = run(iters, repeats)
    res["machine"] = machine()
    return emit(res, args.json, _report)


if __name__ == "__main__":
    raise SystemExit(main())
