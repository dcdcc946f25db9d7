"""Row identity and per-row state: every minibatch carries its rows' global ids, and a
RowState keeps values by those ids across shuffled passes, from memory and from shards."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.learn.datasource import BlendedSource, MemorySource
from bidlab.learn.rowstate import RowState
from bidlab.learn.shards import ShardSource, write_shards
from bidlab.models import LDA


def _dense(m):
    return m.csr.toarray() if hasattr(m, "csr") else np.asarray(m.data)


def _rows_of_passes(src, n_passes):
    """(pass, ids, rows) of every minibatch, copied."""
    out = []
    while True:
        b = src.next()
        if b is None:
            break
        out.append((b.pass_, b.ids[: b.n].copy(), _dense(b.mats[0])[: b.n].copy()))
        if len(out) > 1000:
            raise AssertionError("the source did not stop")
    return out


@pytest.mark.parametrize("shuffle", [False, True])
def test_memory_minibatches_carry_the_global_ids_of_their_rows(shuffle):
    X = np.arange(103 * 3, dtype=np.float64).reshape(103, 3)
    src = MemorySource(X, batch_size=10, shuffle=shuffle, seed=4, n_passes=2)
    seen = _rows_of_passes(src, 2)
    for pass_ in (0, 1):
        ids = np.concatenate([i for p, i, _ in seen if p == pass_])
        np.testing.assert_array_equal(np.sort(ids), np.arange(103))  # each row once a pass
    for _, ids, rows in seen:
        np.testing.assert_array_equal(rows, X[ids])
    orders = [np.concatenate([i for p, i, _ in seen if p == q]) for q in (0, 1)]
    assert (not shuffle) == np.array_equal(orders[0], orders[1])


def test_shard_minibatches_carry_global_ids_across_shuffled_shards(tmp_path):
    X = sp.csr_matrix(np.arange(1, 95 * 4 + 1, dtype=np.float64).reshape(95, 4))
    write_shards(tmp_path / "sh", X, rows_per_shard=30)
    src = ShardSource(tmp_path / "sh", batch_size=16, shuffle_shards=True, shuffle_rows=True,
                      seed=2, n_passes=2)
    try:
        seen = _rows_of_passes(src, 2)
    finally:
        src.close()
    dense = X.toarray()
    for pass_ in (0, 1):
        ids = np.concatenate([i for p, i, _ in seen if p == pass_])
        np.testing.assert_array_equal(np.sort(ids), np.arange(95))
    for _, ids, rows in seen:
        np.testing.assert_array_equal(rows, dense[ids])


def test_a_blended_sources_second_stream_has_no_ids():
    a = MemorySource(np.zeros((40, 2)), batch_size=8)
    b = MemorySource(np.ones((40, 2)), batch_size=8)
    src = BlendedSource(a, b, frac=0.25)
    batch = src.next()
    ids = batch.ids[: batch.n]
    rows = _dense(batch.mats[0])[: batch.n]
    assert (ids[rows[:, 0] == 0] >= 0).all() and (ids[rows[:, 0] == 1] == -1).all()
    assert (rows[:, 0] == 1).any()


def test_row_state_follows_rows_through_shuffled_passes():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((57, 5))
    store = RowState(57, 5)
    src = MemorySource(X, batch_size=8, shuffle=True, seed=1, n_passes=3)
    firsts, seconds = [], []
    while (b := src.next()) is not None:
        out = np.empty((8, 5))
        warm = store.all_seen(b)
        if b.pass_ == 0:
            firsts.append(warm)
        else:
            seconds.append(warm)
            assert store.get(b, out)
            np.testing.assert_array_equal(out[: b.n], X[b.ids[: b.n]] * b.pass_)
        store.put(b, np.asarray(b.mats[0].data) * (b.pass_ + 1))
    assert not any(firsts) and all(seconds)
    np.testing.assert_array_equal(store.values.data, X * 3)


def test_row_state_refuses_ids_of_another_data_set():
    store = RowState(10, 2)
    b = MemorySource(np.zeros((30, 2)), batch_size=30).next()
    with pytest.raises(ValueError, match="outside this RowState's 10 rows"):
        store.put(b, np.zeros((30, 2)))


def test_lda_keeps_each_documents_topic_weights_by_row_id():
    """LDA's warm starts live in a RowState: after a pass every document is in it, and the
    later minibatches start from their documents' own values."""
    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.poisson(0.3, (120, 40)).astype(np.float64))
    lrn = LDA(4, n_passes=2, batch_size=20, random_state=0).learner(X, val_every=0)
    lrn.fit(progress=None)
    store = lrn.model._store
    assert isinstance(store, RowState) and store.values.shape == (120, 4)
    assert bool(store.seen.data.all()) and lrn.model._warm
