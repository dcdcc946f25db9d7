"""Property tests of the matrix core against numpy / scipy oracles (bounded: a few seconds).

Random shapes (including 1-row, 1-column and empty sparse matrices), both float dtypes,
every broadcast form, caching on and off: each result must equal the oracle's.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import digamma

import bidlab as bl

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
DTYPES = st.sampled_from([np.float32, np.float64])


def _tol(dtype):
    return {"rtol": 2e-4, "atol": 2e-4} if dtype == np.float32 else {"rtol": 1e-9,
                                                                       "atol": 1e-9}


@st.composite
def dense(draw, m=None, n=None, dtype=None, low=-10.0, high=10.0):
    m = draw(st.integers(1, 9)) if m is None else m
    n = draw(st.integers(1, 9)) if n is None else n
    dtype = draw(DTYPES) if dtype is None else dtype
    seed = draw(st.integers(0, 2**31 - 1))
    a = np.random.default_rng(seed).uniform(low, high, (m, n)).astype(dtype)
    return a


@st.composite
def sparse(draw, m, n, dtype):
    density = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    seed = draw(st.integers(0, 2**31 - 1))
    s = sp.random(m, n, density=density, format="csr", random_state=seed, dtype=np.float64)
    s.data = (s.data * 4 + 0.5).astype(dtype)
    return s.astype(dtype)


OPS = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
       "mul": (lambda a, b: a * b, np.multiply), "max": (bl.maximum, np.maximum),
       "gt": (lambda a, b: a > b, np.greater)}


@SETTINGS
@given(data=st.data(), op=st.sampled_from(sorted(OPS)),
       form=st.sampled_from(["same", "row", "col", "one", "scalar"]),
       cached=st.booleans())
def test_elementwise_with_every_broadcast_form(data, op, form, cached):
    a = data.draw(dense())
    m, n = a.shape
    shape = {"same": (m, n), "row": (1, n), "col": (m, 1), "one": (1, 1)}.get(form)
    b = data.draw(dense(*shape, dtype=a.dtype)) if shape else data.draw(
        st.floats(-5, 5, allow_nan=False, width=32))
    ours, oracle = OPS[op]
    with bl.caching(cached):
        got = ours(bl.Mat(a), bl.Mat(b) if shape else b)
        again = ours(bl.Mat(a), bl.Mat(b) if shape else b)
    want = oracle(a, b)
    np.testing.assert_allclose(np.asarray(got.data, dtype=np.float64), want, **_tol(a.dtype))
    np.testing.assert_array_equal(got.data, again.data)


@SETTINGS
@given(a=dense(), name=st.sampled_from(["sum", "mean", "max", "min"]),
       axis=st.sampled_from([None, 0, 1]))
def test_reductions(a, name, axis):
    got = getattr(bl.Mat(a), name)(axis=axis).data
    want = getattr(np, name)(a.astype(np.float64), axis=axis)
    want = np.asarray(want).reshape(got.shape)
    np.testing.assert_allclose(got, want, **_tol(a.dtype))


@SETTINGS
@given(data=st.data(), k=st.integers(1, 5), dtype=DTYPES)
def test_sparse_products_match_dense_oracles(data, k, dtype):
    m, n = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))
    S = data.draw(sparse(m, n, dtype))
    D = S.toarray().astype(np.float64)
    A_km, B_kn = data.draw(dense(k, m, dtype)), data.draw(dense(k, n, dtype))
    B_nk, A_mk = data.draw(dense(n, k, dtype)), data.draw(dense(m, k, dtype))
    tol = _tol(dtype)
    s = bl.SMat(S)
    rows, cols = S.nonzero() if S.nnz else (np.zeros(0, int), np.zeros(0, int))
    got = bl.sddmm(bl.Mat(A_km), bl.Mat(B_kn), s).data
    order = np.lexsort((cols, rows))
    want = np.einsum("ki,ki->i", A_km[:, rows].astype(np.float64),
                     B_kn[:, cols].astype(np.float64))
    np.testing.assert_allclose(np.asarray(got).reshape(-1)[order] if S.nnz else got.reshape(-1),
                               want[order] if S.nnz else want, **tol)
    np.testing.assert_allclose(bl.sparse_dense(s, bl.Mat(B_nk)).data, D @ B_nk, **tol)
    np.testing.assert_allclose(bl.sparse_t_dense(s, bl.Mat(A_mk)).data, D.T @ A_mk, **tol)
    np.testing.assert_allclose(bl.dense_sparse(bl.Mat(A_km), s).data, A_km @ D, **tol)
    np.testing.assert_allclose(bl.dense_sparse_t(bl.Mat(B_kn), s).data, B_kn @ D.T, **tol)


@SETTINGS
@given(a=dense(low=0.05, high=50.0))
def test_expdigamma_matches_scipy(a):
    got = bl.expdigamma(bl.Mat(a)).data
    np.testing.assert_allclose(got, np.exp(digamma(a.astype(np.float64))),
                               rtol=5e-5 if a.dtype == np.float32 else 1e-10)
