"""Cold start: the first fit of a fresh process with an empty kernel cache, after
``bidlab warmup``, and warm, each in its own subprocess.

Workloads, one per model family: ``bidlab demo`` (online LDA on the synthetic corpus, its
whole command), ``LDA`` k=20 for 2 passes on KOS, ``LDAGibbs`` k=20 for 4 passes on KOS,
k-means (Lloyd, 50,000 x 32 float32 blobs, k=16), a 10-target logistic ``GLM``, ``NMF``
k=10 on KOS, ``PageRank`` on SNAP wiki-Vote, ``SFA`` k=32 on MovieLens-small and
``BayesNet`` inference on alarm (KOS, wiki-Vote, MovieLens and alarm come from the shared
data). Every run is a new Python process with ``NUMBA_CACHE_DIR`` pointing at a folder
of this program's:

* cold: an empty folder, so every kernel the fit needs is compiled;
* after warmup: a copy of a folder ``bidlab warmup`` filled (a fresh copy per run, so a
  kernel the warm-up missed is compiled in every run, not just the first);
* warm: the folder the cold run filled (the same fit again: everything it needs is cached).

By default a kernel not yet compiled runs its numpy form while a background process
compiles it (:mod:`bidlab.kern.standin`); ``--compile-here`` measures the former
behaviour, every kernel compiled in the fitting process (``BIDLAB_BACKGROUND_COMPILE=0``).
After the timed fit each run waits, untimed, for the background compiler to finish, so the
warm runs find every kernel cached.

Each run reports its first fit's seconds (for the demo, the whole command), the seconds
spent importing bidlab and its models, the process's wall time (with interpreter start,
data preparation, the background compiler's remaining work and exit), how many bidlab
kernels numba compiled in the fitting process, how many went to the background compiler
and how many stand-in calls ran. The
targets, per workload: cold minus warm <= 2 s (a fresh installation's first fit, no
manual step) and after warmup minus warm <= 1 s. Warm and after-warmup runs are
repeated (``--repeat``, interleaved) and their medians compared.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bidlab.bench._common import machine

WORKLOADS = {
    "demo": "bidlab demo (online LDA, synthetic corpus; the whole command)",
    "gibbs": "LDAGibbs k=20, m=100, 4 passes on KOS",
    "kmeans": "KMeans k=16 (Lloyd) on 50,000 x 32 float32 blobs",
    "glm": "GLM('logistic') defaults, 10 targets, 20,000 x 50,000 sparse (L2 deferred)",
    "lda": "LDA k=20 (online VB), 2 passes on KOS",
    "nmf": "NMF k=10 (batch, Frobenius), 20 passes on KOS counts",
    "pagerank": "PageRank (tol 1e-6) on SNAP wiki-Vote, 7,115 vertices",
    "sfa": "SFA k=32 (explicit ratings), 15 sweeps on MovieLens-small",
    "bayesnet": "BayesNet inference on alarm (37 variables), defaults, one evidence",
}
#: the workloads that read the shared data folder (the others generate their data)
NEEDS_SHARED_DATA = ("gibbs", "lda", "nmf", "pagerank", "sfa", "bayesnet")
TARGET_S = 1.0
#: a fresh installation's first fit (empty cache) may be this much slower than warm
COLD_TARGET_S = 2.0


# ----------------------------------------------------------------------------- child


def child(name: str, t_start: float) -> None:
    """Run workload ``name`` once in this fresh process (started at ``t_start``, a
    ``perf_counter`` reading taken before any import) and print its timings and
    compilations as one JSON line."""
    from numba.core import event

    compiled: list[str] = []

    class _Compiles(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            pass

        def on_end(self, ev: event.Event) -> None:
            fn = ev.data["dispatcher"].py_func
            if fn.__module__.startswith("bidlab"):
                compiled.append(f"{fn.__module__}.{fn.__qualname__}")

    event.register("numba:compile", _Compiles())
    import bidlab.datasets
    import bidlab.models  # noqa: F401  (scikit-learn: most of the import time)

    t_import = time.perf_counter() - t_start
    if name == "demo":
        from bidlab.cli import main

        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
            t0 = time.perf_counter()
            status = main(["demo", "--progress", "none", "--out", str(Path(tmp) / "t.html")])
            fit = time.perf_counter() - t0
        if status:
            raise RuntimeError(f"bidlab demo exited with status {status}")
    elif name == "gibbs":
        from bidlab.datasets import load_kos
        from bidlab.models import LDAGibbs

        X = load_kos().X
        t0 = time.perf_counter()
        LDAGibbs(20, 100, n_passes=4, random_state=0).fit(X)
        fit = time.perf_counter() - t0
    elif name == "kmeans":
        from bidlab.datasets import blobs
        from bidlab.models import KMeans

        X, _, _ = blobs(50_000, 32, 16, spread=4.0, seed=0)
        t0 = time.perf_counter()
        KMeans(16, random_state=0).fit(X)
        fit = time.perf_counter() - t0
    elif name == "glm":
        from bidlab.datasets import synthetic_glm
        from bidlab.models import GLM

        X, Y, _ = synthetic_glm(20_000, 50_000, 20, n_targets=10, seed=0)
        t0 = time.perf_counter()
        GLM("logistic", random_state=0).fit(X, Y)
        fit = time.perf_counter() - t0
    elif name in ("lda", "nmf"):
        from bidlab.datasets import load_kos
        from bidlab.models import LDA, NMF

        X = load_kos().X
        t0 = time.perf_counter()
        if name == "lda":
            LDA(20, n_passes=2, random_state=0).fit(X)
        else:
            NMF(10, max_iter=20, tol=0, random_state=0).fit(X)
        fit = time.perf_counter() - t0
    elif name == "pagerank":
        from bidlab.datasets import load_snap_edges, shared_data_dir
        from bidlab.models import PageRank

        A = load_snap_edges(shared_data_dir() / "snap-wiki-vote" / "wiki-Vote.txt").A
        t0 = time.perf_counter()
        PageRank(tol=1e-6).fit(A)
        fit = time.perf_counter() - t0
    elif name == "sfa":
        from bidlab.datasets import load_movielens
        from bidlab.models import SFA

        R = load_movielens().X
        t0 = time.perf_counter()
        SFA(32, max_iter=15, random_state=0).fit(R)
        fit = time.perf_counter() - t0
    elif name == "bayesnet":
        from bidlab.datasets import shared_data_dir
        from bidlab.models import BayesNet

        path = shared_data_dir() / "bnlearn" / "alarm.bif.gz"
        t0 = time.perf_counter()
        BayesNet(str(path), random_state=0).infer({"CVP": "HIGH"})
        fit = time.perf_counter() - t0
    else:
        raise ValueError(f"unknown workload {name!r}: choose from {list(WORKLOADS)}")
    from bidlab.kern import standin

    t0 = time.perf_counter()  # the background compiler finishes (untimed): the cache is full
    standin.wait()
    bg = standin.status()
    print(json.dumps({"import_s": t_import, "fit_s": fit, "compiled": compiled,
                      "standin_runs": bg["runs"], "background_jobs": len(bg["jobs"]),
                      "background_wait_s": time.perf_counter() - t0}))


# ----------------------------------------------------------------------------- parent


def _spawn(args: list[str], cache: Path,
           standins: bool = True) -> tuple[subprocess.CompletedProcess[str], float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               BIDLAB_BACKGROUND_COMPILE="1" if standins else "0")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=1800)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc, wall


def _run(name: str, cache: Path, standins: bool = True) -> dict[str, Any]:
    code = ("import time; t0 = time.perf_counter(); from bidlab.bench.coldstart import child; "
            f"child({name!r}, t0)")
    proc, wall = _spawn(["-c", code], cache, standins)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"fit_s": got["fit_s"], "import_s": got["import_s"], "process_s": wall,
            "compiled": len(got["compiled"]), "compiled_kernels": sorted(set(got["compiled"])),
            "standin_runs": got["standin_runs"], "background_jobs": got["background_jobs"],
            "background_wait_s": got["background_wait_s"]}


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = {key: statistics.median(r[key] for r in runs)
           for key in ("fit_s", "import_s", "process_s")}
    for key in ("compiled", "standin_runs", "background_jobs"):
        out[key] = max(r[key] for r in runs)
    out["compiled_kernels"] = sorted({k for r in runs for k in r["compiled_kernels"]})
    out["runs"] = len(runs)
    return out


def run(workloads: list[str], repeat: int, echo: Any = None,
        with_warmup: bool = True, standins: bool = True,
        warmup_all: bool = False) -> dict[str, Any]:
    """Measure ``workloads``; ``echo`` gets progress lines. ``warmup_all`` runs
    ``bidlab warmup --all`` (every kernel) instead of ``bidlab warmup`` (the kernels with
    no stand-in). ``with_warmup=False`` leaves out
    ``bidlab warmup`` and the after-warmup runs (their figures are then None);
    ``standins=False`` compiles every kernel in the fitting process
    (``BIDLAB_BACKGROUND_COMPILE=0``: no array-level stand-ins, no background compiler)."""
    say = echo or (lambda line: None)
    root = Path(tempfile.mkdtemp(prefix="bidlab-coldstart-"))
    warmup_s = rewarm_s = None
    try:
        warmed = root / "warmed"
        command = ["-m", "bidlab.cli", "warmup"] + (["--all"] if warmup_all else [])
        if with_warmup:
            _, warmup_s = _spawn(command, warmed)
            say(f"bidlab warmup: {warmup_s:.1f} s (process) into an empty cache")
            _, rewarm_s = _spawn(command, warmed)
            say(f"bidlab warmup again (all cached): {rewarm_s:.1f} s")
        rows = {}
        for name in workloads:
            cold_dir = root / f"cold-{name}"
            cold = _run(name, cold_dir, standins)
            say(f"{name}: cold fit {cold['fit_s']:.2f} s ({cold['compiled']} compiled here, "
                f"{cold['background_jobs']} in the background, {cold['standin_runs']} "
                f"stand-in calls; the background finished {cold['background_wait_s']:.1f} s "
                "after the fit)")
            warm_runs, after_runs = [], []
            for i in range(repeat):
                warm_runs.append(_run(name, cold_dir, standins))
                say(f"{name}: warm {warm_runs[-1]['fit_s']:.2f} s")
                if not with_warmup:
                    continue
                copy = root / f"after-{name}-{i}"
                shutil.copytree(warmed, copy)
                after_runs.append(_run(name, copy, standins))
                shutil.rmtree(copy, ignore_errors=True)
                say(f"{name}: after warmup {after_runs[-1]['fit_s']:.2f} s "
                    f"({after_runs[-1]['compiled']} compiled)")
            warm = _median(warm_runs)
            after = _median(after_runs) if after_runs else {
                "fit_s": None, "import_s": None, "process_s": None,
                "compiled": None, "compiled_kernels": [], "runs": 0, "standin_runs": None,
                "background_jobs": None}
            rows[name] = {
                "workload": WORKLOADS[name], "cold": cold, "after_warmup": after, "warm": warm,
                "cold_minus_warm_s": cold["fit_s"] - warm["fit_s"],
                "after_warmup_minus_warm_s": (after["fit_s"] - warm["fit_s"]
                                              if with_warmup else None),
                "met": (after["fit_s"] - warm["fit_s"] <= TARGET_S) if with_warmup else None,
                "cold_met": cold["fit_s"] - warm["fit_s"] <= COLD_TARGET_S,
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "benchmark": "coldstart",
        "standins": standins,
        "warmup_all": warmup_all,
        "warmup_s": warmup_s,
        "warmup_cached_s": rewarm_s,
        "workloads": rows,
        "target": {"goal": f"after warmup - warm <= {TARGET_S:g} s (first fit, each workload)",
                   "met": all(r["met"] for r in rows.values()) if with_warmup else None},
        "cold_target": {"goal": f"cold - warm <= {COLD_TARGET_S:g} s (first fit of a fresh "
                                "installation, each workload)",
                        "met": all(r["cold_met"] for r in rows.values()),
                        "missed": [n for n, r in rows.items() if not r["cold_met"]]},
        "machine": machine(),
    }


def _print(res: dict[str, Any]) -> None:
    if res["warmup_s"] is None:
        print("== cold start (first fit of a fresh process); bidlab warmup not run")
    else:
        print(f"== cold start (first fit of a fresh process); bidlab warmup "
              f"{res['warmup_s']:.1f} s into an empty cache, {res['warmup_cached_s']:.1f} s "
              "when all is cached")
    head = (f"  {'workload':<8} {'cold':>7} {'after warmup':>13} {'warm':>7} "
            f"{'cold-warm':>10} {'after-warm':>11}  compiled (cold/after/warm)")
    print(head)
    def sec(x: float | None, width: int) -> str:
        return f"{'-':>{width}} " if x is None else f"{x:>{width}.2f}s"

    for name, r in res["workloads"].items():
        c, a, w = r["cold"], r["after_warmup"], r["warm"]
        print(f"  {name:<8} {sec(c['fit_s'], 6)} {sec(a['fit_s'], 12)} {sec(w['fit_s'], 6)} "
              f"{sec(r['cold_minus_warm_s'], 9)} {sec(r['after_warmup_minus_warm_s'], 10)}  "
              f"{c['compiled']}/{a['compiled'] if a['compiled'] is not None else '-'}/"
              f"{w['compiled']}")
        print(f"  {'':<8} process wall: cold {c['process_s']:.2f} s, warm "
              f"{w['process_s']:.2f} s (imports {w['import_s']:.2f} s)   [{r['workload']}]")
        if c["background_jobs"]:
            print(f"  {'':<8} cold: {c['background_jobs']} kernels compiled in the background, "
                  f"{c['standin_runs']} stand-in calls; done {c['background_wait_s']:.1f} s "
                  "after the fit")
        if a["compiled_kernels"]:
            print(f"  {'':<8} compiled after warmup: {', '.join(a['compiled_kernels'])}")
    if res["target"]["met"] is not None:
        print(f"  target: {res['target']['goal']}: "
              f"{'met' if res['target']['met'] else 'MISSED'}")
    cold = res["cold_target"]
    print(f"  target: {cold['goal']}: " + ("met" if cold["met"] else
                                           f"MISSED by {', '.join(cold['missed'])}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bidlab.bench coldstart", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated subset of {','.join(WORKLOADS)}")
    parser.add_argument("--repeat", type=int, default=3,
                        help="warm and after-warmup runs per workload (medians reported)")
    parser.add_argument("--no-warmup", action="store_true",
                        help="leave out bidlab warmup and the after-warmup runs (cold vs warm)")
    parser.add_argument("--warmup-all", action="store_true",
                        help="bidlab warmup --all (every kernel) before the after-warmup runs")
    parser.add_argument("--compile-here", action="store_true",
                        help="no stand-ins or background compiler: every kernel compiles in "
                        "the fitting process (BIDLAB_BACKGROUND_COMPILE=0)")
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.workloads.split(",") if s.strip()]
    bad = [s for s in names if s not in WORKLOADS]
    if bad or not names:
        parser.error(f"--workloads {args.workloads!r}: choose from {','.join(WORKLOADS)}")
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1; got {args.repeat}")
    on_disk = [n for n in names if n in NEEDS_SHARED_DATA]
    if on_disk:
        from bidlab.datasets import shared_data_dir

        try:
            shared_data_dir()
        except FileNotFoundError as exc:
            parser.error(f"workloads {','.join(on_disk)} read the shared data: {exc} "
                         f"(or leave them out: --workloads demo,kmeans,glm)")
    res = run(names, args.repeat, echo=None if args.json else
              (lambda line: print(line, file=sys.stderr, flush=True)),
              with_warmup=not args.no_warmup, standins=not args.compile_here,
              warmup_all=args.warmup_all)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        _print(res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
