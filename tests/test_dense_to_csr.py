"""``dense_to_csr``: the CSR scipy's constructor makes from a dense array, without its COO
detour (the GLM trains dense input through it)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models.validation import dense_to_csr


def _cases():
    rng = np.random.default_rng(0)
    full = rng.standard_normal((50, 7))
    some = full * (rng.random(full.shape) < 0.3)
    some[3] = 0.0  # an empty row
    yield full
    yield some
    yield np.zeros((4, 3))
    yield np.zeros((0, 5))
    yield np.zeros((5, 0))
    yield (rng.random((20, 6)) < 0.5).astype(np.int64)
    yield np.asfortranarray(full)
    yield full[::2, 1:5]  # not contiguous


@pytest.mark.parametrize("dtype", [None, np.float32, np.float64])
def test_the_same_matrix_as_scipys_constructor(dtype):
    for D in _cases():
        want = sp.csr_matrix(np.asarray(D, dtype=dtype))
        got = dense_to_csr(D, dtype)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert got.indices.dtype == want.indices.dtype == got.indptr.dtype
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.data, want.data)
        assert got.has_canonical_format


def test_a_copy_unless_the_caller_lends_the_buffer():
    D = np.arange(1.0, 7.0).reshape(2, 3)
    M = dense_to_csr(D)
    M.data[0] = 99.0
    assert D[0, 0] == 1.0
    lent = dense_to_csr(D, copy=False)
    assert np.shares_memory(lent.data, D)
    with pytest.raises(ValueError, match="2-D"):
        dense_to_csr(np.ones(3))
