"""Training from shard folders on disk: paths, resumes and files met along the way."""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from bidlab.learn import Learner, MemorySource, ShardSource, write_shards
from bidlab.models.nmf.model import NMFModel


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_source_made_from_a_relative_path_resumes_after_a_change_of_directory(
        tmp_path, monkeypatch):
    X = np.abs(np.random.default_rng(0).normal(size=(53, 9)))
    write_shards(tmp_path / "sh", X, rows_per_shard=10)
    whole = NMFModel(k=3, random_state=0)
    Learner(whole, MemorySource(X, batch_size=8), n_passes=3).fit(progress=None)
    monkeypatch.chdir(tmp_path)
    src = ShardSource("sh", batch_size=8)
    model = NMFModel(k=3, random_state=0)
    lrn = Learner(model, src, n_passes=3, max_steps=2)
    try:
        lrn.fit(progress=None)  # paused mid-pass: the prefetch thread is stopped
        monkeypatch.chdir(tmp_path.parent)  # e.g. a notebook that changed directory
        lrn.set(max_steps=None)
        # was: ShardError "shard file sh/shard-00001.npz is missing" (read relative to
        # the new working directory)
        lrn.fit(progress=None)
    finally:
        src.close()
    assert lrn.state == "done"
    np.testing.assert_array_equal(model.factors(), whole.factors())


def test_a_short_last_shard_trains_as_in_memory_and_leaves_no_file_open(tmp_path):
    X = sp.random(23, 7, density=0.4, format="csr", random_state=1)
    write_shards(tmp_path / "sh", X, rows_per_shard=5)  # the last shard has 3 rows
    mem = NMFModel(k=2, random_state=0)
    Learner(mem, MemorySource(X, batch_size=4), n_passes=2).fit(progress=None)
    before = _fds()
    src = ShardSource(tmp_path / "sh", batch_size=4)
    disk = NMFModel(k=2, random_state=0)
    Learner(disk, src, n_passes=2).fit(progress=None)
    assert _fds() == before  # no shard file left open once the run ended
    src.close()
    np.testing.assert_array_equal(disk.factors(), mem.factors())
