"""Programs that tests/test_distributed_mpi.py runs under ``mpiexec -n N``: one per case,
each writing what its rank computed to ``OUT.rank<r>.npz`` for the test to check.

    mpiexec -n 2 python tests/mpi_programs.py CASE OUT [ARGS...]
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.distributed import MPIComm, shard


def collectives(comm: MPIComm) -> dict:
    r, n = comm.rank, comm.size
    rng = np.random.default_rng(100 + r)
    a = rng.standard_normal((5, 7))
    f = np.asfortranarray(rng.standard_normal((3, 9)))
    mine_a, mine_f = a.copy(), f.copy()
    comm.allreduce([a, f], "sum")
    m = mine_a.copy()
    comm.allreduce([m], "mean")
    b = np.full(4, float(r))
    comm.broadcast([b], root=n - 1)
    # sparse blocks: distinct rows of a 1000-row matrix, different on every rank
    rows = np.sort(rng.choice(1000, 50 + 10 * r, replace=False))
    vals = rng.standard_normal((rows.size, 3))
    got_rows, got_vals = comm.sparse_allreduce(rows, vals)
    dense = np.zeros((1000, 3))
    dense[rows] = vals
    comm.allreduce([dense], "sum")
    return dict(a=a, f=f, mine_a=mine_a, mine_f=mine_f, m=m, b=b, rows=got_rows,
                vals=got_vals, dense=dense, any_some=comm.any_of(r == n - 1),
                any_none=comm.any_of(False))


def nested_sparse(comm: MPIComm) -> dict:
    """The sparse allreduce in two layers (2 x 2 ranks) against the dense one."""
    rng = np.random.default_rng(300 + comm.rank)
    rows = np.sort(rng.choice(1000, 40 + 7 * comm.rank, replace=False))
    vals = rng.standard_normal((rows.size, 3))
    got_rows, got_vals = comm.sparse_allreduce(rows, vals, 1000)
    dense = np.zeros((1000, 3))
    dense[rows] = vals
    comm.allreduce([dense], "sum")
    return dict(nest_rows=got_rows, nest_vals=got_vals, nest_dense=dense,
                nest_layers=len(comm.layers()), nest_index_bytes=got_rows.dtype.itemsize)


def topics(n_docs: int) -> sp.csr_matrix:
    rng = np.random.default_rng(0)
    topics = rng.dirichlet(np.full(200, 0.05), 4)
    theta = rng.dirichlet(np.full(4, 0.3), n_docs)
    return sp.csr_matrix(np.stack([rng.multinomial(50, t @ topics) for t in theta]).astype(float))


def lda(comm: MPIComm) -> np.ndarray:
    """Batch-VB LDA on this rank's rows."""
    from bidlab.models import LDA

    X = topics(800)
    Xr, = shard(comm, X)
    est = LDA(4, method="batch", n_passes=4, batch_size=100, random_state=0)
    est.learner(Xr, val_every=0, comm=comm).fit(progress=None)
    return est.components_


def kmeans(comm: MPIComm) -> np.ndarray:
    """Lloyd k-means from a fixed start on this rank's rows."""
    from bidlab.datasets import blobs
    from bidlab.models import KMeans

    X = blobs(4000, 8, 6, spread=1.5, seed=4).X
    start = X[np.random.default_rng(5).choice(4000, 6, replace=False)]
    Xr, = shard(comm, X)
    est = KMeans(6, algorithm="lloyd", random_state=0, tol=0.0, init=start)
    est.learner(Xr, n_passes=6, batch_size=500, val_every=0, comm=comm).fit(progress=None)
    return est.cluster_centers_


def kmeans_resumed(comm: MPIComm, out: str) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd k-means on this rank's rows: 10 passes straight, and 2 passes checkpointed
    then resumed to 10 (each rank's labels and bounds are its own: the shared file holds
    none, so the resumed ranks measure their rows afresh)."""
    from bidlab.models import KMeans

    rng = np.random.default_rng(0)
    C = rng.normal(size=(12, 6)) * 3
    X = C[rng.integers(0, 12, 4000)] + rng.normal(size=(4000, 6)) * 1.5
    Xr, = shard(comm, X)

    def run(n: int, checkpoint: str = "", load: bool = False) -> np.ndarray:
        est = KMeans(n_clusters=12, max_iter=n, batch_size=250, random_state=0, tol=0.0)
        lrn = est.learner(Xr, comm=comm, **({"checkpoint": checkpoint} if checkpoint else {}))
        if load:
            lrn.load(checkpoint)
            lrn.set(n_passes=n)
        lrn.fit(progress=None)
        return est.cluster_centers_

    full = run(10)
    run(2, f"{out}.km.npz")
    return full, run(10, f"{out}.km.npz", load=True)


def ratings() -> sp.csr_matrix:
    """Explicit ratings of 120 users (each rated something) of 50 items."""
    rng = np.random.default_rng(6)
    full = rng.standard_normal((120, 3)) @ rng.standard_normal((3, 50)) + 3.0
    mask = rng.random((120, 50)) < 0.2
    mask[np.arange(120), rng.integers(0, 50, 120)] = True
    rows, cols = np.nonzero(mask)
    return sp.csr_matrix((full[rows, cols], (rows, cols)), shape=(120, 50))


def sfa(comm: MPIComm) -> np.ndarray:
    """SFA (explicit) on this rank's users: the item step sums its CG terms over ranks."""
    from bidlab.models import SFA

    Rr, = shard(comm, ratings())
    est = SFA(3, max_iter=4, random_state=0)
    est.learner(Rr, batch_size=20, comm=comm).fit(progress=None)
    return est.item_factors_


def graph() -> sp.csr_matrix:
    """A directed graph of 300 vertices with dangling ones."""
    A = sp.random(300, 300, density=0.02, format="csr", random_state=7)
    A = sp.csr_matrix(A.multiply(sp.csr_matrix(np.arange(300)[:, None] % 17 != 0)))
    A.eliminate_zeros()
    return A


def pagerank(comm: MPIComm) -> np.ndarray:
    """PageRank on this rank's rows (its first row found from the rank's share)."""
    from bidlab.models import PageRank

    Ar, = shard(comm, graph())
    est = PageRank(tol=1e-10)
    est.learner(Ar, comm=comm).fit(progress=None)
    return est.scores_


def glm_data() -> tuple:
    rng = np.random.default_rng(1)
    X = sp.random(4000, 300, density=0.05, format="csr", random_state=1, dtype=np.float64)
    w = rng.standard_normal(300) * 3
    y = (np.asarray(X @ w).ravel() + 0.3 * rng.standard_normal(4000) > 0).astype(int)
    return X, y


def wide_data() -> tuple:
    """Text-like rows: 20,000 columns, about 20 nonzeros a row."""
    rng = np.random.default_rng(2)
    X = sp.random(3200, 20000, density=0.001, format="csr", random_state=2, dtype=np.float64)
    y = (np.asarray(X @ rng.standard_normal(20000)).ravel() > 0).astype(int)
    return X, y


def dense_rows_data() -> tuple:
    """2,000 columns, about 10 nonzeros a row: a minibatch of 100 rows touches ~40 % of
    the columns (above the share at which one process sweeps L2 over every row)."""
    rng = np.random.default_rng(3)
    X = sp.random(3200, 2000, density=0.005, format="csr", random_state=3, dtype=np.float64)
    y = (np.asarray(X @ rng.standard_normal(2000)).ravel() > 0).astype(int)
    return X, y


def glm(comm: MPIComm, passes: int, checkpoint: str = "", data: Any = None,
        l2: float = 1e-4, sync_every: int = 1) -> tuple:
    """Logistic GLM, plain gradient steps, batches of 200 / size rows on every rank,
    averaged every ``sync_every`` steps (default: every step)."""
    from bidlab.models import GLM

    X, y = glm_data() if data is None else data()
    Xr, yr = shard(comm, X[:3200], y[:3200])
    est = GLM("logistic", batch_size=200 // comm.size, n_passes=passes, random_state=0,
              updater="grad", l2=l2, lrate=0.3)  # one rate: "auto" picks per rank's rows
    lrn = est.learner(Xr, yr, val_every=0, comm=comm, checkpoint=checkpoint or None,
                      sync_every=sync_every)
    lrn.fit(progress=None)
    return est.coef_, comm.bytes_sent, comm.syncs


#: the steering program's minibatches between sync points (the ranks meet only there)
STEER_SYNC_EVERY = 5


def steering(comm: MPIComm) -> dict:
    """Commands from rank 0 and a stop on rank 1 alone, made from inside training: rank 0
    queues ``set`` at its 5th step and ``pause`` at its 15th (the last of the first pass:
    it arrives at the pass end's meeting, between sync points), and another ``set`` while
    paused; rank 1 asks itself to stop at its 20th (after the resume). Every rank must act
    on each at the same step: the first after the next meeting (every
    :data:`STEER_SYNC_EVERY` steps, at pass ends, and right after commands arrived)."""
    from bidlab.models import GLM

    X, y = glm_data()
    Xr, yr = shard(comm, X[:3200], y[:3200])
    est = GLM("logistic", batch_size=100, n_passes=50, random_state=0, updater="grad",
              lrate=0.3)
    lrn = est.learner(Xr, yr, val_every=0, comm=comm, sync_every=STEER_SYNC_EVERY)
    meetings = []
    meet = comm.meet

    def counted_meet(learner, stop):
        meetings.append(learner.step)
        return meet(learner, stop)

    comm.meet = counted_meet
    model = lrn.model
    plain = type(model).update
    asked: dict[str, int] = {}

    def update(batch):  # the learner's thread, mid-step
        if comm.rank == 0 and lrn.step == 5:
            asked["set"] = lrn.step
            comm.request("set", lrate=0.1)
        if comm.rank == 0 and lrn.step == 15:
            asked["pause"] = lrn.step
            comm.request("pause")
        if comm.rank == 1 and lrn.step == 20:
            asked["stop"] = lrn.step
            lrn.stop(wait=False)
        return plain(model, batch)

    model.update = update
    lrn.start()
    deadline = time.monotonic() + 60
    while lrn.state != "paused" and time.monotonic() < deadline:
        time.sleep(0.01)
    paused_at = lrn.step
    version = int(lrn.record.as_dict()["opts_version"][-1])
    if comm.rank == 0:
        comm.request("set", lrate=0.05)  # while every rank is paused
    lrn.resume()
    lrn.join(60)
    rec = lrn.record.as_dict()
    changed = int(rec["step"][np.flatnonzero(rec["opts_version"] > rec["opts_version"][0])[0]])
    resumed = int(rec["step"][np.flatnonzero(rec["opts_version"] > version)[0]])
    return dict(steer_changed=changed, steer_paused=paused_at, steer_stopped=lrn.step,
                steer_set_while_paused=resumed,
                steer_state=lrn.state, steer_lrate=float(np.ravel(lrn.opts.get("lrate"))[0]),
                steer_syncs=comm.syncs, steer_meetings=np.array(meetings, np.int64))


def freed(n: int, nest: tuple[int, ...] | None = None) -> int:
    """Make and free ``n`` communicators (a Dup, and its layers' Splits with ``nest``):
    more than MPICH's 2,048 contexts of a process, so a leak fails. Returns ``n``."""
    from mpi4py import MPI

    for _ in range(n):
        c = MPIComm(MPI.COMM_WORLD.Dup(), mode="sparse", nest=nest)
        c.layers()
        c.free()
        c.free()  # again: nothing
    assert c.mpi == MPI.COMM_NULL and MPI.COMM_WORLD != MPI.COMM_NULL
    return n


def suite(out: str) -> None:
    """Everything the 2-rank checks need, in one job (each job pays the imports)."""
    comm = MPIComm()
    found = collectives(comm)
    found["lda"] = lda(comm)
    found["kmeans"] = kmeans(comm)
    found["sfa"] = sfa(comm)
    found["km_full"], found["km_resumed"] = kmeans_resumed(comm, out)
    found["pagerank"] = pagerank(comm)
    found["glm_avg"], _, syncs = glm(MPIComm(), 4)
    # no L2 decay here: it would change every weight at every step
    found["wide_avg"], found["bytes_avg"], _ = glm(MPIComm(), 1, data=wide_data, l2=0.0)
    found["wide_sparse"], found["bytes_sparse"], _ = glm(MPIComm(mode="sparse"), 1,
                                                         data=wide_data, l2=0.0)
    lazy = MPIComm(mode="sparse")  # L2 on: its decay of untouched rows waits (lazy)
    glm(lazy, 1, data=dense_rows_data, l2=1e-3)
    found["lazy_touched"] = lazy._combiner.touched_fraction
    # every 8 steps the union of changed rows is most of them: sparse sends them dense
    found["wide8_avg"], found["bytes8_avg"], _ = glm(MPIComm(), 1, data=dense_rows_data,
                                                     l2=0.0, sync_every=8)
    dense8 = MPIComm(mode="sparse")
    found["wide8_sparse"], found["bytes8_sparse"], found["syncs8"] = glm(
        dense8, 1, data=dense_rows_data, l2=0.0, sync_every=8)
    found["dense_syncs8"] = dense8._combiner.dense_syncs
    found["glm_ck"], _, _ = glm(MPIComm(), 2, checkpoint=f"{out}.ck.npz")
    found["syncs"] = syncs
    found.update(steering(MPIComm()))
    found["freed"] = freed(2100)
    np.savez(f"{out}.rank{comm.rank}.npz", **found)


def butterfly_a9a(comm: MPIComm, folder: str) -> float:
    """GLM on a9a, ranks mixed by butterfly every minibatch; rank 0's test accuracy."""
    from bidlab.datasets import load_a9a
    from bidlab.models import GLM

    X, y, X_test, y_test = load_a9a(folder, zero_one=True)
    Xr, yr = shard(comm, X, y)
    est = GLM("logistic", batch_size=400 // comm.size, n_passes=2, random_state=0)
    est.learner(Xr, yr, val_every=0, comm=comm, sync_every=1).fit(progress=None)
    return float(est.score(X_test, y_test))


def resume_glm(comm: MPIComm, checkpoint: str) -> tuple:
    """:func:`glm`'s 2-rank checkpoint (2 passes) resumed here, trained to 4 passes."""
    from bidlab.models import GLM

    X, y = glm_data()
    Xr, yr = shard(comm, X[:3200], y[:3200])
    est = GLM("logistic", batch_size=200 // comm.size, n_passes=4, random_state=0,
              updater="grad", l2=1e-4, lrate=0.3)
    lrn = est.learner(Xr, yr, val_every=0, comm=comm, sync_every=1)
    lrn.load(checkpoint)
    resumed_at = lrn.metrics["pass"]
    lrn.set(n_passes=4)
    lrn.fit(progress=None)
    return est.coef_, resumed_at, lrn.step, lrn.source.batches_per_pass


def suite4(out: str, checkpoint: str, a9a: str = "") -> None:
    """The checks on 4 ranks (oversubscribed on a small machine), in one job: the
    collectives, Lloyd k-means, a 2-rank checkpoint resumed, butterfly mixing on a9a."""
    comm = MPIComm()
    found = collectives(comm)
    found.update(nested_sparse(MPIComm(nest=(2, 2))))
    found["freed"] = freed(750, nest=(2, 2))  # a Dup and two Splits each
    found["kmeans"] = kmeans(comm)
    (found["glm_resumed"], found["resumed_at"], found["resumed_step"],
     found["resumed_batches"]) = resume_glm(MPIComm(), checkpoint)
    if a9a:
        found["butterfly_acc"] = butterfly_a9a(MPIComm(mode="butterfly"), a9a)
    np.savez(f"{out}.rank{comm.rank}.npz", **found)


def fail(out: str, how: str) -> None:
    """Rank 1 raises (or is killed) in its 3rd minibatch; the job must end at once."""
    from bidlab.distributed.train import guarded
    from bidlab.learn import Learner
    from bidlab.learn.datasource import MemorySource
    from bidlab.models.lsq import LeastSquares

    comm = MPIComm(timeout=60)

    class Faulty(LeastSquares):
        def update(self, batch):
            self.calls = getattr(self, "calls", 0) + 1
            if comm.rank == 1 and self.calls == 3:
                with open(f"{out}.when", "w") as f:
                    f.write(repr(time.time()))
                if how == "kill":
                    os.kill(os.getpid(), 9)
                raise RuntimeError("rank 1 failed on purpose in its third minibatch")
            time.sleep(0.01)
            return super().update(batch)

    X, Y = np.ones((1000, 2)), np.ones((1000, 1))
    lrn = Learner(Faulty(), MemorySource(X, Y, batch_size=10), comm=comm, n_passes=1000)
    guarded(comm, lambda: lrn.fit(progress=None))


def fail_alone(out: str) -> None:
    """Rank 1 raises in its 3rd minibatch with no job-wide abort (as on notebook engines):
    each rank writes how its run ended and when."""
    from bidlab.learn import Learner
    from bidlab.learn.datasource import MemorySource
    from bidlab.models.lsq import LeastSquares

    comm = MPIComm(timeout=60)

    class Faulty(LeastSquares):
        def update(self, batch):
            self.calls = getattr(self, "calls", 0) + 1
            if comm.rank == 1 and self.calls == 3:
                raise RuntimeError("rank 1 failed on purpose in its third minibatch")
            time.sleep(0.01)
            return super().update(batch)

    X, Y = np.ones((1000, 2)), np.ones((1000, 1))
    lrn = Learner(Faulty(), MemorySource(X, Y, batch_size=10), comm=comm, n_passes=1000)
    t0 = time.time()
    try:
        lrn.fit(progress=None)
        how = "finished"
    except BaseException as exc:  # noqa: BLE001 - what ended the run is the result
        how = f"{type(exc).__name__}: {exc}"
    with open(f"{out}.rank{comm.rank}.txt", "w") as f:
        f.write(f"{time.time() - t0}\n{how}")


CASES = {"suite": suite, "suite4": suite4, "fail": fail, "fail_alone": fail_alone}

if __name__ == "__main__":
    CASES[sys.argv[1]](*sys.argv[2:])
