"""The readable report of ``python -m bidlab.bench bayesnet`` (``--json`` prints the result
dict itself)."""

from __future__ import annotations

from typing import Any

from bidlab.bench._common import print_targets, ran

__all__ = ["report"]


def report(res: dict[str, Any]) -> None:
    """Print the benchmark's result ``res`` part by part, then its targets."""
    if "skipped" in res:
        print(f"== bayesnet: skipped ({res['skipped']})")
        return
    if res["accuracy"]:
        print("== marginals given random evidence vs exact (pgmpy VariableElimination)")
    for r in ran(res["accuracy"]):
        print(f"  {r['network']:<11} {r['variables']:>3} vars  max |error| "
              f"{r['max_abs_error']:.4f}  R-hat {r['rhat']:.3f}  {r['seconds']:>7.2f} s  "
              f"{r['node_draws_per_s']:.3g} node draws/s  ({r['chains']} chains, "
              f"{r['burn_in']} + {r['kept']} sweeps)")
    if res["speed"]:
        print("== speed at equal error vs pyAgrum GibbsSampling")
    for r in ran(res["speed"], lambda r: f"{r.get('network', '')} {r.get('peer', '')} "):
        b = r["bidlab"]
        print(f"  {r['network']:<6} (evidence: {r['evidence']}): peer error "
              f"{r['peer_error']:.4f} in {r['peer_seconds']:.2f} s "
              f"({r['peer_node_draws_per_s']:.3g} draws/s); bidlab {b['error']:.4f} in "
              f"{b['seconds']:.2f} s ({b['node_draws_per_s']:.3g} draws/s): "
              f"x{r['time_ratio']:.1f} time, x{r['draws_per_s_ratio']:.1f} draws/s")
    if res["pgmpy"]:
        print("== speed at equal error vs pgmpy GibbsSampling (no evidence: it takes none)")
    for r in res["pgmpy"]:
        _pgmpy_line(r)
    lr = res["learning"]
    if lr is not None:
        print(f"== learning alarm from {lr['rows']:,} rows, {lr['hidden']:.0%} hidden, "
              f"{lr['passes']} passes, m = {lr['nsamps']}: {lr['seconds']:.1f} s; held-out "
              f"log-likelihood/row learned {lr['ll_learned']:.4f}, true "
              f"{lr['ll_true']:.4f}, uniform start {lr['ll_uniform']:.4f}")
    print("== targets")
    print_targets(res["targets"])


def _pgmpy_line(r: dict[str, Any]) -> None:
    est = r.get("full_kernel_estimate")
    full = f"full kernel {r['full_kernel_entries']:.3g} entries"
    if est:
        full += (f" (building it: ~{est['seconds']:.3g} s, ~{est['bytes']:.3g} bytes at the "
                 f"rate measured on {est['rate_from']})")
    print(f"  {r['network']:<10} {r['variables']:>3} vars, {r['mode']}; {full}")
    if "skipped" in r:
        print(f"    skipped: {r['skipped']}")
        return
    b = r["bidlab"]
    print(f"    pgmpy: set-up {r['peer_setup_s']:.3f} s, {r['peer_samples']:,} samples in "
          f"{r['peer_sample_s']:.1f} s ({r['peer_node_draws_per_s']:.3g} node draws/s), "
          f"max |error| {r['peer_error']:.4f}")
    print(f"    bidlab: {b['error']:.4f} in {b['seconds']:.3f} s "
          f"({b['node_draws_per_s']:.3g} node draws/s, {b['chains']} chains, 50 + {b['kept']} "
          f"sweeps, best of 3): x{r['time_ratio']:.0f} time with set-up, "
          f"x{r['time_ratio_sampling']:.0f} without; x{r['draws_per_s_ratio']:.0f} draws/s")
