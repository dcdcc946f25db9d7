"""A full-batch model's step sync points on several ranks exchange none of its matrices:
they change only at pass ends, from totals summed over the ranks, so the ranks hold the
same ones throughout (the ranks still meet there, for commands and the stop check). An
online model's matrices are still averaged."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bidlab.distributed import shard
from bidlab.learn.comm import ThreadGroup
from bidlab.models import NMF


def _counts(seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    X = sp.random(240, 30, density=0.3, random_state=rng, format="csr", dtype=np.float64)
    X.data = np.ceil(X.data * 5)
    return X


def _recording(comm):
    """The communicator, with the matrices each of its step sync points combined listed
    (``comm.combined``: one list of (shape, how) per call)."""
    comm.combined = []
    real = comm.combine

    def combine(modelmats, how):
        comm.combined.append([(m.data.shape, h) for m, h in zip(modelmats, how, strict=True)
                              if h != "local"])
        return real(modelmats, how)

    comm.combine = combine
    return comm


def _start(X: sp.csr_matrix, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return rng.random((X.shape[0], k)) + 0.1, rng.random((k, X.shape[1])) + 0.1


def _on_two_ranks(train_together, **kw):
    X = _counts()
    W0, H0 = _start(X)
    group = ThreadGroup(2, timeout=60)
    made = []
    for r in range(2):
        comm = _recording(group.comm(r))
        Xr, Wr = shard(comm, X)[0], shard(comm, W0)[0]
        est = NMF(4, init="custom", tol=0.0, max_iter=3, **kw)
        made.append((est, est.learner(Xr, W=Wr, H=H0, comm=comm, batch_size=20,
                                      sync_every=1), comm))
    train_together([lrn for _, lrn, _ in made], timeout=120)
    return X, made


def test_a_full_batch_model_exchanges_no_matrix_at_step_syncs(train_together):
    X, made = _on_two_ranks(train_together, method="batch")
    for _, lrn, comm in made:
        assert lrn.state == "done"
        assert len(comm.combined) >= 3 * 6  # a sync point after every minibatch
        assert all(exchanged == [] for exchanged in comm.combined)
    H0, H1 = (lrn.model.modelmats[0].numpy() for _, lrn, _ in made)
    np.testing.assert_array_equal(H0, H1)  # the ranks hold one model throughout
    one = NMF(4, init="custom", tol=0.0, max_iter=3, method="batch")
    W0, Hs = _start(X)
    lrn = one.learner(X, W=W0, H=Hs, batch_size=20)
    lrn.fit(progress=None)
    np.testing.assert_allclose(H0, lrn.model.modelmats[0].numpy(), rtol=1e-9, atol=1e-12)


def test_an_online_model_is_still_averaged_at_step_syncs(train_together):
    _, made = _on_two_ranks(train_together, method="online")
    for _, lrn, comm in made:
        assert lrn.state == "done"
        assert sum(1 for exchanged in comm.combined if exchanged) >= 3 * 6
        assert all(h == "mean" for exchanged in comm.combined for _, h in exchanged)
