"""The result cache stays bounded: evicted keys leave every index, sparse results that grow
in place count against the byte limit, and containers outside the cache are not counted."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import bidlab as bl


def _held(cache) -> int:
    return sum(int(getattr(c, "nbytes", 0)) for c in cache._store.values())


def test_evicted_keys_leave_the_guid_index(fresh_cache):
    bl.cache_limit(64 * 1024)
    a = bl.Mat(np.ones((8, 8), np.float32))
    with bl.caching():
        for i in range(3000):
            a + float(i)  # a new key each time (the scalar is part of it)
    assert fresh_cache.stats()["evictions"] > 2500
    indexed = sum(len(keys) for keys in fresh_cache._keys_by_guid.values())
    assert indexed <= len(fresh_cache) + 1, (indexed, len(fresh_cache))
    assert fresh_cache.bytes_held == _held(fresh_cache) <= 64 * 1024


def _csr(n, nnz, seed):
    return sp.random(n, n, density=nnz / (n * n), format="csr", random_state=seed,
                     dtype=np.float32)


def test_sparse_results_growing_in_place_keep_the_limit(fresh_cache):
    limit = 200_000
    bl.cache_limit(limit)
    owners = [bl.Mat(np.ones((1, 1), np.float32)) for _ in range(20)]
    grown = []
    for i, owner in enumerate(owners):
        s = bl.SMat(_csr(100, 10, i))
        fresh_cache.put(("grow", i), s, (owner,))
        s.copy_from(_csr(100, 4000, 100 + i))  # 400x the entries, same container
        grown.append(s)
        assert fresh_cache.bytes_held == _held(fresh_cache)
        assert fresh_cache.bytes_held <= limit or len(fresh_cache) == 1
    assert fresh_cache.stats()["evictions"] > 0


def test_matrices_outside_the_cache_are_not_counted(fresh_cache):
    s = bl.SMat(_csr(50, 5, 0))
    before = fresh_cache.bytes_held
    s.copy_from(_csr(50, 2000, 1))
    assert fresh_cache.bytes_held == before
