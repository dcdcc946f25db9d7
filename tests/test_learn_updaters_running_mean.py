"""RunningMean: each row of a model matrix kept as the running weighted mean of the data rows
given to it, with its count beside it (Sculley's 1 / count step)."""

from __future__ import annotations

import numpy as np
import pytest

import bidlab as bl
from bidlab.learn import Learner, MemorySource, Model, RunningMean


class GroupMeans(Model):
    """Means of the data rows by the group in the first column (a known assignment)."""

    mat_names = ("means", "counts")

    def __init__(self, k, counts_shape=None):
        super().__init__()
        self.k, self.counts_shape = k, counts_shape

    def init(self, info):
        d = info.n_features - 1
        shape = self.counts_shape or (self.k, 1)
        self.modelmats = [bl.zeros((self.k, d), np.float64), bl.zeros(shape, np.float64)]
        self.updatemats = [bl.zeros((self.k, d), np.float64), bl.zeros(shape, np.float64)]

    def default_updater(self, **options):
        return RunningMean(**options)

    def update(self, batch):
        Z = np.asarray(batch.mats[0].data)[: batch.n]
        w = np.asarray(batch.mats[1].data)[: batch.n, 0]
        g = Z[:, 0].astype(int)
        S, n = self.updatemats[0].data, self.updatemats[1].data
        S[...] = 0
        n[...] = 0
        np.add.at(S, g, w[:, None] * Z[:, 1:])
        np.add.at(n[:, 0], g, w)

    def evaluate(self, batch):
        return 0.0


def _data(n=500, k=4, d=3, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, k, n)
    Z = np.column_stack([g, rng.normal(g[:, None] * 3.0, 1.0, (n, d))])
    return Z, rng.uniform(0.5, 2.0, n)


def test_running_means_are_the_weighted_means_of_every_row_given():
    Z, w = _data()
    model = GroupMeans(4)
    Learner(model, MemorySource(Z, w, batch_size=64, shuffle=True, seed=1), n_passes=1,
            val_every=0).fit(progress=None)
    g = Z[:, 0].astype(int)
    for c in range(4):
        want = np.average(Z[g == c, 1:], axis=0, weights=w[g == c])
        np.testing.assert_allclose(model.modelmats[0].data[c], want, rtol=1e-10)
        np.testing.assert_allclose(model.modelmats[1].data[c, 0], w[g == c].sum(), rtol=1e-12)


def test_a_smaller_lrate_damps_each_step():
    Z, w = _data(n=64)
    model = GroupMeans(4)
    Learner(model, MemorySource(Z, w, batch_size=64), RunningMean(lrate=0.5), n_passes=1,
            val_every=0).fit(progress=None)
    g = Z[:, 0].astype(int)
    for c in range(4):  # one step from 0: half way to the mean
        want = 0.5 * np.average(Z[g == c, 1:], axis=0, weights=w[g == c])
        np.testing.assert_allclose(model.modelmats[0].data[c], want, rtol=1e-10)


def test_counts_of_the_wrong_shape_are_refused_with_the_fix():
    Z, w = _data(n=64)
    lrn = Learner(GroupMeans(4, counts_shape=(4, 2)), MemorySource(Z, w, batch_size=64),
                  n_passes=1, val_every=0)
    with pytest.raises(ValueError, match=r"counts .* must be 4 x 1"):
        lrn.fit(progress=None)
