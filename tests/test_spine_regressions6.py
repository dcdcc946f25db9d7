"""The training spine's checkpoints and ranks: a checkpoint that does not fit leaves the
learner's options alone, minibatch k-means resumes exactly, an impossible rank split names
a batch size that works, ``--ranks`` below 1 is refused, and ``--ranks`` holds no rows out
by default (the ranks' minibatch counts must agree)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_mpi

from bidlab.learn import ADAGrad, CheckpointError, Grad, Learner, MemorySource

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------ a checkpoint that does not fit
def test_a_checkpoint_that_does_not_fit_leaves_the_options_as_they_were(tmp_path):
    from bidlab.models.lsq import LeastSquares

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 8)).astype(np.float32)
    Y = (X @ rng.standard_normal((8, 2))).astype(np.float32)
    first = Learner(LeastSquares(), MemorySource(X, Y, batch_size=64), ADAGrad(lrate=0.05),
                    n_passes=1, val_every=3)
    first.fit(progress=None)
    first.save(str(tmp_path / "ck.npz"))
    other = Learner(LeastSquares(), (rng.random((50, 3)), rng.random(50)), Grad(lrate=0.5),
                    batch_size=10)
    before = other.opts.as_dict()
    with pytest.raises(CheckpointError, match="shapes"):
        other.load(str(tmp_path / "ck.npz"))
    assert other.opts.as_dict() == before  # not n_passes=1, val_every=3, lrate=0.05
    other.fit(progress=None)
    assert other.step == 10 * 5  # its own 10 passes of 5 minibatches


# ------------------------------------------------------ minibatch k-means resumes exactly
def _minibatch_learner(no_improvement: int | None, **options):
    from bidlab.datasets import blobs
    from bidlab.models import KMeans

    X = blobs(400, 4, 3, seed=1).X
    est = KMeans(8, algorithm="minibatch", random_state=0, max_iter=6,
                 max_no_improvement=no_improvement)
    return est.learner(X, batch_size=50, reassign_ratio=0.5, reassign_every=2, **options)


@pytest.mark.parametrize("no_improvement,stop_at", [(None, 13), (10, 9), (3, 3)])
def test_a_resumed_minibatch_kmeans_run_equals_an_uninterrupted_one(tmp_path, no_improvement,
                                                                    stop_at):
    """The step count (re-seeding cadence), the early stop's state and the re-seeding
    generator were not in the checkpoint: a resumed run re-seeded other centres and
    stopped early at another step."""
    straight = _minibatch_learner(no_improvement)
    straight.fit(progress=None)
    first = _minibatch_learner(no_improvement, max_steps=stop_at)
    first.fit(progress=None)
    first.save(str(tmp_path / "ck.npz"))
    resumed = _minibatch_learner(no_improvement)
    resumed.load(str(tmp_path / "ck.npz"))
    resumed.set(max_steps=None)
    resumed.fit(progress=None)
    assert resumed.step == straight.step
    for a, b in zip(straight.model.modelmats, resumed.model.modelmats, strict=True):
        np.testing.assert_array_equal(a.data, b.data)


# ------------------------------------------------------ rank splits and --ranks
@pytest.mark.parametrize("n,size,bs", [(19, 2, 3), (50, 3, 4), (3, 2, 1), (10, 4, 1)])
def test_an_impossible_rank_split_suggests_a_batch_size_that_works(n, size, bs):
    """The suggestion was a batch size at most an eighth of a share, which itself failed
    (e.g. the very batch size given)."""
    from bidlab.distributed.sharding import rank_batch_size, shard_range

    with pytest.raises(ValueError, match="choose a batch_size") as info:
        [rank_batch_size(n, r, size, bs) for r in range(size)]
    fits = int(str(info.value).rsplit("nearest is ", 1)[1].rstrip(")"))
    counts = {math.ceil((b - a) / rank_batch_size(n, r, size, fits))
              for r, (a, b) in enumerate(shard_range(n, r, size) for r in range(size))}
    assert len(counts) == 1


@pytest.mark.parametrize("ranks", ["0", "-2", "two"])
def test_ranks_below_one_are_refused(tmp_path, capsys, ranks):
    """``--ranks 0`` and negative counts trained on one process without a word."""
    from bidlab.cli import main

    np.savez(tmp_path / "x.npz", X=np.random.default_rng(0).random((40, 3)))
    with pytest.raises(SystemExit) as info:
        main(["train", "kmeans", "--ranks", ranks, "--data", str(tmp_path / "x.npz"),
              "--progress", "none"])
    assert info.value.code == 2
    assert "--ranks: must be a whole number of MPI ranks >= 1" in capsys.readouterr().err


@needs_mpi
def test_ranks_hold_no_rows_out_by_default(tmp_path):
    """Each rank held out 10% of its own share by default, after its batch size had been
    chosen for the whole share: on 41 rows with batch_size 5 rank 0 ran 5 minibatches a
    pass and rank 1 four, and the job failed in a crossed collective (EOFError)."""
    from bidlab.datasets import blobs

    np.savez(tmp_path / "x.npz", X=blobs(41, 3, 3, seed=1).X)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "bidlab.cli", "train", "kmeans", "--ranks", "2", "--data",
         str(tmp_path / "x.npz"), "--n_clusters", "3", "--batch_size", "5", "--sync_every",
         "1", "--sync-timeout", "20", "--progress", "none"],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "41 rows on 2 ranks" in done.stderr
    assert "held-out rows" not in done.stdout and "done:" in done.stdout, done.stdout
