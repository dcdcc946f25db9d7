"""NMF's pass kernels against numpy (running scatter sums, the fused KL step), and the batch
method's pass sums kept by the model: a run stopped and checkpointed mid-pass resumes to
the components of an uninterrupted one."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.kern.nmf_kl import kl_h_push, kl_w_numerator
from bidlab.kern.scatter_sums import ScatterSums, transpose_into
from bidlab.models import NMF

EPS = float(np.finfo(np.float32).eps)


def _blocks(seed=0, n=3, m=40, d=70, k=5, dtype=np.float64):
    rng = np.random.default_rng(seed)
    out = []
    for b in range(n):  # power-law-ish rows; one empty row, one dense row
        X = sp.random(m, d, density=0.1, format="csr", random_state=seed + b, dtype=dtype)
        X = sp.vstack([X, sp.csr_matrix((1, d), dtype=dtype),
                       sp.csr_matrix(rng.random((1, d)).astype(dtype))]).tocsr()
        out.append((X, rng.random((X.shape[0], k)).astype(dtype)))
    return out


@pytest.mark.parametrize("copies", [0, 1, 3])
def test_scatter_sums_total_is_the_sum_of_the_products(copies):
    blocks = _blocks()
    sums = ScatterSums(70, 5, np.float64, copies=copies)
    for X, G in blocks:
        sums.add(X, G)
    want = sum(X.T @ G for X, G in blocks)
    np.testing.assert_allclose(sums.total(), want, rtol=1e-12)
    assert not sums.work.any()  # folded
    sums.add(*blocks[0])  # goes on after a fold
    np.testing.assert_allclose(sums.total(), want + blocks[0][0].T @ blocks[0][1], rtol=1e-12)
    T = np.empty((5, 70))
    sums.total(transposed=T)
    np.testing.assert_array_equal(T, sums.total().T)
    sums.zero()
    assert not sums.total().any()
    with pytest.raises(ValueError, match="do not fit"):
        sums.add(blocks[0][0], blocks[0][1][:, :3])


@pytest.mark.parametrize("k", [5, 40])  # one nonzero at a time below 32 columns, four above
def test_scatter_sums_at_either_width_and_the_blocked_transpose(k):
    X, _ = _blocks(seed=9, m=600, d=300)[0]
    G = np.random.default_rng(10).random((X.shape[0], k))
    sums = ScatterSums(300, k, np.float64, copies=1)
    sums.add(X, G)
    np.testing.assert_allclose(sums.total(), X.T @ G, rtol=1e-12)
    T = np.empty((k, 300))
    transpose_into(sums.total(), T)
    np.testing.assert_array_equal(T, sums.total().T)
    with pytest.raises(ValueError, match="does not transpose"):
        transpose_into(T, T)


def _kl_oracle(X, W, Ht):
    C = X.tocoo()
    p = np.maximum(np.einsum("ij,ij->i", W[C.row], Ht[C.col]), EPS)
    Q = sp.csr_matrix((C.data / p, (C.row, C.col)), shape=X.shape)
    tiny = np.finfo(W.dtype).tiny
    return Q, float(np.sum(C.data * np.log(C.data / p + tiny))), float(C.data.sum())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_kl_step_matches_numpy(dtype):
    rtol = 1e-10 if dtype == np.float64 else 2e-5
    blocks = _blocks(seed=5, dtype=dtype)
    Ht = np.random.default_rng(6).random((70, 5)).astype(dtype)
    Ht[3] = 0.0  # a zero row of H^T: W H floored at eps
    sums = ScatterSums(70, 5, dtype, copies=1)
    parts = np.zeros((2, 2))
    want = 0.0
    for X, W in blocks:
        Q, xlogq, xsum = _kl_oracle(X, W, Ht)
        out = np.empty_like(W)
        kl_w_numerator(X, W, Ht, EPS, out)
        np.testing.assert_allclose(out, Q @ Ht, rtol=rtol)
        got = kl_h_push(X, W, Ht, EPS, sums, parts)
        np.testing.assert_allclose(got, (xlogq, xsum), rtol=rtol)
        want = want + Q.T @ W
    np.testing.assert_allclose(sums.total(), want, rtol=rtol)
    sums.zero()  # what the fused loop pushed is cleared
    assert not sums.total().any()


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
def test_sparse_batch_run_resumes_mid_pass_from_a_checkpoint(tmp_path, loss):
    rng = np.random.default_rng(7)
    X = sp.csr_matrix(rng.gamma(2.0, 1.0, (90, 3)) @ rng.gamma(2.0, 1.0, (3, 25))
                      * (rng.random((90, 25)) < 0.4))
    kw = {"loss": loss, "max_iter": 4, "tol": 0.0, "random_state": 0}
    whole = NMF(3, **kw)
    whole.learner(X, batch_size=20).fit(progress=None)
    path = str(tmp_path / "ck")
    first = NMF(3, **kw)
    lrn = first.learner(X, batch_size=20, checkpoint=path)
    lrn.opts.max_steps = 7  # stops at minibatch 2 of pass 1 (5 a pass), saved there
    lrn.fit(progress=None)
    assert lrn.metrics["pass"] == 1 and lrn.metrics["index"] == 2
    lrn.save(path)
    lrn.set(checkpoint=None)
    lrn.opts.max_steps = None
    lrn.fit(progress=None)  # the live model goes on with the sums it holds
    np.testing.assert_allclose(first.components_, whole.components_, rtol=1e-12)
    again = NMF(3, **kw)
    lrn = again.learner(X, batch_size=20).load(path)  # the sums come from the file
    lrn.set(checkpoint=None)
    lrn.opts.max_steps = None
    lrn.fit(progress=None)
    np.testing.assert_allclose(again.components_, whole.components_, rtol=1e-12)
    assert again.model_.errors[-1] == pytest.approx(whole.model_.errors[-1], rel=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cd_sweeps_row_by_row_are_the_whole_array_sweeps(dtype):
    """The coordinate-descent kernels (a row of W, a block of H's columns at a time, in
    cache) against their whole-array forms (one product per component): the same steps,
    float rounding apart; a component no row uses (zero Gram diagonal) stays put."""
    from bidlab.kern import nmf_cd

    rng = np.random.default_rng(7)
    m, k, n = 97, 6, 2 * nmf_cd.COLUMN_BLOCK + 7  # a last block that is not full
    Wt = rng.random((m, k)).astype(dtype)
    H = rng.random((k, n)).astype(dtype)
    H[4] = 0.0  # unused component: W's Gram diagonal 0 there
    X = rng.random((m, n)).astype(dtype)
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-11}
    for l1, l2 in ((0.0, 0.0), (0.05, 0.1)):
        G, B = H @ H.T, X @ H.T
        W, want = Wt.copy(), Wt.copy()
        nmf_cd.cd_rows(W, G, B, l1, l2)
        nmf_cd._rows_arrays(want, G, B, dtype(l1), dtype(l2), 1)
        np.testing.assert_allclose(W, want, **tol)
        assert (W >= 0).all() and not np.allclose(W, Wt)
        if l2 == 0.0:  # G[4, 4] = 0 and no L2 on the diagonal: skipped
            np.testing.assert_array_equal(W[:, 4], Wt[:, 4])
    gram, num = W.T @ W, W.T @ X
    gram[2, :] = gram[:, 2] = 0.0  # a component no row of W uses
    got, want = H.copy(), H.copy()
    nmf_cd.cd_cols(got, gram, num, np.empty(n, dtype))
    nmf_cd._cols_arrays(want, gram, num, np.empty(n, dtype), nmf_cd.COLUMN_BLOCK)
    np.testing.assert_allclose(got, want, **tol)
    np.testing.assert_array_equal(got[2], H[2])
    assert (got >= 0).all() and not np.allclose(got, H)
    with pytest.raises(ValueError, match="acc must hold"):
        nmf_cd.cd_cols(got, gram, num, np.empty(n - 1, dtype))
    with pytest.raises(ValueError, match="Gram matrix"):
        nmf_cd.cd_rows(W, G[:3, :3], B)
