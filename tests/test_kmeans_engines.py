"""The two k-means engines on the spine: Lloyd's Hamerly bounds kept by row id (any row
order, shards, checkpoints), minibatch steps through the RunningMean updater, and files of
the earlier single engine class loading as the engine they were."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets import blobs
from bidlab.learn import BlockSource, Learner, MemorySource, RowState, RunningMean
from bidlab.learn.shards import ShardSource, write_shards
from bidlab.models import KMeans
from bidlab.models.kmeans.lloyd import LloydKMeansModel
from bidlab.models.kmeans.minibatch import MinibatchKMeansModel
from bidlab.models.kmeans.model import KMeansModel

FIXTURES = Path(__file__).parent / "fixtures"


def _data(n=3000, d=4, k=5, seed=3):
    X = blobs(n, d, k, spread=2.5, seed=seed).X.astype(np.float64)
    return X, X[np.random.default_rng(seed).choice(n, k, replace=False)].copy()


def _lloyd(X, start, source, n_passes, **options):
    model = LloydKMeansModel(start, tol=0.0, **options)
    lrn = Learner(model, source, n_passes=n_passes)
    lrn.fit(progress=None)
    return model, lrn


def test_lloyd_bounds_follow_the_rows_of_a_shuffled_source():
    X, start = _data()
    n, k = X.shape[0], start.shape[0]
    plain, _ = _lloyd(X, start, BlockSource(X, batch_size=400), 6, bounds=False)
    blocks, _ = _lloyd(X, start, BlockSource(X, batch_size=400), 6)
    mixed, _ = _lloyd(X, start, MemorySource(X, batch_size=400, shuffle=True, seed=1), 6)
    for m in (blocks, mixed):
        np.testing.assert_allclose(m.centers.data, plain.centers.data, rtol=1e-10)
        assert m.n_updates == plain.n_updates
    # the bounds pruned distances in both row orders alike
    assert abs(mixed.distance_evaluations - blocks.distance_evaluations) <= 0.01 * n * k
    assert blocks.distance_evaluations < 0.9 * plain.distance_evaluations <= n * k * 6


def test_lloyd_bounds_work_on_shuffled_shards(tmp_path):
    X, start = _data(n=1200, seed=5)
    Xs = sp.csr_matrix(X)
    write_shards(tmp_path / "sh", Xs, rows_per_shard=300)
    src = ShardSource(tmp_path / "sh", batch_size=250, shuffle_shards=True, shuffle_rows=True,
                      seed=2)
    try:
        shards, _ = _lloyd(X, start, src, 5)
    finally:
        src.close()
    plain, _ = _lloyd(X, start, BlockSource(Xs, batch_size=250), 5, bounds=False)
    np.testing.assert_allclose(shards.centers.data, plain.centers.data, rtol=1e-10)
    assert shards.distance_evaluations < plain.distance_evaluations


def test_a_checkpoint_keeps_the_row_bounds(tmp_path):
    X, start = _data(seed=7)
    whole, _ = _lloyd(X, start, BlockSource(X, batch_size=500), 6)
    first, lrn = _lloyd(X, start, BlockSource(X, batch_size=500), 3)
    path = lrn.save(str(tmp_path / "ck"))
    assert not whole.converged or whole.n_updates > 3
    resumed = LloydKMeansModel(start, tol=0.0)
    again = Learner(resumed, BlockSource(X, batch_size=500), n_passes=6)
    again.load(path)
    again.set(n_passes=6)  # the checkpoint's options came back with it
    again.fit(progress=None)
    np.testing.assert_allclose(resumed.centers.data, whole.centers.data, rtol=1e-12)
    # the resumed passes pruned from the checkpoint's bounds, as the whole run did
    assert resumed.distance_evaluations == whole.distance_evaluations - first.distance_evaluations


def test_running_mean_keeps_each_centre_the_mean_of_its_rows():
    X, labels, centres = blobs(2000, 3, 4, spread=0.05, seed=11)
    X = X.astype(np.float64)
    model = MinibatchKMeansModel(np.asarray(centres, np.float64), reassign_every=0,
                                 max_no_improvement=None)
    lrn = Learner(model, MemorySource(X, batch_size=128, shuffle=True, seed=0), n_passes=1,
                  val_every=0)
    assert isinstance(lrn.updater, RunningMean)
    lrn.fit(progress=None)
    for c in range(4):
        rows = X[labels == c]
        np.testing.assert_allclose(model.centers.data[c], rows.mean(axis=0), rtol=1e-9)
        assert model.counts[c] == len(rows)


def test_minibatch_re_seeding_moves_a_starved_centre_through_the_updater():
    X, _, _ = blobs(1000, 2, 3, spread=0.1, seed=12)
    X = X.astype(np.float64)
    far = np.vstack([X[:2], [[1e3, 1e3]]])  # the third centre gets no row
    model = MinibatchKMeansModel(far, reassign_every=1, max_no_improvement=None)
    Learner(model, MemorySource(X, batch_size=200), n_passes=1, val_every=0).fit(
        progress=None)
    assert np.abs(model.centers.data[2]).max() < 100  # moved onto the data
    assert model.counts.min() > 0


def test_row_state_views_a_run_of_ids_in_place():
    X = np.zeros((10, 2))
    store = RowState(10, 1)
    batch = BlockSource(X, batch_size=4).next()
    v = store.view(batch)
    v[:, 0] = 7
    assert (store.values.data[:4, 0] == 7).all() and store.all_seen(batch)
    shuffled = MemorySource(X, batch_size=4, shuffle=True, seed=0).next()
    assert shuffled.run == -1  # unknown: RowState checks the ids
    if not np.array_equal(shuffled.ids[:4], np.arange(shuffled.ids[0], shuffled.ids[0] + 4)):
        assert store.view(shuffled) is None
    second = BlockSource(X, batch_size=4)._batches[1]
    assert second.run == 4  # BlockSource knows its ids are one run
    store.view(second)[:, 0] = 5
    assert (store.values.data[4:8, 0] == 5).all()


@pytest.mark.parametrize("name, engine", [("kmeans_lloyd", LloydKMeansModel),
                                          ("kmeans_minibatch", MinibatchKMeansModel)])
def test_files_of_the_single_engine_class_load_as_their_engine(name, engine):
    est = KMeans.load(FIXTURES / "v0_1" / f"{name}.bidlab")
    assert type(est.model_) is engine and isinstance(est.model_, KMeansModel)
    assert "algorithm" not in est.model_.opts
    back = pickle.loads(pickle.dumps(est))
    assert type(back.model_) is engine


def test_a_pickle_of_the_single_engine_class_loads_as_its_engine():
    with open(FIXTURES / "kmeans_k2_v0.pkl", "rb") as fh:
        km = pickle.load(fh)
    assert type(km.model_) in (LloydKMeansModel, MinibatchKMeansModel)
    assert "algorithm" not in km.model_.opts
