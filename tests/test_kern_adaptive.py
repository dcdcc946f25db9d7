"""bidlab.kern.adaptive: each CPU kernel runs serial or parallel, whichever is cheaper now.

The choice logic is tested with a fake clock (no timing of real work, so these tests cannot
be flaky); the kernels' two compiled versions are checked to give bit-identical results,
which is what lets the choice change a call's time but never its answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.kern import adaptive, cpu, cpu_elementwise, kmeans, steps, touched


@pytest.fixture(autouse=True)
def _fresh_timings():
    adaptive.reset()
    old = adaptive.get_policy()
    adaptive.set_policy("adaptive")
    yield
    adaptive.set_policy(old)
    adaptive.reset()


class FakeClock:
    """Replaces ``time.perf_counter`` inside adaptive; the fake kernels advance it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fake_kernels(clock: FakeClock, costs: dict[str, float], log: list[str]):
    def make(mode: str):
        def call() -> str:
            clock.now += costs[mode]
            log.append(mode)
            return mode
        return call
    return make("serial"), make("parallel")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    if numba.get_num_threads() < 2:
        pytest.skip("one numba thread: every kernel runs serially, there is no choice")
    fake = FakeClock()
    monkeypatch.setattr(adaptive.time, "perf_counter", fake)
    return fake


def test_runs_the_cheaper_version_and_probes_the_other(clock: FakeClock) -> None:
    costs = {"serial": 1.0e-3, "parallel": 1.2e-3}  # close: re-checked every PROBE_EVERY
    log: list[str] = []
    serial, parallel = fake_kernels(clock, costs, log)
    seeds = 2 * adaptive.SEED_RUNS
    results = [adaptive.run("site", 1000, serial, parallel) for _ in range(seeds + 10 * 32)]
    assert results == log  # the chosen kernel's return value comes back
    # warm-up: the parallel calls (the first may include compiling), then the serial ones
    assert log[:seeds] == ["parallel"] * adaptive.SEED_RUNS + ["serial"] * adaptive.SEED_RUNS
    steady = log[seeds:]
    assert steady.count("parallel") == 10
    assert all(steady[i] == "parallel" for i in range(31, len(steady), 32))
    d = adaptive.decisions()["site[work~4^5]"]
    assert d["prefers"] == "serial"
    assert d["serial_ns_per_unit"] == pytest.approx(1e3)
    assert d["parallel_ns_per_unit"] == pytest.approx(1.2e3)


def test_probes_that_would_cost_much_are_rare(clock: FakeClock) -> None:
    costs = {"serial": 1e-3, "parallel": 8e-3}  # a busy machine: parallel loses 8x
    log: list[str] = []
    serial, parallel = fake_kernels(clock, costs, log)
    seeds = 2 * adaptive.SEED_RUNS
    for _ in range(seeds + 2000):
        adaptive.run("site", 1000, serial, parallel)
    probes = log[seeds:].count("parallel")
    # a probe waits for PROBE_BUDGET x its extra cost (7 ms) of time at the site: ~350 calls
    assert 4 <= probes <= 6
    lost = probes * (costs["parallel"] - costs["serial"])
    assert lost / (clock.now) < 1.5 / adaptive.PROBE_BUDGET


def test_long_calls_are_not_run_serially_just_to_measure_them(clock: FakeClock) -> None:
    # a full-batch fit of a few passes, each a 0.4 s parallel call: measuring the serial
    # version (up to `threads` x as long, twice) waits until the site has run
    # WARMUP_BUDGET x that long, then happens as for short calls
    costs = {"serial": 0.7, "parallel": 0.4}
    log: list[str] = []
    serial, parallel = fake_kernels(clock, costs, log)
    threads = numba.get_num_threads()
    runs = adaptive.SEED_RUNS
    risk = (runs - 1) * (threads - 1) * costs["parallel"]
    first_serial = round(adaptive.WARMUP_BUDGET * risk / costs["parallel"])
    for _ in range(first_serial + runs + 2):
        adaptive.run("pass", 1000, serial, parallel)
    assert log[:first_serial] == ["parallel"] * first_serial
    assert log[first_serial:first_serial + runs] == ["serial"] * runs
    assert log[first_serial + runs:] == ["parallel", "parallel"]
    assert adaptive.decisions()["pass[work~4^5]"]["prefers"] == "parallel"
    # calls whose serial runs could lose at most WARMUP_FREE seconds are measured at once
    log.clear()
    short = fake_kernels(clock, {"serial": 0.01, "parallel": 0.02}, log)
    for _ in range(2 * runs + 2):
        adaptive.run("short", 1000, *short)
    if (runs - 1) * (threads - 1) * 0.02 <= adaptive.WARMUP_FREE:
        assert log == ["parallel"] * runs + ["serial"] * (runs + 2)


def test_follows_the_machine_when_it_changes(clock: FakeClock) -> None:
    costs = {"serial": 1e-3, "parallel": 8e-3}
    log: list[str] = []
    serial, parallel = fake_kernels(clock, costs, log)
    for _ in range(100):
        adaptive.run("site", 1000, serial, parallel)
    costs["parallel"] = 0.5e-3  # the other process ended: two cores are free again
    log.clear()
    for _ in range(1200):
        adaptive.run("site", 1000, serial, parallel)
    # the first probe comes in below the parallel estimate, which it replaces: the site
    # switches at once (averaged in, it took several probes)
    switched = log.index("parallel")
    assert log[switched:switched + 20] == ["parallel"] * 20
    assert switched < 1000
    assert log[-64:].count("parallel") >= 62  # switched back, probing serial now and then
    assert adaptive.decisions()["site[work~4^5]"]["prefers"] == "parallel"


def test_one_slow_reading_does_not_decide(clock: FakeClock) -> None:
    # the parallel version's second run still waited for the thread pool (6x its cost):
    # the seed is the lowest reading after the first, so the site still runs parallel
    costs = {"serial": 2e-3, "parallel": 1e-3}
    slow = iter([20e-3, 6e-3])  # the first two parallel runs
    log: list[str] = []

    def parallel() -> str:
        clock.now += next(slow, costs["parallel"])
        log.append("parallel")
        return "parallel"

    serial, _ = fake_kernels(clock, costs, log)
    for _ in range(2 * adaptive.SEED_RUNS + 40):
        adaptive.run("site", 1000, serial, parallel)
    steady = log[2 * adaptive.SEED_RUNS:]
    assert steady.count("serial") <= 1  # a probe at most
    assert adaptive.decisions()["site[work~4^5]"]["parallel_ns_per_unit"] == pytest.approx(1e3)


def test_size_classes_and_sites_keep_separate_timings(clock: FakeClock) -> None:
    log: list[str] = []
    small = fake_kernels(clock, {"serial": 1e-3, "parallel": 5e-3}, log)
    big = fake_kernels(clock, {"serial": 8e-1, "parallel": 4e-1}, log)
    for _ in range(40):
        adaptive.run("k", 1_000, *small)
        adaptive.run("k", 1_000_000, *big)
        adaptive.run("other", 1_000, *big)
    d = adaptive.decisions()
    assert d["k[work~4^5]"]["prefers"] == "serial"
    assert d["k[work~4^10]"]["prefers"] == "parallel"
    assert d["other[work~4^5]"]["prefers"] == "parallel"


def test_fixed_policies_skip_the_bookkeeping(clock: FakeClock) -> None:
    log: list[str] = []
    serial, parallel = fake_kernels(clock, {"serial": 1.0, "parallel": 2.0}, log)
    with adaptive.policy("parallel"):
        for _ in range(5):
            adaptive.run("site", 10, serial, parallel)
    with adaptive.policy("serial"):
        for _ in range(5):
            adaptive.run("site", 10, serial, parallel)
    assert log == ["parallel"] * 5 + ["serial"] * 5
    assert adaptive.decisions() == {}
    assert adaptive.get_policy() == "adaptive"
    with pytest.raises(ValueError, match="use one of"):
        adaptive.set_policy("fast")


def test_environment_variable_sets_the_policy_and_rejects_typos() -> None:
    code = "from bidlab.kern import adaptive; print(adaptive.get_policy())"
    env = {**os.environ, "BIDLAB_KERNEL_THREADS": "serial"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "serial"
    env["BIDLAB_KERNEL_THREADS"] = "fastest"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0
    assert "BIDLAB_KERNEL_THREADS='fastest'" in out.stderr and "adaptive" in out.stderr


# ------------------------------------------------------------------ the compiled pairs
@adaptive.adaptive_kernel()
def _thread_ids(out):  # pragma: no cover - compiled
    for i in numba.prange(out.shape[0]):
        out[i] = numba.get_thread_id()


def test_serial_runs_use_one_thread_and_restore_the_count() -> None:
    if numba.get_num_threads() < 2:
        pytest.skip("one numba thread: nothing to restrict")
    out = np.full(4096, -1, np.int64)
    _thread_ids.serial(out)
    assert set(out.tolist()) == {0}
    assert numba.get_num_threads() >= 2  # restored
    _thread_ids.parallel(out)
    assert len(set(out.tolist())) == numba.get_num_threads()
    numba.set_num_threads(1)  # a user's own limit is kept, and a serial run is then free
    try:
        _thread_ids.serial(out)
        assert numba.get_num_threads() == 1
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def _csr(m: int, n: int, density: float, dtype: type, seed: int) -> sp.csr_matrix:
    x = sp.random(m, n, density=density, format="csr", dtype=dtype, random_state=seed)
    x.data += 0.5
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_serial_and_parallel_versions_give_identical_bits(dtype: type) -> None:
    rng = np.random.default_rng(3)
    x = _csr(301, 257, 0.05, dtype, 1)
    k = 13
    R = rng.random((301, k)).astype(dtype)
    C = rng.random((257, k)).astype(dtype)
    nparts = cpu._nparts(x.indptr)

    def both(pair, make_out, args):
        outs = []
        for version in (pair.serial, pair.parallel):
            out = make_out()
            version(*args(out))
            outs.append(out)
        return outs

    a, b = both(cpu._sddmm, lambda: np.empty(x.nnz, dtype),
                lambda o: (x.indptr, x.indices, R, C, o, nparts))
    np.testing.assert_array_equal(a, b)
    a, b = both(cpu._gather, lambda: np.empty((301, k), dtype),
                lambda o: (x.indptr, x.indices, x.data, C, o, nparts))
    np.testing.assert_array_equal(a, b)
    # the CSR scatter, listed by column: each output row one thread's sum in row order
    listing = cpu._listing(257)
    nu = listing.fill_arrays(x.indptr, x.indices)
    a, b = both(cpu._scatter_listed, lambda: np.full((257, k), np.nan, dtype),
                lambda o: (listing.pos, listing.touched, nu, listing.colptr, listing.perm,
                           listing.row_of, x.data, R, o, nparts))
    listing.clear()
    cpu._listings.give(257, listing)
    np.testing.assert_array_equal(a, b)
    plain = np.empty((257, k), dtype)
    cpu._scatter_serial(x.indptr, x.indices, x.data, R, plain)
    np.testing.assert_allclose(a, plain, rtol=1e-5 if dtype == np.float32 else 1e-12)
    # the learner's fused optimizer steps, hyperparameters along either axis
    M0, U = rng.standard_normal((301, k)).astype(dtype), rng.standard_normal((301, k))
    U = U.astype(dtype)
    for by_inner, h in ((False, rng.random(301).astype(dtype)),
                        (True, rng.random(k).astype(dtype))):
        runs = []
        for v in ("serial", "parallel"):
            M, S, V = M0.copy(), np.abs(M0), U.copy()
            getattr(steps._adagrad, v)(M, U, S, h, h * 0.01, dtype(0.25), dtype(0.5), by_inner)
            getattr(steps._grad, v)(M, U, h, dtype(0.5), by_inner)
            getattr(steps._subtract_scaled, v)(V, M, h, by_inner)
            getattr(steps._subtract_scaled_sign, v)(V, M, h, by_inner)
            runs.append((M, S, V))
        for u, w in zip(*runs, strict=True):
            np.testing.assert_array_equal(u, w)
    a, b = both(cpu_elementwise._csr_row_sums, lambda: np.zeros(301, dtype),
                lambda o: (x.indptr, x.data, o))
    np.testing.assert_array_equal(a, b)
    v = rng.random(1001).astype(dtype) * 5
    a, b = both(cpu_elementwise._expdigamma_flat, lambda: np.empty(1001, dtype), lambda o: (v, o))
    np.testing.assert_array_equal(a, b)
    a, b = both(cpu_elementwise._expdigamma_2d, lambda: np.empty((301, k), dtype),
                lambda o: (R + 0.1, o))
    np.testing.assert_array_equal(a, b)

    # the GLM's touched-rows step (fastmath), ADAGrad and plain, and k-means' nearest centre
    T, n_feat = 7, 257
    X = sp.random(40, n_feat, density=0.05, format="csr", random_state=3, dtype=dtype)
    E = rng.standard_normal((40, T)).astype(dtype)
    lr, l1, l2 = (rng.random(T).astype(dtype) * s for s in (0.1, 1e-3, 1e-2))
    W0 = rng.standard_normal((n_feat, T)).astype(dtype)
    S0 = rng.random((n_feat, T)).astype(dtype)
    step = touched.TouchedStep(n_feat, T, dtype)
    cols = step.columns
    cols.fill(X)  # grows perm / row_of, so the listing's arrays are taken after it
    state = (cols.pos, cols.colptr, cols.perm, cols.row_of, X.data, E, lr, l1, l2)
    # rows last brought up to date at steps 0..4, so the deferred terms are applied too
    done0 = rng.integers(0, 5, n_feat).astype(np.int64)
    rates = np.cumsum(np.vstack([np.zeros((1, 2)), rng.random((6, 2))]), axis=0)
    kernels = ((touched._adagrad_touched, True), (touched._grad_touched, False))
    # the untouched rows' regulariser terms swept, then deferred
    for kernel, sums in kernels:
        for dense_reg, defer, has_l1 in ((True, False, False), (False, True, False),
                                         (True, False, True), (False, True, True)):
            runs = []
            for version in (kernel.serial, kernel.parallel):
                W, S, done = W0.copy(), S0.copy(), done0.copy()
                if sums:
                    version(W, S, *state, lr + 1e-8, dtype(0.5), dtype(0.9), dense_reg, defer,
                            done, 5, rates, 0, step.work, step.scalars, step.powers,
                            cols.touched, cols.n_touched, has_l1)
                else:
                    version(W, *state, dtype(0.9), dense_reg, defer, done, 5, rates, 0,
                            step.work, step.scalars, step.powers, cols.touched,
                            cols.n_touched, has_l1)
                runs.append((W, S, done))
            for a, b in zip(*runs, strict=True):
                np.testing.assert_array_equal(a, b)
        assert not np.array_equal(runs[0][0], W0)
    # the catch-up, with decays within the polynomial's range and (L2 x 300) past it
    for adagrad, l2x in ((True, l2), (False, l2), (True, l2 * 300), (False, l2 * 300)):
        runs = []
        for version in (touched._catch_up_all.serial, touched._catch_up_all.parallel):
            W, S, done = W0.copy(), S0.copy(), done0.copy()
            version(W, S, lr, l1, l2x, lr + 1e-8, done, 6, rates, 0, adagrad, step.work,
                    step.scalars, step.powers)
            runs.append((W, S, done))
        for a, b in zip(*runs, strict=True):
            np.testing.assert_array_equal(a, b)
        assert not np.array_equal(runs[0][0], W0)
    cols.clear()
    D = rng.standard_normal((301, 9)).astype(dtype)
    cc, xx = rng.random(9).astype(dtype), rng.random(301).astype(dtype)
    runs = []
    for version in (kmeans._assign_cpu.serial, kmeans._assign_cpu.parallel):
        labels, d1, d2 = np.empty(301, np.int64), np.empty(301, dtype), np.empty(301, dtype)
        version(D, cc, xx, labels, d1, d2)
        runs.append((labels, d1, d2))
    for u, w in zip(*runs, strict=True):
        np.testing.assert_array_equal(u, w)


def test_public_kernels_record_their_choices() -> None:
    from bidlab import kern

    x = _csr(200, 150, 0.05, np.float32, 2)
    A = np.random.default_rng(0).random((8, 200), dtype=np.float32)
    B = np.random.default_rng(1).random((8, 150), dtype=np.float32)
    for _ in range(6):
        kern.sddmm(A, B, x)
    if numba.get_num_threads() < 2:
        assert adaptive.decisions() == {}
        return
    (name, d), = ((n, d) for n, d in adaptive.decisions().items() if n.startswith("cpu._sddmm"))
    assert d["serial_calls"] + d["parallel_calls"] == 6
    assert d["serial_calls"] >= 2 and d["parallel_calls"] >= 2
    assert d["prefers"] in ("serial", "parallel")


def test_threadpoolctl_limits_reach_the_numba_kernels():
    """threadpoolctl sees numba's thread count (bidlab.kern.threads) and a limit of one
    thread makes every adaptive kernel call run serially, then is put back."""
    import numba
    from threadpoolctl import threadpool_info, threadpool_limits

    numba_pools = [i for i in threadpool_info() if i["user_api"] == "numba"]
    assert len(numba_pools) == 1 and numba_pools[0]["num_threads"] == numba.get_num_threads()
    before = numba.get_num_threads()
    ran = []
    with threadpool_limits(limits=1):
        assert numba.get_num_threads() == 1
        with adaptive.policy("parallel"):
            adaptive.run("limit-test", 1e6, lambda: ran.append("serial"),
                         lambda: ran.append("parallel"))
    assert ran == ["serial"] and numba.get_num_threads() == before
    with threadpool_limits(limits=1, user_api="numba"):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before


def test_run_together_runs_every_call_and_raises_once_all_have_finished() -> None:
    """The first call runs in the calling thread, the others in the pool; an exception in
    any of them is raised only after every call has returned (none still writes)."""
    import threading

    from bidlab.kern.threads import run_together

    done: list[tuple[int, str]] = []

    def work(i: int, fail: bool) -> None:
        time.sleep(0.05 * i)
        done.append((i, threading.current_thread().name))
        if fail:
            raise ValueError(f"call {i} failed")

    run_together(work, [(0, False), (1, False), (2, False)])
    assert sorted(i for i, _ in done) == [0, 1, 2]
    assert dict(done)[0] == threading.current_thread().name
    assert all(name.startswith("bidlab-kernel") for i, name in done if i)
    done.clear()
    with pytest.raises(ValueError, match="call 0 failed"):
        run_together(work, [(0, True), (1, False), (2, True)])
    assert sorted(i for i, _ in done) == [0, 1, 2]


def test_run_together_works_in_a_forked_child() -> None:
    """A child forked after the pool started makes its own (the parent's threads are not
    there)."""
    import multiprocessing

    from bidlab.kern.threads import run_together

    out = np.zeros(3)

    def fill(i: int) -> None:
        out[i] = i + 1

    run_together(fill, [(0,), (1,), (2,)])
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()

    def child() -> None:
        got = np.zeros(3)

        def put(i: int) -> None:
            got[i] = 10 * (i + 1)

        run_together(put, [(0,), (1,), (2,)])
        q.put(got.tolist())

    p = ctx.Process(target=child)
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert q.get(timeout=5) == [10.0, 20.0, 30.0]
    assert out.tolist() == [1.0, 2.0, 3.0]
