"""Array-level stand-ins give the numba kernels' results; a fresh process runs them while the
background compiler fills the cache, then switches to the compiled kernels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import both_paths

from bidlab import kern
from bidlab.kern import standin
from bidlab.kern.kmeans import CenterWork, assigned_sq_dist
from bidlab.kern.kmeans_lloyd import lloyd_block
from bidlab.kern.touched import TouchedStep

REPO = Path(__file__).resolve().parent.parent


def _sparse(m, n, dtype, seed=0, density=0.08):
    S = sp.random(m, n, density=density, format="csr", dtype=np.float64, random_state=seed)
    S.data += 0.5
    return S.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_sums_and_expdigamma(dtype):
    rng = np.random.default_rng(0)
    S = _sparse(300, 200, dtype)
    A = np.asfortranarray(rng.random((6, 300)).astype(dtype))
    B = rng.random((200, 6)).astype(dtype)
    T = np.asfortranarray(rng.random((6, 200)).astype(dtype))
    x = rng.random((30, 6)).astype(dtype) * 5 + 0.01

    def run():
        return [kern.sddmm(A, T, S), kern.sparse_dense(S, B), kern.sparse_t_dense(S, A.T),
                kern.dense_sparse(A, S), kern.dense_sparse_t(T, S), kern.row_sums(S),
                kern.col_sums(S), kern.expdigamma(x), kern.expdigamma(np.asfortranarray(x))]

    compiled, arrays = both_paths(run)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for c, a in zip(compiled, arrays, strict=True):
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol)


def test_scatter_paths():
    """The private-copy and listed scatters (their size thresholds moved to select each)."""
    from bidlab.kern import cpu

    S = _sparse(400, 3000, np.float64, seed=1)
    G = np.random.default_rng(1).random((400, 4))
    out = {}
    for ratio in (1 << 40, 0):  # copies, then listed
        old = cpu.PARALLEL_MIN_WORK, cpu.LISTING_MIN_RATIO
        cpu.PARALLEL_MIN_WORK, cpu.LISTING_MIN_RATIO = 0, ratio
        try:
            out[ratio] = both_paths(lambda: kern.sparse_t_dense(S, G))
        finally:
            cpu.PARALLEL_MIN_WORK, cpu.LISTING_MIN_RATIO = old
    for compiled, arrays in out.values():
        np.testing.assert_allclose(arrays, compiled, rtol=1e-12)
        np.testing.assert_allclose(arrays, S.T @ G, rtol=1e-12)


@pytest.mark.parametrize(("k", "copies"), [(5, 1), (40, 2), (40, 0)])
def test_scatter_sums_and_transpose(k, copies):
    """NMF's running ``S.T @ G`` totals (one nonzero at a time below EACH_BELOW_K, four
    above) and the blocked transpose."""
    from bidlab.kern.scatter_sums import ScatterSums, transpose_into

    rng = np.random.default_rng(1)
    blocks = [_sparse(60, 90, np.float64, seed=s) for s in range(3)]
    Gs = [rng.random((60, k)) for _ in blocks]

    def run():
        sums = ScatterSums(90, k, np.float64, copies=copies)
        for S, G in zip(blocks, Gs, strict=True):
            sums.add(S, G)
        T = np.empty((k, 90))
        total = sums.total(T).copy()
        again = np.empty((90, k))
        transpose_into(T, again)
        return total, T, again, sums.work.copy()

    compiled, arrays = both_paths(run)
    oracle = sum(S.T @ G for S, G in zip(blocks, Gs, strict=True))
    for c, a in zip(compiled[:3], arrays[:3], strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(arrays[0], oracle, rtol=1e-12)
    np.testing.assert_array_equal(arrays[1], arrays[0].T)
    np.testing.assert_array_equal(arrays[2], arrays[0])
    assert not arrays[3].any() and not compiled[3].any()  # the copies are left zeroed
    # the fold's form on copies that hold something (the forced pushes leave them empty)
    from bidlab.kern import arrays as forms

    out, work, T = rng.random((90, k)), rng.random((2, 90, k)), np.empty((k, 90))
    want = out + work[0] + work[1]
    forms.fold(out, work, T)
    np.testing.assert_allclose(out, want, rtol=1e-15)
    np.testing.assert_array_equal(T, out.T)
    assert not work.any()


@pytest.mark.parametrize("case", ["explicit", "implicit", "diagonal"])
def test_als_conjugate_gradient_steps(case):
    """SFA's CG steps (explicit ratings with biases, implicit feedback, and implicit in the
    Gram matrix's eigenbasis) from the same start."""
    from bidlab.kern import als

    rng = np.random.default_rng(2)
    S = _sparse(70, 50, np.float64, seed=3, density=0.15)
    S.data = np.ceil(S.data * 3)
    f = 6
    O0, X0 = rng.standard_normal((50, f)) * 0.3, rng.standard_normal((70, f)) * 0.3
    kw = {"steps": 3}
    if case == "explicit":
        kw.update(l2=0.5, mu=2.0, bias=True)
    else:
        gram = O0.T @ O0 + 0.5 * np.eye(f)
        if case == "diagonal":
            lam, Q = als.rotation(gram)
            O0, X0, gram = O0 @ Q, X0 @ Q, lam
            kw["diagonal"] = True
        kw.update(gram=gram, alpha=2.0)

    def run():
        X, sc = X0.copy(), als.Scratch.new(70, f, np.float64)
        als.solve_rows(S, O0, X, sc, **kw)
        return X, sc.R.copy(), sc.rs.copy(), sc.err.copy()

    compiled, arrays = both_paths(run)
    for c, a in zip(compiled, arrays, strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-12)
    assert not np.allclose(compiled[0], X0), "the steps moved X"


@pytest.mark.parametrize("pruned", [False, True])
def test_lloyd_block_and_distances(pruned):
    rng = np.random.default_rng(2)
    n, d, k = 900, 5, 4
    X = rng.standard_normal((n, d)).astype(np.float32)
    C = rng.standard_normal((k, d)).astype(np.float32)
    cc = (C * C).sum(1)
    lab0 = rng.integers(0, k, n)
    u0 = rng.random(n).astype(np.float32)
    lo0 = rng.random(n).astype(np.float32)
    bounds = {"drift": np.full(k, 0.1, np.float32), "s": np.full(k, 0.3, np.float32),
              "top": 1, "m1": 0.05, "m2": 0.1} if pruned else None

    def run():
        work = CenterWork(k, d)
        work.reset()
        lab, u, lo, xx = lab0.copy(), u0.copy(), lo0.copy(), np.empty(n, np.float32)
        changed = lloyd_block(X, C, cc, xx, lab, u, lo, work, None, xx_ready=False,
                              bounds=bounds)
        sums, counts = np.zeros((k, d)), np.zeros(k)
        work.total(sums, counts)
        dist = np.empty(n)
        assigned_sq_dist(X, lab, C, dist)
        return changed, lab, u, lo, sums, counts, dist

    compiled, arrays = both_paths(run)
    assert compiled[0] == arrays[0]
    np.testing.assert_array_equal(arrays[1], compiled[1])
    for c, a in zip(compiled[2:], arrays[2:], strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("adagrad", "l2", "dtype"), [
    (True, 0.05, np.float64), (False, 0.05, np.float64), (True, 3.0, np.float64),
    (False, 3.0, np.float64), (True, 0.05, np.float32)])
def test_touched_steps_with_deferred_terms(adagrad, l2, dtype, monkeypatch):
    """Ten sparse GLM steps with L1 / L2 deferred (a few rows touched each), then the
    catch-up: the same model as the compiled kernels'. A large L2 takes the rows whose
    decay the polynomial cannot give to the power. The stand-ins work in blocks of 10 rows
    here (many blocks, some with rows behind and some not, some rows all zero)."""
    from bidlab.kern import touched_arrays

    monkeypatch.setattr(touched_arrays, "_CHUNK", 30)
    rng = np.random.default_rng(3)
    d, T, n = 400, 3, 20
    Xs = [_sparse(n, d, np.float64, seed=s, density=0.004) for s in range(10)]
    for X in Xs:
        X.data[:] = rng.random(X.nnz)
    Xs = [X.astype(dtype) for X in Xs]
    As = [rng.standard_normal((n, T)).astype(dtype) for _ in Xs]
    lr, l1, eps = (np.full(T, v, dtype) for v in (0.1, 1e-3, 1e-6))
    l2 = np.full(T, l2, dtype)  # 3.0: decays too large for the polynomial

    def run():
        step = TouchedStep(d, T, dtype)
        M = np.linspace(-1, 1, d * T, dtype=dtype).reshape(d, T)
        M[::7] = 0  # rows not trained yet
        S = np.full((d, T), 0.5, dtype)
        for t, (X, A) in enumerate(zip(Xs, As, strict=True)):
            if adagrad:
                step.adagrad(X, A, M, S, lr, l1, l2, eps, 1.0, 0.9, t)
            else:
                step.grad(X, A, M, lr, l1, l2, 0.9, t)
            assert step.deferring
        step.catch_up(len(Xs))
        return M, S, step.done.copy()

    compiled, arrays = both_paths(run)
    tol = 1e-6 if dtype == np.float64 else 2e-4
    np.testing.assert_allclose(arrays[0], compiled[0], rtol=tol, atol=tol * 1e-3)
    np.testing.assert_allclose(arrays[1], compiled[1], rtol=tol, atol=tol * 1e-3)
    np.testing.assert_array_equal(arrays[2], compiled[2])  # every row caught up to the end


def _fresh_process(code: str, cache: Path, on: bool) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), BIDLAB_BACKGROUND_COMPILE="1" if on
               else "0", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_SWITCH = """
import json
import numpy as np, scipy.sparse as sp
from bidlab import kern
from bidlab.kern import cpu_elementwise, standin
S = sp.random(50, 40, density=0.2, format="csr", random_state=0)
first = kern.col_sums(S)
after_first = standin.runs()
finished = standin.wait(240)
second = kern.col_sums(S)
st = cpu_elementwise._csr_col_sums.stats
print(json.dumps({"runs": [after_first, standin.runs()], "finished": finished,
                  "jobs": standin.status()["jobs"], "same": bool(np.allclose(first, second)),
                  "oracle": bool(np.allclose(first, np.asarray(S.sum(axis=0)).ravel())),
                  "hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values())}))
"""


def test_fresh_process_runs_the_stand_in_then_the_cached_kernel(tmp_path):
    got = _fresh_process(_SWITCH, tmp_path / "on", on=True)
    assert got["runs"] == [1, 1]  # the first call ran the stand-in, the second did not
    assert got["finished"]
    assert [j["state"] for j in got["jobs"]] == ["done"]
    assert got["jobs"][0]["kernel"].endswith("_csr_col_sums")
    assert got["same"] and got["oracle"]
    assert (got["hits"], got["misses"]) == (1, 0)  # loaded from what the worker wrote
    assert any(p.suffix == ".nbc" for p in (tmp_path / "on").rglob("*"))


_ORDER = """
import json
import numpy as np
from bidlab.kern import columns, standin
landed = []
for hook in standin._hooks:
    def done(sig, ok, seconds, hook=hook, first=hook.done):
        landed.append(hook.name)
        first(sig, ok, seconds)
    hook.done = done
pos, touched = np.full(10, -1, np.int32), np.zeros(10, np.int32)
columns._forget(pos, touched, 0)  # priority 0, sent first
indptr, ind = np.array([0, 2], np.int32), np.array([1, 3], np.int32)
columns._by_column(indptr, ind, pos, touched, np.zeros(11, np.int32), np.zeros(2, np.int32),
                   np.zeros(2, np.int32))  # priority -1, sent a moment later
print(json.dumps({"finished": standin.wait(240), "landed": landed}))
"""


def test_the_worker_chooses_its_first_job_by_priority(tmp_path):
    """The worker imports the kernels' modules before it chooses a job, so of the jobs a fit
    sends at once the one with the lowest priority compiles first, not the first sent: the
    GLM column listing (priority -1) before ``_forget``."""
    got = _fresh_process(_ORDER, tmp_path / "order", on=True)
    assert got["finished"]
    assert got["landed"] == ["_by_column", "_forget"]


_PRESTART = """
import json, os, time
import numpy as np, scipy.sparse as sp
from bidlab.kern import standin
before = standin.status()["worker_pid"]
from bidlab import kern
from bidlab.kern import cpu_elementwise
prestarted = standin.status()["worker_pid"]
cold = [standin._cold(h) for h in standin._hooks]
jobs = len(standin.status()["jobs"])
kern.col_sums(sp.random(50, 40, density=0.2, format="csr", random_state=0))
used = standin.status()["worker_pid"]
finished = standin.wait(240)
hook = cpu_elementwise._csr_col_sums._compile_for_args
cached_now = not standin._cold(hook)
again = standin.prestart(idle_s=0.5)
pid = standin.status()["worker_pid"]
gone = False
deadline = time.monotonic() + 30.0  # a low-priority process ends late on a busy machine
while not gone and time.monotonic() < deadline:
    time.sleep(0.1)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        gone = True
print(json.dumps({"before": before, "prestarted": prestarted, "cold": cold, "jobs": jobs,
                  "used": used, "finished": finished, "cached_now": cached_now,
                  "again": again, "after_idle": standin.status()["worker_pid"], "gone": gone}))
"""


def test_importing_a_cold_kernel_starts_the_worker_and_an_unused_one_is_closed(tmp_path):
    """A fresh installation (nothing in numba's cache): importing a module with stand-ins
    starts the background compiler before any job; the first job goes to that worker. A
    prestarted worker no job reaches within its idle time is closed and its process ends."""
    got = _fresh_process(_PRESTART, tmp_path / "pre", on=True)
    assert got["before"] is None and got["prestarted"] is not None
    assert got["cold"] and all(got["cold"]) and got["jobs"] == 0
    assert got["used"] == got["prestarted"]  # the job went to the prestarted worker
    assert got["finished"] and got["cached_now"]
    assert got["again"] is True and got["after_idle"] is None and got["gone"]


def test_no_prestart_when_switched_off(tmp_path):
    code = ("import json; from bidlab.kern import standin, cpu_elementwise; "
            "print(json.dumps({'pid': standin.status()['worker_pid'], "
            "'again': standin.prestart()}))")
    got = _fresh_process(code, tmp_path / "off", on=False)
    assert got == {"pid": None, "again": False}


def test_the_worker_runs_at_the_lowest_priority():
    """The worker lowers its priority before it imports anything heavy: nice 19 and, where
    Linux groups processes by session, nice 19 for its session's group (the worker has a
    session of its own, so this test's group is not touched)."""
    import time

    from bidlab.kern.compile_worker import Worker

    worker = Worker(lambda *_: None)
    try:
        stat = Path(f"/proc/{worker.pid}/stat")
        if not stat.exists():
            pytest.skip("no /proc on this platform")
        deadline = time.monotonic() + 30
        nice = None
        while time.monotonic() < deadline:
            nice = int(stat.read_text().rsplit(")", 1)[1].split()[16])
            if nice == 19:
                break
            time.sleep(0.05)
        assert nice == 19
        group = Path(f"/proc/{worker.pid}/autogroup")
        if group.exists():
            assert group.read_text().strip().endswith("nice 19"), group.read_text()
            assert Path("/proc/self/autogroup").read_text() != group.read_text()
    finally:
        assert worker.close(timeout=60)


def test_switched_off_compiles_in_the_process(monkeypatch):
    """Off (the environment variable, or set_enabled): a new specialization compiles here,
    no stand-in runs and nothing goes to the worker."""
    from bidlab.kern import columns

    for value, on in (("0", False), ("off", False), ("1", True), ("", True)):
        monkeypatch.setenv(standin.ENV, value)
        assert standin._initial() is on
    pos = np.full(6, 3, np.int16)  # int16 indices: a specialization nothing else uses
    before = (standin.runs(), len(standin.status()["jobs"]))
    with standin.enabled(False):
        assert not standin.is_enabled()
        columns._forget(pos, np.arange(3, dtype=np.int16), 2)
    assert pos.tolist() == [-1, -1, 3, 3, 3, 3]
    assert (standin.runs(), len(standin.status()["jobs"])) == before
    assert any(str(sig[0].dtype) == "int16" for sig in columns._forget.overloads)


def test_learn_kernels_stand_ins():
    """The minibatch staging's and row states' kernels: stand-ins against the kernels' own
    Python code (no compiling needed)."""
    from bidlab.learn import rowstate, staging

    S = _sparse(30, 12, np.float64, seed=4, density=0.3)
    rows = np.array([3, 0, 7, 7, 29])
    n = staging._nnz_of_rows_arrays(S.indptr, rows)
    assert n == staging._nnz_of_rows.py_func(S.indptr, rows)
    got = []
    for gather in (staging._gather_rows_arrays, staging._gather_rows.py_func):
        out = (np.zeros(8, np.int64), np.zeros(n + 5, S.indices.dtype), np.zeros(n + 5))
        out[0][1] = 5
        p = gather(S.indptr, S.indices, S.data, rows, *out, 1, 5)
        got.append((p, *out))
    assert got[0][0] == got[1][0] == n + 5
    for a, b in zip(got[0][1:], got[1][1:], strict=True):
        np.testing.assert_array_equal(a, b)
    for ids in (np.arange(4, 9), np.array([1, 3]), np.array([-1, 0]), np.array([0])):
        assert rowstate._run_start_arrays(ids) == rowstate.run_start.py_func(ids)


@pytest.mark.parametrize("order", ["C", "F"])
def test_updater_steps(order):
    from bidlab.kern import steps

    rng = np.random.default_rng(5)
    M0, U0 = (np.asarray(rng.standard_normal((7, 5)), order=order) for _ in range(2))
    S0 = np.asarray(rng.random((7, 5)), order=order)
    M0[0, 0] = 0.0
    lr, eps, c = rng.random((7, 1)), np.full((7, 1), 1e-6), rng.random((7, 1))

    def run():
        M, U, S = M0.copy(order=order), U0.copy(order=order), S0.copy(order=order)
        assert steps.subtract_scaled(U, M, c) and steps.subtract_scaled_sign(U, M, c)
        assert steps.adagrad(M, U, S, lr, eps, 0.5, 0.9) and steps.grad(M, U, lr, 0.9)
        return M, U, S

    compiled, arrays = both_paths(run)
    for c_, a in zip(compiled, arrays, strict=True):
        np.testing.assert_allclose(a, c_, rtol=1e-13, atol=1e-15)
