"""``python -m bidlab.bench distributed [--json] [--quick] [--ranks N]``: learners on MPI
ranks (``mpiexec`` from the mpich wheel, loopback).

Workloads (shared data folder): GLM (logistic, one target: ``alt.atheism`` against the
rest, ADAGrad, L2 1e-4, 400 rows a minibatch) on 20 Newsgroups (11,314 training
documents, rows shuffled once, CSR) and online-VB LDA (k = 20, 256 documents a minibatch)
on KOS (3,430 documents x 6,906 words). Each job first trains a throwaway model on two
minibatches, so numba's compilation stays out of the timed run (the ranks compile in
their own process: no background compiler competes with the clock). Each job runs the same
number of passes on N ranks, every rank a contiguous share of the rows, combined every
``sync_every`` minibatches (the learner's default, or ``--sync-every``; the ranks meet
only there), each rank with ``--threads`` kernel threads (default 1, so
N ranks against 1 measures scaling over ranks). The passes are ``--passes``, or by default
as many as make the 1-rank job train for ``--seconds`` (default 20: the 1-rank job times
one probe pass after its warm-up), so that training, not start-up, sets the ratio. A
1-rank job with one thread per core (``threads``) is the in-process peer of N ranks.

Figures:

* **bytes per sync**, ``sparse`` (only the model rows changed since the last sync, summed
  by the sparse allreduce) against ``average`` (a dense allreduce), each counted as the
  bytes one rank sends under its algorithm's schedule (dense: reduce-scatter + allgather,
  2 (N-1)/N of the model); the target compares the steady state (``steady``: without the
  start's broadcast and the first sync, which is dense in every mode). Target: sparse at
  most 1/5 of dense.
* **throughput**: rows per second of the whole job (every rank's rows over the slowest
  rank's training time) on N ranks against 1. Target on 2 ranks: at least 1.7x. The two
  jobs run ``--repeat`` times (default 5), alternated (1, N, 1, N, ...; the ceiling job
  below after each N), and the ratio is the median of each N-rank run over the 1-rank run
  before it: on a shared 2-core machine one job's rate drifts by more than the effect
  measured, and an N-rank job, which needs every core at once, suffers more from a
  neighbour than a 1-rank job does. The machine's load while it ran is printed (1-minute
  load average before and after).
* **the machine's ceiling**: the N-rank job once more with no combination at all (each rank
  trains its shard alone, ``independent``), alternated with the pair: what N processes
  get from this machine (shared memory bandwidth, clock under load), so the N-rank
  throughput can be read against it as well as against 1 rank.
* **butterfly against allreduce**: GLM's held-out accuracy and wall time with each.
* **cost model** (a model, not a measurement): per-message latency ``a`` and bandwidth ``b``
  measured between two ranks (ping-pong of 8 B and 8 MiB), then per sync on N = 8..256
  ranks for the measured model size M and sparse fraction f: dense allreduce
  ``2 log2(N) a + 2 (N-1)/N M / b``; sparse rows (one all-to-all + allgather, direct)
  ``2 (N-1) a + 2 (N-1)/N f' M / b`` with f' the union of N ranks' touched fraction
  ``1 - (1 - f)^N``; nested sparse rows in two layers of degrees ``d1 x d2 = N`` (as square
  as powers of 2 go), each layer ``2 (d-1) a + 2 (d-1)/d f_l M_l / b`` over its share
  (``M``, then ``M / d1``) and its union (``1 - (1 - f)^d1``, then ``f'``); butterfly
  ``a + M / b``.

``--quick`` runs one pass over a tenth of the rows, without the thread peers (a smoke run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.bench._common import emit, log, machine, print_targets, target

# ===================================================================== one rank's job


def _job(spec: dict[str, Any]) -> dict[str, Any]:
    """Run on every rank of an mpiexec job; rank 0's dict is printed as JSON."""
    from bidlab.distributed import MPIComm, rank_batch_size, shard

    independent = spec.get("mode") == "independent"
    comm = MPIComm(mode="average" if independent else spec.get("mode", "average"))
    if spec["what"] == "pingpong":
        return _pingpong(comm)
    folder = spec["folder"]
    X = sp.load_npz(os.path.join(folder, f"{spec['what']}_X.npz"))
    y = None
    if spec["what"] == "glm":
        from bidlab.models import GLM

        y = np.load(os.path.join(folder, "glm_y.npy"))
        # L2 on: under the sparse exchange its decay of an untouched weight waits until the
        # weight is next touched (GLMModel.lazy_rows), so untouched rows do not change
        make = lambda: GLM("logistic", random_state=0, l2=1e-4)  # noqa: E731
    else:
        from bidlab.models import LDA

        make = lambda: LDA(20, random_state=0)  # noqa: E731
    extra: dict[str, Any] = {}
    if spec.get("sync_every"):
        extra["sync_every"] = int(spec["sync_every"])
    n = X.shape[0]
    rows = int(n * spec.get("fraction", 1.0))
    X = X[:rows]
    y = None if y is None else y[:rows]
    mine = shard(comm, X, y)
    bs = rank_batch_size(rows, comm.rank, comm.size, spec["batch"])
    mats = [m for m in mine if m is not None]
    warm = make()  # compile the kernels before the clock starts (not part of the figures)
    warm.learner(*[m[:2 * bs] for m in mats], batch_size=bs, n_passes=1,
                 val_every=0).fit(progress=None)
    passes = int(spec.get("passes") or 0)
    if passes < 1:  # as many passes as fill spec["seconds"], from one timed probe pass
        probe = make().learner(*mats, batch_size=bs, n_passes=1, val_every=0)
        probe.init()
        t0 = time.perf_counter()
        probe.fit(progress=None)
        probe_s = comm.mpi.allreduce(time.perf_counter() - t0, op=_max())
        passes = pass_count(float(spec["seconds"]), probe_s)
    est = make()
    # "independent": the same shards and steps with no combination at all (no comm):
    # what the machine allows N processes, the ceiling of the N-rank throughput
    lrn = est.learner(*mats, comm=None if independent else comm, batch_size=bs,
                      n_passes=passes, val_every=0, **({} if independent else extra))
    from bidlab.distributed.train import guarded

    guarded(comm, lrn.init)
    comm.any_of(False)  # start together
    t0 = time.perf_counter()
    guarded(comm, lambda: lrn.fit(progress=None))
    seconds = time.perf_counter() - t0
    slowest = comm.mpi.allreduce(seconds, op=_max())
    out = {"ranks": comm.size, "mode": spec.get("mode", "average"), "rows": rows,
           "seconds": slowest,
           "passes": passes, "threads": int(spec.get("threads", 1)),
           "rows_per_s": rows * passes / slowest, "syncs": comm.syncs,
           "bytes_sent": comm.bytes_sent,
           "model_bytes": int(sum(m.data.nbytes for m in lrn.model.modelmats)),
           "bytes_per_sync": comm.bytes_sent / max(1, comm.syncs),
           # the steady state: without the start's broadcast and the first sync (dense in
           # every mode: it makes the common start)
           # (NaN with no sync after the first: nothing steady was measured)
           "steady_bytes_per_sync": (comm.bytes_sent - comm.bytes_after_first_sync)
           / (comm.syncs - 1) if comm.syncs > 1 else math.nan,
           "touched_fraction": getattr(comm._combiner, "touched_fraction", math.nan)}
    if spec["what"] == "glm" and comm.rank == 0:
        Xt = sp.load_npz(os.path.join(folder, "glm_Xtest.npz"))
        out["accuracy"] = float(est.score(Xt, np.load(os.path.join(folder, "glm_ytest.npy"))))
    return out


def _max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


def _pingpong(comm: Any) -> dict[str, Any]:
    """Half round-trip times of 8 B and 8 MiB messages between ranks 0 and 1."""
    out: dict[str, Any] = {"ranks": comm.size}
    for nbytes, reps in ((8, 200), (8 << 20, 10)):
        buf = np.zeros(nbytes // 8, np.float64)
        comm.mpi.Barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            if comm.rank == 0:
                comm.mpi.Send(buf, dest=1)
                comm.mpi.Recv(buf, source=1)
            elif comm.rank == 1:
                comm.mpi.Recv(buf, source=0)
                comm.mpi.Send(buf, dest=0)
        out[f"half_rtt_{nbytes}"] = (time.perf_counter() - t0) / reps / 2
    out["latency_s"] = out["half_rtt_8"]
    out["bandwidth_Bps"] = (8 << 20) / max(1e-12, out[f"half_rtt_{8 << 20}"] - out["latency_s"])
    return out


# ===================================================================== the orchestrator
def pass_count(seconds: float, probe_seconds: float) -> int:
    """Passes that train for about ``seconds`` when one pass took ``probe_seconds``
    (at least 1).

    Examples
    --------
    >>> pass_count(20.0, 0.15), pass_count(20.0, 30.0)
    (134, 1)
    """
    return max(1, math.ceil(float(seconds) / max(float(probe_seconds), 1e-6)))


def rank_env(threads: int) -> dict[str, str]:
    """The ranks' environment: ``threads`` kernel threads each (numba and OpenMP), and
    kernels compiled in the rank itself during the warm-up.

    Examples
    --------
    >>> rank_env(1)["NUMBA_NUM_THREADS"]
    '1'
    """
    t = str(max(1, int(threads)))
    return dict(os.environ, NUMBA_NUM_THREADS=t, OMP_NUM_THREADS=t,
                BIDLAB_BACKGROUND_COMPILE="0")


def _launch(n: int, spec: dict[str, Any]) -> dict[str, Any]:
    from bidlab.distributed.launch import mpiexec_path

    cmd = [mpiexec_path(), "-n", str(n), sys.executable, "-m", "bidlab.bench.distributed",
           "--job", json.dumps(spec)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                          env=rank_env(spec.get("threads", 1)))
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _load() -> float:
    return os.getloadavg()[0]


def cost_model(latency: float, bandwidth: float, model_bytes: int, touched: float,
               ranks: tuple[int, ...] = (8, 16, 32, 64, 128, 256)) -> list[dict[str, Any]]:
    """Seconds per sync of each scheme on N ranks (see the module doc): a model."""
    rows = []
    for n in ranks:
        f_union = 1 - (1 - touched) ** n
        m = model_bytes
        d1 = 2 ** math.ceil(math.log2(n) / 2)  # two layers, as square as powers of 2 go
        d2 = n // d1
        f_group = 1 - (1 - touched) ** d1
        rows.append({
            "ranks": n,
            "dense_s": 2 * math.log2(n) * latency + 2 * (n - 1) / n * m / bandwidth,
            "sparse_s": _layer_s(n, f_union, m, latency, bandwidth),
            "nested_s": _layer_s(d1, f_group, m, latency, bandwidth)
            + _layer_s(d2, f_union, m / d1, latency, bandwidth),
            "nest": (d1, d2),
            "butterfly_s": latency + m / bandwidth,
            "union_touched": f_union})
    return rows


def _layer_s(d: int, f: float, m: float, latency: float, bandwidth: float) -> float:
    """One layer of the sparse allreduce among ``d`` ranks over a share of ``m`` bytes
    of which ``f`` is touched by the union of the ranks it covers (all-to-all and
    allgather, direct)."""
    return 2 * (d - 1) * latency + 2 * (d - 1) / d * f * m / bandwidth


def _write_data(folder: str) -> None:
    """The workloads, read once from the shared data and written where the ranks read them."""
    from bidlab.datasets import load_20newsgroups, load_kos

    train = load_20newsgroups(subset="train")
    test = load_20newsgroups(subset="test", vocabulary=train.vocab)
    order = np.random.default_rng(0).permutation(train.X.shape[0])  # files come by group
    train.X, train.labels = train.X[order], np.asarray(train.labels)[order]
    sp.save_npz(os.path.join(folder, "glm_X.npz"), train.X.astype(np.float32).tocsr())
    sp.save_npz(os.path.join(folder, "glm_Xtest.npz"), test.X.astype(np.float32).tocsr())
    np.save(os.path.join(folder, "glm_y.npy"), (np.asarray(train.labels) == 0).astype(int))
    np.save(os.path.join(folder, "glm_ytest.npy"), (np.asarray(test.labels) == 0).astype(int))
    sp.save_npz(os.path.join(folder, "lda_X.npz"), load_kos(dtype=np.float32).X.tocsr())


def run(ranks: int, passes: int | None, fraction: float, seconds: float = 20.0,
        threads: int = 1, peers: bool = True, repeat: int = 1,
        sync_every: int | None = None) -> dict[str, Any]:
    """Every job's figures (see the module doc); ``passes`` None: sized by ``seconds``;
    ``peers``: also the 1-rank jobs with a thread per core; ``repeat``: runs of the
    1-rank / N-rank pair, alternated; ``sync_every``: None for the learner's default."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        _write_data(folder)
        return _run(ranks, passes, fraction, folder, seconds, threads, peers, repeat,
                    sync_every)


def paired_ratio(many: list[float], one: list[float]) -> float:
    """The median of the runs' ratios, each N-rank run over the 1-rank run just before it.

    Examples
    --------
    >>> paired_ratio([150.0, 190.0, 170.0], [100.0, 100.0, 100.0])
    1.7
    """
    return float(np.median([a / b for a, b in zip(many, one, strict=True)]))


def _run(ranks: int, passes: int | None, fraction: float, folder: str, seconds: float,
         threads: int, peers: bool = True, repeat: int = 1,
         sync_every: int | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"load_before": _load(), "jobs": {}, "threads": threads,
                           "repeat": repeat, "sync_every": sync_every}
    pp = _launch(2, {"what": "pingpong"})
    res["pingpong"] = pp
    log(f"ping-pong: latency {pp['latency_s'] * 1e6:.1f} us, bandwidth "
        f"{pp['bandwidth_Bps'] / 1e9:.2f} GB/s")
    batch = {"glm": 400, "lda": 256}
    cores = os.cpu_count() or 1
    for what in ("glm", "lda"):
        todo = [(1, "average", threads), (ranks, "average", threads),
                (ranks, "independent", threads)] * max(1, repeat)
        todo.append((ranks, "sparse", threads))
        if what == "glm":
            todo.append((ranks, "butterfly", threads))
        if peers and cores > threads:  # the in-process peer: one rank, a thread per core
            todo.append((1, "average", cores))
        n_passes = passes
        for n, mode, th in todo:
            spec = {"what": what, "mode": mode, "passes": n_passes, "seconds": seconds,
                    "fraction": fraction, "batch": batch[what], "folder": folder,
                    "threads": th, "sync_every": sync_every}
            r = _launch(n, spec)
            n_passes = r["passes"]  # the first job's, sized by seconds: every job's
            key = f"{what}/{n}/{mode}" + (f"/{th} threads" if th != threads else "")
            runs = res["jobs"].get(key, {}).get("rows_per_s_runs", []) + [r["rows_per_s"]]
            res["jobs"][key] = r | {"rows_per_s_runs": runs}
            log(f"{key}: {r['passes']} passes, {r['seconds']:.1f} s, "
                f"{r['rows_per_s']:.0f} rows/s, {r['bytes_per_sync']:.0f} B/sync" + (
                    f", accuracy {r['accuracy']:.4f}" if "accuracy" in r else ""))
    res["load_after"] = _load()
    jobs = res["jobs"]
    targets = []
    ratios: dict[str, float] = {}  # throughput ratios, same run
    for what in ("glm", "lda"):
        dense, sparse = jobs[f"{what}/{ranks}/average"], jobs[f"{what}/{ranks}/sparse"]
        ratio = sparse["steady_bytes_per_sync"] / max(1.0, dense["steady_bytes_per_sync"])
        targets.append(target(f"{what}: sparse / dense bytes per sync", ratio, 0.2,
                              at_most=True))
        speed = paired_ratio(dense["rows_per_s_runs"],
                             jobs[f"{what}/1/average"]["rows_per_s_runs"])
        targets.append(target(f"{what}: {ranks} ranks / 1 rank throughput", speed, 1.7))
        ratios[f"{what}: {ranks} ranks / 1 rank"] = speed
        ceiling = paired_ratio(jobs[f"{what}/{ranks}/independent"]["rows_per_s_runs"],
                               jobs[f"{what}/1/average"]["rows_per_s_runs"])
        ratios[f"{what}: {ranks} independent processes / 1 (the machine's ceiling)"] = ceiling
        ratios[f"{what}: {ranks} ranks / {ranks} independent processes"] = float(np.median(
            [a / b for a, b in zip(dense["rows_per_s_runs"],
                                   jobs[f"{what}/{ranks}/independent"]["rows_per_s_runs"],
                                   strict=True)]))
        peer = jobs.get(f"{what}/1/average/{cores} threads")
        if peer is not None:
            ratios[f"{what}: {ranks} ranks / 1 rank of {cores} threads"] = (
                dense["rows_per_s"] / peer["rows_per_s"])
    res["targets"] = targets
    res["ratios"] = ratios
    glm = jobs[f"glm/{ranks}/sparse"]
    res["cost_model"] = cost_model(pp["latency_s"], pp["bandwidth_Bps"], glm["model_bytes"],
                                   glm["touched_fraction"])
    res["machine"] = machine()
    return res


def _report(res: dict[str, Any]) -> None:
    print(f"load average (1 min): {res['load_before']:.1f} before, "
          f"{res['load_after']:.1f} after")
    print(f"ping-pong: latency {res['pingpong']['latency_s'] * 1e6:.1f} us, bandwidth "
          f"{res['pingpong']['bandwidth_Bps'] / 1e9:.2f} GB/s")
    print(f"{'job':<26} {'passes':>6} {'rows/s':>10} {'s':>8} {'syncs':>6} {'B/sync':>10} "
          f"{'steady':>10} {'touched':>8} {'acc':>7}")
    for key, r in res["jobs"].items():
        acc = f"{r['accuracy']:.4f}" if "accuracy" in r else ""
        print(f"{key:<26} {r.get('passes', ''):>6} {r['rows_per_s']:>10.0f} "
              f"{r['seconds']:>8.2f} {r['syncs']:>6} "
              f"{r['bytes_per_sync']:>10.0f} {r['steady_bytes_per_sync']:>10.0f} "
              f"{r['touched_fraction']:>8.3f} {acc:>7}")
        if len(r.get("rows_per_s_runs", ())) > 1:
            print(f"{'':<26} rows/s of each run: "
                  + ", ".join(f"{x:.0f}" for x in r["rows_per_s_runs"]))
    for name, value in res.get("ratios", {}).items():
        print(f"throughput {name}: {value:.2f}x")
    print("cost model per sync (a model from the ping-pong figures, not a measurement):")
    for row in res["cost_model"]:
        print(f"  N={row['ranks']:>4}: dense {row['dense_s'] * 1e3:8.3f} ms, sparse "
              f"{row['sparse_s'] * 1e3:8.3f} ms (union touched {row['union_touched']:.2f}), "
              f"nested {row['nest'][0]}x{row['nest'][1]} {row['nested_s'] * 1e3:8.3f} ms, "
              f"butterfly {row['butterfly_s'] * 1e3:8.3f} ms")
    print_targets(res["targets"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bidlab.bench distributed")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quick", action="store_true", help="a tenth of the rows, one pass")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--passes", type=int, default=None,
                   help="passes of every job (default: sized by --seconds)")
    p.add_argument("--seconds", type=float, default=20.0,
                   help="training seconds of the 1-rank job when --passes is not given")
    p.add_argument("--threads", type=int, default=1, help="kernel threads per rank")
    p.add_argument("--repeat", type=int, default=5,
                   help="runs of the 1-rank and N-rank jobs, alternated (the throughput "
                        "ratio is the median of the pairs')")
    p.add_argument("--sync-every", type=int, default=None,
                   help="minibatches between combinations (default: the learner's)")
    p.add_argument("--job", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.job:
        out = _job(json.loads(args.job))
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps(out), flush=True)
        return 0
    res = run(args.ranks, 1 if args.quick else args.passes, 0.1 if args.quick else 1.0,
              seconds=args.seconds, threads=args.threads, peers=not args.quick,
              repeat=1 if args.quick else args.repeat, sync_every=args.sync_every)
    return emit(res, args.json, _report)


if __name__ == "__main__":
    raise SystemExit(main())
