"""Integer and bool operands promote to a float the kernels compute in, with numpy's values."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma

import bidlab as bl


def _s(dtype, seed=0):
    m = sp.random(6, 7, density=0.4, format="csr", random_state=seed, dtype=np.float64)
    m.data = np.round(m.data * 4) + 1
    return m.astype(dtype)


@pytest.mark.parametrize("dtype, want", [(np.bool_, np.float32), (np.int8, np.float32),
                                         (np.int32, np.float64), (np.int64, np.float64)])
def test_sparse_products_of_integers_and_bools(dtype, want):
    S = _s(dtype)
    B = np.arange(14).reshape(7, 2).astype(dtype)
    A = np.arange(18).reshape(3, 6).astype(dtype)
    got = bl.sparse_dense(bl.SMat(S), bl.Mat(B))
    assert got.dtype == want
    np.testing.assert_allclose(got.data, S.toarray().astype(np.float64) @ B, rtol=1e-6)
    got = bl.dense_sparse(bl.Mat(A), bl.SMat(S))
    assert got.dtype == want
    np.testing.assert_allclose(got.data, A.astype(np.float64) @ S.toarray(), rtol=1e-6)


def test_special_functions_of_bools_and_small_ints_compute_in_float32():
    B = np.array([[True, False, True]])
    assert bl.expdigamma(bl.Mat(B)).dtype == np.float32
    I8 = np.array([[1, 2, 3]], np.int8)
    np.testing.assert_allclose(bl.expdigamma(bl.Mat(I8)).data, np.exp(digamma(I8 * 1.0)),
                               rtol=1e-5)
    assert bl.exp(bl.Mat(B)).dtype == np.float32
