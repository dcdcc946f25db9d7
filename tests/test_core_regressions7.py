"""Regressions of the matrix core, the touched-rows step and the in-memory sources: corrupt
minibatches refused before a kernel reads them, numpy numbers and conversions, clear errors
for operands the core cannot use, and blocks that stay aligned with their rows."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl
from bidlab.kern.touched import TouchedStep
from bidlab.learn.blocks import BlockSource
from bidlab.learn.datasource import MemorySource


def _csr(rows: int, cols: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.random((rows, cols))
    dense[dense < 0.6] = 0
    return sp.csr_matrix(dense)


# ----------------------------------------------------------------------------- SMat refills


@pytest.mark.parametrize(
    "parts, match",
    [
        ((np.array([1.0, 2.0]), np.array([10**6, 0]), np.array([0, 1, 2])), "column index"),
        ((np.array([1.0]), np.array([0, 1]), np.array([0, 1, 2])), "entries are stored"),
        ((np.array([1.0, 2.0, 3.0]), np.array([0, 1, 2]), np.array([1, 2, 3])), "starts at 1"),
        ((np.array([1.0, 2.0]), np.array([0, 1]), np.array([0, 2, 1])), "ends before"),
    ],
)
def test_a_corrupt_refill_is_refused_and_leaves_the_matrix_as_it_was(parts, match):
    s = bl.SMat(sp.csr_matrix(np.eye(2, 3)))
    s.copy_from(sp.csr_matrix(np.eye(2, 3) * 2))  # owns its buffers now
    before = s.toarray().copy()
    with pytest.raises(ValueError, match=match):
        s.copy_from_parts(*parts)
    np.testing.assert_array_equal(s.toarray(), before)
    # scipy's constructor does not check column indices; copy_from does
    bad = sp.csr_matrix((np.array([1.0, 2.0]), np.array([7, 0]), np.array([0, 1, 2])),
                        shape=(2, 3))
    with pytest.raises(ValueError, match="column index 7"):
        s.copy_from(bad)


def test_a_refill_from_spare_room_buffers_is_accepted():
    X = _csr(8, 5, 0)
    s = bl.SMat(_csr(3, 5, 1))
    a, b = X.indptr[2], X.indptr[5]
    s.copy_from_parts(X.data[a:], X.indices[a:], X.indptr[2:6] - a)  # longer than nnz
    np.testing.assert_array_equal(s.toarray(), X[2:5].toarray())
    assert s.nnz == b - a


def test_a_one_dimensional_sparse_array_is_named_not_unpacked():
    with pytest.raises(ValueError, match="not 2-D"):
        bl.SMat(sp.coo_array(np.array([1.0, 0.0, 2.0])))


# ----------------------------------------------------------------------------- Mat


@pytest.mark.parametrize("value", [np.float64(0.25), np.float32(0.25), np.array(0.25),
                                   np.int64(3)])
def test_set_takes_numpy_numbers(value):
    h = bl.scalar(0.5)
    h.set(value)
    assert float(h) == float(value)
    v = bl.row([1.0, 2.0, 3.0])
    v <<= value
    np.testing.assert_array_equal(v.numpy(), np.full((1, 3), float(value), np.float32))


def test_set_of_a_numpy_float_into_an_int_matrix_is_refused_as_an_array_is():
    m = bl.Mat(np.zeros((1, 1), np.int32))
    with pytest.raises(TypeError):
        m.set(np.float64(2.5))


def test_np_array_of_a_mat_is_a_copy():
    m = bl.Mat(np.zeros((2, 2)))
    a = np.array(m)
    a[0, 0] = 99.0
    assert m.data[0, 0] == 0.0
    assert np.asarray(m) is m.data  # asarray still converts without a copy
    assert np.asarray(m, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(m, dtype=np.float32, copy=False)


def test_a_sparse_transpose_in_an_elementwise_op_names_the_fix():
    S = bl.SMat(sp.csr_matrix(np.eye(2, 3)))
    with pytest.raises(TypeError, match=r"products \(@\) only"):
        bl.Mat(np.ones((3, 2))) + S.T


# ----------------------------------------------------------------------------- TouchedStep


def test_touched_step_refuses_shapes_its_kernels_would_overrun():
    rng = np.random.default_rng(0)
    X = _csr(4, 5, 2)
    T = 3
    M, S = rng.random((5, T)), rng.random((5, T)) + 1
    lr, z, eps = np.full(T, 0.1), np.zeros(T), np.full(T, 1e-3)
    step = TouchedStep(5, T, np.float64)
    with pytest.raises(ValueError, match=r"factor \(2, 3\)"):
        step.adagrad(X, rng.random((2, T)), M, S, lr, z, z, eps, 0.5, 1.0)
    with pytest.raises(ValueError, match=r"vector has shape \(1,\)"):
        step.adagrad(X, rng.random((4, T)), M, S, lr[:1], z, z, eps, 0.5, 1.0)
    with pytest.raises(ValueError, match=r"model \(5, 1\)"):
        step.grad(X, rng.random((4, T)), rng.random((5, 1)), lr, z, z, 1.0)
    before = M.copy()
    step.grad(X, rng.random((4, T)), M, lr, z, z, 1.0)  # right shapes still step
    assert not np.array_equal(M, before)


# ----------------------------------------------------------------------------- sources


def _blocks(src):
    out = []
    while (b := src.next()) is not None:
        out.append(b)
    return out


def test_block_source_refuses_matrices_that_disagree_in_rows():
    X = np.zeros((23, 3))
    with pytest.raises(ValueError, match="'w' has 22"):
        BlockSource(X, np.ones(22), batch_size=5)


@pytest.mark.parametrize("fmt", ["csc", "coo"])
def test_block_source_reads_rows_of_other_sparse_formats(fmt):
    X = _csr(6, 10, 3)  # fewer rows than columns: a CSC's column pointers fit as rows
    src = BlockSource(X.asformat(fmt), np.arange(6.0), batch_size=3, n_passes=1)
    batches = _blocks(src)
    assert len(batches) == 2
    for b in batches:
        rows = b.mats[1].numpy().ravel().astype(int)
        np.testing.assert_array_equal(b.mats[0].toarray(), X[rows].toarray())


def test_block_source_takes_lists_and_names_more_than_four_matrices():
    src = BlockSource([[1.0, 2.0], [3.0, 4.0]], *[np.zeros(2)] * 4, batch_size=1)
    assert src.info.names == ("X", "w", "m2", "m3", "m4")
    np.testing.assert_array_equal(src.next().mats[0].numpy(), [[1.0, 2.0]])
    with pytest.raises(ValueError, match="must be 2-D"):
        BlockSource(np.zeros((3, 2, 2)), batch_size=2)


@pytest.mark.parametrize("seed", [-1, None, 1.5, True])
def test_memory_source_names_a_bad_seed_when_made(seed):
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        MemorySource(np.zeros((4, 2)), batch_size=2, shuffle=True, seed=seed)
