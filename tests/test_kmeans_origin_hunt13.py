"""k-means on rows far from the origin: the origin in learner checkpoints, one origin for
the ranks of a distributed learner, CSR rows after a far dense fit, and what a callable
``init`` returned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import needs_mpi

from bidlab.datasets import blobs
from bidlab.learn.checkpoint import load_checkpoint, save_checkpoint
from bidlab.learn.comm import ThreadGroup
from bidlab.models import KMeans


def _far(n: int = 2000, offset: float = 1e4, dtype=np.float32, seed: int = 4) -> np.ndarray:
    """Blobs of spread 1.5 moved ``offset`` from the origin."""
    return (blobs(n, 4, 3, spread=1.5, seed=seed).X + offset).astype(dtype)


@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_a_checkpoint_keeps_the_origin_its_centres_are_measured_from(tmp_path, algorithm):
    X = _far(dtype=np.float64)
    ck = str(tmp_path / "ck.npz")
    km = KMeans(3, algorithm=algorithm, init=X[:3], random_state=0)
    lrn = km.learner(X, n_passes=2, batch_size=500)
    lrn.fit(progress=None)
    lrn.save(ck)
    want = np.array(km.cluster_centers_)
    # other data of the same shape, with another mean: the loaded centres stay where
    # they were saved (they used to move by the difference of the two means)
    other = KMeans(3, algorithm=algorithm, init=X[:3], random_state=0)
    lrn2 = other.learner(X + 500.0, n_passes=4, batch_size=500)
    lrn2.load(ck)
    np.testing.assert_allclose(other.cluster_centers_, want, rtol=0, atol=1e-9)
    lrn2.set(n_passes=4)
    lrn2.fit(progress=None)  # and training goes on from them, towards the new rows
    assert np.abs(other.cluster_centers_ - want).max() > 100


def test_a_checkpoint_without_an_origin_loads_in_the_learners_frame(tmp_path):
    """A file of an earlier version keeps no origin: its centres were measured from the
    learner's own origin (the same data), and are read so."""
    X = _far(dtype=np.float64)
    ck = str(tmp_path / "ck.npz")
    km = KMeans(3, init=X[:3], random_state=0)
    lrn = km.learner(X, n_passes=2, batch_size=500)
    lrn.fit(progress=None)
    lrn.save(ck)
    f = load_checkpoint(ck)
    assert "model_extra/origin" in f.arrays
    arrays = {k: v for k, v in f.arrays.items() if k != "model_extra/origin"}
    save_checkpoint(ck, arrays, f.meta)
    again = KMeans(3, init=X[:3], random_state=0)
    again.learner(X, n_passes=2, batch_size=500).load(ck)
    np.testing.assert_allclose(again.cluster_centers_, km.cluster_centers_, rtol=0, atol=1e-9)


def test_a_resumed_far_run_equals_an_uninterrupted_one(tmp_path):
    X = _far()
    ck = str(tmp_path / "ck.npz")
    full = KMeans(3, init=X[:3], random_state=0, tol=0.0)
    full.learner(X, n_passes=4, batch_size=500).fit(progress=None)
    part = KMeans(3, init=X[:3], random_state=0, tol=0.0)
    lrn = part.learner(X, n_passes=2, batch_size=500)
    lrn.fit(progress=None)
    lrn.save(ck)
    res = KMeans(3, init=X[:3], random_state=0, tol=0.0)
    lrn = res.learner(X, n_passes=4, batch_size=500).load(ck)
    lrn.set(n_passes=4)
    lrn.fit(progress=None)
    np.testing.assert_array_equal(res.cluster_centers_, full.cluster_centers_)


def _two_ranks(X0, X1, train_together, **kw):
    """KMeans learners on ``X0`` and ``X1`` (two ranks of a ThreadGroup), trained."""
    group = ThreadGroup(2)
    halves = [KMeans(3, **kw) for _ in range(2)]
    options = {"n_passes": 5, "batch_size": 500, "val_every": 0}
    if kw.get("algorithm") == "minibatch":
        options["sync_every"] = 1
    learners = [h.learner(part, comm=group.comm(r), **options)
                for r, (h, part) in enumerate(zip(halves, (X0, X1), strict=True))]
    train_together(learners)
    return halves


def test_ranks_on_far_rows_train_as_one_process(train_together):
    """float32 rows 10,000 from the origin, split so that each rank's rows have their own
    mean: the ranks agree on one origin, so Lloyd's ranks reach one process's centres
    (unshifted, their GEMM distances kept no digit of the clusters' spread)."""
    X = _far()
    X = np.ascontiguousarray(X[np.argsort(X[:, 2], kind="stable")])  # the ranks' means differ
    kw = {"algorithm": "lloyd", "random_state": 0, "tol": 0.0, "init": X[[10, 1000, 1990]]}
    one = KMeans(3, **kw)
    one.learner(X, n_passes=5, batch_size=500, val_every=0).fit(progress=None)
    halves = _two_ranks(X[:1000], X[1000:], train_together, **kw)
    assert halves[0].model_.origin is not None
    np.testing.assert_array_equal(halves[0].model_.origin, halves[1].model_.origin)
    for h in halves:
        np.testing.assert_allclose(h.cluster_centers_, one.cluster_centers_, rtol=2e-6)


def test_minibatch_ranks_on_far_rows_cluster_them(train_together):
    X = _far()
    kw = {"algorithm": "minibatch", "random_state": 0, "init": X[[10, 1000, 1990]]}
    one = KMeans(3, **kw)
    one.learner(X, n_passes=5, batch_size=500, val_every=0).fit(progress=None)
    halves = _two_ranks(X[::2], X[1::2], train_together, **kw)
    np.testing.assert_array_equal(halves[0].cluster_centers_, halves[1].cluster_centers_)
    assert halves[0].score(X) > 1.05 * one.score(X)  # minus the inertia: within 5%


def test_ranks_whose_rows_lie_apart_train_on_them_as_given(train_together):
    """Each rank's rows far from the origin, mostly on opposite sides: the ranks' common
    mean is near the origin, so none is shifted and each rank's copy is moved back."""
    A = blobs(2000, 4, 3, spread=1.5, seed=4).X.astype(np.float64)
    X0 = np.vstack([A[:900] + 1e3, A[900:1000] - 1e3])
    X1 = np.vstack([A[1000:1100] + 1e3, A[1100:] - 1e3])
    kw = {"init": np.vstack([X0[:2], X1[-1:]]), "tol": 0.0, "random_state": 0}
    halves = _two_ranks(X0, X1, train_together, **kw)
    one = KMeans(3, **kw)
    one.learner(np.vstack([X0, X1]), n_passes=5, batch_size=500).fit(progress=None)
    for h in halves:
        assert h.model_.origin is None
        np.testing.assert_allclose(h.cluster_centers_, one.cluster_centers_, rtol=1e-9)


def test_ranks_seeded_apart_start_from_rank_0s_centres(train_together):
    """k-means++ seeds each rank on its own rows; rank 0's centres are broadcast, so a
    rank's seeding bounds (measured against its own centres) must not prune the first
    pass: the ranks equal one process started from rank 0's centres."""
    X = blobs(2000, 4, 5, spread=2.0, seed=7).X.astype(np.float64)
    group = ThreadGroup(2)
    halves = [KMeans(5, tol=0.0, random_state=r) for r in range(2)]
    learners = [h.learner(X[:1000] if r == 0 else X[1000:], n_passes=4, batch_size=250,
                          comm=group.comm(r)) for r, h in enumerate(halves)]
    start = np.array(halves[0].model_.start_centers)
    assert not np.allclose(start, halves[1].model_.start_centers)
    train_together(learners)
    one = KMeans(5, init=start, tol=0.0, random_state=0)
    one.learner(X, n_passes=4, batch_size=250).fit(progress=None)
    for h in halves:
        np.testing.assert_allclose(h.cluster_centers_, one.cluster_centers_, rtol=1e-9)


def test_csr_rows_after_a_far_float32_fit_are_refused_with_the_fix():
    X = _far()
    km = KMeans(3, random_state=0, batch_size=400).fit(X)
    before = np.array(km.cluster_centers_)
    with pytest.raises(ValueError, match=r"CSR rows.*X\.toarray\(\)"):
        km.partial_fit(sp.csr_matrix(X))
    np.testing.assert_array_equal(km.cluster_centers_, before)  # nothing changed
    km.partial_fit(X)  # dense rows go on as before


def test_csr_rows_after_a_far_float64_fit_train_in_the_datas_frame():
    X = _far(dtype=np.float64)
    dense = KMeans(3, random_state=0, batch_size=400)
    dense.partial_fit(X)
    km = KMeans(3, random_state=0, batch_size=400)
    km.partial_fit(X)
    assert km.model_.origin is not None
    dense.partial_fit(X)
    km.partial_fit(sp.csr_matrix(X))
    np.testing.assert_allclose(km.cluster_centers_, dense.cluster_centers_, atol=1e-6)


@pytest.mark.parametrize("returned", ["k-means++", None])
def test_a_callable_init_that_returns_no_array_is_named(returned):
    km = KMeans(3, init=lambda X, k, rs: returned, random_state=0)
    with pytest.raises(TypeError, match=f"returned a {type(returned).__name__} .*shape \\(3, 2\\)"):
        km.fit(np.random.default_rng(0).random((20, 2)))


def test_a_lloyd_pass_sums_so_far_move_with_the_origin(tmp_path):
    """A checkpoint taken mid-pass keeps the pass's cluster sums so far, measured from the
    origin like the centres: a learner of another origin that loads it ends the pass with
    those sums plus its own rows'."""
    X = _far(dtype=np.float64)
    ck = str(tmp_path / "ck.npz")
    km = KMeans(3, init=X[:3], random_state=0, tol=0.0)
    lrn = km.learner(X, n_passes=4, batch_size=500, max_steps=6)  # pass 1, block 2
    lrn.fit(progress=None)
    lrn.save(ck)
    f = load_checkpoint(ck).arrays
    P, o = f["model_extra/pass_sums"], f["model_extra/origin"][0]
    assert P[3, 2] == 1.0  # it holds the sums of the pass so far
    C = np.array(km.cluster_centers_)
    rest = X[1000:] + 500.0  # the pass's rows left, of the other learner's data
    lab = ((rest[:, None, :] - C[None]) ** 2).sum(-1).argmin(1)
    S = P[:3, :4] + P[:3, 4:5] * o + np.array([rest[lab == c].sum(0) for c in range(3)])
    N = P[:3, 4] + np.bincount(lab, minlength=3)
    other = KMeans(3, init=X[:3], random_state=0, tol=0.0)
    lrn2 = other.learner(X + 500.0, n_passes=4, batch_size=500).load(ck)
    lrn2.set(max_steps=8)  # to the pass's end
    lrn2.fit(progress=None)
    np.testing.assert_allclose(other.cluster_centers_, S / N[:, None], rtol=1e-12)


@needs_mpi
def test_two_mpi_ranks_cluster_far_float32_rows(tmp_path):
    """``bidlab train kmeans --ranks 2`` (minibatch steps) on float32 rows 100,000 from the
    origin: the ranks agree on one origin, and their centres cluster the rows as one
    process's do (unshifted, their inertia was 17 times as large)."""
    from bidlab.models import load

    X = _far(n=4000, offset=1e5)
    np.savez(tmp_path / "x.npz", X=X)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]),
               NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "bidlab.cli", "train", "kmeans", "--ranks", "2", "--data",
         str(tmp_path / "x.npz"), "--n_clusters", "3", "--random_state", "0", "--algorithm",
         "minibatch", "--sync-timeout", "60", "--progress", "none", "--save",
         str(tmp_path / "km")],
        env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = load(str(tmp_path / "km"))
    one = KMeans(3, random_state=0, n_init=3).fit(X)
    assert ranks.score(X) > 1.01 * one.score(X)  # minus the inertia: within 1%
