"""SDDMM with several lanes per entry on a GPU, the SFA sweep's per-entry dot products (an
element-wise product summed by rows, in chunks, on a GPU) against numpy, and the
item-major ratings built where the minibatches live. The CPU tests run anywhere; the
``gpu`` ones skip without CuPy and a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.kern import als
from bidlab.models import SFA

gpu = pytest.mark.gpu


def _need_gpu() -> None:
    if not backend.gpu_available():
        pytest.skip("no CuPy with a CUDA device here")


def _ratings(n: int = 300, d: int = 120, density: float = 0.08, seed: int = 0
             ) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    R = sp.random(n, d, density=density, random_state=rng, format="csr",
                  data_rvs=lambda s: rng.integers(1, 6, s).astype(float))
    R = R.tolil()
    R[np.arange(n), rng.integers(0, d, n)] = 3.0  # every user rated something
    return R.tocsr()


@pytest.mark.parametrize("batch_size", [None, 70])
def test_by_item_is_the_transpose_whatever_the_minibatches(batch_size: int | None) -> None:
    R = _ratings()
    lrn = SFA(4, max_iter=1, random_state=0).learner(R, batch_size=batch_size)
    lrn.fit()
    by_item = lrn.model.by_item()
    assert by_item.has_sorted_indices
    want = sp.csr_matrix(R.T)
    assert by_item.shape == want.shape and (by_item != want).nnz == 0


def test_sfa_sweeps_agree_across_minibatch_sizes() -> None:
    R = _ratings(seed=1)
    whole = SFA(5, max_iter=3, random_state=0).fit(R)
    parts = SFA(5, max_iter=3, random_state=0)
    parts.learner(R, batch_size=64).fit()
    np.testing.assert_allclose(parts.item_factors_, whole.item_factors_, atol=1e-10)


@pytest.mark.parametrize("chunk", [None, 1, 7, 500, 10_000])
def test_chunked_dots_match_einsum(chunk: int | None) -> None:
    from bidlab.kern.als_entries import chunked_dots

    rng = np.random.default_rng(3)
    Z, V = rng.random((1234, 9)), rng.random((50, 9))
    rows = rng.integers(0, 50, 1234)
    want = np.einsum("ij,ij->i", Z, V[rows])
    np.testing.assert_allclose(chunked_dots(Z, V, rows, np, chunk=chunk), want, rtol=1e-13)


@gpu
def test_chunked_dots_on_the_gpu() -> None:
    _need_gpu()
    from bidlab.kern.als_entries import chunked_dots

    cp = backend.cupy()
    rng = np.random.default_rng(4)
    Z, V = rng.random((1000, 33)).astype(np.float32), rng.random((40, 33)).astype(np.float32)
    rows = rng.integers(0, 40, 1000)
    want = np.einsum("ij,ij->i", Z.astype(np.float64), V[rows].astype(np.float64))
    for chunk in (None, 3, 256):
        got = chunked_dots(cp.asarray(Z), cp.asarray(V), cp.asarray(rows), cp, chunk=chunk)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.get(), want, rtol=1e-5)


@gpu
@pytest.mark.parametrize("f", [1, 7, 64, 100, 300])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_sddmm_every_lane_count_matches_numpy(f: int, index: type) -> None:
    _need_gpu()
    from bidlab.kern import cuda

    cp = backend.cupy()
    R = _ratings(200, 90, 0.1, seed=f)
    rng = np.random.default_rng(f)
    V, Z = rng.random((200, f)), rng.random((90, f))
    rows = np.repeat(np.arange(200), np.diff(R.indptr))
    want = np.einsum("ij,ij->i", V[rows], Z[R.indices])
    ip, ix = cp.asarray(R.indptr.astype(index)), cp.asarray(R.indices.astype(index))
    for lanes in (None, *cuda.SDDMM_LANES):
        out = cp.full(R.nnz, np.nan)
        cuda.sddmm_rows(ip, ix, cp.asarray(V), cp.asarray(Z), out, lanes=lanes)
        np.testing.assert_allclose(out.get(), want, rtol=1e-12, err_msg=f"lanes={lanes}")
    with pytest.raises(ValueError, match="lanes=3"):
        cuda.sddmm_rows(ip, ix, cp.asarray(V), cp.asarray(Z), out, lanes=3)


@gpu
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("f", [3, 17, 65])
def test_solve_rows_on_the_gpu_matches_the_numpy_reference(bias: bool, f: int) -> None:
    _need_gpu()
    cp = backend.cupy()
    R = _ratings(seed=f)
    rng = np.random.default_rng(f)
    O = rng.standard_normal((R.shape[1], f)) * 0.3
    X0 = rng.standard_normal((R.shape[0], f)) * 0.3
    gram = None if bias else O.T @ O + 0.1 * np.eye(f)
    kw = dict(steps=3, gram=gram, l2=0.1, alpha=2.0, mu=3.0, bias=bias)
    X, sc = X0.copy(), als.Scratch.new(R.shape[0], f, np.float64)
    als.solve_rows_reference(R, O, X, sc, **kw)
    Xg, scg = cp.asarray(X0), als.Scratch.new(R.shape[0], f, np.float64, cp)
    gkw = dict(kw, gram=None if gram is None else cp.asarray(gram))
    als.solve_rows(backend.to_device(R), cp.asarray(O), Xg, scg, **gkw)
    np.testing.assert_allclose(Xg.get(), X, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scg.err.get(), sc.err, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scg.R.get(), sc.R, rtol=1e-7, atol=1e-10)


@gpu
@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_sfa_on_the_gpu_matches_the_cpu_with_many_factors(feedback: str) -> None:
    _need_gpu()
    R = _ratings(seed=2)
    kw = dict(feedback=feedback, l2=0.5, max_iter=4, random_state=0)
    cpu = SFA(40, **kw).fit(R)
    gpu_est = SFA(40, device="gpu", **kw).fit(R)
    np.testing.assert_allclose(gpu_est.item_factors_, cpu.item_factors_, atol=1e-8)
    np.testing.assert_allclose(gpu_est.user_factors_, cpu.user_factors_, atol=1e-8)
    many = SFA(40, device="gpu", **kw)
    many.learner(R, batch_size=64).fit()
    np.testing.assert_allclose(many.item_factors_, cpu.item_factors_, atol=1e-8)
