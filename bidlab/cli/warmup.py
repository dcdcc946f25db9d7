"""``bidlab warmup``: compile the CPU kernels of the common first fits into numba's disk cache.

Why: bidlab's numba kernels are compiled on first use, per specialization (value and index
dtypes, array layouts), and cached on disk (:mod:`bidlab._numba_cache`). A fresh
installation's first fit does not wait for that (:mod:`bidlab.kern.standin` runs the
kernels' numpy forms while a background process compiles them), but it runs at the numpy
forms' speed until the compiled kernels arrive, and the few kernels without such a form
(of the models warmed up here, k-means' CSR centroid sums and Hamerly bound step) still
compile in the fitting process. The LDA Gibbs sampler, ALS (``SFA``) and the
Bayesian-network sampler have numpy forms, so their first fits do not wait for the
compiler, and SFA and BayesNet are not warmed up here. So by default ``bidlab warmup``
compiles only what still stalls a first fit: the kernels that have no such form (the fits
run with every stand-in forced, :func:`bidlab.kern.standin.forced`, so the others are not
compiled). ``--all`` compiles every kernel the fits reach, so that later processes run
machine code from their first call: for a container image, a shared installation, or
timings.

The specializations a kernel needs are the ones the models call it with, so the warm-up
runs small fits of each model (LDA online and batch, LDAGibbs, GLM with each link, k-means
Lloyd and minibatch; dense and sparse input where the model takes both; float32 and
float64) and their predictions, and calls the matrix core's products with C- and
F-ordered operands. Tiny data would only take the single-threaded branches,
so each fit runs once per :data:`BRANCHES` entry, with the size thresholds that choose
between a kernel's serial, parallel and column-listed versions moved to select one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BRANCHES", "DTYPES", "MODELS", "MODEL_DTYPES", "Job", "Report", "add_arguments",
           "default_processes", "jobs", "run", "warmup", "kernels"]

DTYPES = ("float32", "float64")
MODELS = ("core", "lda", "gibbs", "glm", "kmeans")
_BIG = 1 << 62
#: threshold settings that make the size-dependent dispatch take each kernel variant:
#: (module, attribute) -> value; "serial" is what tiny inputs take anyway
BRANCHES: dict[str, dict[tuple[str, str], int]] = {
    "serial": {("bidlab.kern.cpu", "PARALLEL_MIN_WORK"): _BIG,
               ("bidlab.kern.lda_sampler", "PARALLEL_MIN_PAIRS"): _BIG},
    "parallel": {("bidlab.kern.cpu", "PARALLEL_MIN_WORK"): 0,
                 ("bidlab.kern.cpu", "LISTING_MIN_RATIO"): _BIG,
                 ("bidlab.kern.lda_sampler", "PARALLEL_MIN_PAIRS"): 0},
    "listed": {("bidlab.kern.cpu", "PARALLEL_MIN_WORK"): 0,
               ("bidlab.kern.cpu", "LISTING_MIN_RATIO"): 0,
               # GLM's L1 / L2 terms deferred whatever share of rows a minibatch touches
               ("bidlab.kern.touched", "DEFER_BELOW"): 0},
}


@dataclass(frozen=True)
class Job:
    """One warm-up step: a model family on one dtype (all :data:`BRANCHES`)."""

    name: str
    run: Callable[[], None]


@dataclass
class Report:
    """What :func:`warmup` did: per job (name, seconds, compiled, loaded) and the folders
    numba caches the kernels in."""

    rows: list[tuple[str, float, int, int]] = field(default_factory=list)
    cache_dirs: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def compiled(self) -> int:
        """Specializations compiled (and written to the cache)."""
        return sum(r[2] for r in self.rows)

    @property
    def loaded(self) -> int:
        """Specializations found in the cache already."""
        return sum(r[3] for r in self.rows)


# ----------------------------------------------------------------------------- kernels


def kernels() -> list[Any]:
    """Every disk-cached numba dispatcher of the bidlab modules imported so far."""
    from numba.core.dispatcher import Dispatcher

    from bidlab.kern.adaptive import AdaptiveKernel

    found: dict[int, Any] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("bidlab.") or module is None:
            continue
        for obj in list(vars(module).values()):
            if isinstance(obj, AdaptiveKernel):
                obj = obj.parallel
            if isinstance(obj, Dispatcher) and obj._cache.cache_path is not None:
                found[id(obj)] = obj
    return list(found.values())


def _counts() -> tuple[int, int]:
    """(compiled, loaded from the cache) summed over :func:`kernels`."""
    compiled = loaded = 0
    for d in kernels():
        stats = d.stats
        compiled += sum(stats.cache_misses.values())
        loaded += sum(stats.cache_hits.values())
    return compiled, loaded


@contextlib.contextmanager
def _branch(name: str) -> Iterator[None]:
    """Move the dispatch thresholds as :data:`BRANCHES` ``name`` says, then restore them."""
    import importlib

    saved = []
    try:
        for (module, attr), value in BRANCHES[name].items():
            mod = importlib.import_module(module)
            if not hasattr(mod, attr):
                raise AttributeError(f"bidlab warmup: {module}.{attr} is gone; update "
                                     "bidlab.cli.warmup.BRANCHES to the kernel's threshold")
            saved.append((mod, attr, getattr(mod, attr)))
            setattr(mod, attr, value)
        yield
    finally:
        for mod, attr, value in reversed(saved):
            setattr(mod, attr, value)


def _each_branch(fit: Callable[[], None]) -> None:
    for name in BRANCHES:
        with _branch(name):
            fit()


# ----------------------------------------------------------------------------- data


def _corpus(dtype: str) -> Any:
    from bidlab.datasets import synthetic_lda_corpus

    return synthetic_lda_corpus(n_docs=240, n_words=300, k=4, doc_len=(20, 40), seed=0,
                                dtype=np.dtype(dtype)).X


def _features(dtype: str, sparse: bool, n: int = 240, d: int = 24) -> Any:
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    if sparse:
        X = sp.random(n, 4 * d, density=0.1, format="csr", dtype=np.float64, random_state=rng)
        X.data += 0.5
        return X.astype(dtype)
    return rng.standard_normal((n, d)).astype(dtype)


def _targets(link: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    if link == "linear":
        return rng.standard_normal(n)
    if link == "softmax":
        return rng.integers(0, 3, n)
    return rng.integers(0, 2, n)


# ----------------------------------------------------------------------------- jobs


def _core(dtype: str) -> None:
    """The matrix core's kernels (:mod:`bidlab.kern`) with C- and F-ordered dense operands."""
    from bidlab import kern

    S = _features(dtype, sparse=True)
    m, n = S.shape
    rng = np.random.default_rng(2)

    def dense(rows: int, cols: int, order: str) -> np.ndarray:
        return np.asarray(rng.random((rows, cols)), dtype=dtype, order=order)

    def calls() -> None:
        for order in ("C", "F"):
            A = dense(6, m, order)
            kern.sddmm(A, dense(6, n, order), S)
            kern.sparse_dense(S, dense(n, 6, order))
            kern.sparse_t_dense(S, dense(m, 6, order))
            kern.dense_sparse(A, S)
            kern.dense_sparse_t(dense(6, n, order), S)
            kern.expdigamma(A)
        kern.row_sums(S)
        kern.col_sums(S)
    _each_branch(calls)



def _lda(dtype: str) -> None:
    from bidlab.models import LDA

    X = _corpus(dtype)
    for method in ("online", "batch"):
        def fit(method: str = method) -> None:
            model = LDA(5, method, n_passes=2, batch_size=64, dtype=dtype, random_state=0)
            model.fit(X)
            model.transform(X[:32])
            model.score(X[:32])
        _each_branch(fit)


def _gibbs(dtype: str) -> None:
    from bidlab.models import LDAGibbs

    X = _corpus(dtype)

    def fit() -> None:
        model = LDAGibbs(5, 100, n_passes=2, batch_size=64, dtype=dtype, random_state=0)
        model.fit(X)
        model.set_temperature(2.0, topic=0)  # heated parameters: another sampler path
        model.partial_fit(X[:64])
        model.transform(X[:32])
        model.score(X[:32])
    _each_branch(fit)


def _glm(dtype: str) -> None:
    from bidlab.models.glm import GLM, glm_sweep
    from bidlab.models.glm.links import LINKS

    for sparse in (False, True):
        X = _features(dtype, sparse)
        n = X.shape[0]

        def fit(X: Any = X, n: int = n) -> None:
            for link in LINKS:  # one target per link, the usual fit(X, y)
                y = _targets(link, n)
                GLM(link, n_passes=2, batch_size=64, random_state=0).fit(X, y).predict(X)
            Y = np.column_stack([_targets(lk, n) for lk in LINKS])  # several targets at once
            GLM(list(LINKS), n_passes=2, batch_size=64, random_state=0).fit(X, Y)
            y = _targets("softmax", n)
            glm_sweep("softmax", lrate=[0.1, 0.3], l2=[0.0, 1e-5], n_passes=2, batch_size=64,
                      random_state=0).fit(X, y)
            for updater in ("adagrad", "grad"):  # with L1 and L2 terms
                GLM("logistic", updater=updater, l1=1e-4, l2=1e-4, n_passes=2, batch_size=64,
                    random_state=0).fit(X, _targets("logistic", n))
        _each_branch(fit)


def _kmeans(dtype: str) -> None:
    from bidlab.models import KMeans

    for sparse in (False, True):
        X = _features(dtype, sparse, n=400)

        def fit(X: Any = X) -> None:
            for bounds in (True, False):
                model = KMeans(4, max_iter=4, tol=0, bounds=bounds, random_state=0).fit(X)
                model.predict(X)
                model.transform(X[:16])
            KMeans(4, algorithm="minibatch", batch_size=128, max_iter=2,
                   random_state=0).fit(X).predict(X)
            w = np.ones(X.shape[0])
            KMeans(4, max_iter=3, tol=0, random_state=0).fit(X, sample_weight=w)
        _each_branch(fit)


_JOBS: dict[str, Callable[[str], None]] = {"core": _core, "lda": _lda, "gibbs": _gibbs,
                                            "glm": _glm, "kmeans": _kmeans}
#: the dtypes warmed up by default: LDA and LDAGibbs compute in float32 unless asked
#: (``dtype=``); the others follow their input, float32 or float64
MODEL_DTYPES = {"lda": ("float32",), "gibbs": ("float32",)}
#: relative compile time of each job (the biggest start first when run in parallel)
_WEIGHT = {"glm": 5, "kmeans": 4, "gibbs": 3, "lda": 2, "core": 1}


def jobs(models: tuple[str, ...] = MODELS, dtypes: tuple[str, ...] = DTYPES) -> list[Job]:
    """The warm-up steps for ``models`` (of :data:`MODELS`) and ``dtypes``."""
    for m in models:
        if m not in _JOBS:
            raise ValueError(f"unknown model {m!r}: choose from {list(MODELS)}")
    for dt in dtypes:
        if dt not in DTYPES:
            raise ValueError(f"unknown dtype {dt!r}: choose from {list(DTYPES)}")
    return [Job(f"{m} {dt}", lambda m=m, dt=dt: _JOBS[m](dt)) for m in models for dt in dtypes]


def _run_job(model: str, dtype: str, everything: bool = False) -> tuple[str, float, int, int]:
    """Run one job in this process: (name, seconds, compiled, loaded).

    The kernels compile here, not in the background with stand-ins running meanwhile
    (:mod:`bidlab.kern.standin`): filling the cache is the job. Unless ``everything``,
    the kernels that have stand-ins run them and are not compiled."""
    from bidlab.kern import standin

    before = _counts()
    t0 = time.perf_counter()
    mode = standin.enabled(False) if everything else standin.forced()
    with warnings.catch_warnings(), mode:
        warnings.simplefilter("ignore")  # tiny data: convergence and size warnings
        _JOBS[model](dtype)
    after = _counts()
    return (f"{model} {dtype}", time.perf_counter() - t0, after[0] - before[0],
            after[1] - before[1])


def default_processes() -> int:
    """Worker processes :func:`warmup` uses by default: one per core, at most 4."""
    return max(1, min(4, os.cpu_count() or 1))


def warmup(models: tuple[str, ...] = MODELS, dtypes: tuple[str, ...] | None = None,
           echo: Callable[[str], None] | None = None, processes: int = 1,
           everything: bool = False) -> Report:
    """Run :func:`jobs`; ``echo`` gets one line per job. Returns what was compiled.

    ``everything`` False (default): only the kernels without an array-level stand-in are
    compiled (the others do not stall a first fit); True: every kernel the jobs reach.

    ``dtypes`` None: each model's :data:`MODEL_DTYPES` (the arithmetic its default
    settings use), else every model in each of ``dtypes``.

    ``processes`` > 1 runs the jobs in that many worker processes at once (numba compiles
    under the GIL, so threads would not overlap); the biggest jobs start first. A kernel
    two jobs need may then be compiled twice, once in each worker. The background compiler
    (:mod:`bidlab.kern.standin`) is off meanwhile: everything compiles in the foreground.
    """
    from bidlab.kern import standin

    jobs(models, dtypes or DTYPES)  # checks the names
    # the kernels compile in the foreground here: importing a kernel module whose cache is
    # cold would otherwise start the background compiler, which nothing here sends a job
    with standin.enabled(False):
        return _warmup(models, dtypes, echo, processes, everything)


def _warmup(models: tuple[str, ...], dtypes: tuple[str, ...] | None,
            echo: Callable[[str], None] | None, processes: int, everything: bool) -> Report:
    """:func:`warmup`, with the background compiler off."""
    from bidlab._numba_cache import cache_dir

    todo = sorted(((m, dt) for m in models for dt in (dtypes or MODEL_DTYPES.get(m, DTYPES))),
                  key=lambda job: -_WEIGHT.get(job[0], 1))
    report = Report()
    t_all = time.perf_counter()

    def done(row: tuple[str, float, int, int]) -> None:
        report.rows.append(row)
        if echo is not None:
            echo(f"  {row[0]:<16} {row[1]:7.2f} s   {row[2]:3d} compiled, {row[3]:3d} loaded "
                 "from the cache")

    if processes <= 1 or len(todo) <= 1:
        for model, dtype in todo:
            done(_run_job(model, dtype, everything))
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = multiprocessing.get_context("spawn")  # no forked numba / OpenMP state
        with ProcessPoolExecutor(min(processes, len(todo)), mp_context=ctx) as pool:
            futures = [pool.submit(_run_job, m, dt, everything) for m, dt in todo]
            try:
                for fut in as_completed(futures):
                    done(fut.result())
            except BaseException:  # Ctrl-C or a failed job: start none of those waiting
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    report.seconds = time.perf_counter() - t_all
    import bidlab.models  # noqa: F401  (every kernel module, to name the cache folders)

    report.cache_dirs = sorted({str(cache_dir(d)) for d in kernels()})
    return report


# ----------------------------------------------------------------------------- command


def _names(text: str, valid: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in names if s not in valid]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{what} {', '.join(bad) or text!r}: choose from {','.join(valid)}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``bidlab warmup``'s arguments."""
    parser.add_argument("--models", type=lambda s: _names(s, MODELS, "model"), default=MODELS,
                        help=f"comma-separated subset of {','.join(MODELS)} (default: all)")
    parser.add_argument("--dtypes", type=lambda s: _names(s, DTYPES, "dtype"), default=None,
                        help=f"comma-separated subset of {','.join(DTYPES)} (default: the "
                        "models' own: float32 for lda and gibbs, both for the others)")
    parser.add_argument("--all", action="store_true", dest="everything",
                        help="compile every kernel, also those whose numpy stand-in runs "
                        "while they compile in the background (default: only the others)")
    parser.add_argument("--processes", type=int, default=None,
                        help="worker processes compiling at once (default: one per core, "
                        "at most 4)")


def run(args: argparse.Namespace) -> int:
    """Compile, print per job what was compiled and how long it took; 0 on success."""
    processes = args.processes if args.processes is not None else default_processes()
    if processes < 1:
        print(f"bidlab warmup: --processes must be >= 1; got {processes}", file=sys.stderr)
        return 2
    dtypes = ", ".join(args.dtypes) if args.dtypes else "their default dtypes"
    which = ("every CPU kernel" if args.everything else
             "the CPU kernels without a numpy stand-in (--all: every one)")
    try:  # from the first line on: a Ctrl-C as soon as it is read lands here too
        print(f"bidlab warmup: compiling {which} for {', '.join(args.models)} in {dtypes}",
              flush=True)
        report = warmup(args.models, args.dtypes, echo=lambda line: print(line, flush=True),
                        processes=processes, everything=args.everything)
    except KeyboardInterrupt:
        print("\nbidlab warmup: interrupted; the kernels compiled so far stay in numba's "
              "cache: run bidlab warmup again to compile the rest", file=sys.stderr)
        return 130
    print(f"done in {report.seconds:.1f} s: {report.compiled} kernel specializations "
          f"compiled, {report.loaded} already cached")
    for folder in report.cache_dirs:
        print(f"numba cache: {folder}")
    return 0
