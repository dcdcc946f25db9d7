"""``python -m bidlab.bench learner [--json]``: what the learner costs on top of the model.

The model is the cached LDA E-step of ``python -m bidlab.bench cache``
(``preds = sddmm(user, mm, X); user <<= expdigamma(user * (mm @ (X / preds).T) + alpha)``).

* **overhead** -- the learner's own time per minibatch (option changes, pause / stop
  checks, the source, the record, metrics) relative to one bare cached E-step. It is
  measured directly by running the loop with a model whose update does nothing, over many
  minibatches: with a source that hands out one prebuilt minibatch (``overhead_loop``:
  the loop itself; target <= 3 %) and with a ``MemorySource`` that copies each minibatch
  into its reused containers (``overhead_with_copy``). As a cross-check,
  ``overhead_direct`` is (learner running the E-step - bare E-step) / bare E-step, which
  carries the noise of two timings of the full E-step.
* **observer throughput** -- E-step minibatches per second with a 10 Hz observer (metrics
  plus the top 10 rows of the model matrix, double-buffered host copies) relative to none;
  target >= 0.95.

Rounds alternate between the variants so machine noise hits all alike; times are the best
round's, the observer ratio is the median over rounds of back-to-back (observed, plain)
pairs run in alternating order.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

import bidlab as bl
from bidlab import backend
from bidlab.bench._common import emit, machine, print_targets, target
from bidlab.bench.cache import EStep, device_args, workload, workload_args
from bidlab.learn import Learner, MemorySource, Model, Updater
from bidlab.learn.datasource import DataSource
from bidlab.learn.staging import Minibatch


class EStepModel(Model):
    """The cache benchmark's E-step as a learner model (``update`` runs one E-step)."""

    score_name = "none"

    def __init__(self, est: EStep) -> None:
        super().__init__()
        self.est = est

    def init(self, info: Any) -> None:
        self.modelmats = [self.est.mm]
        self.updatemats = [bl.zeros(self.est.mm.shape, device=_device(self.est.mm))]

    def update(self, batch: Minibatch) -> None:
        est = self.est
        preds = bl.sddmm(est.user, est.mm, batch.mats[0])
        unew = est.user * bl.dense_sparse_t(est.mm, batch.mats[0] / preds) + est.alpha
        est.user <<= bl.expdigamma(unew)

    def evaluate(self, batch: Minibatch) -> None:
        self.update(batch)


class Noop(Model):
    """A model whose update does nothing: what remains is the learner's own time."""

    def __init__(self, shape: tuple[int, int], device: str) -> None:
        super().__init__()
        self.shape, self.device = shape, device

    def init(self, info: Any) -> None:
        self.modelmats = [bl.zeros(self.shape, device=self.device)]
        self.updatemats = [bl.zeros(self.shape, device=self.device)]

    def update(self, batch: Minibatch) -> None:
        return None

    def evaluate(self, batch: Minibatch) -> None:
        return None


class NoUpdate(Updater):
    """Leaves the model alone: the E-step has no M-step here."""

    def update(self, step: int) -> None:
        self.t += 1


class SameBatch(DataSource):
    """Hands out one prebuilt minibatch forever (no copy): isolates the loop's own cost."""

    def __init__(self, x: Any, per_pass: int) -> None:
        super().__init__(x.shape[0], None, None)
        src = MemorySource(x, batch_size=x.shape[0])
        self._info = src.info
        self._batch = src.next()
        self._per_pass = per_pass

    @property
    def batches_per_pass(self) -> int:
        return self._per_pass

    def next(self) -> Minibatch:
        b = self._batch
        b.pass_, b.index = self._pass, self._index
        b.last = self._index == self._per_pass - 1
        self._index += 1
        if b.last:
            self._pass, self._index = self._pass + 1, 0
        return b


def _device(m: bl.Mat) -> str:
    return "gpu" if backend.is_cupy_array(m.data) else "cpu"


def _sync(device: str) -> None:
    if device == "gpu":
        backend.cupy().cuda.Device().synchronize()


def bare_loop(est: EStep, steps: int, device: str) -> float:
    """Median seconds per E-step of the plain cached loop."""
    est.reset()
    times = []
    with bl.caching():
        _sync(device)
        t_prev = time.perf_counter()
        for _ in range(steps):
            est.step()
            _sync(device)
            now = time.perf_counter()
            times.append(now - t_prev)
            t_prev = now
    return float(np.median(times[2:]))


def learner_loop(model: Model, source: DataSource, steps: int, observe: bool = False,
                 est: EStep | None = None) -> dict[str, float]:
    """Median seconds per minibatch of the learner loop, and its throughput."""
    if est is not None:
        est.reset()
    lr = Learner(model, source, NoUpdate(), n_passes=10**9, max_steps=steps, val_every=0,
                 name="bench")
    delivered = []
    if observe:
        lr.observe(lambda s: delivered.append(s.step), rate=10.0, views={"top": (0, 10)})
    t0 = time.perf_counter()
    lr.start()
    lr.join()
    wall = time.perf_counter() - t0
    stamps = lr.history()["time"]
    gaps = np.diff(stamps)[2:]
    lr.source.close()
    return {"median_step_s": float(np.median(gaps)), "steps_per_s": steps / wall,
            "observer_calls": len(delivered), "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bidlab.bench learner", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    workload_args(ap, steps=40, steps_help="minibatches per round")
    ap.add_argument("--loop-steps", type=int, default=4000,
                    help="minibatches per round of the do-nothing model")
    ap.add_argument("--rounds", type=int, default=5)
    device_args(ap)
    args = ap.parse_args(argv)

    x, est = workload(args)
    per_pass = 8
    data = sp.vstack([x] * per_pass, format="csr")  # 8 copies: 8 identical minibatches a pass
    if args.device == "gpu":
        data = backend.to_device(data)
    bare_loop(est, 3, args.device)  # compile kernels, warm the cache

    def copy_source() -> DataSource:
        return MemorySource(data, batch_size=args.docs, device=args.device)

    def same_source() -> DataSource:
        return SameBatch(data[: args.docs], per_pass)

    est_model = EStepModel(est)
    noop = Noop(est.mm.shape, args.device)
    rounds = []
    for i in range(args.rounds):
        r = {"bare": bare_loop(est, args.steps, args.device),
             "direct": learner_loop(est_model, same_source(), args.steps, est=est)}
        order = ("plain", "observed") if i % 2 == 0 else ("observed", "plain")
        for variant in order:  # back to back, in alternating order: a fair pair
            r[variant] = learner_loop(est_model, copy_source(), args.steps,
                                      variant == "observed", est=est)
        r["loop"] = learner_loop(noop, same_source(), args.loop_steps)
        r["copy"] = learner_loop(noop, copy_source(), args.loop_steps // 4)
        rounds.append(r)
    bare = min(r["bare"] for r in rounds)
    direct = min(r["direct"]["median_step_s"] for r in rounds)
    loop = min(r["loop"]["median_step_s"] for r in rounds)
    copy = min(r["copy"]["median_step_s"] for r in rounds)
    rate_none = max(r["plain"]["steps_per_s"] for r in rounds)
    rate_obs = max(r["observed"]["steps_per_s"] for r in rounds)
    pair_ratios = [r["observed"]["steps_per_s"] / r["plain"]["steps_per_s"] for r in rounds]
    out = {
        "benchmark": "learner",
        "machine": machine(),
        "device": args.device,
        "shape": {"docs": args.docs, "vocab": args.vocab, "nnz": int(x.nnz), "k": args.k},
        "estep_steps_per_round": args.steps,
        "bare_estep_median_s": bare,
        "loop_only_median_s": loop,
        "loop_and_copy_median_s": copy,
        "learner_estep_median_s": direct,
        "overhead_loop": loop / bare,
        "overhead_with_copy": copy / bare,
        "overhead_direct": (direct - bare) / bare,
        "estep_per_s_no_observer": rate_none,
        "estep_per_s_10hz_observer": rate_obs,
        "observer_throughput_ratio": float(np.median(pair_ratios)),
        "observer_throughput_ratio_per_round": pair_ratios,
        "observer_throughput_ratio_best_of": rate_obs / rate_none,
        "observer_calls_per_round": [r["observed"]["observer_calls"] for r in rounds],
    }
    out["targets"] = [
        target("learner loop / bare E-step", out["overhead_loop"], 0.03, at_most=True),
        target("throughput with a 10 Hz observer / without",
               out["observer_throughput_ratio"], 0.95),
    ]
    return emit(out, args.json, print_report)


def print_report(out: dict[str, Any]) -> None:
    """The readable report of :func:`main`'s result."""
    shape = out["shape"]
    bare, loop = out["bare_estep_median_s"], out["loop_only_median_s"]
    copy, direct = out["loop_and_copy_median_s"], out["learner_estep_median_s"]
    print(f"learner on the E-step: {shape['docs']} docs x {shape['vocab']} words, "
          f"nnz={shape['nnz']}, k={shape['k']}, device={out['device']}")
    print(f"  bare cached E-step        {bare * 1e3:9.3f} ms / minibatch")
    print(f"  learner loop alone        {loop * 1e3:9.3f} ms  = "
          f"{100 * out['overhead_loop']:.3f}% of an E-step")
    print(f"  loop + copying the data   {copy * 1e3:9.3f} ms  = "
          f"{100 * out['overhead_with_copy']:.3f}%")
    print(f"  learner running E-step    {direct * 1e3:9.3f} ms  "
          f"({100 * out['overhead_direct']:+.2f}% vs bare, noisy cross-check)")
    print(f"  10 Hz observer: best {out['estep_per_s_10hz_observer']:.2f} vs "
          f"{out['estep_per_s_no_observer']:.2f} E-steps/s; median ratio of back-to-back "
          f"pairs {out['observer_throughput_ratio']:.3f}")
    print_targets(out["targets"])


if __name__ == "__main__":
    raise SystemExit(main())
