"""Re-writing a shard folder safely; SFA resumed with a ``mu`` taken from its first
minibatch; estimators given a DataSource."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.learn import Learner, MemorySource
from bidlab.learn.shards import ShardSource, read_manifest, write_shards
from bidlab.models import NMF, SFA, KMeans
from bidlab.models.sfa.model import SFAModel


class _FailingRows(np.ndarray):
    """Rows that raise once a slice reaches ``fail_at`` (a data set that fails midway)."""

    fail_at = 0

    def __getitem__(self, key):
        if isinstance(key, slice) and (key.start or 0) >= self.fail_at:
            raise OSError("No space left on device")
        return super().__getitem__(key)


def _read_all(folder, batch_size=7):
    src = ShardSource(folder, batch_size=batch_size)
    rows = np.concatenate([np.array(b.mats[0].data, copy=True) for b in src.passes(1)])
    src.close()
    return rows


def _failing(X, fail_at):
    bad = X.view(_FailingRows)
    bad.fail_at = fail_at
    return bad


# -- write_shards: a write that fails midway -------------------------------------------------
@pytest.mark.parametrize("second", [True, False])
def test_a_rewrite_that_fails_midway_leaves_the_old_data_set(tmp_path, second):
    rng = np.random.default_rng(0)
    old = rng.random((30, 3))
    write_shards(tmp_path, old, rows_per_shard=10)
    if second:  # the old set under the second names: a new write takes the first ones
        write_shards(tmp_path, old, rows_per_shard=10)
    files = sorted(p.name for p in tmp_path.iterdir())
    new = rng.random((50, 3))
    with pytest.raises(OSError, match="No space left"):
        write_shards(tmp_path, _failing(new, 20), rows_per_shard=10)
    assert sorted(p.name for p in tmp_path.iterdir()) == files  # nothing half-written left
    assert read_manifest(tmp_path)["n_samples"] == 30
    np.testing.assert_array_equal(_read_all(tmp_path), old)
    # the next write that succeeds replaces it, and only its shards remain
    write_shards(tmp_path, new, rows_per_shard=10)
    np.testing.assert_array_equal(_read_all(tmp_path), new)
    listed = {s["file"] for s in read_manifest(tmp_path)["shards"]}
    assert {p.name for p in tmp_path.glob("shard-*.npz")} == listed and len(listed) == 5


def test_an_interrupted_first_write_leaves_no_shards(tmp_path):
    X = np.arange(40.0).reshape(20, 2)
    with pytest.raises(OSError):
        write_shards(tmp_path, _failing(X, 10), rows_per_shard=5)
    assert list(tmp_path.iterdir()) == []


# -- SFA: mu from the first minibatch, resumed at a pass boundary ------------------------------
def _ratings(n_users=47, n_items=30, seed=0):
    R = sp.random(n_users, n_items, density=0.3, random_state=seed, format="csr")
    R.data = np.ceil(R.data * 5)
    return R


@pytest.mark.parametrize("kind", ["memory", "shards"])
def test_sfa_resumed_from_a_pass_boundary_of_a_shuffled_source_equals_one_run(tmp_path, kind):
    R = _ratings()
    if kind == "shards":
        write_shards(tmp_path / "sh", R, rows_per_shard=10)

    def source():
        if kind == "memory":
            return MemorySource(R, batch_size=6, shuffle=True, seed=3)
        return ShardSource(tmp_path / "sh", batch_size=6, shuffle_shards=True,
                           shuffle_rows=True, seed=3)

    whole = SFAModel(k=3, random_state=0)  # mu: the first minibatch's mean
    Learner(whole, source(), n_passes=3).fit(progress=None)
    first = SFAModel(k=3, random_state=0)
    lrn = Learner(first, source(), n_passes=3, max_steps=8)  # 8 minibatches: one pass
    lrn.fit(progress=None)
    path = lrn.save(str(tmp_path / "ck.npz"))
    resumed = SFAModel(k=3, random_state=0)
    again = Learner(resumed, source(), n_passes=3).load(path)
    again.set(max_steps=None)
    again.fit(progress=None)
    assert resumed.mu == whole.mu
    np.testing.assert_allclose(resumed.item_factors(), whole.item_factors(), atol=1e-9)
    np.testing.assert_allclose(resumed.user_factors(), whole.user_factors(), atol=1e-9)
    assert resumed.rmse == pytest.approx(whole.rmse, abs=1e-12)


# -- estimators: a DataSource where data in memory is taken ----------------------------------
@pytest.mark.parametrize("make, model", [(lambda: NMF(2), "NMFModel"),
                                         (lambda: KMeans(2), "KMeansModel"),
                                         (lambda: SFA(2), "SFAModel")])
@pytest.mark.parametrize("method", ["learner", "fit"])
def test_an_estimator_given_a_data_source_names_the_model_to_train(tmp_path, make, model,
                                                                   method):
    write_shards(tmp_path, _ratings(20, 8), rows_per_shard=10)
    est = make()
    with pytest.raises(TypeError, match=rf"{type(est).__name__}\.{method}\(\) takes its data "
                                        rf"in memory .* not a ShardSource.*Learner\(\w*{model}"):
        getattr(est, method)(ShardSource(tmp_path, batch_size=5))
    with pytest.raises(TypeError, match="not a MemorySource"):
        getattr(est, method)(MemorySource(_ratings(20, 8), batch_size=5))
