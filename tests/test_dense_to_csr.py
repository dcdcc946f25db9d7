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


def test_take_rows_equals_scipys_row_indexing():
    from bidlab.models.validation import stores_every_entry, take_rows

    rng = np.random.default_rng(1)
    full = dense_to_csr(rng.standard_normal((30, 4)))
    some = dense_to_csr(rng.standard_normal((30, 4)) * (rng.random((30, 4)) < 0.5))
    assert stores_every_entry(full) and not stores_every_entry(some)
    for M in (full, some):
        for rows in (rng.permutation(30), np.array([3, 3, 0]), np.array([], int)):
            got, want = take_rows(M, rows), M[rows]
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.toarray(), want.toarray())
            np.testing.assert_array_equal(got.indices, want.indices)
            np.testing.assert_array_equal(got.indptr, want.indptr)


def test_standardising_dense_input_keeps_every_entry_and_the_values():
    from bidlab.models.glm.standardize import choose_scaling
    from bidlab.models.validation import stores_every_entry

    rng = np.random.default_rng(2)
    D = rng.normal(40.0, 7.0, (500, 6)) * np.array([1, 10, 100, 0.1, 1, 5])
    D[:, 3] = 2.5  # a constant column: scale 1, centred to explicit zeros
    X = dense_to_csr(D)
    s = choose_scaling(X, "auto", True)
    np.testing.assert_allclose(s.scale[[0, 1, 2, 4, 5]], 1 / D[:, [0, 1, 2, 4, 5]].std(0))
    assert s.scale[3] == 1.0
    Y = s.apply(X)
    assert stores_every_entry(Y)
    np.testing.assert_allclose(Y.toarray(), (D - D.mean(0)) * s.scale, atol=1e-9)
