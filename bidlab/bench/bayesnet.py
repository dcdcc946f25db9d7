"""``python -m bidlab.bench bayesnet [--json] [--quick]``: Bayesian-network Gibbs sampling
against exact inference, against pyAgrum's and pgmpy's Gibbs samplers, and SAME Gibbs-EM
learning from rows with hidden entries.

1. **Accuracy**: on alarm, child, insurance, hailfinder and water (bnlearn, shared data
   folder), evidence on 3 variables drawn at random from a row sampled from the network
   (so it is possible); bidlab's marginals of every variable against exact inference
   (pgmpy ``VariableElimination``): the largest absolute error (target <= 0.01), the
   largest R-hat, the time and node draws per second.
2. **Speed at equal error vs pyAgrum** (alarm, and child): pyAgrum's ``GibbsSampling``
   with the same evidence runs a fixed number of iterations; its largest error is the bar.
   bidlab then runs with doubling numbers of kept sweeps until its error is at or below
   that bar; the ratio of the two times (and of node draws per second) is reported.
3. **Speed at equal error vs pgmpy**: pgmpy's ``GibbsSampling`` takes no evidence, so it
   is measured without, against exact prior marginals, in a child process with a time and
   a memory limit: its set-up (it builds a transition kernel with one entry per joint
   state of all the other variables, for every variable), a timed pilot, then one chain of
   as many samples as take about 30 s. Its error is the bar bidlab reaches as above, from
   10 chains up (10, 30, 100, 300, 1000, then more sweeps; the run that reaches it timed
   best of 3); the time ratio is given with pgmpy's set-up and without. The kernel is
   built on cancer, earthquake, survey, asia and sachs (at most 650,000 entries); on child
   and alarm it would have 7.5e9 and 2.4e17 entries, so pgmpy's sampling loop runs there
   with each entry computed by pgmpy's own reduction when first used.
4. **Learning**: 30,000 rows sampled from alarm, 30 % of the entries hidden, tables
   learned from uniform ones by ``BayesNet.fit`` (SAME Gibbs-EM); held-out
   log-likelihood per row (5,000 fresh rows) of the learned, the true and the uniform
   tables, and the time.

A peer that is not installed is skipped with the reason printed. Every bidlab run is
preceded by one tiny run (numba compiles once per process: the figures are warm).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bidlab.bench import _bayesnet_peers as peers
from bidlab.bench import _bayesnet_pgmpy as pg
from bidlab.bench._bayesnet_report import report
from bidlab.bench._common import bench_parser, emit, log, machine, target

NETWORKS = ("alarm", "child", "insurance", "hailfinder", "water")
PARTS = ("accuracy", "speed", "pgmpy", "learning")
#: where bidlab's sweeps run (``--device``; ``run`` sets it): "cpu" or "gpu"
DEVICE = "cpu"
# pgmpy's sampler on the networks whose full kernel it builds in seconds (the smallest first,
# the only one in --quick), and with its kernel computed on first use on two it cannot build
PGMPY_BUILT = ("cancer", "earthquake", "survey", "asia", "sachs")
PGMPY_LAZY = ("child", "alarm")
PGMPY_MAX_ENTRIES = 2_000_000
PGMPY_SECONDS = 30.0  # pgmpy's sampling time the sample count is chosen for
PGMPY_RUNS = 3  # pgmpy's runs per network (seeds and starts differ); the median error counts
# bidlab's chains tried in turn at pgmpy's error (steps of ~1.5x: the time found is at most
# ~1.5x the least that reaches it), each with the seeds below
CHAIN_LADDER = (10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000)
SEEDS = (3, 4, 5)


def _nets() -> Any:
    from bidlab.datasets.paths import find_shared_data_dir

    shared = find_shared_data_dir()
    if shared is None or not (shared / "bnlearn").is_dir():
        return None
    return shared / "bnlearn"


def _evidence(bn: Any, k: int, seed: int) -> dict[str, str]:
    net = bn.network_
    row = bn.sample(1, random_state=seed)[0]
    rng = np.random.default_rng(seed)
    vs = rng.choice(net.n_vars, size=k, replace=False)
    return {net.names[v]: net.states[v][row[v]] for v in sorted(vs)}


def _err(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True))


def _network(folder: Any, name: str, seed: int, part: str) -> tuple[Any, Any, Any, str]:
    """(network, evidence on 3 variables, pgmpy model or None, why none) for ``name``; a
    missing pgmpy is logged as skipping ``part``."""
    from bidlab.models import BayesNet

    bn = BayesNet.from_bif(folder / f"{name}.bif.gz")
    net = bn.network_
    model, why = peers.pgmpy_model(net)
    if model is None:
        log(f"{part} on {name}: skipped, {why}")
    return net, _evidence(bn, 3, seed=seed), model, why


def _bidlab(net: Any, evidence: dict[str, str], chains: int, burn: int, kept: int,
            seed: int = 0) -> tuple[list[np.ndarray], float, float, float]:
    """(marginals, seconds, node draws, R-hat)."""
    from bidlab.models import BayesNet

    bn = BayesNet(net, n_chains=chains, burn_in=burn, n_samples=kept, random_state=seed,
                  device=DEVICE)
    t = time.perf_counter()
    bn.infer(evidence)
    dt = time.perf_counter() - t
    free = net.n_vars - len(evidence)
    return bn.marginals_, dt, float(chains) * (burn + kept) * free, float(bn.rhat_)


def accuracy(folder: Any, quick: bool) -> list[dict[str, Any]]:
    rows = []
    for name in NETWORKS[:2] if quick else NETWORKS:
        net, ev, model, why = _network(folder, name, 1, "accuracy")
        if model is None:
            return [{"skipped": why}]
        t = time.perf_counter()
        exact = peers.exact_pgmpy(model, net, ev)
        t_exact = time.perf_counter() - t
        chains, burn, kept = (500, 100, 300) if quick else (1000, 200, 1000)
        est, dt, draws, rhat = _bidlab(net, ev, chains, burn, kept)
        row = {"network": name, "variables": net.n_vars, "evidence": ev,
               "max_abs_error": _err(est, exact), "rhat": rhat, "seconds": round(dt, 3),
               "node_draws_per_s": draws / dt, "chains": chains, "burn_in": burn,
               "kept": kept, "exact_seconds": round(t_exact, 3)}
        log(f"{name}: max error {row['max_abs_error']:.4f}, R-hat {rhat:.3f}, {dt:.2f} s, "
            f"{row['node_draws_per_s']:.3g} draws/s")
        rows.append(row)
    return rows


def _to_equal_error(net: Any, ev: dict[str, str], exact: list[np.ndarray],
                    bar: float, chains: tuple[int, ...] = (1000,),
                    seeds: tuple[int, ...] = SEEDS) -> dict[str, Any]:
    """bidlab until its error is <= bar: 50 + 25 sweeps of each number of ``chains`` in
    turn, then the last with doubling kept sweeps. A size counts as reaching ``bar`` when
    the median error of its runs with ``seeds`` does (one lucky seed is not enough); its
    time is the least of those runs (all the same work)."""
    kept, ladder = 25, list(chains)
    while True:
        n = ladder[0]
        runs = [_bidlab(net, ev, n, 50, kept, seed=s) for s in seeds]
        errs = [_err(r[0], exact) for r in runs]
        e = float(np.median(errs))
        if e <= bar or kept >= 12_800:
            dt = min(r[1] for r in runs)
            return {"chains": n, "kept": kept, "error": e, "errors": errs, "seconds": dt,
                    "node_draws_per_s": runs[0][2] / dt, "reached": e <= bar}
        if len(ladder) > 1:
            ladder.pop(0)
        else:
            kept *= 2


def speed(folder: Any, quick: bool) -> list[dict[str, Any]]:
    rows = []
    for name in ("alarm",) if quick else ("alarm", "child"):
        net, ev, model, why = _network(folder, name, 2, "speed (no exact reference)")
        if model is None:
            return [{"skipped": why}]
        exact_ev = peers.exact_pgmpy(model, net, ev)
        agrum, why_a = peers.pyagrum_model(net)
        if agrum is None:
            log(f"pyAgrum on {name}: skipped, {why_a}")
            rows.append({"network": name, "peer": "pyAgrum", "skipped": why_a})
            continue
        iters = 20_000 if quick else 100_000
        est, dt, draws = peers.gibbs_pyagrum(agrum, net, ev, iters, 1000)
        bar = _err(est, exact_ev)
        ours = _to_equal_error(net, ev, exact_ev, bar)
        rows.append(_speed_row(name, "pyAgrum", "evidence on 3", bar, dt, draws, ours))
    return rows


def _speed_row(name: str, peer: str, ev: str, bar: float, dt: float, draws: float,
               ours: dict[str, Any]) -> dict[str, Any]:
    row = {"network": name, "peer": peer, "evidence": ev, "peer_error": bar,
           "peer_seconds": round(dt, 3), "peer_node_draws_per_s": draws / dt,
           "bidlab": ours, "time_ratio": dt / ours["seconds"],
           "draws_per_s_ratio": ours["node_draws_per_s"] / (draws / dt)}
    log(f"{name} vs {peer}: peer error {bar:.4f} in {dt:.2f} s; bidlab {ours['error']:.4f} "
        f"in {ours['seconds']:.2f} s: x{row['time_ratio']:.1f} time, "
        f"x{row['draws_per_s_ratio']:.1f} draws/s")
    return row


def vs_pgmpy(folder: Any, quick: bool) -> list[dict[str, Any]]:
    """pgmpy's ``GibbsSampling`` (no evidence) against exact prior marginals, and bidlab at
    its error: the kernel built on the networks whose kernel is small enough, computed on
    first use on the others (see ``_bayesnet_pgmpy``)."""
    from bidlab.models import BayesNet

    rows: list[dict[str, Any]] = []
    plan = [(n, False) for n in PGMPY_BUILT[:1 if quick else None]]
    plan += [] if quick else [(n, True) for n in PGMPY_LAZY]
    for name, lazy in plan:
        bn = BayesNet.from_bif(folder / f"{name}.bif.gz")
        net = bn.network_
        model, why = peers.pgmpy_model(net)
        if model is None:
            log(f"pgmpy on {name}: skipped, {why}")
            return [{"network": name, "peer": "pgmpy", "skipped": why}]
        entries = pg.kernel_entries([len(s) for s in net.states])
        mode = "kernel computed on first use" if lazy else "kernel built"
        head = {"network": name, "variables": net.n_vars, "peer": "pgmpy", "mode": mode,
                "full_kernel_entries": entries}
        if not lazy and entries > PGMPY_MAX_ENTRIES:
            rows.append({**head, "skipped": f"its kernel would have {entries:.3g} entries"})
            continue
        seconds = 0.5 if quick else PGMPY_SECONDS
        exact = peers.exact_pgmpy(model, net, {})
        runs = []
        try:
            for k in range(1 if quick else PGMPY_RUNS):
                # the hard limit allows building the kernel at 1,000 entries a second
                r = pg.gibbs_pgmpy(model, net, bn.sample(1, random_state=5 + k)[0], seconds,
                                   timeout=60 + 4 * seconds + (0 if lazy else entries / 1000),
                                   lazy=lazy, seed=2 * k)
                r["error"] = _err(r.pop("marginals"), exact)
                runs.append(r)
        except (MemoryError, ValueError, TimeoutError) as exc:
            why = f"pgmpy GibbsSampling: {type(exc).__name__}: {exc}"
            log(f"{name}: {why}")
            rows.append({**head, "skipped": why})
            continue
        rows.append(_pgmpy_row(net, head, runs, exact))
    _not_built(rows)
    return rows


def _pgmpy_row(net: Any, head: dict[str, Any], runs: list[dict[str, Any]],
               exact: list[np.ndarray]) -> dict[str, Any]:
    """The row of pgmpy's run with the median error (one chain's error moves ~3x from run
    to run) and bidlab at that error."""
    errors = [r["error"] for r in runs]
    r = runs[int(np.argsort(errors)[(len(runs) - 1) // 2])]
    bar = r["error"]
    ours = _to_equal_error(net, {}, exact, bar, CHAIN_LADDER)
    total = r["setup_s"] + r["sample_s"]
    peer_rate = r["draws"] / r["sample_s"]
    row = {**head, "evidence": "none (pgmpy takes none)", "peer_error": bar,
           "peer_setup_s": round(r["setup_s"], 4), "peer_samples": r["size"],
           "peer_sample_s": round(r["sample_s"], 3), "peer_seconds": round(total, 3),
           "peer_errors": errors,
           "peer_node_draws_per_s": peer_rate, "kernel_entries": r["kernel_entries"],
           "kernel_bytes": r["rss_growth_bytes"], "bidlab": ours,
           "time_ratio": total / ours["seconds"],
           "time_ratio_sampling": r["sample_s"] / ours["seconds"],
           "draws_per_s_ratio": ours["node_draws_per_s"] / peer_rate}
    log(f"{head['network']} vs pgmpy ({head['mode']}): set-up {r['setup_s']:.2f} s, "
        f"{r['size']} samples in {r['sample_s']:.1f} s ({peer_rate:.3g} draws/s), error "
        f"{bar:.4f} (median of {', '.join(f'{e:.4f}' for e in errors)}); "
        f"bidlab {ours['error']:.4f} in {ours['seconds']:.3f} s "
        f"({ours['node_draws_per_s']:.3g} draws/s): x{row['time_ratio']:.0f} time "
        f"(x{row['time_ratio_sampling']:.0f} without set-up), "
        f"x{row['draws_per_s_ratio']:.0f} draws/s")
    return row


def _not_built(rows: list[dict[str, Any]]) -> None:
    """Give each row whose full kernel was not built the time and memory building it would
    take at the rate measured on the largest kernel that was built."""
    built = [r for r in rows if r.get("mode") == "kernel built" and "skipped" not in r]
    if not built:
        return
    ref = max(built, key=lambda r: r["kernel_entries"])
    per_s = ref["kernel_entries"] / max(ref["peer_setup_s"], 1e-9)
    per_entry = ref["kernel_bytes"] / ref["kernel_entries"]
    for r in rows:
        if r["full_kernel_entries"] > ref["kernel_entries"]:
            r["full_kernel_estimate"] = {
                "seconds": r["full_kernel_entries"] / per_s,
                "bytes": r["full_kernel_entries"] * per_entry, "rate_from": ref["network"]}


def learning(folder: Any, quick: bool) -> dict[str, Any]:
    from bidlab.models import BayesNet

    truth = BayesNet.from_bif(folder / "alarm.bif.gz")
    n = 5000 if quick else 30_000
    X = truth.sample(n, random_state=10).astype(np.float64)
    X[np.random.default_rng(11).random(X.shape) < 0.3] = np.nan
    test = truth.sample(5000, random_state=12)
    start = truth.network_.uniform()
    passes = 10 if quick else 20
    bn = BayesNet(start, n_passes=passes, nsamps=5, random_state=0, device=DEVICE)
    t = time.perf_counter()
    bn.fit(X)
    dt = time.perf_counter() - t
    row = {"rows": n, "hidden": 0.3, "passes": passes, "nsamps": 5, "seconds": round(dt, 2),
           "ll_learned": bn.log_likelihood(test), "ll_true": truth.log_likelihood(test),
           "ll_uniform": BayesNet(start).log_likelihood(test)}
    log(f"learning: {dt:.1f} s, held-out ll/row learned {row['ll_learned']:.4f}, true "
        f"{row['ll_true']:.4f}, uniform start {row['ll_uniform']:.4f}")
    return row


def run(quick: bool, parts: tuple[str, ...] = PARTS, device: str = "cpu") -> dict[str, Any]:
    from bidlab.models import BayesNet
    from bidlab.models.bayesnet.bif import parse_bif

    global DEVICE
    DEVICE = device
    folder = _nets()
    if folder is None:
        return {"benchmark": "bayesnet", "skipped": "no bnlearn/ in the shared data folder"}
    tiny = parse_bif("variable A { type discrete [ 2 ] { y, n }; } "
                     "probability ( A ) { table 0.5, 0.5; }")
    BayesNet(tiny, n_chains=4, burn_in=1, n_samples=2, device=device).infer({})  # compile
    BayesNet(tiny, n_passes=1, device=device).fit(np.zeros((4, 1)))
    res: dict[str, Any] = {"benchmark": "bayesnet", "quick": quick, "parts": list(parts),
                           "device": device}
    res["accuracy"] = accuracy(folder, quick) if "accuracy" in parts else []
    res["speed"] = speed(folder, quick) if "speed" in parts else []
    res["pgmpy"] = vs_pgmpy(folder, quick) if "pgmpy" in parts else []
    res["learning"] = learning(folder, quick) if "learning" in parts else None
    res["targets"] = _targets(res)
    return res


def _targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = [target(f"max error {r['network']}", r["max_abs_error"], 0.01, at_most=True)
           for r in res["accuracy"] if "skipped" not in r]
    out += [target(f"time to equal error vs pyAgrum ({r['network']})", r["time_ratio"], 10.0)
            for r in res["speed"] if "skipped" not in r]
    for r in res["pgmpy"]:
        if "skipped" not in r:
            name = f"vs pgmpy ({r['network']}, {r['mode']})"
            out.append(target(f"time to equal error {name}, set-up included",
                              r["time_ratio"], 1000.0))
            out.append(target(f"time to equal error {name}, sampling only",
                              r["time_ratio_sampling"], 1000.0))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("bayesnet", __doc__,
                          quick="two networks, fewer sweeps, pgmpy on cancer only, "
                          "5,000 learning rows")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated parts to run (default all: accuracy,speed,"
                        "pgmpy,learning)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="where bidlab's sweeps run (gpu: needs CuPy and a device)")
    args = parser.parse_args(argv)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    if not parts or any(p not in PARTS for p in parts):
        parser.error(f"--parts must name some of {', '.join(PARTS)}; got {args.parts!r}")
    if args.device == "gpu":
        from bidlab import backend

        if not backend.gpu_available():
            parser.error("--device gpu: no CuPy/CUDA device here (install bidlab[gpu] on a "
                         "machine with an NVIDIA GPU)")
    res = run(args.quick, parts, args.device)
    res["machine"] = machine()
    return emit(res, args.json, report)


if __name__ == "__main__":
    raise SystemExit(main())
