"""A run resumed from a mid-pass checkpoint with another batch size goes on from the row the
checkpoint stopped at (not from the minibatch of that number, in the new size), for every
source that resumes; batch variational-Bayes LDA adds its prior beta only after a pass that
summed minibatches."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl
from bidlab.learn import BlockSource, Learner, MemorySource, ShardSource, write_shards
from bidlab.learn.datasource import DataSource
from bidlab.learn.model import Model
from bidlab.learn.staging import Piece, Plan
from bidlab.learn.updaters import Grad
from bidlab.models import LDA

N = 23  # rows; no batch size below divides it


class RowLog(Model):
    """Trains nothing; keeps (pass, global row id) of every training row it is given."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen: list[tuple[int, int]] = []

    def init(self, info):
        self.modelmats = [bl.zeros((1, 1), np.float64)]
        self.updatemats = [bl.zeros((1, 1), np.float64)]

    def update(self, batch):
        self.seen += [(batch.pass_, int(i)) for i in batch.ids[: batch.n]]
        return 0.0

    def evaluate(self, batch):
        return 0.0


def _source(kind, batch_size, folder):
    X = np.arange(N, dtype=np.float64).reshape(-1, 1)
    if kind == "memory":
        return MemorySource(X, batch_size=batch_size)
    if kind == "shuffled":
        return MemorySource(X, batch_size=batch_size, shuffle=True, seed=3)
    if kind == "blocks":
        return BlockSource(X, batch_size=batch_size)
    if not (folder / "manifest.json").exists():
        write_shards(folder, X, rows_per_shard=6)
    return ShardSource(folder, batch_size=batch_size, shuffle_rows=kind == "shards-shuffled")


def _rows(kind, batch_size, tmp_path, **options):
    model = RowLog()
    lr = Learner(model, _source(kind, batch_size, tmp_path / "shards"), Grad(lrate=0.1),
                 val_every=0, **options)
    return lr, model


@pytest.mark.parametrize("kind", ["memory", "shuffled", "blocks", "shards",
                                  "shards-shuffled"])
@pytest.mark.parametrize(("before", "after"), [(5, 3), (5, 7), (3, 10)])
def test_resumed_with_another_batch_size_sees_each_remaining_row_once(tmp_path, kind, before,
                                                                      after):
    whole, wm = _rows(kind, before, tmp_path, n_passes=2)
    whole.fit(progress=None)
    order = [r for p, r in wm.seen if p == 0]  # the pass's row order (seeded per pass)
    assert sorted(order) == list(range(N))
    ck = str(tmp_path / "ck.npz")
    first, fm = _rows(kind, before, tmp_path, n_passes=2, max_steps=3, checkpoint=ck)
    first.fit(progress=None)
    done = len(fm.seen)
    assert done == 3 * before and [r for _, r in fm.seen] == order[:done]
    again, am = _rows(kind, after, tmp_path, n_passes=2)
    again.load(ck).set(max_steps=None)  # the file's max_steps=3 is spent
    again.fit(progress=None)
    # was: it resumed at minibatch 3 of the new size (row 3 * after): rows of the pass
    # repeated (after < before) or skipped (after > before; with after=10 the whole rest
    # of the pass, minibatch 3 being past its end)
    assert [r for p, r in am.seen if p == 0] == order[done:]
    assert sorted(r for p, r in am.seen if p == 1) == list(range(N))


def test_a_learner_stopped_again_in_the_resumed_pass_keeps_its_row(tmp_path):
    first, fm = _rows("memory", 5, tmp_path, n_passes=1, max_steps=2,
                      checkpoint=str(tmp_path / "a.npz"))
    first.fit(progress=None)
    again, am = _rows("memory", 4, tmp_path, n_passes=1, max_steps=3)
    again.load(str(tmp_path / "a.npz")).set(max_steps=3)
    again.fit(progress=None)  # rows 10..13 (the checkpoint's minibatch 2, of 4 rows now)
    again.save(str(tmp_path / "b.npz"))
    again.set(max_steps=None)
    again.fit(progress=None)  # the same learner goes on from row 14
    last, lm = _rows("memory", 6, tmp_path, n_passes=1)
    last.load(str(tmp_path / "b.npz")).set(max_steps=None)
    last.fit(progress=None)
    assert [r for _, r in fm.seen + am.seen] == list(range(N))
    assert [r for _, r in lm.seen] == list(range(14, N))


class PlannedRows(DataSource):
    """A random-access source of its own: minibatch ``index`` is rows ``index * b`` on."""

    def __init__(self, X, batch_size):
        super().__init__(batch_size, None, None)
        self._src = MemorySource(X, batch_size=batch_size)
        self._info, self._X = self._src.info, self._src._mats

    def _plan(self, pass_, index):
        a = index * self.batch_size
        z = min(a + self.batch_size, self.n_samples)
        return Plan([Piece(self._X, slice(a, z))], pass_, index, z >= self.n_samples, a)


def test_a_source_that_cannot_start_at_any_row_says_which_batch_sizes_fit(tmp_path):
    X = np.arange(N, dtype=np.float64).reshape(-1, 1)
    Learner(RowLog(), MemorySource(X, batch_size=5), Grad(lrate=0.1), val_every=0,
            max_steps=3, checkpoint=str(tmp_path / "ck.npz")).fit(progress=None)
    model = RowLog()
    lr = Learner(model, PlannedRows(X, 4), Grad(lrate=0.1), val_every=0, n_passes=1)
    with pytest.raises(ValueError, match="cannot resume a pass at row 15.*batch_size=4.*"
                                         "divides 15"):
        lr.load(str(tmp_path / "ck.npz"))
    lr = Learner(model, PlannedRows(X, 3 * 5), Grad(lrate=0.1), val_every=0, n_passes=1)
    lr.load(str(tmp_path / "ck.npz")).set(max_steps=None)  # row 15 starts a minibatch
    lr.fit(progress=None)
    assert [r for p, r in model.seen if p == 0] == list(range(15, N))


# -- batch variational Bayes LDA: beta after a pass that summed nothing ----------------------
def _docs():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, size=(40, 30)).astype(np.float64))
    return X[np.diff(X.indptr) > 0]


def test_batch_lda_pass_of_held_out_minibatches_only_leaves_the_topics_as_they_were():
    lr = LDA(3, method="batch", random_state=0, beta=0.5).learner(
        _docs(), batch_size=10, n_passes=1, val_every=0)
    lr.fit(progress=None)
    lam = lr.model.lamT.data.copy()
    lr.set(n_passes=3, val_every=1)  # two passes whose every minibatch is held out
    lr.fit(progress=None)
    # was: each of those passes added beta once more to lambda (1.0 here), which already held
    # the beta of the last pass that summed minibatches
    np.testing.assert_array_equal(lr.model.lamT.data, lam)
    lr.set(n_passes=4, val_every=0)
    lr.fit(progress=None)  # a pass that sums minibatches again: lambda is their sums + beta
    assert lr.model.lamT.data.min() > 0.5
