"""The rooflined kernels (bidlab.kern) against their numpy oracles, on numpy and (GPU) cupy.

Every kernel is checked in float32 and float64, on odd shapes, with empty rows and columns,
unsorted and duplicate column indices, and NaN input; every CUDA source is compiled with
``nvcc -ptx`` on every run, GPU or not.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.special as ss

from bidlab import backend, kern
from bidlab._source_checkout import cuda_source_dir

DTYPES = [np.float32, np.float64]
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _tol(dtype) -> dict:
    return {"rtol": TOL[dtype], "atol": TOL[dtype]}


def _csr(m: int, n: int, density: float, dtype, seed: int, empty_rows=(), empty_cols=()):
    """A random CSR matrix with the given rows and columns left empty."""
    rng = np.random.default_rng(seed)
    a = sp.random(m, n, density=density, format="lil", random_state=seed, dtype=np.float64)
    for r in empty_rows:
        a[r, :] = 0
    for c in empty_cols:
        a[:, c] = 0
    s = a.tocsr().astype(dtype)
    s.data[:] = rng.random(s.nnz).astype(dtype) + 0.1
    return s


def _scrambled(s: sp.csr_matrix, seed: int) -> sp.csr_matrix:
    """The same matrix with each row's column indices in a random order (unsorted CSR)."""
    rng = np.random.default_rng(seed)
    indices, data = s.indices.copy(), s.data.copy()
    for i in range(s.shape[0]):
        lo, hi = s.indptr[i], s.indptr[i + 1]
        perm = rng.permutation(hi - lo) + lo
        indices[lo:hi], data[lo:hi] = indices[perm], data[perm]
    out = sp.csr_matrix((data, indices, s.indptr.copy()), shape=s.shape)
    out.has_sorted_indices = False
    return out


def _dev(xp, a):
    if xp is np:
        return a
    return backend.to_device(a)


def _host(a):
    return np.asarray(backend.to_host(a))


def _sddmm_oracle(A, B, S):
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    return np.einsum("ki,ki->i", A[:, rows], B[:, S.indices])


SHAPES = [(1, 1, 1), (37, 53, 5), (200, 130, 64), (65, 33, 70)]  # (m, n, k); k > warp too


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_products_match_their_oracles(xp, dtype, m, n, k):
    rng = np.random.default_rng(m * n + k)
    S = _csr(m, n, 0.2, dtype, seed=k, empty_rows=[0, m - 1] if m > 2 else [],
             empty_cols=[n // 2] if n > 2 else [])
    A = np.asfortranarray(rng.standard_normal((k, m)).astype(dtype))  # k x m
    B = np.asfortranarray(rng.standard_normal((k, n)).astype(dtype))  # k x n
    Bn = rng.standard_normal((n, k)).astype(dtype)                     # n x k
    Bm = rng.standard_normal((m, k)).astype(dtype)                     # m x k
    dense = S.toarray()
    d = lambda a: _dev(xp, a)  # noqa: E731

    np.testing.assert_allclose(_host(kern.sddmm(d(A), d(B), d(S))), _sddmm_oracle(A, B, S),
                               **_tol(dtype))
    np.testing.assert_allclose(_host(kern.sparse_dense(d(S), d(Bn))), dense @ Bn, **_tol(dtype))
    np.testing.assert_allclose(_host(kern.sparse_t_dense(d(S), d(Bm))), dense.T @ Bm,
                               **_tol(dtype))
    np.testing.assert_allclose(_host(kern.dense_sparse(d(A), d(S))), A @ dense, **_tol(dtype))
    np.testing.assert_allclose(_host(kern.dense_sparse_t(d(B), d(S))), B @ dense.T,
                               **_tol(dtype))
    np.testing.assert_allclose(_host(kern.row_sums(d(S))), dense.sum(axis=1), **_tol(dtype))
    np.testing.assert_allclose(_host(kern.col_sums(d(S))), dense.sum(axis=0), **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_results_keep_the_operand_dtype_and_products_are_f_ordered(dtype):
    S = _csr(20, 30, 0.3, dtype, seed=1)
    A = np.asfortranarray(np.ones((4, 20), dtype))
    out = kern.dense_sparse(A, S)
    assert out.dtype == dtype and out.flags.f_contiguous
    assert kern.dense_sparse_t(np.ones((4, 30), dtype), S).flags.f_contiguous
    assert kern.sddmm(A, np.ones((4, 30), dtype), S).dtype == dtype
    # mixed precision promotes the numpy way
    assert kern.sparse_dense(S, np.ones((30, 3), np.float64)).dtype == np.float64
    # integer counts become floating point
    counts = sp.csr_matrix(np.array([[1, 0, 2]], dtype=np.int64))
    assert kern.sparse_dense(counts, np.ones((3, 2), np.float32)).dtype == np.float64


def test_unsorted_and_duplicate_indices_follow_scipy(xp):
    S = _scrambled(_csr(60, 40, 0.3, np.float64, seed=3), seed=4)
    rows = np.repeat(np.arange(60), np.diff(S.indptr))
    last = rows[-1] if rows.size else 59
    # duplicates: (last, 7) stored twice more at the end of the last non-empty row
    # (scipy sums duplicates in products and in toarray)
    indptr = S.indptr.copy()
    indptr[last + 1:] += 2
    pos = S.indptr[last + 1]
    data = np.insert(S.data, pos, [1.5, 2.5])
    indices = np.insert(S.indices, pos, [7, 7])
    dup = sp.csr_matrix((data, indices, indptr), shape=S.shape)
    dup.has_canonical_format = False
    rng = np.random.default_rng(5)
    B = rng.standard_normal((40, 6))
    A = np.asfortranarray(rng.standard_normal((6, 60)))
    Bk = np.asfortranarray(rng.standard_normal((6, 40)))
    d = lambda a: _dev(xp, a)  # noqa: E731
    for mat in (S, dup):
        dense = mat.toarray()  # scipy sums duplicates here
        np.testing.assert_allclose(_host(kern.sparse_dense(d(mat), d(B))), dense @ B, rtol=1e-12)
        np.testing.assert_allclose(_host(kern.dense_sparse(d(A), d(mat))), A @ dense, rtol=1e-12)
        vals = _host(kern.sddmm(d(A), d(Bk), d(mat)))
        np.testing.assert_allclose(vals, _sddmm_oracle(A, Bk, mat), rtol=1e-12)
    # each stored copy of a duplicate gets the same SDDMM value
    vals = kern.sddmm(A, Bk, dup)
    assert vals[pos] == vals[pos + 1]


@pytest.mark.parametrize("path", ["serial", "private copies", "column listing"])
def test_duplicates_within_one_group_of_four_are_summed(path, monkeypatch):
    """The products take four nonzeros of a row per pass: repeated indices inside one
    group must add up (a non-canonical CSR row [3, 3, 3, 3, 5, 3, 0])."""
    from bidlab.kern import cpu

    if path != "serial":
        monkeypatch.setattr(cpu, "PARALLEL_MIN_WORK", 0)
    monkeypatch.setattr(cpu, "LISTING_MIN_RATIO", 0 if path == "column listing" else 10**9)
    indices = np.array([3, 3, 3, 3, 5, 3, 0, 1, 1, 1, 1], np.int32)
    data = np.arange(1.0, 12.0)
    S = sp.csr_matrix((data, indices, np.array([0, 7, 7, 11], np.int32)), shape=(3, 6))
    S.has_canonical_format = False
    dense = S.toarray()
    A = np.asfortranarray(np.random.default_rng(0).standard_normal((5, 3)))
    B = np.random.default_rng(1).standard_normal((6, 5))
    np.testing.assert_allclose(kern.dense_sparse(A, S), A @ dense, rtol=1e-12)
    np.testing.assert_allclose(kern.sparse_t_dense(S, A.T), dense.T @ A.T, rtol=1e-12)
    np.testing.assert_allclose(kern.sparse_dense(S, B), dense @ B, rtol=1e-12)


def test_empty_matrices_and_zero_k(xp):
    d = lambda a: _dev(xp, a)  # noqa: E731
    S = sp.csr_matrix((5, 4), dtype=np.float64)  # no nonzeros at all
    np.testing.assert_array_equal(_host(kern.sparse_dense(d(S), d(np.ones((4, 3))))),
                                  np.zeros((5, 3)))
    np.testing.assert_array_equal(_host(kern.dense_sparse(d(np.ones((3, 5))), d(S))),
                                  np.zeros((3, 4)))
    assert kern.sddmm(np.ones((3, 5)), np.ones((3, 4)), S).shape == (0,)
    T = sp.csr_matrix(np.eye(3))
    np.testing.assert_array_equal(kern.sddmm(np.ones((0, 3)), np.ones((0, 3)), T), np.zeros(3))


@pytest.mark.parametrize("scatter", ["private copies", "column listing"])
def test_parallel_scatter_and_gather_on_a_power_law_matrix(scatter, monkeypatch):
    """Big enough for the multi-threaded paths (both scatters, nnz-balanced parts)."""
    from bidlab.kern import cpu

    if scatter == "column listing":
        monkeypatch.setattr(cpu, "LISTING_MIN_RATIO", 0)
    rng = np.random.default_rng(7)
    m, n, k = 4000, 3000, 48
    cols = np.minimum(rng.zipf(1.3, size=120_000) - 1, n - 1)
    rows = rng.integers(0, m, size=cols.size)
    S = sp.csr_matrix((rng.random(cols.size).astype(np.float32), (rows, cols)), shape=(m, n))
    A = np.asfortranarray(rng.random((k, m), dtype=np.float32))
    B = np.asfortranarray(rng.random((k, n), dtype=np.float32))
    dense = S.toarray().astype(np.float64)
    np.testing.assert_allclose(kern.dense_sparse(A, S), A @ dense, rtol=1e-4)
    np.testing.assert_allclose(kern.sparse_t_dense(S, A.T), dense.T @ A.T, rtol=1e-4)
    np.testing.assert_allclose(kern.dense_sparse_t(B, S), B @ dense.T, rtol=1e-4)
    np.testing.assert_allclose(kern.sddmm(A, B, S), _sddmm_oracle(A, B, S), rtol=1e-4)
    # out= is written in place, and a second call reuses the column listing
    out = np.zeros((k, n), np.float32, order="F")
    from bidlab.backend import allocations

    kern.dense_sparse(A, S, out=out)
    before = allocations.snapshot()[0]
    res = kern.dense_sparse(A, S, out=out)
    assert res is out and allocations.snapshot()[0] == before
    np.testing.assert_allclose(out, A @ dense, rtol=1e-4)
    # another matrix with other columns right after: nothing of the last listing remains
    S2 = sp.random(m, n, density=0.004, format="csr", random_state=8, dtype=np.float32)
    np.testing.assert_allclose(kern.dense_sparse(A, S2), A @ S2.toarray(), rtol=1e-4,
                               atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_expdigamma_matches_scipy_including_edge_cases(xp, dtype):
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.random(500) * 1e-3, rng.random(500) * 10, rng.random(91) * 1e6,
                        [0.0, -0.5, -1.0, -2.5, 1e-30, 5.999, 6.0, np.inf, np.nan]])
    x = x.astype(dtype).reshape(-1, 4)
    want = np.exp(ss.digamma(x.astype(np.float64))).astype(dtype)
    got = _host(kern.expdigamma(_dev(xp, x)))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=TOL[dtype] * 10, atol=0, equal_nan=True)
    assert np.isnan(got[np.isnan(x)]).all(), "NaN must propagate, never be fixed"
    # F-ordered input and in place
    xf = np.asfortranarray(x.T)
    res = kern.expdigamma(_dev(xp, xf))
    assert _host(res).flags.f_contiguous or xp is not np
    y = _dev(xp, x.copy())
    assert kern.expdigamma(y, out=y) is y
    np.testing.assert_allclose(_host(y), want, rtol=TOL[dtype] * 10, equal_nan=True)


def test_nan_propagates_through_products():
    S = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]]))
    A = np.asfortranarray(np.array([[np.nan, 1.0]]))
    assert np.isnan(kern.dense_sparse(A, S)[0, 0]) and kern.dense_sparse(A, S)[0, 1] == 2.0
    assert np.isnan(kern.sddmm(A, np.ones((1, 2)), S)[0])


def test_bad_input_names_the_problem():
    S = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match=r"A \(2, 3\), B \(3, 3\) and S \(3, 3\)"):
        kern.sddmm(np.ones((2, 3)), np.ones((3, 3)), S)
    with pytest.raises(ValueError, match=r"dense operand \(4, 2\).*needs 3 rows"):
        kern.sparse_dense(S, np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"needs 3 columns"):
        kern.dense_sparse(np.ones((2, 4)), S)
    with pytest.raises(TypeError, match="CSR sparse matrix; got CSC"):
        kern.sparse_dense(S.tocsc(), np.ones((3, 2)))
    with pytest.raises(TypeError, match="CSR sparse matrix; got ndarray"):
        kern.sddmm(np.ones((1, 3)), np.ones((1, 3)), np.eye(3))
    with pytest.raises(ValueError, match=r"out has shape \(2, 2\); expected \(3, 2\)"):
        kern.sparse_dense(S, np.ones((3, 2)), out=np.empty((2, 2)))
    with pytest.raises(TypeError, match="real numbers"):
        kern.expdigamma(np.ones(3, complex))


def test_mixing_backends_raises_a_clear_type_error():
    if not backend.gpu_available():
        with pytest.raises(ImportError, match=r"bidlab\[gpu\]"):
            backend.cupy()
        return
    cp = backend.cupy()
    S = sp.csr_matrix(np.eye(3))
    with pytest.raises(TypeError, match="numpy and cupy"):
        kern.sparse_dense(S, cp.ones((3, 2)))


def _ticks_inside(call, seconds: float = 0.3) -> tuple[int, float]:
    """Run ``call`` repeatedly in a thread for ~``seconds``; count how often this thread
    got to run (1 ms sleeps) while a call was in progress."""
    import threading
    import time

    call()  # compiled and warm
    t0 = time.perf_counter()
    call()
    calls = max(3, int(seconds / max(time.perf_counter() - t0, 1e-4)))
    done = threading.Event()
    windows: list[tuple[float, float]] = []

    def compute() -> None:
        for _ in range(calls):
            t = time.perf_counter()
            call()
            windows.append((t, time.perf_counter()))
        done.set()

    ticks = []
    worker = threading.Thread(target=compute)
    worker.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    worker.join()
    inside = sum(1 for t in ticks for a, b in windows if a < t < b)
    return inside, sum(b - a for a, b in windows)


def test_every_compiled_kernel_releases_the_gil():
    """The live dashboards and the notebook's own thread must run while a minibatch
    computes: every top-level numba kernel is compiled with nogil=True (inline helpers are
    compiled into their callers)."""
    from numba.core.registry import CPUDispatcher

    from bidlab.kern import columns, cpu, kmeans, lda_poisson, lda_rows, lda_sampler, steps, touched
    from bidlab.kern.adaptive import AdaptiveKernel

    checked = []
    for module in (cpu, lda_sampler, lda_poisson, lda_rows, columns, steps, touched, kmeans):
        for name, obj in vars(module).items():
            if isinstance(obj, AdaptiveKernel):
                obj = obj.parallel
            if isinstance(obj, CPUDispatcher) and obj.targetoptions.get("inline") != "always":
                checked.append(name)
                assert obj.targetoptions.get("nogil"), f"{module.__name__}.{name} holds the GIL"
    assert len(checked) >= 20, checked


def test_a_running_kernel_lets_other_threads_run():
    """Behaviour, not flags: this thread keeps ticking while SDDMM runs in another."""
    rng = np.random.default_rng(3)
    m, n, k = 20_000, 5_000, 64
    S = sp.random(m, n, density=0.01, format="csr", random_state=3, dtype=np.float32)
    A = np.asfortranarray(rng.random((k, m), dtype=np.float32))
    B = np.asfortranarray(rng.random((k, n), dtype=np.float32))
    out = np.empty(S.nnz, np.float32)
    inside, busy = _ticks_inside(lambda: kern.sddmm(A, B, S, out=out))
    assert inside >= 0.2 * busy / 0.002, (
        f"only {inside} ticks of this thread fell inside {busy:.2f} s of SDDMM calls")


# ----------------------------------------------------------------------------- CUDA sources

CU_FILES = sorted(cuda_source_dir().glob("*.cu"))


def test_every_kernel_source_is_found():
    names = {p.name for p in CU_FILES}
    assert {"sparse_products.cu", "expdigamma.cu", "lda_sampler.cu"} <= names


@pytest.mark.parametrize("source", CU_FILES, ids=lambda p: p.name)
def test_cuda_source_compiles_with_nvcc(source: Path, tmp_path: Path):
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                     if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if nvcc is None:
        pytest.skip("nvcc not found: install the CUDA toolkit to compile-check kernels/*.cu")
    proc = subprocess.run(
        [nvcc, "-ptx", "--std=c++17", "-arch=sm_80", "-DBIDLAB_NVCC_CHECK", str(source),
         "-o", str(tmp_path / "out.ptx")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"nvcc failed on {source.name}:\n{proc.stderr}"
    ptx = (tmp_path / "out.ptx").read_text()
    assert ".entry" in ptx and "bidlab_" in ptx, "every kernel body must be instantiated"


@pytest.mark.parametrize(("preset", "expected"), [
    ({}, "20000 -"), ({"GOMP_SPINCOUNT": "5"}, "5 -"),
    ({"OMP_WAIT_POLICY": "PASSIVE"}, "- PASSIVE"),
])
def test_importing_bidlab_shortens_openmp_spinning_unless_told_otherwise(
        preset: dict[str, str], expected: str) -> None:
    """bidlab/_threads.py: GOMP_SPINCOUNT is set before numba first loads OpenMP (a
    parallel kernel then runs in the same process); a user's own setting is kept."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items()
           if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env.update(preset)
    code = ("import os, numpy as np, bidlab\n"
            "from bidlab.kern import cpu\n"
            "get = lambda k: os.environ.get(k, '-')\n"
            "print(get('GOMP_SPINCOUNT'), get('OMP_WAIT_POLICY'))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.strip()
    assert out == expected


@pytest.mark.parametrize("source", CU_FILES, ids=lambda p: p.name)
def test_cuda_source_needs_no_host_math_header(source: Path):
    """CuPy compiles kernels/*.cu with NVRTC, which has no math.h: ``nvcc -ptx`` accepts
    INFINITY, NAN and M_PI (it includes the host headers) but NVRTC fails on them."""
    import re

    code = re.sub(r"//[^\n]*", "", source.read_text())
    used = sorted(set(re.findall(r"\b(INFINITY|NAN|HUGE_VALF?|M_PI\w*|M_E|M_LN\w*)\b", code)))
    assert not used, f"{source.name} uses {used}: NVRTC does not define them; spell the constant"
