"""k-means on several ranks and in checkpoints: Lloyd's ranks stop when one process would,
a checkpoint whose origin is corrupt is refused before anything is loaded, and a loaded
Lloyd learner saved again keeps the pass's sums so far."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_mpi

from bidlab.datasets import blobs
from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.learn.comm import ThreadGroup
from bidlab.models import KMeans


def _sorted_rows(seed: int = 0, n: int = 40) -> np.ndarray:
    """``n`` normal rows in 2-D, sorted by their first feature: contiguous halves (the
    ranks' shares) lie on either side, so one half's labels settle before the other's."""
    X = np.random.default_rng(seed).normal(0.0, 1.0, (n, 2))
    return np.ascontiguousarray(X[np.argsort(X[:, 0], kind="stable")])


def _ranks(parts, train_together, **kw) -> list[KMeans]:
    group = ThreadGroup(len(parts))
    models = [KMeans(3, **kw) for _ in parts]
    learners = [m.learner(p, comm=group.comm(r), n_passes=30, batch_size=1000)
                for r, (m, p) in enumerate(zip(models, parts, strict=True))]
    train_together(learners)
    return models


def _fixed_point(X: np.ndarray, C: np.ndarray) -> bool:
    """Whether ``C`` are the means of the rows nearest each (Lloyd's fixed point)."""
    lab = ((X[:, None, :] - C[None]) ** 2).sum(-1).argmin(1)
    means = np.array([X[lab == j].mean(0) for j in range(C.shape[0])])
    return bool(np.allclose(means, C, rtol=0, atol=1e-12))


@pytest.mark.parametrize("tol", [0.0, 0.05])
def test_lloyd_ranks_stop_when_one_process_would(train_together, tol):
    """Rank 0's labels stop changing a pass before rank 1's: the ranks used to stop there
    (2 iterations against 3), with centres that were no fixed point. The changed labels
    (and the rows' norms behind ``tol``) are summed over the ranks."""
    X = _sorted_rows()
    kw = {"init": X[[0, 19, 39]], "tol": tol, "random_state": 0, "algorithm": "lloyd"}
    one = KMeans(3, **kw)
    one.learner(X, n_passes=30, batch_size=1000).fit(progress=None)
    assert _fixed_point(X, one.cluster_centers_) or tol > 0
    for bounds in (True, False):
        ranks = _ranks([X[:20], X[20:]], train_together, bounds=bounds, **kw)
        for r in ranks:
            assert r.model_.n_iter == one.model_.n_iter
            np.testing.assert_allclose(r.cluster_centers_, one.cluster_centers_,
                                       rtol=0, atol=1e-12)


@needs_mpi
def test_two_mpi_ranks_run_lloyd_to_its_fixed_point(tmp_path):
    """``bidlab train kmeans --ranks 2`` with Lloyd on rows whose halves settle apart: the
    saved centres are the means of the rows nearest them (the ranks used to stop when
    rank 0's labels did, short of it)."""
    from bidlab.models import load

    X = _sorted_rows()
    np.savez(tmp_path / "x.npz", X=X)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]),
               NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "bidlab.cli", "train", "kmeans", "--ranks", "2", "--data",
         str(tmp_path / "x.npz"), "--n_clusters", "3", "--random_state", "0", "--tol", "0",
         "--n_passes", "100", "--sync-timeout", "60", "--progress", "none", "--save",
         str(tmp_path / "km")],
        env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    km = load(str(tmp_path / "km"))
    assert _fixed_point(X, np.asarray(km.cluster_centers_, np.float64))


def _far(n: int = 2000, offset: float = 1e4) -> np.ndarray:
    """Blobs of spread 1.5 moved ``offset`` from the origin (float64)."""
    return blobs(n, 4, 3, spread=1.5, seed=4).X + offset


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_checkpoint_whose_origin_is_not_finite_is_refused_before_loading(
        tmp_path, algorithm, bad):
    """The origin used to be checked after the centres were written: the learner was left
    with the file's centres and its own origin (centres moved by the two origins'
    difference). The file is now refused first, and the learner is as it was."""
    X = _far()
    ck, crafted = str(tmp_path / "ck.npz"), str(tmp_path / "bad.npz")
    km = KMeans(3, algorithm=algorithm, init=X[:3], random_state=0)
    lrn = km.learner(X, n_passes=2, batch_size=500)
    lrn.fit(progress=None)
    lrn.save(ck)
    f = load_checkpoint(ck)
    arrays = dict(f.arrays)
    arrays["model_extra/origin"] = arrays["model_extra/origin"].copy()
    arrays["model_extra/origin"][0, 1] = bad
    save_checkpoint(crafted, arrays, f.meta)
    other = KMeans(3, algorithm=algorithm, init=X[1:4], random_state=1)
    lrn2 = other.learner(X[::-1].copy(), n_passes=1, batch_size=500)
    lrn2.fit(progress=None)
    centres, origin = np.array(other.cluster_centers_), np.array(other.model_.origin)
    state = {k: np.array(m.numpy()) for k, m in other.model_.extra_state().items()}
    with pytest.raises(CheckpointError, match=r"origin holds NaN or infinity.*corrupt"):
        lrn2.load(crafted)
    np.testing.assert_array_equal(other.cluster_centers_, centres)
    np.testing.assert_array_equal(other.model_.origin, origin)
    for k, m in other.model_.extra_state().items():
        np.testing.assert_array_equal(m.numpy(), state[k])
    lrn2.load(ck)  # the file it was made from loads
    np.testing.assert_allclose(other.cluster_centers_, km.cluster_centers_, rtol=0, atol=1e-9)


@pytest.mark.parametrize("X", [blobs(2000, 4, 3, spread=3.0, seed=4).X, _far()],
                         ids=["near", "far"])
def test_a_loaded_lloyd_learner_saved_again_keeps_the_pass_sums(tmp_path, X):
    """Loaded mid-pass and saved again before running: the second file used to hold empty
    pass sums, so its resume threw the pass away (one centre update fewer: 3 iterations
    against 4, other centres). It keeps the loaded sums, and resumes as the first does."""
    kw = {"init": X[:3], "random_state": 0, "tol": 0.0}
    full = KMeans(3, **kw)
    full.learner(X, n_passes=4, batch_size=500).fit(progress=None)
    first, again = str(tmp_path / "c1.npz"), str(tmp_path / "c2.npz")
    part = KMeans(3, **kw)
    lrn = part.learner(X, n_passes=4, batch_size=500, max_steps=6)  # pass 1, block 2
    lrn.fit(progress=None)
    lrn.save(first)
    mid = KMeans(3, **kw)
    mid.learner(X, n_passes=4, batch_size=500).load(first).save(again)
    np.testing.assert_array_equal(load_checkpoint(again).arrays["model_extra/pass_sums"],
                                  load_checkpoint(first).arrays["model_extra/pass_sums"])
    res = KMeans(3, **kw)
    lrn = res.learner(X, n_passes=4, batch_size=500).load(again)
    lrn.set(n_passes=4, max_steps=None)
    lrn.fit(progress=None)
    assert res.model_.n_iter == full.model_.n_iter
    np.testing.assert_array_equal(res.cluster_centers_, full.cluster_centers_)


def _lloyd_step(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    lab = ((X[:, None, :] - C[None]) ** 2).sum(-1).argmin(1)
    return np.array([X[lab == j].mean(0) for j in range(C.shape[0])])


@needs_mpi
def test_two_mpi_ranks_resumed_mid_pass_do_not_mix_rank_0s_sums(tmp_path):
    """The ranks share one checkpoint, written by rank 0: a Lloyd run resumed from it
    mid-pass used to seed every rank with rank 0's sums of the pass so far (counted twice,
    rank 1's lost: centres off by 0.09). The pass ends as a Lloyd iteration from the
    saved centres, or (its sums lost) with the saved centres kept."""
    from bidlab.models import load

    X = blobs(4000, 4, 3, spread=3.0, seed=4).X.astype(np.float64)
    np.savez(tmp_path / "x.npz", X=X)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]),
               NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    ck = str(tmp_path / "ck.npz")
    base = [sys.executable, "-m", "bidlab.cli", "train", "kmeans", "--ranks", "2", "--data",
            str(tmp_path / "x.npz"), "--n_clusters", "3", "--random_state", "0", "--tol", "0",
            "--batch_size", "500", "--n_passes", "2", "--sync-timeout", "60", "--progress",
            "none", "--checkpoint", ck]
    for extra in (["--max_steps", "6"], ["--save", str(tmp_path / "km")]):
        done = subprocess.run(base + extra, env=env, capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        if extra[0] == "--max_steps":  # pass 1, block 2 of 4
            f = load_checkpoint(ck)
            assert (f.meta["progress"]["pass"], f.meta["progress"]["index"]) == (1, 2)
            C = np.asarray(f.modelmats[0], np.float64) + f.arrays["model_extra/origin"][0]
    got = np.asarray(load(str(tmp_path / "km")).cluster_centers_, np.float64)
    assert any(np.allclose(got, want, rtol=0, atol=1e-9) for want in (C, _lloyd_step(X, C)))
