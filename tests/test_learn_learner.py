"""The learner end to end: convergence, threads, live options, failures, observers, registry."""

from __future__ import annotations

import gc
import io
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl
from bidlab import backend
from bidlab.learn import (
    ADAGrad,
    Grad,
    L2Regularizer,
    Learner,
    MemorySource,
    Model,
    ShardSource,
    progress,
    registry,
    write_shards,
)
from bidlab.models.lsq import LeastSquares


def planted(n=3000, f=12, k=2, sparse=False, seed=0, noise=0.01):
    """Least-squares data with a known answer: Y = X W^T + b + small noise."""
    rng = np.random.default_rng(seed)
    if sparse:
        X = sp.random(n, f, density=0.4, format="csr", dtype=np.float32, random_state=seed,
                      data_rvs=lambda m: rng.standard_normal(m))
        Xd = X.toarray()
    else:
        X = Xd = rng.standard_normal((n, f)).astype(np.float32)
    W = rng.standard_normal((k, f)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    Y = (Xd @ W.T + b + noise * rng.standard_normal((n, k))).astype(np.float32)
    A = np.hstack([Xd, np.ones((n, 1), np.float32)]).astype(np.float64)
    sol = np.linalg.lstsq(A, Y.astype(np.float64), rcond=None)[0]
    return X, Y, sol[:-1].T, sol[-1]


def _check_solution(model, W, b, tol):
    np.testing.assert_allclose(model.coef_, W, atol=tol)
    np.testing.assert_allclose(model.intercept_, b, atol=tol)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_least_squares_converges_from_memory(sparse):
    X, Y, W, b = planted(sparse=sparse)
    lr = Learner(LeastSquares(), MemorySource(X, Y, batch_size=128, shuffle=True),
                 ADAGrad(lrate=0.05, texp=0.0), n_passes=8)
    lr.fit(progress=None)
    assert lr.state == "done"
    _check_solution(lr.model, W, b, 2e-3)
    s = lr.summaries[-1]
    assert s["train_score"] > -1e-3 and s["val_score"] > -1e-3  # -MSE near the noise level
    assert len(lr.summaries) == 8


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("placement", ["data-where-trained", "data-on-host"])
def test_least_squares_on_each_backend(xp, sparse, placement):
    """numpy always; with a GPU, cupy containers fed from device data and from host data."""
    if xp is np and placement == "data-on-host":
        pytest.skip("the same as data-where-trained on the CPU")
    X, Y, W, b = planted(sparse=sparse)
    device = "cpu" if xp is np else "gpu"
    if device == "gpu" and placement == "data-where-trained":
        X, Y = backend.to_device(X), xp.asarray(Y)
    src = MemorySource(X, Y, batch_size=128, shuffle=True, device=device)
    lr = Learner(LeastSquares(), src, ADAGrad(lrate=0.05, texp=0.0), n_passes=8)
    seen = []
    lr.observe(lambda s: seen.append(s.views["w"].copy()), rate=50, views={"w": 0})
    lr.fit(progress=None)
    _check_solution(lr.model, W, b, 2e-3)
    assert isinstance(lr.model.modelmats[0].data, xp.ndarray)
    lr.observers.wait_idle()
    assert isinstance(seen[-1], np.ndarray) and seen[-1].shape == W.shape
    np.testing.assert_array_equal(seen[-1], lr.model.coef_)  # the final snapshot
    before = backend.allocations.snapshot()[0]
    lr.set(n_passes=10)
    lr.fit(progress=None)
    assert backend.allocations.snapshot()[0] == before


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_least_squares_from_shards_equals_memory(tmp_path, sparse):
    X, Y, W, b = planted(n=2000, sparse=sparse, seed=1)
    write_shards(tmp_path, X, Y, rows_per_shard=300)
    models = []
    for src in (ShardSource(tmp_path, batch_size=100), MemorySource(X, Y, batch_size=100)):
        lr = Learner(LeastSquares(), src, Grad(lrate=0.1), n_passes=6)
        lr.fit(progress=None)
        src.close()
        models.append(lr.model)
    # identical minibatches in identical order: identical models
    np.testing.assert_array_equal(models[0].coef_, models[1].coef_)
    _check_solution(models[0], W, b, 2e-3)


def test_training_allocates_nothing_after_warm_up():
    X, Y, _, _ = planted(n=1000)
    lr = Learner(LeastSquares(), (X, Y), Grad(lrate=0.1), batch_size=96, n_passes=2)
    lr.fit(progress=None)
    before = backend.allocations.snapshot()[0]
    misses = bl.cache_stats()["misses"]
    lr.set(n_passes=5, lrate=0.05)  # a live change rewrites a hyperparameter in place
    lr.fit(progress=None)
    assert backend.allocations.snapshot()[0] == before
    assert bl.cache_stats()["misses"] == misses  # no new cache entry either


def test_validation_holds_out_every_kth_minibatch():
    X, Y, _, _ = planted(n=1000)
    lr = Learner(LeastSquares(), (X, Y), Grad(), batch_size=40, n_passes=2, val_every=4)
    lr.fit(progress=None)
    h = lr.history()
    assert len(h["step"]) == 50
    np.testing.assert_array_equal(h["val"], h["index"] % 4 == 3)
    assert np.isfinite(h["score"]).all()
    assert lr.updater.t == 50 - 12  # held-out minibatches never train


def test_history_as_a_dataframe_and_as_csv(tmp_path):
    import csv

    pd = pytest.importorskip("pandas")
    X, Y, _, _ = planted(n=400)
    lr = Learner(LeastSquares(), (X, Y), Grad(), batch_size=40, n_passes=2, val_every=4)
    lr.fit(progress=None)
    cols = lr.history()
    frame = lr.history(as_frame=True)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == list(cols)
    assert len(frame) == 20
    np.testing.assert_array_equal(frame["score"].to_numpy(), cols["score"])
    path = lr.to_csv(tmp_path / "history.csv")
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == list(cols) and len(rows) == 21
    back = pd.read_csv(path)
    np.testing.assert_array_equal(back["step"].to_numpy(), cols["step"])
    np.testing.assert_array_equal(back["val"].to_numpy(), cols["val"].astype(int))
    np.testing.assert_array_equal(back["score"].to_numpy(), cols["score"])  # exact: repr


class Counter(Model):
    """W += lrate each step (update direction 1); the score is W before the step.

    So W[step + 1] - W[step], read from the record's scores, is the learning rate that
    minibatch ``step`` really used.
    """

    def __init__(self, delay=0.0, fail_at=None, **kw):
        super().__init__(**kw)
        self.delay, self.fail_at = delay, fail_at
        self.calls = 0

    def init(self, info):
        self.modelmats = [bl.zeros((1, 1), np.float64)]
        self.updatemats = [bl.ones((1, 1), np.float64)]

    def update(self, batch):
        if self.fail_at is not None and self.calls == self.fail_at:
            raise_from_update(self.calls)
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        return float(self.modelmats[0].data[0, 0])

    def evaluate(self, batch):
        return float(self.modelmats[0].data[0, 0])


def raise_from_update(step):
    raise FloatingPointError(f"planted failure at step {step}")


def _counter_learner(**kw):
    kw.setdefault("delay", 0.002)
    model = Counter(delay=kw.pop("delay"), fail_at=kw.pop("fail_at", None))
    opts = dict(n_passes=10_000, val_every=0)
    opts.update(kw)
    return Learner(model, np.zeros((50, 1)), Grad(lrate=1.0), batch_size=1, **opts)


def test_live_lrate_change_is_used_by_the_next_minibatch():
    lr = _counter_learner()
    lr.start()
    while lr.step < 20:
        time.sleep(0.001)
    in_flight = lr.step  # minibatches finished when we set; one may be running
    version = lr.set(lrate=0.25)
    while lr.step < in_flight + 20:
        time.sleep(0.001)
    lr.stop()
    h = lr.history()
    first_new = int(h["step"][np.argmax(h["opts_version"] >= version)])
    assert first_new <= in_flight + 1  # the next minibatch boundary at the latest
    assert (h["opts_version"][h["step"] >= first_new] >= version).all()
    # the rate each minibatch really used (from the model's own trajectory)
    used = np.diff(h["score"])
    claimed = np.array([lr.option_used("lrate", int(s)) for s in h["step"][:-1]])
    np.testing.assert_allclose(used, claimed)
    assert set(np.round(used, 6)) == {1.0, 0.25}


def test_options_set_between_runs_are_used_by_the_next_run():
    lr = _counter_learner(max_steps=5, delay=0.0)
    lr.fit(progress=None)
    lr.set(lrate=0.25, max_steps=10)
    lr.fit(progress=None)
    assert lr.model.modelmats[0].data[0, 0] == 5 * 1.0 + 5 * 0.25
    assert [lr.option_used("lrate", s) for s in (4, 5)] == [1.0, 0.25]


def test_exception_in_update_surfaces_on_join_with_its_traceback():
    lr = _counter_learner(fail_at=7, delay=0.0)
    seen = []
    lr.observe(seen.append, rate=1000)
    lr.start()
    with pytest.raises(FloatingPointError, match="planted failure at step 7") as ei:
        lr.join(timeout=10)
    assert lr.state == "failed"
    frames = [f.name for f in ei.traceback]
    assert "update" in frames and "raise_from_update" in frames
    assert "raise_from_update" in lr.traceback
    with pytest.raises(FloatingPointError):
        lr.join()  # every join re-raises
    lr.observers.wait_idle()
    final = seen[-1]
    assert final.state == "failed" and "planted failure at step 7" in final.error
    # the model is still consistent and the learner can be started again
    assert lr.model.modelmats[0].data[0, 0] == 7.0
    lr.model.fail_at = None
    lr.set(max_steps=12)
    lr.start().join(10)
    assert lr.state == "done" and lr.step == 12


def test_start_twice_is_refused_and_pause_resume_stop_work():
    lr = _counter_learner()
    lr.start()
    with pytest.raises(RuntimeError, match="already running: a learner runs one training loop"):
        lr.start()
    lr.pause(wait=True)
    assert lr.state == "paused"
    with pytest.raises(RuntimeError, match="already paused"):
        lr.start()
    s = lr.step
    time.sleep(0.05)
    assert lr.step == s  # paused: no progress
    lr.resume()
    while lr.step < s + 5:
        time.sleep(0.001)
    assert lr.stop() == "stopped"
    steps = lr.step
    assert lr.model.modelmats[0].data[0, 0] == steps  # every finished minibatch applied
    lr.set(max_steps=steps + 5)
    lr.start().join(10)  # continues where it stopped
    assert lr.state == "done" and lr.step == steps + 5


def test_stop_while_paused_and_stop_before_start():
    lr = _counter_learner()
    assert lr.stop() == "created"
    lr.start()
    lr.pause(wait=True)
    assert lr.stop(timeout=5) == "stopped"


def test_observers_are_rate_limited_and_get_host_views():
    X, Y, _, _ = planted(n=500, k=3)
    lr = Learner(LeastSquares(), (X, Y), Grad(lrate=0.05), batch_size=10, n_passes=10_000)
    got = []
    lr.observe(lambda s: got.append((s.step, s.views["top"].copy(), s.metrics)), rate=20,
               views={"top": (0, 2), "b": 1, "f": lambda m: m.modelmats[0] * 2})
    lr.start()
    time.sleep(0.5)
    lr.stop()
    lr.observers.wait_idle()
    assert 3 <= len(got) <= 20 * 0.5 + 3
    steps = [g[0] for g in got]
    assert steps == sorted(steps)
    assert got[-1][1].shape == (2, 12) and isinstance(got[-1][1], np.ndarray)
    assert got[-1][2]["state"] == "stopped"
    np.testing.assert_array_equal(got[-1][1], lr.model.coef_[:2].astype(np.float32))


def test_a_slow_observer_does_not_stall_training():
    lr = _counter_learner(delay=0.0005)
    calls = []

    def slow(snap):
        calls.append(snap.step)
        time.sleep(0.2)

    lr.observe(slow, rate=100)
    lr.start()
    time.sleep(0.45)
    lr.stop()
    assert len(calls) <= 4
    assert lr.step > 50  # training went on while the observer slept


def test_observer_that_raises_stays_subscribed_and_training_goes_on():
    lr = _counter_learner(delay=0.001, max_steps=150)
    sub = lr.observe(lambda s: 1 / 0, rate=100)
    lr.fit(progress=None)
    lr.observers.wait_idle()
    assert lr.state == "done" and sub.delivered >= 2
    assert isinstance(sub.errors[-1], ZeroDivisionError)
    with pytest.raises(ValueError, match="rate"):
        lr.observe(print, rate=0)
    with pytest.raises(ValueError, match="view 'x'"):
        lr.observe(print, views={"x": "top"})


def test_registry_lists_live_learners_and_forgets_collected_ones():
    lr = _counter_learner(max_steps=5, delay=0.0)
    name = lr.name
    assert name in registry.names()
    lr.fit(progress=None)
    info = {d["name"]: d for d in registry.info()}[name]
    assert info["state"] == "done" and info["model"] == "Counter" and info["progress"] == 1.0
    other = _counter_learner(max_steps=5)
    assert other.name != name and other.name.startswith("counter")
    del lr
    gc.collect()
    assert name not in registry.names()
    with pytest.raises(KeyError, match="no live learner named"):
        registry.get(name)
    registry.get(other.name).start()
    registry.stop(other.name)
    other.join(5)
    assert other.state in ("stopped", "done")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_fit_prints_pass_summary_lines(monkeypatch):
    monkeypatch.setattr(progress, "PASS_LINE_EVERY_S", 0.0)  # every pass's line
    X, Y, _, _ = planted(n=600)
    lr = Learner(LeastSquares(), (X, Y), Grad(), batch_size=50, n_passes=3, name="demo")
    out = _Terminal()  # the text bar is drawn on a terminal only
    lr.fit(progress="text", file=out)
    lines = [ln.strip("\r ") for ln in out.getvalue().splitlines()]
    summaries = [ln for ln in lines if ln.startswith("pass")]
    assert len(summaries) == 3
    for field in ("100.0%", "train -", "val -", "samples/s", "GFLOP/s", "MB/s", "cache"):
        assert field in summaries[-1]
    assert "demo [" in out.getvalue()


def test_training_thread_runs_with_caching_on():
    seen = []

    class Probe(Counter):
        def update(self, batch):
            seen.append(bl.caching_enabled())
            return super().update(batch)

    lr = Learner(Probe(), np.zeros((3, 1)), Grad(), batch_size=1, n_passes=1, val_every=0)
    lr.fit(progress=None)
    assert seen == [True] * 3 and not bl.caching_enabled()


def test_l2_mixin_gives_the_ridge_solution():
    from sklearn.linear_model import Ridge

    X, Y, _, _ = planted(n=800, f=6, k=1, noise=0.5)
    l2 = 0.05
    lr = Learner(LeastSquares(), (X, Y), Grad(lrate=0.05), [L2Regularizer(l2=l2, mats=[0])],
                 batch_size=800, n_passes=400, val_every=0)
    lr.fit(progress=None)
    ridge = Ridge(alpha=l2 * 800 / 2).fit(X, Y)
    np.testing.assert_allclose(lr.model.coef_, ridge.coef_.reshape(1, -1), atol=1e-4)
    np.testing.assert_allclose(lr.model.intercept_, np.ravel(ridge.intercept_), atol=1e-4)
    assert lr.metrics["kpi_l2"] == pytest.approx(0.5 * l2 * (ridge.coef_ ** 2).sum(), rel=1e-3)


def test_threads_do_not_leak():
    before = {t.name for t in threading.enumerate()}
    lr = _counter_learner(max_steps=20, delay=0.0)
    lr.observe(lambda s: None)
    lr.fit(progress=None)
    del lr
    gc.collect()
    time.sleep(1.2)  # the publisher wakes at least once a second
    after = {t.name for t in threading.enumerate()}
    assert not {n for n in after - before if n.startswith("bidlab-")}


def test_join_racing_start_never_sees_an_unstarted_thread():
    import threading as th

    X = np.random.default_rng(0).standard_normal((100, 3)).astype(np.float32)
    errors = []
    for _ in range(200):
        lr = Learner(LeastSquares(), (X, X[:, :1]), Grad(), batch_size=50, n_passes=1)
        gate = th.Barrier(2)

        def joiner(lr=lr, gate=gate):
            gate.wait()
            try:
                lr.join(5)
            except RuntimeError as exc:  # "cannot join thread before it is started"
                errors.append(exc)

        t = th.Thread(target=joiner)
        t.start()
        gate.wait()
        lr.start()
        t.join()
        lr.join(5)
    assert not errors, errors[:3]


def test_summaries_keep_the_last_passes_only(monkeypatch):
    from bidlab.learn import learner as learner_mod

    assert learner_mod.SUMMARIES_KEPT >= 1000
    monkeypatch.setattr(learner_mod, "SUMMARIES_KEPT", 5)
    X = np.random.default_rng(0).standard_normal((20, 2)).astype(np.float32)
    lr = Learner(LeastSquares(), (X, X[:, :1]), Grad(), batch_size=20, n_passes=30,
                 val_every=0)
    lr.fit(progress=None)
    assert [s["pass"] for s in lr.summaries] == [25, 26, 27, 28, 29]


def test_a_diverging_model_fails_the_learner_and_keeps_the_last_finite_checkpoint(tmp_path):
    from bidlab.learn.learner import DivergedError

    rng = np.random.default_rng(0)
    X = (rng.standard_normal((400, 4)) * 10).astype(np.float32)
    Y = X @ rng.standard_normal((4, 1)).astype(np.float32)
    ck = tmp_path / "ck.npz"
    lr = Learner(LeastSquares(), (X, Y), Grad(lrate=1e-4), batch_size=50, n_passes=1,
                 checkpoint=str(ck))
    lr.fit(progress=None)
    good = np.load(ck)["model/0"].copy()
    lr.set(lrate=1e12, n_passes=8)
    with pytest.raises(DivergedError, match=r"NaN or inf at step \d+ .*lrate=1e\+12"), \
            np.errstate(all="ignore"):
        lr.fit(progress=None)
    assert lr.state == "failed"
    assert np.isfinite(np.load(ck)["model/0"]).all()
    np.testing.assert_array_equal(np.load(ck)["model/0"], good)
