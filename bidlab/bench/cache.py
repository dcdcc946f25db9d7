"""``python -m bidlab.bench cache``: the LDA E-step loop with the result cache on and off.

The loop is the seed's variational E-step in BIDMach's matrix form::

    preds = sddmm(user, mm, sdata)               # model prediction at each nonzero
    unew  = user * (mm @ (sdata / preds).T) + alpha
    user <<= expdigamma(unew)                    # the safe loop update (BIDMat's <--)

It prints allocations per step after warm-up (the core's counter, and on a GPU the
cudaMalloc calls seen by a CuPy memory hook) and the cached / uncached time ratio.
Targets: 0 allocations per step after step 2; cached step <= 0.8x the uncached one.
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

import bidlab as bl
from bidlab import backend
from bidlab.bench._common import emit, machine, print_targets, target


def make_minibatch(docs: int, vocab: int, nnz_per_doc: int, seed: int) -> sp.csr_matrix:
    """A docs x vocab count matrix with Zipf-like word popularity (power-law columns)."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = 1.0 / ranks
    p /= p.sum()
    cols = rng.choice(vocab, size=docs * nnz_per_doc, p=p)
    rows = np.repeat(np.arange(docs), nnz_per_doc)
    counts = rng.integers(1, 4, size=rows.shape[0]).astype(np.float32)
    x = sp.csr_matrix((counts, (rows, cols)), shape=(docs, vocab))
    x.sum_duplicates()
    return x


class EStep:
    """The E-step state: model ``mm`` (k x vocab), doc-topic ``user`` (k x docs), alpha."""

    def __init__(self, x: sp.csr_matrix, k: int, device: str, seed: int = 0) -> None:
        docs, vocab = x.shape
        rng = np.random.default_rng(seed)
        mm = np.asfortranarray(rng.random((k, vocab), dtype=np.float32) + 0.1)
        user = np.asfortranarray(rng.random((k, docs), dtype=np.float32) + 0.1)
        if device == "gpu":
            self.sdata = bl.SMat(backend.to_device(x))
            self.mm, self.user = bl.Mat(backend.to_device(mm)), bl.Mat(backend.to_device(user))
        else:
            self.sdata, self.mm, self.user = bl.SMat(x), bl.Mat(mm), bl.Mat(user)
        self.user0 = self.user.data.copy()
        self.alpha = bl.scalar(0.1, device=device)

    def reset(self) -> None:
        self.user.data[...] = self.user0

    def step(self) -> None:
        preds = bl.sddmm(self.user, self.mm, self.sdata)
        unew = self.user * bl.dense_sparse_t(self.mm, self.sdata / preds) + self.alpha
        self.user <<= bl.expdigamma(unew)


class _MallocCounter:
    """Counts cudaMalloc calls through CuPy's memory hooks (GPU only)."""

    def __init__(self) -> None:
        from cupy.cuda import memory_hook

        outer = self

        class Hook(memory_hook.MemoryHook):
            name = "bidlab_count"

            def malloc_preprocess(self, **kwargs: Any) -> None:
                outer.count += 1

        self.count = 0
        self.hook = Hook()


def _sync(device: str) -> None:
    if device == "gpu":
        backend.cupy().cuda.Device().synchronize()


def run_loop(est: EStep, steps: int, cached: bool, device: str) -> dict[str, Any]:
    """Time ``steps`` E-steps; record the core's allocations per step."""
    est.reset()
    bl.clear_cache()
    allocs, times, mallocs = [], [], []
    counter = _MallocCounter() if device == "gpu" else None
    with bl.caching(cached):
        for _ in range(steps):
            before = backend.allocations.snapshot()[0]
            m0 = counter.count if counter else 0
            _sync(device)
            t0 = time.perf_counter()
            if counter:
                with counter.hook:
                    est.step()
            else:
                est.step()
            _sync(device)
            times.append(time.perf_counter() - t0)
            allocs.append(backend.allocations.snapshot()[0] - before)
            mallocs.append((counter.count - m0) if counter else None)
    steady = times[2:]
    return {
        "cached": cached,
        "allocations_per_step": allocs,
        "allocations_after_step2": int(sum(allocs[2:])),
        "cuda_mallocs_after_step2": None if counter is None else int(sum(mallocs[2:])),
        "median_step_s": float(np.median(steady)),
        "cache": bl.cache_stats(),
    }


def paired_ratio(x: sp.csr_matrix, k: int, device: str, pairs: int) -> dict[str, Any]:
    """Cached / uncached step time measured in back-to-back pairs.

    Two identical E-step states step alternately, one with the cache on and one off (the
    order flips every pair), so a change of machine load hits both sides of a pair alike;
    the median of the per-pair ratios is robust to the load drifting during the run.
    """
    on, off = EStep(x, k, device), EStep(x, k, device)
    bl.clear_cache()
    ratios, t_on, t_off = [], [], []
    faults = {True: 0, False: 0}

    def timed(est: EStep, cached: bool) -> float:
        with bl.caching(cached):
            _sync(device)
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            est.step()
            _sync(device)
            dt = time.perf_counter() - t0
            faults[cached] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            return dt

    for i in range(pairs + 2):
        if i % 2:
            a, b = timed(on, True), timed(off, False)
        else:
            b, a = timed(off, False), timed(on, True)
        if i == 1:
            faults[True] = faults[False] = 0
        if i >= 2:  # the first two pairs fill the cache and warm the allocator
            ratios.append(a / b)
            t_on.append(a)
            t_off.append(b)
    return {
        "pairs": pairs,
        "median_ratio": float(np.median(ratios)),
        "ratio_quartiles": [float(q) for q in np.percentile(ratios, [25, 75])],
        "median_cached_s": float(np.median(t_on)),
        "median_uncached_s": float(np.median(t_off)),
        # page faults are what an allocation costs on a CPU once the allocator recycles
        "minor_page_faults_per_step_cached": faults[True] / pairs,
        "minor_page_faults_per_step_uncached": faults[False] / pairs,
    }


def workload_args(ap: argparse.ArgumentParser, steps: int, steps_help: str | None = None
                  ) -> None:
    """The E-step workload's options (minibatch shape, k, minibatches per round, device,
    ``--json``), shared with ``python -m bidlab.bench learner``."""
    ap.add_argument("--docs", type=int, default=4096, help="documents per minibatch")
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--nnz-per-doc", type=int, default=100)
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--steps", type=int, default=steps, help=steps_help)


def device_args(ap: argparse.ArgumentParser) -> None:
    """``--device`` and ``--json``, the options that end both benchmarks' lists."""
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--json", action="store_true", help="print one JSON object")


def workload(args: argparse.Namespace) -> tuple[Any, EStep]:
    """The minibatch and its E-step for :func:`workload_args`' parsed options."""
    x = make_minibatch(args.docs, args.vocab, args.nnz_per_doc, seed=0)
    return x, EStep(x, args.k, args.device)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bidlab.bench cache", description=__doc__)
    workload_args(ap, steps=30)
    device_args(ap)
    args = ap.parse_args(argv)

    x, est = workload(args)
    run_loop(est, 3, True, args.device)  # compile kernels before timing anything
    # interleave cached / uncached rounds so machine noise hits both alike
    rounds = [(run_loop(est, args.steps, True, args.device),
               run_loop(est, args.steps, False, args.device)) for _ in range(3)]
    cached = min((r[0] for r in rounds), key=lambda r: r["median_step_s"])
    uncached = min((r[1] for r in rounds), key=lambda r: r["median_step_s"])
    paired = paired_ratio(x, args.k, args.device, args.steps)
    ratio = cached["median_step_s"] / uncached["median_step_s"]
    out = {
        "benchmark": "cache",
        "machine": machine(),
        "device": args.device,
        "shape": {"docs": args.docs, "vocab": args.vocab, "nnz": int(x.nnz), "k": args.k},
        "cached": cached,
        "uncached": uncached,
        "time_ratio_cached_over_uncached": ratio,
        "paired": paired,
        "targets": [
            target("allocations per step after step 2, cached",
                   cached["allocations_after_step2"], 0, at_most=True),
            target("cached / uncached step time", ratio, 0.8, at_most=True),
        ],
    }
    return emit(out, args.json, print_report)


def print_report(out: dict[str, Any]) -> None:
    """The readable report of :func:`main`'s result."""
    shape, paired = out["shape"], out["paired"]
    print(f"E-step {shape['docs']} docs x {shape['vocab']} words, nnz={shape['nnz']}, "
          f"k={shape['k']}, device={out['device']}")
    for r in (out["cached"], out["uncached"]):
        tag = "cached  " if r["cached"] else "uncached"
        extra = "" if r["cuda_mallocs_after_step2"] is None else (
            f", cudaMalloc after step 2: {r['cuda_mallocs_after_step2']}")
        print(f"  {tag}: median step {r['median_step_s'] * 1e3:8.2f} ms, allocations "
              f"after step 2: {r['allocations_after_step2']}{extra}")
    q1, q3 = paired["ratio_quartiles"]
    print(f"  cached / uncached time, {paired['pairs']} back-to-back step pairs: median "
          f"{paired['median_ratio']:.3f} (quartiles {q1:.3f}-{q3:.3f}; "
          f"{paired['median_cached_s'] * 1e3:.2f} vs "
          f"{paired['median_uncached_s'] * 1e3:.2f} ms); minor page faults per step: "
          f"{paired['minor_page_faults_per_step_cached']:.1f} cached, "
          f"{paired['minor_page_faults_per_step_uncached']:.1f} uncached")
    print_targets(out["targets"])
