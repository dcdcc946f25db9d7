"""An empty Lloyd cluster on several ranks: every rank re-seeds it with the same row (the
farthest over all ranks' rows), so the ranks keep one set of centres and end where one
process on all the rows does."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.learn.comm import ThreadGroup
from bidlab.models import KMeans


def _rows() -> np.ndarray:
    """Three blobs; the far ones (rows 40+) all on rank 1's side of the split."""
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(0.0, 0.3, (40, 2)), rng.normal((6.0, 0.0), 0.3, (20, 2)),
                        rng.normal((0.0, 9.0), 0.3, (20, 2))])
    return np.ascontiguousarray(X)


@pytest.mark.parametrize("split", [40, 30, 60])
def test_ranks_reseed_an_empty_cluster_as_one_process(train_together, split):
    X = _rows()
    # the third start centre is far from every row: its cluster is empty after the first
    # assignment, and a row far from its centre must take it
    init = np.array([[0.0, 0.0], [0.5, 0.5], [-50.0, -50.0]])
    kw = {"init": init, "tol": 0.0, "random_state": 0, "algorithm": "lloyd"}
    one = KMeans(3, **kw)
    one.learner(X, n_passes=30, batch_size=1000).fit(progress=None)
    group = ThreadGroup(2)
    ranks = [KMeans(3, **kw) for _ in range(2)]
    learners = [m.learner(p, comm=group.comm(r), n_passes=30, batch_size=1000)
                for r, (m, p) in enumerate(zip(ranks, (X[:split], X[split:]), strict=True))]
    train_together(learners)
    for r in ranks:
        np.testing.assert_allclose(r.cluster_centers_, one.cluster_centers_, rtol=0,
                                   atol=1e-9)
        assert r.model_.n_iter == one.model_.n_iter
