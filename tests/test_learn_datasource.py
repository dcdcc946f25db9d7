"""Data sources: same containers every step, no dropped rows, shards == memory, bad input."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import finishes

from bidlab import backend
from bidlab.learn import (
    BlendedSource,
    MemorySource,
    ShardError,
    ShardSource,
    read_manifest,
    write_shards,
)
from bidlab.mat import Mat, SMat


def _data(n=103, f=7, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.random(n, f, density=0.3, format="csr", dtype=np.float32, random_state=seed)
    y = np.arange(n, dtype=np.float32)  # the row id: lets tests see which rows came
    w = rng.random(n).astype(np.float32)
    return X, y, w


def _dense_of(m):
    return m.toarray() if isinstance(m, SMat) else np.asarray(m.data)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
def test_memory_source_covers_every_row_once_per_pass_in_reused_containers(sparse, shuffle):
    X, y, w = _data()
    Xin = X if sparse else X.toarray()
    src = MemorySource(Xin, y, w, batch_size=10, shuffle=shuffle, seed=3)
    assert src.batches_per_pass == 11 and src.info.n_samples == 103
    ids = {Mat: set(), SMat: set()}
    before = None
    for p in range(3):
        seen = []
        for b in src.passes(1):
            assert b.pass_ == p and b.n == (3 if b.last else 10)
            rows = b.mats[1].data.ravel().astype(int)
            seen.extend(rows)
            # every matrix holds the same rows (aligned), features included
            np.testing.assert_array_equal(_dense_of(b.mats[0]), X.toarray()[rows])
            np.testing.assert_array_equal(b.mats[2].data.ravel(), w[rows])
            ids[type(b.mats[0])].add((b.n, id(b.mats[0]), b.mats[0].guid))
        assert sorted(seen) == list(range(103))  # nothing dropped, nothing repeated
        if shuffle and p == 1:
            assert seen != sorted(seen)
        if p == 0:
            before = backend.allocations.snapshot()[0]
    assert backend.allocations.snapshot()[0] == before  # passes 2 and 3 allocate nothing
    assert src.container_sizes == [3, 10]
    # one container per size, the same object (and GUID) every step
    assert len(ids[SMat if sparse else Mat]) == 2


def test_dense_and_sparse_sources_yield_identical_minibatches():
    X, y, _ = _data()
    a = MemorySource(X, y, batch_size=16, shuffle=True, seed=5)
    b = MemorySource(X.toarray(), y, batch_size=16, shuffle=True, seed=5)
    for _ in range(20):
        ba, bb = a.next(), b.next()
        assert (ba.pass_, ba.index, ba.n) == (bb.pass_, bb.index, bb.n)
        np.testing.assert_array_equal(ba.mats[0].toarray(), bb.mats[0].data)


def test_shards_yield_the_same_minibatches_as_memory(tmp_path):
    X, y, w = _data(n=250)
    write_shards(tmp_path / "s", X, y, w, rows_per_shard=37)
    manifest = read_manifest(tmp_path / "s")
    assert manifest["n_samples"] == 250 and len(manifest["shards"]) == 7
    assert [m["kind"] for m in manifest["matrices"]] == ["csr", "dense", "dense"]
    sh = ShardSource(tmp_path / "s", batch_size=32)
    mem = MemorySource(X, y, w, batch_size=32)
    for _ in range(2 * 8 + 3):  # across passes and shard boundaries
        a, b = sh.next(), mem.next()
        assert (a.pass_, a.index, a.n, a.last) == (b.pass_, b.index, b.n, b.last)
        assert (a.mats[0].csr != b.mats[0].csr).nnz == 0
        np.testing.assert_array_equal(a.mats[1].data, b.mats[1].data)
        np.testing.assert_array_equal(a.mats[2].data, b.mats[2].data)
    sh.close()


def test_shard_shuffling_is_a_permutation_and_reproducible(tmp_path):
    X, y, _ = _data(n=250)
    write_shards(tmp_path, X.toarray(), y, rows_per_shard=40)

    def one_pass(seed, pass_):
        s = ShardSource(tmp_path, batch_size=32, shuffle_shards=True, shuffle_rows=True,
                        seed=seed)
        s.seek(pass_, 0)
        rows = np.concatenate([b.mats[1].data.ravel().copy() for b in s.passes(1)])
        s.close()
        return rows

    r0 = one_pass(1, 0)
    assert sorted(r0.astype(int)) == list(range(250)) and list(r0) != sorted(r0)
    np.testing.assert_array_equal(r0, one_pass(1, 0))  # same seed and pass: same order
    assert list(one_pass(1, 1)) != list(r0)  # a new order next pass


def test_shard_source_seek_resumes_mid_pass(tmp_path):
    X, y, _ = _data(n=100)
    write_shards(tmp_path, X, y, rows_per_shard=30)
    s = ShardSource(tmp_path, batch_size=8, shuffle_rows=True, seed=2)
    full = [b.mats[1].data.ravel().copy() for b in s.passes(2)]
    s.seek(1, 5)
    b = s.next()
    assert (b.pass_, b.index) == (1, 5)
    np.testing.assert_array_equal(b.mats[1].data.ravel(), full[13 + 5])
    s.close()


def test_shard_prefetch_thread_runs_ahead_and_stops(tmp_path):
    X, y, _ = _data(n=400)
    write_shards(tmp_path, X, y, rows_per_shard=50)
    s = ShardSource(tmp_path, batch_size=10, prefetch=3)
    s.next()
    time.sleep(0.2)
    assert s._queue.qsize() == 3  # planned ahead while we were idle
    thread = s._thread
    s.close()
    assert not thread.is_alive()
    names = [t.name for t in threading.enumerate()]
    assert not any(n.startswith("bidlab-shards") for n in names)


def test_missing_and_corrupt_shards_name_the_file(tmp_path):
    X, y, _ = _data(n=100)
    write_shards(tmp_path, X, y, rows_per_shard=30)
    victim = tmp_path / "shard-00002.npz"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])  # truncated
    s = ShardSource(tmp_path, batch_size=10)
    with pytest.raises(ShardError, match="shard-00002.npz"):
        for _ in range(12):
            s.next()
    s.close()
    victim.write_bytes(b"garbage" * (len(data) // 7) + b"x" * (len(data) % 7))  # same size
    s = ShardSource(tmp_path, batch_size=10)
    with pytest.raises(ShardError, match="shard-00002.npz is corrupt"):
        for _ in range(12):
            s.next()
    s.close()
    victim.unlink()
    with pytest.raises(ShardError, match="missing 1 shard file.*shard-00002.npz"):
        ShardSource(tmp_path, batch_size=10)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ShardError, match="not valid JSON"):
        ShardSource(tmp_path)


def test_manifest_rows_must_add_up(tmp_path):
    X, y, _ = _data(n=50)
    write_shards(tmp_path, X, y, rows_per_shard=20)
    m = json.loads((tmp_path / "manifest.json").read_text())
    m["n_samples"] = 51
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ShardError, match="lists 50 rows in its shards but n_samples=51"):
        ShardSource(tmp_path)


def _point_shard_at(folder, index, name, keep_bytes=False):
    m = json.loads((folder / "manifest.json").read_text())
    m["shards"][index]["file"] = name
    if not keep_bytes:
        del m["shards"][index]["bytes"]
    (folder / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("keep_bytes", [False, True], ids=["no-bytes", "bytes"])
@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_manifest_names_files_inside_its_folder_only(tmp_path, how, keep_bytes):
    from bidlab.cli import main

    X, y, _ = _data(n=60)
    folder = tmp_path / "shards"
    write_shards(folder, X, y, rows_per_shard=30)
    outside = tmp_path / "x.npz"  # a valid shard of other data, beside the folder
    write_shards(tmp_path / "other", X * 2, y, rows_per_shard=30)
    (tmp_path / "other" / "shard-00000.npz").rename(outside)
    name = {"dotdot": "../x.npz", "absolute": str(outside), "symlink": "link.npz"}[how]
    if how == "symlink":
        (folder / "link.npz").symlink_to(outside)
    _point_shard_at(folder, 0, name, keep_bytes)
    with pytest.raises(ShardError, match=r"names '.*x.npz'|names 'link.npz'") as err:
        ShardSource(folder, batch_size=10)
    assert "outside its folder" in str(err.value)
    assert main(["train", "lsq", "--data", str(folder), "--n_passes", "1"]) == 2


def test_special_files_in_a_shard_folder_are_refused_without_blocking(tmp_path):
    import os

    X, y, _ = _data(n=60)
    write_shards(tmp_path, X, y, rows_per_shard=30)
    victim = tmp_path / "shard-00001.npz"
    victim.unlink()
    os.mkfifo(victim)
    exc = finishes(lambda: ShardSource(tmp_path, batch_size=10), (victim,))
    assert isinstance(exc, ShardError) and f"{victim} is a FIFO" in str(exc), repr(exc)
    victim.unlink()
    manifest = tmp_path / "manifest.json"
    manifest.unlink()
    os.mkfifo(manifest)
    exc = finishes(lambda: read_manifest(tmp_path), (manifest,))
    assert isinstance(exc, ShardError) and f"{manifest} is a FIFO" in str(exc), repr(exc)


def test_blended_source_mixes_in_the_given_fraction():
    rng = np.random.default_rng(0)
    Xa, Xb = rng.random((100, 3)), rng.random((30, 3)) + 10
    a = MemorySource(Xa, np.zeros(100), batch_size=10)
    b = MemorySource(Xb, np.ones(30), batch_size=10)
    src = BlendedSource(a, b, frac=0.75, batch_size=20)
    # containers are reused step after step: copy what is kept
    batches = [(bt.n, bt.mats[0].data.copy(), bt.mats[1].data.copy()) for bt in src.passes(1)]
    assert len(batches) == 7  # 100 rows of a at 15 per minibatch
    assert [n for n, _, _ in batches] == [20] * 6 + [15]
    for _, _, y in batches[:-1]:
        assert y.sum() == 5  # 5 rows of b, 15 of a
    first_a = np.concatenate([x[:15] for _, x, _ in batches[:6]])
    np.testing.assert_array_equal(first_a, Xa[:90])
    b_rows = np.concatenate([x[15:] for _, x, _ in batches[:6]] + [batches[6][1][10:]])
    np.testing.assert_array_equal(b_rows[:30], Xb)  # b repeats as needed
    np.testing.assert_array_equal(b_rows[30:], Xb[:5])
    assert src.next().pass_ == 1


def test_blended_sparse_sources_concatenate_rows():
    X, y, _ = _data(n=60)
    a = MemorySource(X[:40], y[:40], batch_size=5)
    b = MemorySource(X[40:], y[40:], batch_size=5)
    src = BlendedSource(a, b, frac=0.5, batch_size=10)
    bt = src.next()
    np.testing.assert_array_equal(bt.mats[0].toarray(),
                                  np.vstack([X[:5].toarray(), X[40:45].toarray()]))


def test_bad_input_messages():
    X = np.ones((10, 3))
    with pytest.raises(ValueError, match="'X' has 10 rows .* but 'y' has 9"):
        MemorySource(X, np.ones(9))
    with pytest.raises(ValueError, match="empty"):
        MemorySource(np.ones((0, 3)))
    with pytest.warns(UserWarning, match="batch_size 50 is larger than the 10 samples"):
        src = MemorySource(X, batch_size=50)
    assert src.batch_size == 10 and src.batches_per_pass == 1
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        MemorySource(X, batch_size=0)
    with pytest.raises(ValueError, match="must be 2-D"):
        MemorySource(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="holds <U1"):
        MemorySource(np.array([["a"]]))
    with pytest.raises(ValueError, match="rows_per_shard"):
        write_shards("/nonexistent", X, rows_per_shard=0)


def test_finite_source_ends_after_n_passes():
    src = MemorySource(np.ones((10, 2)), batch_size=4, n_passes=2)
    assert len(list(iter(src.next, None))) == 6
    assert src.next() is None


def test_shuffled_sparse_shards_allocate_nothing_after_the_first_pass(tmp_path):
    rng = np.random.default_rng(0)
    lengths = rng.zipf(1.5, 300).clip(1, 60)  # skewed row lengths: minibatch nnz varies
    rows = np.repeat(np.arange(300), lengths)
    cols = rng.integers(0, 80, rows.shape[0])
    X = sp.csr_matrix((np.ones(rows.shape[0], np.float32), (rows, cols)), shape=(300, 80))
    write_shards(tmp_path, X, np.arange(300, dtype=np.float32), rows_per_shard=70)
    src = ShardSource(tmp_path, batch_size=16, shuffle_shards=True, shuffle_rows=True)
    for _ in src.passes(1):
        pass
    before = backend.allocations.snapshot()[0]
    for _ in src.passes(4):
        pass
    assert backend.allocations.snapshot()[0] == before
    src.close()


def test_learner_releases_the_prefetch_thread_when_a_run_ends(tmp_path):
    from bidlab.learn import Grad, Learner
    from bidlab.models.lsq import LeastSquares

    X, y, _ = _data(n=200)
    write_shards(tmp_path, X, y, rows_per_shard=50)
    lr = Learner(LeastSquares(), ShardSource(tmp_path, batch_size=20), Grad(), n_passes=2)
    lr.fit(progress=None)
    assert not any(t.name.startswith("bidlab-shards") for t in threading.enumerate())
    lr.set(n_passes=3)
    lr.fit(progress=None)  # the stream goes on where it was
    assert lr.step == 30 and lr.summaries[-1]["pass"] == 2
