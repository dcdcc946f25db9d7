"""Shard folders and ranks driven as a user would: a manifest whose dtypes disagree with its
shards, matrix names that overwrite each other's shard members, a negative row-length
histogram, a negative shuffle seed, a plain learner model under ``--ranks``, bad
``--sync-timeout`` and ``--nest`` values, and GLM's default batch size on two ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import drain, needs_mpi

from bidlab.learn.shards import ShardError, ShardSource, write_shards

ROOT = Path(__file__).resolve().parent.parent


def _edit(folder: Path, edit) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


# ------------------------------------------------------------------ shard folders
@pytest.mark.parametrize("sparse, edit, member", [
    (False, lambda m: m["matrices"][0].__setitem__("dtype", "int8"), "'X' holds float32"),
    (False, lambda m: m["matrices"][1].__setitem__("dtype", "int32"), "'y' holds float64"),
    (True, lambda m: m["matrices"][0].__setitem__("dtype", "int16"), "'X__data' holds"),
    (True, lambda m: m["matrices"][0].__setitem__("index_dtype", "int8"), "'X__indices'"),
])
def test_a_declared_dtype_that_is_not_the_stored_one_is_refused(tmp_path, sparse, edit,
                                                                member):
    """The rows were cast to the declared dtype without a word: 0.5 became 0 in int8."""
    x = np.arange(14, dtype=np.float32).reshape(7, 2) + 0.5
    write_shards(tmp_path, sp.csr_matrix(x) if sparse else x, np.arange(7.0) + 0.5,
                 rows_per_shard=3)
    _edit(tmp_path, edit)
    with pytest.raises(ShardError, match=f"{member}.*but the manifest declares"):
        drain(ShardSource(tmp_path, batch_size=2, n_passes=1))


@pytest.mark.parametrize("mats, names", [
    ((np.ones((5, 2)), np.arange(5.0)), ("a", "a")),
    ((sp.csr_matrix(np.eye(5)), np.arange(5.0)), ("X", "X__data")),
    ((np.ones((5, 2)), np.arange(5.0)), (1, 2)),
])
def test_names_that_share_shard_members_are_refused_before_writing(tmp_path, mats, names):
    """The second matrix overwrote the first's ``.npz`` member: the folder was written and
    then unreadable (or the write failed with numpy's 'keywords must be strings')."""
    with pytest.raises(ValueError, match="names must be distinct non-empty strings"):
        write_shards(tmp_path / "s", *mats, rows_per_shard=2, names=names)
    assert not (tmp_path / "s").exists()


def test_a_negative_row_length_histogram_is_refused_as_malformed(tmp_path):
    """It reached numpy as a bare 'negative dimensions are not allowed'."""
    write_shards(tmp_path, sp.random(7, 4, density=0.5, format="csr", random_state=0),
                 rows_per_shard=3)
    _edit(tmp_path, lambda m: m["matrices"][0].__setitem__("row_nnz_hist", [[-5, 7]]))
    with pytest.raises(ShardError, match="malformed.*row lengths and counts are >= 0"):
        drain(ShardSource(tmp_path, batch_size=2, n_passes=1))


def test_a_negative_seed_is_refused_when_the_source_is_made(tmp_path):
    """It failed later, in the prefetch thread, as numpy's 'expected non-negative integer'."""
    write_shards(tmp_path, np.ones((5, 2)), rows_per_shard=2)
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        ShardSource(tmp_path, batch_size=2, shuffle_rows=True, seed=-1)


# ------------------------------------------------------------------------- ranks
def test_a_plain_learner_model_is_refused_on_ranks(tmp_path, capsys):
    """Every rank trained alone on every row, all writing the one --checkpoint."""
    from bidlab.cli import main

    np.savez(tmp_path / "x.npz", X=np.ones((8, 2)), y=np.ones(8))
    code = main(["train", "lsq", "--ranks", "2", "--data", str(tmp_path / "x.npz"),
                 "--progress", "none", "--checkpoint", str(tmp_path / "ck")])
    assert code == 2
    assert "lsq is a plain learner Model, which --ranks does not run" in \
        capsys.readouterr().err
    assert not list(tmp_path.glob("ck*"))


def test_a_batch_size_nobody_asked_for_is_evened_over_the_ranks():
    from bidlab.distributed.sharding import even_batch_size, rank_batch_size, shard_range

    for n, size, bs in [(41, 2, 2), (19, 2, 3), (50, 3, 4), (1000, 2, 128)]:
        fits = even_batch_size(n, size, bs)
        counts = {-(-(b - a) // rank_batch_size(n, r, size, fits))
                  for r, (a, b) in enumerate(shard_range(n, r, size) for r in range(size))}
        assert len(counts) == 1 and abs(fits - bs) <= 1


def _ranks(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    from bidlab.datasets import blobs

    data = blobs(41, 3, 2, seed=1)
    y = (data.X[:, 0] > np.median(data.X[:, 0])).astype(np.float64)
    np.savez(tmp_path / "x.npz", X=data.X, y=y)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "bidlab.cli", "train", *args, "--ranks", "2", "--data",
         str(tmp_path / "x.npz"), "--progress", "none", "--n_passes", "1"],
        env=env, capture_output=True, text=True, timeout=120)


@needs_mpi
@pytest.mark.parametrize("args, said", [
    (("--sync-timeout", "0"), "argument --sync-timeout: must be a number of seconds > 0"),
    (("--nest", "2"), "--nest layers the sparse mode, and --comm-mode is average"),
])
def test_bad_rank_options_are_named_once(tmp_path, args, said):
    """--sync-timeout 0 read 'spin must be in [0, timeout] seconds' (an option nobody gave),
    --nest without the sparse mode was ignored, and argparse's usage came once per rank."""
    done = _ranks(tmp_path, "kmeans", "--n_clusters", "2", *args)
    assert done.returncode == 2, done.stderr[-3000:]
    assert said in done.stderr and done.stderr.count("usage:") <= 1, done.stderr[-3000:]


@needs_mpi
def test_glm_trains_on_two_ranks_with_its_default_batch_size(tmp_path):
    """'auto' made 2 rows a minibatch on 41 rows, which 2 ranks cannot even out: the job
    failed asking for a batch size the user never gave."""
    done = _ranks(tmp_path, "glm")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done:" in done.stdout, done.stdout
