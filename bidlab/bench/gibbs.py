"""``python -m bidlab.bench gibbs [--json] [--quick] [--repeats N]``: SAME Gibbs against tomotopy.

On three corpora with different profiles -- KOS (short documents, V = 6,906), the 20
Newsgroups train split (V = 56,123) and a synthetic corpus of long documents (about 2,000
tokens each) -- with 10 % of each corpus's documents held out and K = 64:

* tomotopy ``LDAModel`` (2 worker threads) runs 200 sweeps, scored every 10;
* bidlab ``LDAGibbs`` runs with its default settings (the same priors alpha = 0.1,
  beta = 0.01), scored 4 times a pass.

The figure is the time bidlab takes to reach tomotopy's held-out log-likelihood after its
200 sweeps, divided by tomotopy's time (target <= 0.4 on every corpus). Both are scored by
:func:`bidlab.models.lda.common.heldout_loglik`, scoring time excluded. The two systems
alternate which runs first, once per repeat, and each repeat's ratio is reported; the
target is checked on the worst repeat. numba's one-time compilation is done before any
timing (the serial and the threaded sampler).

``--quick`` takes small slices of the corpora and 40 tomotopy sweeps (a smoke run).
Progress lines go to stderr; with ``--json`` stdout holds only the JSON object.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from bidlab.bench._common import emit, log, machine, print_corpora, target
from bidlab.bench.lda import ALPHA, BETA, K, _time_to_reach, run_bidlab, run_tomotopy, split_docs
from bidlab.kern import lda_sampler
from bidlab.models import LDAGibbs

CORPORA = ("kos", "20news", "long")
SWEEPS = 200
LIMIT = 0.4


def load(name: str, quick: bool) -> Any:
    """The corpus's documents x vocabulary counts (CSR)."""
    from bidlab import datasets

    if name == "kos":
        X = datasets.load_kos().X
    elif name == "20news":
        X = datasets.load_20newsgroups(subset="train").X
    elif name == "long":
        n = 40 if quick else 1500
        X = datasets.synthetic_lda_corpus(n_docs=n, n_words=20000, k=K, doc_len=(1500, 2500),
                                          alpha=ALPHA, seed=0).X
    else:
        raise ValueError(f"unknown corpus {name!r}; choose from {', '.join(CORPORA)}")
    if quick and name != "long":
        X = X[: min(X.shape[0], 300)]
    return X


def warm_up() -> float:
    """Fit LDAGibbs on a tiny corpus with the serial and the threaded sampler, so that
    numba's compilation is not timed. Returns the seconds it took."""
    from bidlab import datasets

    t0 = time.perf_counter()
    tiny = datasets.synthetic_lda_corpus(n_docs=300, n_words=400, k=8, seed=1).X
    saved = lda_sampler.PARALLEL_MIN_PAIRS
    try:
        for threshold in (saved, 0):
            lda_sampler.PARALLEL_MIN_PAIRS = threshold
            LDAGibbs(8, n_passes=1).fit(tiny)
    finally:
        lda_sampler.PARALLEL_MIN_PAIRS = saved
    return time.perf_counter() - t0


def bench_corpus(name: str, X: Any, sweeps: int, repeats: int) -> dict[str, Any]:
    """Alternate tomotopy and bidlab ``repeats`` times on one corpus."""
    Xtr, Xte = split_docs(X)
    lengths = np.asarray(Xtr.sum(axis=1)).ravel()
    info = {"corpus": name, "train_docs": int(Xtr.shape[0]), "test_docs": int(Xte.shape[0]),
            "vocabulary": int(Xtr.shape[1]), "train_tokens": int(lengths.sum()),
            "tokens_per_doc": round(float(lengths.mean()), 1), "nnz": int(Xtr.nnz)}
    runs = []
    for rep in range(repeats):
        first_tomotopy = rep % 2 == 0
        rows: dict[str, dict] = {}
        for system in (("tomotopy", "bidlab") if first_tomotopy else ("bidlab", "tomotopy")):
            load_before = os.getloadavg()[0]
            if system == "tomotopy":
                rows[system] = run_tomotopy(Xtr, Xte, sweeps)
            else:
                rows[system] = run_bidlab("bidlab SAME Gibbs",
                                          LDAGibbs(K, alpha=ALPHA, beta=BETA), Xtr, Xte)
            rows[system]["load_before"] = round(load_before, 2)
        goal = rows["tomotopy"]["heldout_loglik"]
        reach = _time_to_reach(rows["bidlab"]["checkpoints"], goal)
        ratio = None if reach is None else round(reach / rows["tomotopy"]["wall_s"], 4)
        run = {"repeat": rep, "first": "tomotopy" if first_tomotopy else "bidlab",
               "tomotopy_s": rows["tomotopy"]["wall_s"], "tomotopy_loglik": goal,
               "bidlab_s": rows["bidlab"]["wall_s"],
               "bidlab_loglik": rows["bidlab"]["heldout_loglik"],
               "time_to_reach_s": reach, "ratio": ratio, "rows": rows}
        runs.append(run)
        log(f"# {name} repeat {rep}: tomotopy {run['tomotopy_s']:.2f} s LL {goal:.4f}; bidlab "
            f"{run['bidlab_s']:.2f} s LL {run['bidlab_loglik']:.4f}; reached in "
            f"{reach if reach is None else round(reach, 2)} s -> ratio {ratio}")
    ratios = [r["ratio"] for r in runs]
    worst = None if None in ratios else max(ratios)
    return {**info, "runs": runs, "ratios": ratios,
            "targets": [target(f"{name}: bidlab reaches tomotopy's {sweeps}-sweep LL "
                               f"(worst of {repeats})", worst, LIMIT, at_most=True)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bidlab.bench gibbs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--quick", action="store_true", help="small corpora, 40 tomotopy sweeps")
    ap.add_argument("--corpora", default=",".join(CORPORA),
                    help=f"comma-separated: {', '.join(CORPORA)}")
    ap.add_argument("--repeats", type=int, default=None,
                    help="alternated repeats per corpus (default 3; --quick 1)")
    args = ap.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    if repeats < 1:
        ap.error(f"--repeats must be >= 1; got {repeats}")
    sweeps = 40 if args.quick else SWEEPS
    try:
        import tomotopy  # noqa: F401
    except ImportError as exc:
        result: dict[str, Any] = {"benchmark": "gibbs", "skipped": f"tomotopy: {exc}"}
        return emit(result, args.json, lambda r: print(f"skipped: {r['skipped']}"))
    result = {"benchmark": "gibbs", "k": K, "alpha": ALPHA, "beta": BETA,
              "tomotopy_sweeps": sweeps, "tomotopy_workers": 2,
              "machine": machine(note="other work may have run on the machine at the same "
                                 "time; load_before is the 1-minute load average"),
              "warm_up_s": round(warm_up(), 2), "corpora": []}
    for name in args.corpora.split(","):
        try:
            X = load(name, args.quick)
        except (FileNotFoundError, OSError) as exc:
            result["corpora"].append({"corpus": name, "skipped": str(exc)})
            continue
        result["corpora"].append(bench_corpus(name, X, sweeps, repeats))
    return emit(result, args.json, _print)


def _print(result: dict[str, Any]) -> None:
    print(f"SAME Gibbs (defaults) vs tomotopy ({result['tomotopy_sweeps']} sweeps, 2 threads),"
          f" K={result['k']}: time to reach tomotopy's held-out LL / tomotopy's time")
    print_corpora(result["corpora"], lambda c: f"{c['train_docs']} docs, "
                  f"V={c['vocabulary']}, {c['tokens_per_doc']} tokens/doc", "runs", _run_line)


def _run_line(r: dict[str, Any]) -> str:
    reach = r["time_to_reach_s"]
    return (f"  repeat {r['repeat']} ({r['first']} first): tomotopy {r['tomotopy_s']:.2f} s"
            f" LL {r['tomotopy_loglik']:.4f} | bidlab reaches it in "
            f"{'never' if reach is None else f'{reach:.2f} s'} (ends {r['bidlab_s']:.2f} s"
            f" LL {r['bidlab_loglik']:.4f}) | ratio {r['ratio']}")
