"""``python -m bidlab.bench temperature [--json]``: what heating parameters costs SAME Gibbs.

Per-parameter temperatures are the thesis's handle for steering a sampler live (a click on
a bubble heats one (topic, word) parameter), so heating a few of them must not slow
training. Two ``LDAGibbs`` learners with the same data and options train in one process,
one with ``--heated`` parameters at temperature 4 (the top word of topics 0, 1, ...) and
one without; they alternate windows of ``--steps`` minibatches (the other paused), for
``--rounds`` rounds, the order flipped every round. Each window's rate comes from the
learner's own per-minibatch record. Reports minibatches/s of each and heated / plain
(target: >= 0.95; 1.0 means heating is free).

Data: UCI KOS from ``--data`` (the shared data folder) when present, else a synthetic
corpus with planted topics.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bidlab.bench._common import emit, machine, print_targets, target
from bidlab.bench._learner_windows import paused_learner, train_window
from bidlab.datasets.paths import find_shared_data_dir


def measure(steps: int, rounds: int, heated: int, docs: int, k: int,
            data: Path | None) -> dict[str, Any]:
    from bidlab.datasets import load_kos, synthetic_lda_corpus

    if data is not None:
        corpus, source = load_kos(data), "uci-kos"
    else:
        corpus, source = synthetic_lda_corpus(n_docs=docs, n_words=2000, k=k, seed=0), "synthetic"
    X = corpus.X[:docs]
    if heated > X.shape[1]:
        raise ValueError(f"--heated {heated} is more than this corpus's {X.shape[1]} words "
                         "(one heated parameter per word): ask for fewer")
    learners = {name: paused_learner(X, k) for name in ("plain", "heated")}
    hot = learners["heated"]
    top = np.asarray(hot.estimator.components_).argmax(axis=1)  # k x vocabulary
    for t in range(heated):
        hot.set_temperature(4.0, topic=t % k, word=int(top[t % k]) if t < k else t)
    runs: dict[str, list[float]] = {"plain": [], "heated": []}
    try:
        for r in range(rounds):
            for name in ("plain", "heated") if r % 2 == 0 else ("heated", "plain"):
                runs[name].append(train_window(learners[name], steps))
    finally:
        for lr in learners.values():
            lr.stop()
    mean = {name: float(np.mean(v)) for name, v in runs.items()}
    return {"benchmark": "temperature", "data": source, "docs": int(X.shape[0]), "k": k,
            "heated_parameters": int((hot.temperature != 1.0).sum()),
            "minibatches_per_run": steps, "rounds": rounds,
            "minibatches_per_s": runs, "mean_minibatches_per_s": mean,
            "heated_over_plain": mean["heated"] / mean["plain"], "machine": machine(),
            "targets": [target("heated / plain minibatches per second",
                               mean["heated"] / mean["plain"], 0.95)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bidlab.bench temperature",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300, help="minibatches per window")
    ap.add_argument("--rounds", type=int, default=6, help="windows of each learner")
    ap.add_argument("--heated", type=int, default=1, help="parameters heated (T = 4)")
    ap.add_argument("--docs", type=int, default=2000, help="documents")
    ap.add_argument("--k", type=int, default=10, help="topics")
    ap.add_argument("--data", type=Path, default=find_shared_data_dir(),
                    help="the shared data folder (uci-kos); synthetic data when absent")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    for flag in ("steps", "rounds", "docs", "k"):
        if getattr(args, flag) < (2 if flag == "steps" else 1):
            ap.error(f"--{flag} must be at least {2 if flag == 'steps' else 1}")
    if args.heated < 0:
        ap.error("--heated must be >= 0")
    data = args.data if args.data is not None and (args.data / "uci-kos").is_dir() else None
    try:
        out = measure(args.steps, args.rounds, args.heated, args.docs, args.k, data)
    except ValueError as exc:
        ap.error(str(exc))
    return emit(out, args.json, print_report)


def print_report(out: dict[str, Any]) -> None:
    """The readable report of :func:`main`'s result."""
    m = out["mean_minibatches_per_s"]
    print(f"{out['data']}, {out['docs']} documents, k={out['k']}, "
          f"{out['heated_parameters']} heated parameter(s)")
    for name in ("plain", "heated"):
        rates = ", ".join(f"{x:.1f}" for x in out["minibatches_per_s"][name])
        print(f"  {name:6s} {m[name]:7.1f} minibatches/s  ({rates})")
    print_targets(out["targets"])
