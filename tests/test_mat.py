"""The cached matrix core: ops against numpy oracles, the cache, sparse growth, bad input."""

from __future__ import annotations

import gc
import operator
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl
from bidlab import backend


def _host(x):
    return np.asarray(backend.to_host(x.data if hasattr(x, "guid") else x))


def _arr(xp, rng, shape, dtype=np.float32, low=0.1):
    return xp.asarray((rng.random(shape) + low).astype(dtype))


@pytest.fixture(autouse=True)
def _fresh_cache():
    bl.clear_cache()
    bl.cache_limit(None)
    yield
    bl.clear_cache()
    bl.cache_limit(None)


# ----------------------------------------------------------------------------- dense ops


_OPS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "**": operator.pow,
    ">": operator.gt,
    "<=": operator.le,
    "==": operator.eq,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", list(_OPS))
@pytest.mark.parametrize("bshape", [(5, 7), (1, 7), (5, 1), (1, 1)])
def test_binary_ops_match_numpy_with_edge_broadcasting(xp, dtype, op, bshape):
    rng = np.random.default_rng(0)
    a, b = _arr(xp, rng, (5, 7), dtype), _arr(xp, rng, bshape, dtype)
    f = _OPS[op]
    got = f(bl.Mat(a), bl.Mat(b))
    want = f(a, b)
    assert got.shape == (5, 7) and got.dtype == want.dtype
    np.testing.assert_allclose(_host(got), backend.to_host(want), rtol=1e-6)
    rev = f(bl.Mat(b), bl.Mat(a))
    np.testing.assert_allclose(_host(rev), backend.to_host(f(b, a)), rtol=1e-6)


def test_python_scalars_follow_numpy_promotion(xp):
    a = bl.Mat(xp.ones((2, 3), dtype=np.float32))
    assert (a * 0.5).dtype == np.float32
    assert (2 * a).dtype == np.float32
    assert (a + bl.Mat(xp.ones((2, 3), dtype=np.float64))).dtype == np.float64
    i = bl.Mat(xp.arange(6, dtype=np.int64).reshape(2, 3))
    assert (i / bl.Mat(xp.full((1, 1), 2, dtype=np.int64))).dtype == np.float64
    np.testing.assert_allclose(_host(i / 2), np.arange(6).reshape(2, 3) / 2)


@pytest.mark.parametrize(
    "name",
    [
        "exp",
        "log",
        "sqrt",
        "digamma",
        "gammaln",
        "expdigamma",
        "absolute",
        "negative",
        "sigmoid",
        "tanh",
        "log1p",
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_ops_match_numpy_and_scipy(xp, name, dtype):
    import scipy.special as sc

    rng = np.random.default_rng(1)
    host = (rng.random((4, 9)) * 5 + 0.05).astype(dtype)
    got = getattr(bl, name)(bl.Mat(xp.asarray(host)))
    oracle = {
        "digamma": sc.digamma,
        "gammaln": sc.gammaln,
        "sigmoid": sc.expit,
        "expdigamma": lambda x: np.exp(sc.digamma(x)),
    }.get(name, getattr(np, name, None))
    assert got.dtype == dtype
    np.testing.assert_allclose(
        _host(got), oracle(host), rtol=2e-5 if dtype == np.float32 else 1e-10
    )


@pytest.mark.parametrize("axis,shape", [(0, (1, 7)), (1, (5, 1)), (None, (1, 1))])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reductions_keep_two_dimensions(xp, name, axis, shape):
    rng = np.random.default_rng(2)
    a = _arr(xp, rng, (5, 7))
    got = getattr(bl.Mat(a), name)(axis=axis)
    assert got.shape == shape
    want = getattr(np, name)(backend.to_host(a), axis=axis, keepdims=True)
    np.testing.assert_allclose(_host(got), want, rtol=1e-5)


def test_matmul_and_transpose_views(xp):
    rng = np.random.default_rng(3)
    a, b = _arr(xp, rng, (4, 6)), _arr(xp, rng, (4, 3))
    A, B = bl.Mat(a), bl.Mat(b)
    got = A.T @ B
    np.testing.assert_allclose(_host(got), backend.to_host(a.T @ b), rtol=1e-5)
    assert A.T is A.T and A.T.T is A, "a transpose is one stable view (stable cache key)"
    with pytest.raises(ValueError, match=r"\(4, 6\) and \(4, 3\) are not aligned"):
        A @ B


def test_nan_propagates_never_silently_fixed(xp):
    a = xp.asarray(np.array([[1.0, np.nan], [np.inf, 2.0]], dtype=np.float32))
    A = bl.Mat(a)
    assert np.isnan(_host(A + 1)[0, 1])
    assert np.isnan(_host(bl.exp(A))[0, 1])
    assert np.isnan(_host(A.sum())[0, 0])
    assert np.isnan(_host(bl.expdigamma(A))[0, 1])


def test_indexing_copies_blocks_and_gathers_rows(xp):
    rng = np.random.default_rng(4)
    a = _arr(xp, rng, (6, 5))
    A = bl.Mat(a)
    np.testing.assert_array_equal(_host(A[1:3]), backend.to_host(a[1:3]))
    np.testing.assert_array_equal(_host(A[2]), backend.to_host(a[2:3]))
    np.testing.assert_array_equal(_host(A[:, 4]), backend.to_host(a[:, 4:5]))
    idx = bl.Mat(xp.asarray(np.array([[5, 0, 5]], dtype=np.int64)))
    np.testing.assert_array_equal(_host(A[idx]), backend.to_host(a[[5, 0, 5]]))
    cidx = bl.Mat(xp.asarray(np.array([[4, 0, 4]], dtype=np.int64)))
    np.testing.assert_array_equal(_host(A[:, cidx]), backend.to_host(a[:, [4, 0, 4]]))
    A[0, 0] = 7.0
    assert float(A[0, 0]) == 7.0


# ----------------------------------------------------------------------------- bad input


def test_bad_input_messages_name_the_problem():
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(3, 2\) do not match"):
        bl.ones((2, 3)) + bl.ones((3, 2))
    with pytest.raises(ValueError, match=r"reshape"):
        bl.Mat(np.ones(3))
    with pytest.raises(TypeError, match="dtype <U1"):
        bl.Mat(np.array([["a"]]))
    with pytest.raises(ValueError, match=r"out= has shape \(2, 2\)"):
        bl.add(bl.ones((2, 3)), 1.0, out=bl.zeros((2, 2)))
    with pytest.raises(TypeError, match="cannot be cast"):
        bl.add(bl.ones((2, 3)), 0.5, out=bl.zeros((2, 3), dtype=np.int32))
    with pytest.raises(ValueError, match=r"cannot copy shape \(3, 1\)"):
        m = bl.zeros((2, 1))
        m <<= np.ones((3, 1), np.float32)


def test_mixing_backends_raises_a_type_error_naming_both():
    class FakeCupyArray:
        __module__ = "cupy._core.core"
        shape = (2, 2)
        dtype = np.dtype(np.float32)
        ndim = 2

    with pytest.raises(TypeError, match="numpy and cupy"):
        bl.ones((2, 2)) + FakeCupyArray()


def test_missing_cupy_explains_the_gpu_extra(monkeypatch):
    monkeypatch.setattr(backend, "_cupy", None)
    monkeypatch.setattr(backend, "_cupy_error", "ModuleNotFoundError: No module named 'cupy'")
    with pytest.raises(ImportError, match=r"bidlab\[gpu\]"):
        bl.zeros((2, 2), device="gpu")


# ----------------------------------------------------------------------------- the cache


def _estep_like(x, w, alpha):
    y = bl.exp(x @ w) * alpha + 1.0
    return (y / y.sum(axis=1)).sum(axis=0)


def test_cached_loop_allocates_nothing_after_the_first_step(xp):
    rng = np.random.default_rng(5)
    x, w = bl.Mat(_arr(xp, rng, (32, 8))), bl.Mat(_arr(xp, rng, (8, 4)))
    alpha = bl.scalar(0.5, device="gpu" if xp is not np else "cpu")
    with bl.caching():
        first = _estep_like(x, w, alpha)
        count0, _ = backend.allocations.snapshot()
        entries = bl.cache_stats()["entries"]
        for step in range(10):
            alpha.set(0.1 * step)  # a live hyperparameter changes...
            again = _estep_like(x, w, alpha)
            assert again is first and again.guid == first.guid
        assert backend.allocations.snapshot()[0] == count0, "no allocation after warm-up"
        assert bl.cache_stats()["entries"] == entries, "...without growing the cache"
        assert bl.cache_stats()["hits"] >= 10 * 7
    want = np.exp(_host(x) @ _host(w)) * 0.9 + 1.0
    np.testing.assert_allclose(
        _host(first), (want / want.sum(1, keepdims=True)).sum(0, keepdims=True), rtol=1e-5
    )


def test_changing_a_python_float_adds_entries_which_is_why_hyperparameters_are_mats():
    x = bl.ones((3, 3))
    with bl.caching():
        for v in (0.1, 0.2, 0.3):
            x * v
    assert bl.cache_stats()["entries"] == 3
    lr = bl.scalar(0.1)
    with bl.caching():
        for v in (0.1, 0.2, 0.3):
            lr.set(v)
            x * lr
    assert bl.cache_stats()["entries"] == 4


def test_without_caching_every_result_is_new():
    x = bl.ones((3, 3))
    assert (x + 1) is not (x + 1)
    assert bl.cache_stats()["entries"] == 0


def test_caching_switch_is_per_thread():
    x = bl.ones((3, 3))
    seen = {}

    def worker():
        seen["enabled"] = bl.caching_enabled()

    with bl.caching():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert bl.caching_enabled()
        assert (x + 1) is (x + 1)
    assert seen["enabled"] is False
    assert not bl.caching_enabled()


def test_aliasing_hazard_a_held_cached_result_is_overwritten_next_step():
    """The documented hazard: keep values across steps with .copy(), not the cached result."""
    x = bl.zeros((2, 2))
    with bl.caching():
        x.set(1.0)
        held = x + 1  # cached container for (add, x, 1)
        kept = held.copy()  # an uncached copy: safe
        x.set(5.0)
        x + 1  # the next "step" writes into the same container
    assert float(held[0, 0]) == 6.0, "the held result changed under our feet"
    assert float(kept[0, 0]) == 2.0


def test_copy_into_is_the_safe_loop_update(xp):
    rng = np.random.default_rng(6)
    u = bl.Mat(_arr(xp, rng, (4, 3)))
    start = _host(u).copy()
    with bl.caching():
        for _ in range(3):
            unew = u * 0.5 + 1.0
            u <<= unew
    expect = start
    for _ in range(3):
        expect = expect * 0.5 + 1.0
    np.testing.assert_allclose(_host(u), expect, rtol=1e-6)


def test_out_is_honoured_by_every_kind_of_op():
    a, b = bl.ones((2, 3)), bl.full((2, 3), 2.0)
    out = bl.zeros((2, 3))
    assert bl.add(a, b, out=out) is out and float(out[0, 0]) == 3.0
    assert bl.exp(a, out=out) is out
    s = bl.zeros((1, 3))
    assert a.sum(axis=0, out=s) is s and float(s[0, 0]) == 2.0
    m = bl.zeros((2, 2))
    assert bl.matmul(a, b.T, out=m) is m and float(m[0, 0]) == 6.0


def test_cache_limit_evicts_least_recently_used_first():
    x = bl.ones((100, 100), dtype=np.float64)  # 80 kB results
    bl.cache_limit(200_000)
    evicted = bl.cache_stats()["evictions"]  # a running count: earlier tests' evictions too
    with bl.caching():
        r1 = x + 1
        x + 2
        r1_again = x + 1  # touch r1: now most recently used
        x + 3  # over the limit: evicts (add, x, 2)
        assert r1_again is r1
        stats = bl.cache_stats()
        assert stats["bytes_held"] <= 200_000 and stats["evictions"] == evicted + 1
        assert (x + 1) is r1
    bl.clear_cache()
    assert bl.cache_stats()["entries"] == 0 and bl.cache_stats()["bytes_held"] == 0


def test_entries_of_collected_operands_are_dropped():
    with bl.caching():
        x = bl.ones((50, 50))
        x + 1
        assert bl.cache_stats()["entries"] == 1
        del x
        gc.collect()
        assert bl.cache_stats()["entries"] == 0


# ----------------------------------------------------------------------------- sparse


def _csr(xp, rng, m, n, density, dtype=np.float32):
    s = sp.random(m, n, density=density, format="csr", dtype=dtype, random_state=rng)
    s.data += 0.5
    return backend.to_device(s) if xp is not np else s


def test_sparse_growth_reuses_buffers_and_grows_by_the_factor():
    rng = np.random.default_rng(7)
    holder = bl.SMat(
        sp.random(10, 8, density=0.2, format="csr", dtype=np.float32, random_state=rng)
    )
    first = sp.random(10, 8, density=0.3, format="csr", dtype=np.float32, random_state=rng)
    holder.copy_from(first)
    assert holder.capacity == int(np.ceil(first.nnz * 1.2))
    count0, _ = backend.allocations.snapshot()
    smaller = sp.random(10, 8, density=0.25, format="csr", dtype=np.float32, random_state=rng)
    holder.copy_from(smaller)
    assert backend.allocations.snapshot()[0] == count0, "fits: no allocation"
    np.testing.assert_array_equal(holder.toarray(), smaller.toarray())
    bigger = sp.random(10, 8, density=0.9, format="csr", dtype=np.float32, random_state=rng)
    holder.copy_from(bigger)
    assert holder.capacity == int(np.ceil(bigger.nnz * 1.2))
    np.testing.assert_array_equal(holder.toarray(), bigger.toarray())


def test_wrapping_a_users_csr_never_writes_into_it():
    rng = np.random.default_rng(8)
    user = sp.random(6, 5, density=0.5, format="csr", dtype=np.float32, random_state=rng)
    before = user.toarray().copy()
    s = bl.SMat(user)
    s.copy_from(sp.random(6, 5, density=0.5, format="csr", dtype=np.float32, random_state=rng))
    np.testing.assert_array_equal(user.toarray(), before)


@pytest.mark.parametrize("oshape", [(6, 5), (1, 5), (6, 1), (1, 1)])
def test_sparse_elementwise_acts_on_stored_entries(xp, oshape):
    rng = np.random.default_rng(9)
    s = _csr(xp, rng, 6, 5, 0.5)
    d = _arr(xp, rng, oshape)
    S = bl.SMat(s)
    got = S / bl.Mat(d)
    host_s = backend.to_host(s).toarray()
    dense_d = np.broadcast_to(backend.to_host(d), (6, 5))
    want = np.where(host_s != 0, host_s / dense_d, 0)
    np.testing.assert_allclose(got.toarray(), want, rtol=1e-6)
    assert got.root is S, "the result shares S's pattern"
    np.testing.assert_allclose((S * 2.0).toarray(), host_s * 2, rtol=1e-6)
    np.testing.assert_allclose(
        bl.exp(S).toarray(), np.where(host_s != 0, np.exp(host_s), 0), rtol=1e-6
    )


def test_derived_sparse_results_follow_their_root_when_it_is_refilled():
    rng = np.random.default_rng(10)
    root = bl.SMat(sp.random(8, 6, density=0.3, format="csr", dtype=np.float32, random_state=rng))
    with bl.caching():
        r = root * 3.0
        nxt = sp.random(8, 6, density=0.8, format="csr", dtype=np.float32, random_state=rng)
        root.copy_from(nxt)
        r2 = root * 3.0
        assert r2 is r
        np.testing.assert_allclose(r2.toarray(), nxt.toarray() * 3, rtol=1e-6)
        assert r2.capacity >= nxt.nnz


def test_csr_views_the_buffers_after_a_smaller_refill():
    """``SMat.csr`` views the matrix's buffers even when nnz is under half their size.

    scipy's constructor copies such a view (its ``prune``); a result recomputed in place
    after its ``csr`` was taken then read the old values through the copy.
    """
    rng = np.random.default_rng(12)
    big = sp.random(20, 10, density=0.9, format="csr", dtype=np.float32, random_state=rng)
    small = sp.random(20, 10, density=0.1, format="csr", dtype=np.float32, random_state=rng)
    S = bl.SMat(big.copy())
    w = bl.scalar(1.0)
    with bl.caching():
        S.copy_from(big)
        r = S * w  # its values buffer holds big.nnz entries
        S.copy_from(small)
        assert 2 * S.nnz < min(S.capacity, r.capacity)
        for value in (1.0, 2.0, 3.0):
            w.set(value)
            r = S * w
            np.testing.assert_allclose(r.sum(axis=0).numpy(),
                                       np.asarray(small.sum(axis=0)) * value, rtol=1e-6)
    csr = S.csr
    assert np.shares_memory(csr.data, S.data) and np.shares_memory(csr.indices, S.indices)
    S.data[:] = 5.0
    np.testing.assert_array_equal(S.csr.data, 5.0)
    csr.data[:] = 7.0
    np.testing.assert_array_equal(S.data, 7.0)


def test_sparse_operands_with_different_patterns_are_rejected():
    a = bl.SMat(sp.csr_matrix(np.array([[1.0, 0], [0, 1.0]], np.float32)))
    b = bl.SMat(sp.csr_matrix(np.array([[0, 1.0], [1.0, 0]], np.float32)))
    with pytest.raises(ValueError, match="different sparsity patterns"):
        a * b
    c = bl.SMat(sp.csr_matrix(np.array([[2.0, 0], [0, 3.0]], np.float32)))
    np.testing.assert_allclose((a * c).toarray(), [[2, 0], [0, 3]])


def test_sparse_sums(xp):
    rng = np.random.default_rng(11)
    s = _csr(xp, rng, 7, 9, 0.3)
    S = bl.SMat(s)
    host = backend.to_host(s).toarray()
    np.testing.assert_allclose(_host(S.sum(axis=0)), host.sum(0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(_host(S.sum(axis=1)), host.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(_host(S.sum()), host.sum(keepdims=True), rtol=1e-5)
