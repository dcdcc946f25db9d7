"""The cached matrix core against its documented contracts: entries keyed on a dropped
matrix go (sparse results included), and results match numpy / scipy."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl
from bidlab.mat.cache import CACHE


def _csr(m, n, seed, density=0.4):
    return sp.random(m, n, density=density, format="csr", random_state=seed, dtype=np.float32)


def test_a_dropped_minibatch_smat_takes_its_sparse_results_out_of_the_cache(fresh_cache):
    # A loop that wraps a new SMat each step (no copy_from) makes new keys every step; the
    # entries must go with the SMat, as the cache documents, not keep it alive forever.
    rng = np.random.default_rng(0)
    A = bl.Mat(rng.random((3, 6), dtype=np.float32))
    B = bl.Mat(rng.random((3, 5), dtype=np.float32))
    gone = []
    with bl.caching():
        for step in range(10):
            s = _csr(6, 5, step)
            S = bl.SMat(s)
            P = bl.sddmm(A, B, S)
            Q = bl.exp(P) * 2.0  # results derived from results: the same pattern root
            want = np.exp((A.numpy().T @ B.numpy()) * (s.toarray() != 0)) * 2.0
            np.testing.assert_allclose(Q.toarray(), np.where(s.toarray() != 0, want, 0),
                                       rtol=1e-5)
            gone.append(weakref.ref(S))
            del S, P, Q
    gc.collect()
    assert all(ref() is None for ref in gone), "the cache kept dropped SMats alive"
    assert len(fresh_cache) == 0
    assert fresh_cache.bytes_held == 0


def test_sparse_results_of_a_live_smat_are_still_hits(fresh_cache):
    S = bl.SMat(_csr(6, 5, 1))
    with bl.caching():
        first = S * 3.0
        del first
        gc.collect()
        hits = CACHE.stats()["hits"]
        again = S * 3.0
        assert CACHE.stats()["hits"] == hits + 1
        assert again is S * 3.0
    np.testing.assert_allclose(again.toarray(), S.toarray() * 3.0)


def test_evicting_a_sparse_result_releases_it(fresh_cache):
    S = bl.SMat(_csr(40, 40, 2))
    with bl.caching():
        first = bl.exp(S)
        ref = weakref.ref(first)
        nbytes = first.nbytes
        del first
        bl.cache_limit(nbytes)
        _ = S * 2.0  # pushes exp(S) out
        gc.collect()
    assert ref() is None, "an evicted sparse result stayed pinned on its pattern root"
    assert fresh_cache.bytes_held == nbytes
    bl.clear_cache()
    assert fresh_cache.bytes_held == 0 and not getattr(S, "_pinned", None)


def test_numpy_array_times_smat_is_the_sparse_product_not_an_object_array():
    s = _csr(5, 4, 3)
    S = bl.SMat(s)
    d = np.arange(20, dtype=np.float32).reshape(5, 4)
    for got in (d * S, S * d):  # numpy defers to SMat's reflected operator
        assert isinstance(got, bl.SMat) and got.dtype == np.float32
        np.testing.assert_allclose(got.toarray(), s.multiply(d).toarray())
    got = d[:1] - S  # a row vector broadcast over the stored entries
    np.testing.assert_allclose(got.toarray(), np.where(s.toarray() != 0, d[:1] - s.toarray(), 0))


@pytest.mark.parametrize("case", ["S@x", "x@S", "S.T@x", "x@S.T"])
def test_sparse_product_with_a_raw_array_names_the_fix(case):
    S = bl.SMat(_csr(5, 4, 4))
    products = {"S@x": lambda: S @ np.ones((4, 2)), "x@S": lambda: np.ones((2, 5)) @ S,
                "S.T@x": lambda: S.T @ np.ones((5, 2)), "x@S.T": lambda: np.ones((2, 4)) @ S.T}
    with pytest.raises(TypeError, match=r"bidlab\.Mat\(x\)"):
        products[case]()


def test_clear_cache_while_dropped_smats_await_collection(fresh_cache):
    gc.disable()  # the dropped SMats and their results wait in cycles, as between collections
    try:
        with bl.caching():
            for step in range(5):
                S = bl.SMat(_csr(6, 5, step))
                _ = bl.exp(S) + 1.0
                del S, _
        bl.clear_cache()  # frees the roots while it runs: must not trip over their entries
    finally:
        gc.enable()
    gc.collect()
    assert len(fresh_cache) == 0 and fresh_cache.bytes_held == 0
