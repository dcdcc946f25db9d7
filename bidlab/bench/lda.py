"""``python -m bidlab.bench lda [--json] [--quick] [--gpu]``: LDA three ways against its peers.

In one process and one run, on each corpus (KOS, 20 Newsgroups train split, a synthetic
20k-document corpus; 10% of each corpus's documents held out, K=64):

* bidlab ``LDA`` online VB, ``LDA`` batch VB and ``LDAGibbs`` (SAME, m=100);
* scikit-learn ``LatentDirichletAllocation`` online and batch, gensim ``LdaModel`` and
  tomotopy ``LDAModel`` (2 threads), each with its default training schedule (tomotopy:
  the 100 iterations of its README's example) and the same priors (alpha=0.1, beta=0.01).

Every method's normalised topic-word matrix is scored by ONE evaluator,
:func:`bidlab.models.lda.common.heldout_loglik` (document completion). Each row gives
the training wall time, tokens/s (training tokens x passes / s), the final held-out per-word
log-likelihood and log-likelihood against training time at checkpoints (every pass; every
10 iterations for tomotopy; every chunk for gensim), evaluation time excluded. For bidlab
it also gives the core's allocations per minibatch after the first pass.

Targets (printed as measured ratios, never asserted):

* online VB reaches scikit-learn online's final log-likelihood in <= 1/10 of its time and
  gensim's in <= 1/5 of its time;
* SAME Gibbs reaches tomotopy's final log-likelihood in <= 1/2 of tomotopy's time and ends
  better than online VB;
* zero allocations per minibatch after warm-up.

Before any timing, each bidlab method is fitted once on a tiny corpus so that numba's
one-time compilation is not counted (:func:`warm_up`; its time is reported).

``--gpu`` adds a synthetic ~100M-token corpus at K=256 on the GPU: seconds per pass of
online VB and of Gibbs with m=100 (targets <= 1 s and <= 2 s).

The machine's cores are shared: timings are of one run, on whatever the machine had free.
Progress lines go to stderr; with ``--json`` stdout holds only the JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.bench._common import emit, log, machine, print_corpora, require_gpu, target
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda.common import heldout_loglik

ALPHA = 0.1
BETA = 0.01
K = 64

# ----------------------------------------------------------------------------- data


def split_docs(X: sp.csr_matrix, frac: float = 0.1, seed: int = 0):
    """(train, test): a random ``frac`` of the non-empty documents is held out; the training
    documents come in a random order (20 Newsgroups is stored sorted by newsgroup, which
    would hand every online method a drifting stream)."""
    X = sp.csr_matrix(X, dtype=np.float32)
    keep = np.flatnonzero(np.diff(X.indptr) > 0)
    rng = np.random.default_rng(seed)
    test = np.sort(rng.choice(keep, size=max(1, int(round(frac * keep.shape[0]))), replace=False))
    train = rng.permutation(np.setdiff1d(keep, test))
    return X[train], X[test]


def load_corpora(quick: bool, names: list[str]) -> Iterator[tuple[str, Any]]:
    """(name, Corpus) for each requested corpus that can be loaded here."""
    from bidlab import datasets

    for name in names:
        try:
            if name == "kos":
                corpus = datasets.load_kos()
            elif name == "20news":
                corpus = datasets.load_20newsgroups(subset="train")
            elif name == "synthetic":
                n = 2000 if quick else 20000
                corpus = datasets.synthetic_lda_corpus(
                    n_docs=n, n_words=10000, k=K, doc_len=(50, 200), alpha=ALPHA, seed=0
                )
            else:
                raise ValueError(f"unknown corpus {name!r}")
        except (FileNotFoundError, OSError) as exc:
            yield name, exc
            continue
        if quick and name != "synthetic":
            corpus.X = corpus.X[: min(corpus.X.shape[0], 1500)]
        yield name, corpus


# ----------------------------------------------------------------------------- rows


def _time_to_reach(checkpoints: list[tuple[float, float]], target: float) -> float | None:
    """Training time at the first checkpoint whose log-likelihood is >= target."""
    for t, ll in checkpoints:
        if ll >= target:
            return t
    return None


def _row(system: str, wall: float, tokens: float, checkpoints, **extra: Any) -> dict:
    return {
        "system": system,
        "wall_s": round(wall, 3),
        "tokens_per_s": round(tokens / wall) if wall > 0 else None,
        "heldout_loglik": round(checkpoints[-1][1], 5),
        "checkpoints": [[round(t, 3), round(ll, 5)] for t, ll in checkpoints],
        **extra,
    }


def run_bidlab(system: str, model: Any, Xtr, Xte, per_pass: int = 4) -> dict:
    """Train with the estimator's ``fit_passes`` (its learner), scoring ``per_pass`` times
    a pass (scoring time excluded); also counts the core's allocations in the passes after
    the first."""
    tokens = float(Xtr.sum())
    checkpoints, wall, allocs_after_first = [], 0.0, 0
    batches_after_first = 0
    batch = model.batch_size if model.batch_size else 512
    every = max(1, math.ceil(Xtr.shape[0] / batch / per_pass))
    it = model.fit_passes(Xtr, every)
    b0 = p0 = 0
    while True:
        a0 = backend.allocations.snapshot()[0]
        t0 = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        wall += time.perf_counter() - t0
        if p0 >= 1:
            allocs_after_first += backend.allocations.snapshot()[0] - a0
            batches_after_first += model.n_batches_ - b0
        b0, p0 = model.n_batches_, model.n_passes_done_
        checkpoints.append((wall, heldout_loglik(model.components_, Xte, ALPHA)))
    return _row(
        system,
        wall,
        tokens * model.n_passes_done_,
        checkpoints,
        passes=model.n_passes_done_,
        allocations_per_minibatch_after_first_pass=(
            allocs_after_first / batches_after_first if batches_after_first else None
        ),
    )


def run_sklearn(method: str, Xtr, Xte) -> dict:
    """scikit-learn's own fit loop (max_iter=10), replicated to score between iterations."""
    from sklearn.decomposition import LatentDirichletAllocation

    lda = LatentDirichletAllocation(
        n_components=K,
        doc_topic_prior=ALPHA,
        topic_word_prior=BETA,
        learning_method=method,
        random_state=0,
    )
    X = sp.csr_matrix(Xtr, dtype=np.float64)
    n = X.shape[0]
    t0 = time.perf_counter()
    lda._check_params() if hasattr(lda, "_check_params") else None
    lda._init_latent_vars(X.shape[1], dtype=X.dtype)
    wall = time.perf_counter() - t0
    checkpoints = []
    for _ in range(lda.max_iter):
        t0 = time.perf_counter()
        if method == "online":
            for lo in range(0, n, lda.batch_size):
                lda._em_step(
                    X[lo : lo + lda.batch_size], total_samples=n, batch_update=False, parallel=None
                )
        else:
            lda._em_step(X, total_samples=n, batch_update=True, parallel=None)
        lda.n_iter_ += 1
        wall += time.perf_counter() - t0
        checkpoints.append((wall, heldout_loglik(lda.components_, Xte, ALPHA)))
    # fit() ends with an E-step over the training set for its bound: part of its time
    t0 = time.perf_counter()
    distr, _ = lda._e_step(X, cal_sstats=False, random_init=False, parallel=None)
    lda._perplexity_precomp_distr(X, distr, sub_sampling=False)
    wall += time.perf_counter() - t0
    checkpoints[-1] = (wall, checkpoints[-1][1])
    return _row(f"sklearn {method}", wall, float(X.sum()) * lda.max_iter, checkpoints,
                passes=lda.max_iter)


def run_gensim(Xtr, Xte) -> dict:
    """gensim LdaModel's default single pass (chunksize 2000), scored after every chunk."""
    import gensim
    from gensim.matutils import Sparse2Corpus

    chunk = 2000
    t0 = time.perf_counter()
    lda = gensim.models.LdaModel(
        num_topics=K, id2word={i: str(i) for i in range(Xtr.shape[1])}, alpha=ALPHA,
        eta=BETA, random_state=0, chunksize=chunk,
    )
    wall = time.perf_counter() - t0
    checkpoints = []
    for lo in range(0, Xtr.shape[0], chunk):
        part = list(Sparse2Corpus(Xtr[lo : lo + chunk], documents_columns=False))
        t0 = time.perf_counter()
        lda.update(part, chunks_as_numpy=False)
        wall += time.perf_counter() - t0
        checkpoints.append((wall, heldout_loglik(lda.get_topics(), Xte, ALPHA)))
    return _row("gensim", wall, float(Xtr.sum()), checkpoints, passes=1)


def run_tomotopy(Xtr, Xte, iterations: int = 100, workers: int = 2) -> dict:
    """tomotopy LDAModel: its README's 100 iterations in steps of 10, 2 worker threads."""
    import tomotopy as tp

    vocab = [f"w{j}" for j in range(Xtr.shape[1])]
    mdl = tp.LDAModel(k=K, alpha=ALPHA, eta=BETA, seed=0)
    for d in range(Xtr.shape[0]):
        lo, hi = Xtr.indptr[d], Xtr.indptr[d + 1]
        words = np.repeat(Xtr.indices[lo:hi], Xtr.data[lo:hi].astype(np.int64))
        mdl.add_doc([vocab[w] for w in words])
    index = {w: j for j, w in enumerate(vocab)}

    def components() -> np.ndarray:
        cols = np.array([index[w] for w in mdl.used_vocabs])
        comp = np.empty((K, Xtr.shape[1]))
        for t in range(K):
            row = np.asarray(mdl.get_topic_word_dist(t))
            comp[t] = row.min()  # unseen words: the smoothed probability of a zero count
            comp[t, cols] = row
        return comp

    wall, checkpoints = 0.0, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for done in range(10, iterations + 1, 10):
            t0 = time.perf_counter()
            mdl.train(10, workers=workers)
            wall += time.perf_counter() - t0
            checkpoints.append((wall, heldout_loglik(components(), Xte, ALPHA)))
            del done
    return _row(f"tomotopy ({workers} threads)", wall, float(Xtr.sum()) * iterations,
                checkpoints, passes=iterations)


# ----------------------------------------------------------------------------- targets


def bidlab_models(n_docs: int, quick: bool) -> dict[str, Callable[[], Any]]:
    """The three bidlab trainers with the benchmark's settings (defaults plus passes)."""
    del n_docs
    passes_online = 3 if quick else 6
    return {
        "bidlab online VB": lambda: LDA(K, "online", alpha=ALPHA, beta=BETA,
                                        n_passes=passes_online),
        "bidlab batch VB": lambda: LDA(K, "batch", alpha=ALPHA, beta=BETA,
                                       n_passes=10 if quick else 40),
        "bidlab SAME Gibbs": lambda: LDAGibbs(K, 100, alpha=ALPHA, beta=BETA,
                                              n_passes=3 if quick else 6),
    }


def warm_up() -> float:
    """Fit each bidlab method once on a tiny corpus, so that numba's compilation (once per
    install, cached on disk afterwards) is not timed as training: the peers are compiled
    C/C++ and pay no such cost. Returns the seconds it took."""
    from bidlab import datasets

    t0 = time.perf_counter()
    tiny = datasets.synthetic_lda_corpus(n_docs=300, n_words=400, k=8, seed=1).X
    for make in bidlab_models(tiny.shape[0], quick=True).values():
        model = make()
        model.n_passes = 1
        model.fit(tiny)
    return time.perf_counter() - t0


def targets(rows: dict[str, dict]) -> list[dict[str, Any]]:
    """The speed targets as measured ratios (time to reach a peer's LL / the peer's time),
    Gibbs's final LL against online VB's, and allocations per minibatch after warm-up."""
    out: list[dict[str, Any]] = []

    def ratio(ours: str, peer: str, limit: float) -> None:
        if ours not in rows or peer not in rows:
            return
        goal = rows[peer]["heldout_loglik"]
        reach = _time_to_reach(rows[ours]["checkpoints"], goal)
        value = None if reach is None else round(reach / rows[peer]["wall_s"], 4)
        out.append(target(f"{ours} to reach {peer}", value, limit, at_most=True,
                          peer_loglik=goal, peer_wall_s=rows[peer]["wall_s"],
                          time_to_reach_s=reach))

    ratio("bidlab online VB", "sklearn online", 0.1)
    ratio("bidlab online VB", "gensim", 0.2)
    ratio("bidlab SAME Gibbs", "tomotopy (2 threads)", 0.5)
    g, o = rows.get("bidlab SAME Gibbs"), rows.get("bidlab online VB")
    if g and o:
        out.append(target("Gibbs ends better than online VB (LL difference)",
                          g["heldout_loglik"] - o["heldout_loglik"], 0.0,
                          gibbs=g["heldout_loglik"], online=o["heldout_loglik"]))
    allocs = {
        name: r.get("allocations_per_minibatch_after_first_pass")
        for name, r in rows.items() if name.startswith("bidlab")
    }
    measured = [a for a in allocs.values() if a is not None]
    out.append(target("zero allocations per minibatch after warm-up",
                      max(measured, default=0), 0, at_most=True, per_method=allocs))
    return out


def bench_corpus(name: str, corpus: Any, quick: bool, peers: set[str]) -> dict:
    Xtr, Xte = split_docs(corpus.X)
    info = {
        "train_docs": int(Xtr.shape[0]), "test_docs": int(Xte.shape[0]),
        "vocabulary": int(Xtr.shape[1]), "train_tokens": int(Xtr.sum()),
        "test_tokens": int(Xte.sum()),
        "uniform_loglik": round(-math.log(Xtr.shape[1]), 5),
    }
    rows: dict[str, dict] = {}
    for system, make in bidlab_models(Xtr.shape[0], quick).items():
        rows[system] = run_bidlab(system, make(), Xtr, Xte)
        _progress(name, rows[system])
    runners: list[tuple[str, Callable[[], dict]]] = [
        ("sklearn", lambda: run_sklearn("online", Xtr, Xte)),
        ("sklearn", lambda: run_sklearn("batch", Xtr, Xte)),
        ("gensim", lambda: run_gensim(Xtr, Xte)),
        ("tomotopy", lambda: run_tomotopy(Xtr, Xte, 30 if quick else 100)),
    ]
    for peer, run in runners:
        if peer not in peers:
            continue
        try:
            row = run()
        except ImportError as exc:
            row = {"system": peer, "skipped": f"not installed: {exc}"}
        rows[row["system"]] = row
        _progress(name, row)
    return {"corpus": name, **info, "rows": list(rows.values()), "targets": targets(rows)}


def _progress(name: str, row: dict) -> None:
    if os.environ.get("BIDLAB_BENCH_QUIET"):
        return
    if "skipped" in row:
        log(f"# {name}: {row['system']} skipped ({row['skipped']})")
        return
    log(f"# {name}: {row['system']:<22} {row['wall_s']:8.2f} s  LL {row['heldout_loglik']:.4f}")


# ----------------------------------------------------------------------------- GPU


def bench_gpu(tokens: float = 1e8, k: int = 256, passes: int = 2) -> dict:
    """Seconds per pass on a synthetic ~``tokens``-token corpus at K=``k`` on the GPU."""
    from bidlab import datasets

    if not backend.gpu_available():
        return {"skipped": "no GPU (CuPy with a CUDA device) here"}
    cp = backend.cupy()
    doc_len = 200
    n_docs = int(tokens // doc_len)
    t0 = time.perf_counter()
    corpus = datasets.synthetic_lda_corpus(
        n_docs=n_docs, n_words=50000, k=k, doc_len=(doc_len // 2, 3 * doc_len // 2),
        alpha=ALPHA, seed=0,
    )
    gen_s = time.perf_counter() - t0
    X = backend.to_device(corpus.X)
    out: dict[str, Any] = {
        "docs": n_docs, "tokens": int(corpus.X.sum()), "nnz": int(corpus.X.nnz), "k": k,
        "generate_s": round(gen_s, 1),
    }
    for system, model in (
        ("online VB", LDA(k, "online", batch_size=16384, n_passes=passes, warm_docs=False)),
        ("SAME Gibbs m=100", LDAGibbs(k, 100, anneal="constant", batch_size=16384,
                                      n_passes=passes, warm_docs=False)),
    ):
        times = []
        steps = model.fit_passes(X)
        while True:
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            try:
                next(steps)
            except StopIteration:
                break
            cp.cuda.Device().synchronize()
            times.append(time.perf_counter() - t0)
        out[system] = {"seconds_per_pass": [round(t, 3) for t in times],
                       "note": "the first pass includes setup (copy, k-means start, compiles)",
                       "target_s": 1.0 if system == "online VB" else 2.0}
    return out


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bidlab.bench lda", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--quick", action="store_true", help="small corpora and fewer passes")
    ap.add_argument("--corpora", default="kos,20news,synthetic",
                    help="comma-separated: kos, 20news, synthetic")
    ap.add_argument("--peers", default="sklearn,gensim,tomotopy",
                    help="comma-separated peers to run (empty: none)")
    ap.add_argument("--gpu", action="store_true", help="add the 100M-token GPU benchmark")
    args = ap.parse_args(argv)
    require_gpu(ap, args.gpu)
    peers = {p for p in args.peers.split(",") if p}
    note = "other work may have run on the machine at the same time"
    result: dict[str, Any] = {"benchmark": "lda", "k": K, "alpha": ALPHA, "beta": BETA,
                              "machine": machine(note=note), "corpora": []}
    result["warm_up_s"] = round(warm_up(), 2)
    log(f"# warm-up (numba compilation, untimed): {result['warm_up_s']} s")
    for name, corpus in load_corpora(args.quick, args.corpora.split(",")):
        if isinstance(corpus, Exception):
            result["corpora"].append({"corpus": name, "skipped": str(corpus)})
            continue
        result["corpora"].append(bench_corpus(name, corpus, args.quick, peers))
    if args.gpu:
        result["gpu"] = bench_gpu()
    return emit(result, args.json, _print)


def _system_line(r: dict) -> str:
    if "skipped" in r:
        return f"  {r['system']:<24} skipped: {r['skipped']}"
    return (f"  {r['system']:<24} {r['wall_s']:8.2f} s {r['tokens_per_s'] or 0:>12,} tok/s"
            f"  held-out LL {r['heldout_loglik']:.4f}")


def _print(result: dict) -> None:
    print_corpora(result["corpora"], lambda c: f"{c['train_docs']} train / {c['test_docs']}"
                  f" test docs, V={c['vocabulary']}, {c['train_tokens']} train tokens, "
                  f"uniform LL {c['uniform_loglik']}", "rows", _system_line)
    if "gpu" in result:
        print(f"\nGPU: {json.dumps(result['gpu'], default=str)}")
