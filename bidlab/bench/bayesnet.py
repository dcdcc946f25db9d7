"""``python -m bidlab.bench bayesnet [--json] [--quick]``: Bayesian-network Gibbs sampling
against exact inference, against pyAgrum's and pgmpy's Gibbs samplers, and SAME Gibbs-EM
learning from rows with hidden entries.

1. **Accuracy**: on alarm, child, insurance, hailfinder and water (bnlearn, shared data
   folder), evidence on 3 variables drawn at random from a row sampled from the network
   (so it is possible); bidlab's marginals of every variable against exact inference
   (pgmpy ``VariableElimination``): the largest absolute error (target <= 0.01), the
   largest R-hat, the time and node draws per second.
2. **Speed at equal error** (alarm, and child): pyAgrum's ``GibbsSampling`` with the same
   evidence runs a fixed number of iterations; its largest error is the bar. bidlab then
   runs with doubling numbers of kept sweeps until its error is at or below that bar; the
   ratio of the two times (and of node draws per second) is reported. pgmpy's
   ``GibbsSampling`` takes no evidence: it is measured without evidence, against exact
   prior marginals, the same way, in a child process with a time limit (it builds its
   transition kernel by enumerating Markov-blanket states first: on alarm it does not
   finish), and on asia, where it does.
3. **Learning**: 30,000 rows sampled from alarm, 30 % of the entries hidden, tables
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
from bidlab.bench._common import (
    bench_parser,
    emit,
    log,
    machine,
    print_targets,
    ran,
    target,
)

NETWORKS = ("alarm", "child", "insurance", "hailfinder", "water")
PARTS = ("accuracy", "speed", "learning")


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

    bn = BayesNet(net, n_chains=chains, burn_in=burn, n_samples=kept, random_state=seed)
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
                    bar: float, chains: int) -> dict[str, Any]:
    """bidlab with doubling kept sweeps until its error is <= bar."""
    kept = 25
    while True:
        est, dt, draws, _ = _bidlab(net, ev, chains, 50, kept, seed=3)
        e = _err(est, exact)
        if e <= bar or kept >= 12_800:
            return {"kept": kept, "error": e, "seconds": dt, "node_draws_per_s": draws / dt,
                    "reached": e <= bar}
        kept *= 2


def speed(folder: Any, quick: bool) -> list[dict[str, Any]]:
    from bidlab.models import BayesNet

    rows = []
    for name in ("alarm",) if quick else ("alarm", "child"):
        net, ev, model, why = _network(folder, name, 2, "speed (no exact reference)")
        if model is None:
            return [{"skipped": why}]
        exact_ev = peers.exact_pgmpy(model, net, ev)
        exact_prior = peers.exact_pgmpy(model, net, {})
        chains = 1000
        agrum, why_a = peers.pyagrum_model(net)
        if agrum is None:
            log(f"pyAgrum on {name}: skipped, {why_a}")
            rows.append({"network": name, "peer": "pyAgrum", "skipped": why_a})
        else:
            iters = 20_000 if quick else 100_000
            est, dt, draws = peers.gibbs_pyagrum(agrum, net, ev, iters, 1000)
            bar = _err(est, exact_ev)
            ours = _to_equal_error(net, ev, exact_ev, bar, chains)
            rows.append(_speed_row(name, "pyAgrum", "evidence on 3", bar, dt, draws, ours))
        rows.append(_pgmpy_row(name, net, model, exact_prior, quick))
    # pgmpy's sampler builds its kernel by enumeration: a small network it finishes on
    bn = BayesNet.from_bif(folder / "asia.bif.gz")
    model, _ = peers.pgmpy_model(bn.network_)
    rows.append(_pgmpy_row("asia", bn.network_, model,
                           peers.exact_pgmpy(model, bn.network_, {}), quick))
    return rows


def _pgmpy_row(name: str, net: Any, model: Any, exact: list[np.ndarray],
               quick: bool) -> dict[str, Any]:
    size = 300 if quick else 2000
    try:
        est, dt, draws = peers.gibbs_pgmpy(model, net, size, timeout=60)
    except (MemoryError, ValueError, TimeoutError) as exc:
        why = f"pgmpy GibbsSampling: {type(exc).__name__}: {exc}"
        log(f"{name}: {why}")
        return {"network": name, "peer": "pgmpy", "skipped": why}
    bar = _err(est, exact)
    ours = _to_equal_error(net, {}, exact, bar, 1000)
    return _speed_row(name, "pgmpy", "none (pgmpy takes none)", bar, dt, draws, ours)


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


def learning(folder: Any, quick: bool) -> dict[str, Any]:
    from bidlab.models import BayesNet

    truth = BayesNet.from_bif(folder / "alarm.bif.gz")
    n = 5000 if quick else 30_000
    X = truth.sample(n, random_state=10).astype(np.float64)
    X[np.random.default_rng(11).random(X.shape) < 0.3] = np.nan
    test = truth.sample(5000, random_state=12)
    start = truth.network_.uniform()
    passes = 10 if quick else 20
    bn = BayesNet(start, n_passes=passes, nsamps=5, random_state=0)
    t = time.perf_counter()
    bn.fit(X)
    dt = time.perf_counter() - t
    row = {"rows": n, "hidden": 0.3, "passes": passes, "nsamps": 5, "seconds": round(dt, 2),
           "ll_learned": bn.log_likelihood(test), "ll_true": truth.log_likelihood(test),
           "ll_uniform": BayesNet(start).log_likelihood(test)}
    log(f"learning: {dt:.1f} s, held-out ll/row learned {row['ll_learned']:.4f}, true "
        f"{row['ll_true']:.4f}, uniform start {row['ll_uniform']:.4f}")
    return row


def run(quick: bool, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    from bidlab.models import BayesNet
    from bidlab.models.bayesnet.bif import parse_bif

    folder = _nets()
    if folder is None:
        return {"benchmark": "bayesnet", "skipped": "no bnlearn/ in the shared data folder"}
    tiny = parse_bif("variable A { type discrete [ 2 ] { y, n }; } "
                     "probability ( A ) { table 0.5, 0.5; }")
    BayesNet(tiny, n_chains=4, burn_in=1, n_samples=2).infer({})  # compile first
    BayesNet(tiny, n_passes=1).fit(np.zeros((4, 1)))
    res: dict[str, Any] = {"benchmark": "bayesnet", "quick": quick, "parts": list(parts)}
    res["accuracy"] = accuracy(folder, quick) if "accuracy" in parts else []
    res["speed"] = speed(folder, quick) if "speed" in parts else []
    res["learning"] = learning(folder, quick) if "learning" in parts else None
    return res


def _report(res: dict[str, Any]) -> None:
    if "skipped" in res:
        print(f"== bayesnet: skipped ({res['skipped']})")
        return
    print("== marginals given random evidence vs exact (pgmpy VariableElimination)")
    targets = []
    for r in ran(res["accuracy"]):
        print(f"  {r['network']:<11} {r['variables']:>3} vars  max |error| "
              f"{r['max_abs_error']:.4f}  R-hat {r['rhat']:.3f}  {r['seconds']:>7.2f} s  "
              f"{r['node_draws_per_s']:.3g} node draws/s  ({r['chains']} chains, "
              f"{r['burn_in']} + {r['kept']} sweeps)")
        targets.append(target(f"max error {r['network']}", r["max_abs_error"], 0.01,
                              at_most=True))
    print("== speed at equal error")
    for r in ran(res["speed"], lambda r: f"{r.get('network', '')} {r.get('peer', '')} "):
        b = r["bidlab"]
        print(f"  {r['network']:<6} vs {r['peer']:<8} (evidence: {r['evidence']}): peer "
              f"error {r['peer_error']:.4f} in {r['peer_seconds']:.2f} s "
              f"({r['peer_node_draws_per_s']:.3g} draws/s); bidlab {b['error']:.4f} in "
              f"{b['seconds']:.2f} s ({b['node_draws_per_s']:.3g} draws/s): "
              f"x{r['time_ratio']:.1f} time, x{r['draws_per_s_ratio']:.1f} draws/s")
        limit = 10.0 if r["peer"] == "pyAgrum" else 1000.0
        targets.append(target(f"time to equal error vs {r['peer']} ({r['network']})",
                              r["time_ratio"], limit))
    lr = res["learning"]
    if lr is None:
        print_targets(targets)
        return
    print(f"== learning alarm from {lr['rows']:,} rows, {lr['hidden']:.0%} hidden, "
          f"{lr['passes']} passes, m = {lr['nsamps']}: {lr['seconds']:.1f} s; held-out "
          f"log-likelihood/row learned {lr['ll_learned']:.4f}, true {lr['ll_true']:.4f}, "
          f"uniform start {lr['ll_uniform']:.4f}")
    print_targets(targets)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("bayesnet", __doc__,
                          quick="two networks, fewer sweeps, 5,000 learning rows")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated parts to run (default all: accuracy,speed,"
                        "learning)")
    args = parser.parse_args(argv)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    if not parts or any(p not in PARTS for p in parts):
        parser.error(f"--parts must name some of {', '.join(PARTS)}; got {args.parts!r}")
    res = run(args.quick, parts)
    res["machine"] = machine()
    return emit(res, args.json, _report)


if __name__ == "__main__":
    raise SystemExit(main())
