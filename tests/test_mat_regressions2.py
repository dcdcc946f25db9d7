"""The cached matrix core on operands a user passes without thinking twice: numpy scalars,
Python bools, boolean / list / out-of-range indices, signed zeros as cache keys and dense
operands that would broadcast a sparse one beyond its pattern."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl


@pytest.fixture(autouse=True)
def _fresh_cache():
    bl.clear_cache()
    yield
    bl.clear_cache()


def _m() -> bl.Mat:
    return bl.Mat(np.arange(12, dtype=np.float32).reshape(3, 4))


@pytest.mark.parametrize("value", [np.float32(2.0), np.float64(0.5), np.int64(3), np.bool_(True)])
def test_numpy_scalar_operands_act_as_numbers(value):
    m = _m()
    for got, ref in [
        (m * value, m.data * value),
        (value * m, value * m.data),
        (m + value, m.data + value),
        (m - value, m.data - value),
    ]:
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got.numpy(), ref)


def test_numpy_scalar_times_sparse_scales_stored_entries():
    s = bl.SMat(sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32)))
    np.testing.assert_array_equal((s * np.float32(3)).toarray(), [[3.0, 0.0], [0.0, 6.0]])


def test_python_bool_operand_promotes_like_numpy():
    i = bl.Mat(np.arange(4, dtype=np.int64).reshape(2, 2))
    got = i + True
    assert got.dtype == (i.data + True).dtype
    np.testing.assert_array_equal(got.numpy(), i.data + 1)


def test_boolean_mask_selects_rows_and_columns():
    m = _m()
    np.testing.assert_array_equal(m[np.array([True, False, True])].numpy(), m.data[[0, 2]])
    mask = np.array([False, True, True, False])
    np.testing.assert_array_equal(m[:, mask].numpy(), m.data[:, mask])
    with pytest.raises(IndexError, match="boolean index has 2 entries"):
        m[np.array([True, False])]


def test_list_index_gathers_rows():
    m = _m()
    np.testing.assert_array_equal(m[[2, 0]].numpy(), m.data[[2, 0]])


def test_out_of_range_int_index_raises():
    m = _m()
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0"):
        m[3]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1"):
        m[0, -5]
    np.testing.assert_array_equal(m[-3].numpy(), m.data[0:1])
    m[-1, -1] = 99.0
    assert m.data[2, 3] == 99.0


def test_signed_zero_scalars_do_not_share_a_container():
    m = bl.Mat(np.ones((2, 2), dtype=np.float32))
    with bl.caching(), np.errstate(divide="ignore"):
        pos = m / 0.0
        neg = m / -0.0
        assert pos is not neg
        assert np.all(pos.numpy() == np.inf)
        assert np.all(neg.numpy() == -np.inf)


@pytest.mark.parametrize(
    "sparse, dense",
    [
        (np.array([[1.0, 0.0, 2.0]]), np.arange(6.0).reshape(2, 3)),
        (np.array([[1.0], [0.0], [2.0]]), np.arange(3.0).reshape(1, 3)),
    ],
)
def test_dense_operand_cannot_broadcast_a_sparse_one(sparse, dense):
    s = bl.SMat(sp.csr_matrix(sparse.astype(np.float32)))
    d = bl.Mat(dense.astype(np.float32))
    with pytest.raises(ValueError, match="keeps the sparse operand's shape"):
        s * d
    with pytest.raises(ValueError, match="keeps the sparse operand's shape"):
        d + s
