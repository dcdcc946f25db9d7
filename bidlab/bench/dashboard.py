"""``python -m bidlab.bench dashboard``: what a live dashboard in a real browser costs.

Opens ``notebooks/02_lda_live.ipynb`` in JupyterLab (127.0.0.1, token) in headless Debian
chromium, runs it (an ``LDAGibbs`` learner with a ``Dashboard`` and a ``TopicBubbles``
chart, training in the background), and in the same kernel makes a second learner with
the same data and options and no dashboard. It then alternates: the dashboard learner
trains ``--steps`` minibatches while the page renders it, then the bare learner trains
``--steps`` minibatches (the other one paused each time), for ``--rounds`` rounds, the
bare learner first in every other round (D B B D D B ...: a host drifting faster or slower
over the run favours neither). Each run's time comes from the learner's own per-minibatch
record (first to last minibatch of the window), so the ratio compares the same number of
minibatches on the same data, side by side on one machine. Besides the headline ratio
(mean rate over mean rate) it reports each round's ratio and their geometric mean with a
90 % bootstrap interval: on a shared machine one window's rate varies by more than the
effect measured, and the interval shows how uncertain round-to-round noise alone leaves a
run's figure (the host's slower drift adds to that). Target: throughput ratio >= 0.95.

The first window starts after ``--warmup`` seconds of training with the page rendering
(default 10): the page's own start-up work and the first seconds of a fresh model, whose
top words change on nearly every tick, are not steady state. ``--warmup 0`` measures from
the notebook's first minibatches (the JSON records the warm-up used).

During the dashboard windows it also counts the score chart's updates in the page while
the learner trains (first to last minibatch of each window; target 9.5/s) and measures who
used the machine's cores (``cpu_cores``: chromium's renderer and its other processes, the
Jupyter server, the whole kernel, and within it the training thread and the pump; from
the processes' CPU times: what explains a ratio below 1 on a small machine). At the end
it drags the ``kappa`` slider ``--drags`` times and reports the delay from the browser
event to the first minibatch using the new value (target p95 <= 150 ms).

``--page-only R`` adds R rounds that split the cost: a second bare learner runs in its own
process (no GIL shared with the kernel) while the dashboard learner is slowed to ~12
minibatches/s (enough for 10 updates/s) and its views alternately render into the page and
stand still. That ratio is what the page, the Jupyter server and the views' pump cost a
learner that shares only the machine with them; the main ratio adds what sharing the
kernel's process (its GIL and its sending threads) costs. ``--isolate`` gives both
learners' training threads the last core and pins chromium, the Jupyter server and the
kernel's other threads to the rest: the dashboard's cost when the browser does not share
the training core. ``--map`` adds the intertopic map (``IntertopicMap``) to the dashboard
learner's page, so its cost (the pump's placements and coherence, the page's redraws) is
in the ratio, and reports its frames per second in the kernel (target 9.5, as the score
chart's: each frame checks the topics and sends what moved by a pixel or more) and its data
changes per second in the page (fewer once the topics settle). Needs a source checkout (for the
notebook), chromium at /usr/bin/chromium, playwright and jupyterlab; the browser harness is
:mod:`bidlab.bench._browser`, and :mod:`bidlab.bench._dashboard_run` drives the page and
takes the measurements that this module turns into ratios, intervals and the report.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from bidlab.bench import _live_page as lp
from bidlab.bench._common import emit, machine, print_targets, target
from bidlab.bench._dashboard_run import core_split, run_session
from bidlab.datasets.paths import find_shared_data_dir


def measure(steps: int, rounds: int, drags: int, docs: int, data: Path | None,
            page_rounds: int = 0, warmup: float = 10.0, isolated: bool = False,
            with_map: bool = False) -> dict[str, Any]:
    """Run the benchmark (:func:`bidlab.bench._dashboard_run.run_session`) and return its
    JSON document: the windows, the ratios and their spread, the cores used, the page's
    update rate, the control delays and the targets."""
    session = run_session(steps, rounds, drags, docs, data, page_rounds, warmup, isolated,
                          with_map)
    with_dash, bare = session.with_dashboard, session.without_dashboard
    rates, lat = session.update_windows, session.control
    dash_rate = sum(r["minibatches_per_s"] for r in with_dash) / rounds
    bare_rate = sum(r["minibatches_per_s"] for r in bare) / rounds
    updates = sum(r["updates"] for r in rates)
    seconds = sum(r["seconds"] for r in rates)
    delays = lat["delays_s"]
    out = {
        "benchmark": "dashboard",
        "notebook": "notebooks/02_lda_live.ipynb",
        "data": str(data) if data else "synthetic",
        "minibatches_per_run": steps,
        "rounds": rounds,
        "warmup_s": warmup,
        "isolated": session.isolated,
        "with_dashboard": with_dash,
        "without_dashboard": bare,
        "throughput_ratio": dash_rate / bare_rate,
        **pair_ratios(with_dash, bare),
        "machine_cores": os.cpu_count(),
        "heated_parameters_both_learners": session.heated,
        "cpu_cores_with_dashboard": _mean_shares(with_dash),
        "cpu_cores_without_dashboard": _mean_shares(bare),
        "update_rate_per_s": updates / seconds if seconds else 0.0,
        "update_windows": rates,
        "control": {"option": "kappa", "drags": drags, "changes": lat["changes"],
                    "matched": len(delays), "p50_ms": lp.percentile(delays, 50) * 1e3,
                    "p95_ms": lp.percentile(delays, 95) * 1e3,
                    "max_ms": max(delays) * 1e3 if delays else None},
        "page_only": page_only_summary(session.page_only, page_rounds),
        "intertopic_map": map_summary(with_dash, rates) if with_map else None,
        "machine": machine(),
    }
    out["targets"] = [
        target("throughput with the dashboard / without", out["throughput_ratio"], 0.95),
        target("chart updates in the page per second", out["update_rate_per_s"], 9.5),
        target("control delay p95 (ms)", out["control"]["p95_ms"], 150, at_most=True),
    ]
    if with_map:
        out["targets"].append(target("intertopic map frames in the kernel per second",
                                     out["intertopic_map"]["kernel_frames_per_s"], 9.5))
    return out


def map_summary(with_dash: list[dict[str, Any]], rates: list[dict[str, Any]]
                ) -> dict[str, float]:
    """``--map``: the map's frames per second in the kernel (mean over the dashboard
    windows) and its data changes per second in the page (all windows' changes over
    their seconds)."""
    seconds = sum(r["map"]["seconds"] for r in rates)
    return {"kernel_frames_per_s": sum(w["map_frames_per_s"] for w in with_dash)
            / max(len(with_dash), 1),
            "page_updates_per_s": (sum(r["map"]["updates"] for r in rates) / seconds
                                   if seconds else 0.0)}


def page_only_summary(runs: dict[str, list[dict[str, Any]]] | None, rounds: int
                      ) -> dict[str, Any] | None:
    """The ``--page-only`` rounds' ratio: the bare learner's mean rate while the views
    render over its mean rate while they stand still (None when there were no such rounds)."""
    if runs is None:
        return None
    rate = {tag: sum(r["minibatches_per_s"] for r in rs) / rounds for tag, rs in runs.items()}
    return {"ratio": rate["rendering"] / rate["still"], "rounds": rounds, **runs}


def pair_ratios(with_dash: list[dict[str, Any]], bare: list[dict[str, Any]],
                seed: int = 0) -> dict[str, Any]:
    """Each round's ratio (its dashboard window over the adjacent bare window of the same
    round), their median, their geometric mean and a 90 % bootstrap interval of it.

    Why beside the headline ratio (mean rate over mean rate): on a shared machine the
    neighbours' load drifts over seconds, and adjacent windows share more of it than the
    run's means; the spread of the pairs shows how much of a run's figure is that drift,
    and the interval says whether a run can tell its ratio from a target a few per cent
    away. The geometric mean is the mean of a ratio's logarithm (a round at 0.5 and one at
    2.0 average to 1.0); the interval resamples the rounds (2000 times, seeded: the same
    rounds give the same interval). It counts rounds as independent; a host whose speed
    drifts over longer than a round spreads whole runs wider than that."""
    import numpy as np

    ratios = [d["minibatches_per_s"] / b["minibatches_per_s"]
              for d, b in zip(with_dash, bare, strict=True)]
    if not ratios:
        return {"pair_ratios": [], "pair_ratio_median": None, "pair_ratio_geomean": None,
                "pair_ratio_ci90": None}
    logs = np.log(np.asarray(ratios))
    interval = None  # one round says nothing about its own spread
    if len(logs) > 1:
        rng = np.random.default_rng(seed)
        means = logs[rng.integers(0, len(logs), size=(2000, len(logs)))].mean(axis=1)
        interval = [round(float(v), 4) for v in np.exp(np.percentile(means, [5.0, 95.0]))]
    return {"pair_ratios": [round(r, 4) for r in ratios],
            "pair_ratio_median": float(np.median(ratios)),
            "pair_ratio_geomean": float(np.exp(logs.mean())),
            "pair_ratio_ci90": interval}


def _mean_shares(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Average of the windows' ``cpu_cores`` (parties missing from a window count 0)."""
    keys = sorted({k for r in runs for k in r.get("cpu_cores", {})})
    return {k: round(sum(r.get("cpu_cores", {}).get(k, 0.0) for r in runs) / len(runs), 3)
            for k in keys}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bidlab.bench dashboard", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=250, help="minibatches per timed run")
    ap.add_argument("--rounds", type=int, default=16,
                    help="alternations of the two learners (more: less noise; one round's "
                         "ratio has a standard deviation of ~6 %% on a shared 2-core VM)")
    ap.add_argument("--drags", type=int, default=16, help="slider drags for the latency")
    ap.add_argument("--docs", type=int, default=2000, help="documents (MAX_DOCS)")
    ap.add_argument("--data", type=Path, default=find_shared_data_dir(),
                    help="the shared data folder (uci-kos); synthetic data when absent")
    ap.add_argument("--page-only", type=int, default=0, metavar="R",
                    help="R more rounds: a bare learner in its own process, with the views "
                         "rendering vs still (what the page alone costs)")
    ap.add_argument("--warmup", type=float, default=10.0, metavar="S",
                    help="seconds of training with the page rendering before the first "
                         "window (default 10; 0: measure from the start)")
    ap.add_argument("--isolate", action="store_true",
                    help="give both learners' training threads a core of their own (the "
                         "last one) and pin the page, the server and the kernel's other "
                         "threads to the rest: the cost of the dashboard when the browser "
                         "does not share the training core")
    ap.add_argument("--map", action="store_true",
                    help="add the intertopic map (IntertopicMap) to the dashboard learner: "
                         "its cost is then in the ratio, and its updates are counted")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    for name, least in (("steps", 2), ("rounds", 1), ("drags", 0), ("page_only", 0),
                        ("warmup", 0)):
        if getattr(args, name) < least:
            ap.error(f"--{name.replace('_', '-')} must be at least {least}; "
                     f"got {getattr(args, name)}")
    data = args.data if args.data is not None and args.data.is_dir() else None
    if args.isolate:
        try:
            core_split(sorted(os.sched_getaffinity(0)))  # fail early on a 1-core machine
        except ValueError as exc:
            ap.error(str(exc))
    try:
        out = measure(args.steps, args.rounds, args.drags, args.docs, data, args.page_only,
                      args.warmup, args.isolate, args.map)
    except LookupError as exc:
        print(f"python -m bidlab.bench dashboard: cannot run: {exc}", file=sys.stderr)
        return 2
    return emit(out, args.json, print_report)


def print_report(out: dict[str, Any]) -> None:
    """The readable report of :func:`main`'s result."""
    iso = out["isolated"]
    print(f"LDAGibbs on {out['data']}, {out['minibatches_per_run']} minibatches per run, "
          f"{out['rounds']} rounds after {out['warmup_s']:g} s of warm-up"
          + (f"; training threads on core {iso['training_cores']}, everything else on "
             f"{iso['other_cores']}" if iso else ""))
    for tag, runs in (("with dashboard", out["with_dashboard"]),
                      ("no dashboard  ", out["without_dashboard"])):
        print(f"  {tag}: " + ", ".join(f"{r['minibatches_per_s']:.1f}" for r in runs)
              + " minibatches/s")
    c = out["control"]
    print(f"  throughput ratio {out['throughput_ratio']:.3f}; rounds: "
          + ", ".join(f"{r:.3f}" for r in out["pair_ratios"])
          + f" (median {out['pair_ratio_median']:.3f}, geometric mean "
          f"{out['pair_ratio_geomean']:.3f}, 90 % interval "
          + ("-".join(f"{v:.3f}" for v in ci) if (ci := out["pair_ratio_ci90"])
             else "n/a with one round") + ")")
    for tag, key in (("with dashboard", "cpu_cores_with_dashboard"),
                     ("no dashboard  ", "cpu_cores_without_dashboard")):
        print(f"  cores used {tag}: " + ", ".join(f"{k} {v:.2f}" for k, v in out[key].items())
              + f" (of {out['machine_cores']})")
    print(f"  chart updates in the page {out['update_rate_per_s']:.2f}/s")
    if out.get("intertopic_map"):
        m = out["intertopic_map"]
        print(f"  intertopic map: {m['kernel_frames_per_s']:.2f} frames/s in the kernel, "
              f"{m['page_updates_per_s']:.2f} data changes/s in the page (visible moves only)")
    print(f"  control delay ({c['matched']} drags of {c['option']}): p50 {c['p50_ms']:.0f} ms,"
          f" p95 {c['p95_ms']:.0f} ms")
    po = out["page_only"]
    if po:
        print("  page only (bare learner in its own process): "
              + ", ".join(f"{r['minibatches_per_s']:.1f}" for r in po["rendering"])
              + " rendering vs " + ", ".join(f"{r['minibatches_per_s']:.1f}" for r in po["still"])
              + f" still: ratio {po['ratio']:.3f}")
    print_targets(out["targets"])

