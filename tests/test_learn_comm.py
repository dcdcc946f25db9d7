"""The learner's sync points, proven with learners in threads of one process: two learners
each on half the rows train as one learner on all of them."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.datasets import blobs
from bidlab.learn.comm import SingleProcess, ThreadGroup, check_combine
from bidlab.models import GLM, LDA, KMeans


def test_thread_group_collectives():
    group = ThreadGroup(3)
    out = {}

    def rank(r):
        c = group.comm(r)
        a = np.full((2, 2), float(r + 1))
        b = np.array([r], dtype=np.int64)
        c.allreduce([a, b], "sum")
        m = np.full(3, float(r))
        c.allreduce([m], "mean")
        z = np.full(2, float(r))
        c.broadcast([z], root=2)
        out[r] = (a.copy(), b.copy(), m.copy(), z.copy(), c.any_of(r == 1), c.any_of(False))

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for r in range(3):
        a, b, m, z, some, none = out[r]
        assert (a == 6).all() and b[0] == 3 and np.allclose(m, 1.0) and (z == 2).all()
        assert some and not none


def test_a_rank_that_never_arrives_is_reported_not_waited_for_forever():
    group = ThreadGroup(2, timeout=0.5)
    with pytest.raises(RuntimeError, match="did not reach the same sync point"):
        group.comm(0).any_of(True)


def test_single_process_is_a_no_op_and_combine_is_checked():
    c = SingleProcess()
    a = np.ones(3)
    c.allreduce([a], "mean")
    c.broadcast([a])
    assert (a == 1).all() and c.any_of(True) and not c.any_of(False)
    assert c.fold_seed(7) == 7
    assert check_combine(None, 2, "M") == ("mean", "mean")
    with pytest.raises(ValueError, match="one of"):
        check_combine(("mean", "max"), 2, "M")
    with pytest.raises(ValueError, match="op must be"):
        c.allreduce([a], "max")


def test_two_learners_on_halves_give_batch_vb_lda_of_all_rows(train_together):
    rng = np.random.default_rng(0)
    topics = rng.dirichlet(np.full(200, 0.05), 4)
    theta = rng.dirichlet(np.full(4, 0.3), 800)
    X = sp.csr_matrix(np.stack([rng.multinomial(50, t @ topics) for t in theta]).astype(float))
    kw = {"method": "batch", "n_passes": 4, "batch_size": 100, "random_state": 0}
    one = LDA(4, **kw)
    one.learner(X, val_every=0).fit(progress=None)
    group = ThreadGroup(2)
    halves = [LDA(4, **kw) for _ in range(2)]
    learners = [h.learner(X[:400] if r == 0 else X[400:], val_every=0, comm=group.comm(r))
                for r, h in enumerate(halves)]
    # rank 0 starts from the model the single learner starts from (the same first rows)
    train_together(learners)
    for h in halves:
        np.testing.assert_allclose(h.components_, one.components_, rtol=1e-5, atol=1e-8)


def test_two_learners_averaging_every_step_train_glm_like_one(train_together):
    """Averaging two models after each has stepped on its own minibatch of 100 rows is one
    step on their 200 rows: one learner with minibatches of 200 (plain gradient steps;
    ADAGrad keeps each rank's own squared-gradient sums, which steps more cautiously)."""
    rng = np.random.default_rng(1)
    X = sp.random(4000, 300, density=0.05, format="csr", random_state=1, dtype=np.float64)
    w = rng.standard_normal(300) * 3
    y = (np.asarray(X @ w).ravel() + 0.3 * rng.standard_normal(4000) > 0).astype(int)
    Xt, yt, Xe, ye = X[:3200], y[:3200], X[3200:], y[3200:]
    # one fixed rate: "auto" would pick each half's rate from its own rows
    kw = {"n_passes": 4, "random_state": 0, "updater": "grad", "lrate": 0.3}
    one = GLM("logistic", batch_size=200, **kw)
    one.learner(Xt, yt, val_every=0).fit(progress=None)
    group = ThreadGroup(2)
    halves = [GLM("logistic", batch_size=100, **kw) for _ in range(2)]
    parts = [(Xt[:1600], yt[:1600]), (Xt[1600:], yt[1600:])]
    learners = [h.learner(*parts[r], val_every=0, comm=group.comm(r), sync_every=1)
                for r, h in enumerate(halves)]
    train_together(learners)

    def log_loss(est):
        p = np.clip(est.predict_proba(Xe)[:, 1], 1e-12, 1 - 1e-12)
        return float(-np.mean(ye * np.log(p) + (1 - ye) * np.log(1 - p)))

    np.testing.assert_allclose(halves[0].coef_, halves[1].coef_, rtol=1e-6, atol=1e-9)
    assert abs(log_loss(halves[0]) - log_loss(one)) < 0.005, (log_loss(halves[0]),
                                                              log_loss(one))
    assert log_loss(halves[0]) < 0.95 * np.log(2)  # and it learned


def test_two_learners_on_halves_give_lloyd_kmeans_of_all_rows(xp, train_together):
    """On the CPU and, with CuPy, on the GPU (where only float rounding differs)."""
    X = blobs(4000, 8, 6, spread=1.5, seed=4).X
    start = X[np.random.default_rng(5).choice(4000, 6, replace=False)]  # one start for all
    kw = {"algorithm": "lloyd", "random_state": 0, "tol": 0.0, "init": start,
          "device": "cpu" if xp is np else "gpu"}
    one = KMeans(6, **kw)
    one.learner(X, n_passes=6, batch_size=500, val_every=0).fit(progress=None)
    group = ThreadGroup(2)
    halves = [KMeans(6, **kw) for _ in range(2)]
    learners = [h.learner(X[:2000] if r == 0 else X[2000:], n_passes=6, batch_size=500,
                          val_every=0, comm=group.comm(r)) for r, h in enumerate(halves)]
    train_together(learners)
    tol = {"rtol": 1e-6, "atol": 1e-8} if xp is np else {"rtol": 1e-4, "atol": 1e-6}
    for h in halves:
        np.testing.assert_allclose(backend.to_host(h.cluster_centers_),
                                   backend.to_host(one.cluster_centers_), **tol)


def test_each_rank_visits_its_rows_in_its_own_order():
    from bidlab.learn import Learner
    from bidlab.learn.datasource import MemorySource
    from bidlab.models.lsq import LeastSquares

    group = ThreadGroup(2)
    X, Y = np.arange(200.0).reshape(100, 2), np.zeros((100, 1))
    orders = []
    for r in range(2):
        src = MemorySource(X, Y, batch_size=100, shuffle=True, seed=3)
        lrn = Learner(LeastSquares(), src, comm=group.comm(r))
        orders.append(lrn.source.next().ids.copy())
    assert not np.array_equal(orders[0], orders[1])
    alone = MemorySource(X, Y, batch_size=100, shuffle=True, seed=3).next().ids
    np.testing.assert_array_equal(orders[0], alone)  # rank 0 keeps the seed


def test_a_stop_on_one_rank_stops_the_group():
    from bidlab.learn import Grad, Learner
    from bidlab.models.lsq import LeastSquares

    rng = np.random.default_rng(0)
    group = ThreadGroup(2, timeout=30)
    learners = [Learner(LeastSquares(), (rng.standard_normal((200, 3)),
                                         rng.standard_normal((200, 1))),
                        Grad(lrate=0.01), batch_size=10, n_passes=100_000, val_every=0,
                        comm=group.comm(r)) for r in range(2)]
    for lrn in learners:
        lrn.start()
    while min(lrn.step for lrn in learners) < 5:
        threading.Event().wait(0.01)
    learners[1].stop()
    for lrn in learners:
        assert lrn.join(timeout=30), "a rank kept running after its peer stopped"
        assert lrn.state == "stopped", lrn.state
    # the stop waits for the next meeting (a sync point or a pass end of 20 minibatches),
    # where both ranks are: the same step
    assert learners[0].step == learners[1].step
    step = learners[0].step
    assert step % learners[0].opts.sync_every == 0 or step % 20 == 0, step


def test_ranks_meet_only_at_sync_points(train_together):
    """Between sync points each rank runs at its own pace: with ``sync_every=5`` the
    ranks meet at the run's first boundary and at the boundary after each combine, never
    at the four boundaries between (this communicator carries no meeting with its
    combine; MPI's does, and then meets with the combine alone)."""
    from bidlab.learn import Grad, Learner
    from bidlab.models.lsq import LeastSquares

    rng = np.random.default_rng(0)
    group = ThreadGroup(2, timeout=30)
    calls = {"meet": [0, 0], "combine": [0, 0]}
    learners = []
    for r in range(2):
        comm = group.comm(r)
        for name in calls:
            def counted(*a, _f=getattr(comm, name), _n=name, _r=r, **k):
                calls[_n][_r] += 1
                return _f(*a, **k)
            setattr(comm, name, counted)
        learners.append(Learner(LeastSquares(), (rng.standard_normal((200, 3)),
                                                 rng.standard_normal((200, 1))),
                                Grad(lrate=0.01), batch_size=10, n_passes=3, val_every=0,
                                comm=comm, sync_every=5))
    train_together(learners)
    assert all(lrn.step == 60 for lrn in learners)
    # 60 steps: a combine every 5, and the end's ...
    assert calls["combine"] == [13, 13], calls
    # ... and a meeting at the first boundary and after each of the 12 in-run combines
    # (at every boundary it would be 61)
    assert calls["meet"] == [13, 13], calls


def test_each_rank_writes_and_reads_its_own_checkpoint(tmp_path, train_together):
    X = blobs(2000, 4, 3, spread=1.0, seed=2).X
    start = X[:3]
    group = ThreadGroup(2)
    ck = str(tmp_path / "ck.npz")
    halves = [KMeans(3, algorithm="lloyd", init=start, tol=0.0) for _ in range(2)]
    learners = [h.learner(X[:1000] if r == 0 else X[1000:], n_passes=2, batch_size=250,
                          checkpoint=ck, comm=group.comm(r)) for r, h in enumerate(halves)]
    train_together(learners)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.rank0.npz", "ck.rank1.npz"]
    group2 = ThreadGroup(2)
    again = [KMeans(3, algorithm="lloyd", init=start, tol=0.0).learner(
        X[:1000] if r == 0 else X[1000:], n_passes=2, batch_size=250, comm=group2.comm(r))
        for r in range(2)]
    for r, lrn in enumerate(again):
        lrn.load(ck)
        assert lrn.step == learners[r].step


def test_lda_keeps_its_documents_warm_starts_in_a_checkpoint(tmp_path):
    from bidlab.learn.rowstate import RowState

    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.poisson(0.3, (120, 40)).astype(np.float64))
    lrn = LDA(4, n_passes=2, batch_size=20, random_state=0).learner(X, val_every=0)
    lrn.fit(progress=None)
    lrn.save(str(tmp_path / "ck.npz"))
    other = LDA(4, n_passes=2, batch_size=20, random_state=0).learner(X, val_every=0)
    other.load(str(tmp_path / "ck.npz"))
    store = other.model._store
    assert isinstance(store, RowState) and bool(store.seen.data.all())
    np.testing.assert_array_equal(store.values.data, lrn.model._store.values.data)


def test_convergence_on_one_rank_ends_both_at_that_pass_end(train_together):
    """Pass ends are meetings too: with 7 minibatches a pass and ``sync_every=5`` (no sync
    at the pass end), rank 1's model converging at the end of its second pass stops both
    ranks there, not at the next sync point."""
    from bidlab.learn import Grad, Learner
    from bidlab.models.lsq import LeastSquares

    class ConvergesOnRank1(LeastSquares):
        rank = 0

        def end_pass(self, pass_):
            super().end_pass(pass_)
            self.converged = self.rank == 1 and pass_ == 1

    rng = np.random.default_rng(2)
    group = ThreadGroup(2, timeout=30)
    learners = []
    for r in range(2):
        model = ConvergesOnRank1()
        model.rank = r
        learners.append(Learner(model, (rng.standard_normal((70, 3)),
                                        rng.standard_normal((70, 1))),
                                Grad(lrate=0.01), batch_size=10, n_passes=50, val_every=0,
                                comm=group.comm(r), sync_every=5))
    train_together(learners)
    assert [lrn.step for lrn in learners] == [14, 14]
    assert all(lrn.state == "done" for lrn in learners), [lrn.state for lrn in learners]


def test_a_rank_that_fails_releases_the_others_at_once_with_its_error():
    """The others do not wait out the group's timeout: they end with the failing rank's
    error named."""
    import time

    from bidlab.learn import Grad, Learner, MemorySource
    from bidlab.models.lsq import LeastSquares

    class Failing(LeastSquares):
        def update(self, batch):
            if batch.index == 5:
                raise ValueError("rank 1 fails on purpose")
            return super().update(batch)

    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(4000, 4)), rng.normal(size=(4000, 1))
    group = ThreadGroup(2, timeout=60)
    learners = [Learner(model, MemorySource(X[r::2], Y[r::2], batch_size=20), Grad(lrate=0.01),
                        comm=group.comm(r), n_passes=20, sync_every=1)
                for r, model in enumerate((LeastSquares(), Failing()))]
    t0 = time.perf_counter()
    for lrn in learners:
        lrn.start()
    with pytest.raises(ValueError, match="fails on purpose"):
        learners[1].join()
    with pytest.raises(RuntimeError, match="rank 1 of this 2-learner group failed: "
                       "ValueError: rank 1 fails on purpose"):
        learners[0].join()
    assert time.perf_counter() - t0 < 20  # not the 60 s timeout
