"""Resources that must not grow with repetition: many learners, fits and runs in one
kernel (a notebook that refits or restarts training hundreds of times)."""

from __future__ import annotations

import gc

import numpy as np
import scipy.sparse as sp

from bidlab.mat.cache import CACHE
from bidlab.models import LDA, LDAGibbs


def _counts() -> sp.csr_matrix:
    X = sp.random(60, 40, density=0.2, format="csr", random_state=0, dtype=np.float64)
    X.data = np.ceil(X.data * 5)
    return X


def _cached_after_learners(est, X, n: int) -> tuple[int, int]:
    for _ in range(n):
        lr = est.learner(X)
        lr.start()
        lr.join()
        del lr
    gc.collect()
    return len(CACHE), CACHE.bytes_held


def test_learners_made_and_dropped_leave_no_cached_results():
    # a dashboard's "train" button: a new learner on the same fitted estimator each time
    X = _counts()
    for est in (LDA(n_components=3, n_passes=2, random_state=0),
                LDAGibbs(n_components=3, n_passes=2, random_state=0)):
        est.fit(X)
        first = _cached_after_learners(est, X, 2)
        later = _cached_after_learners(est, X, 12)
        assert later == first, (type(est).__name__, first, later)


def test_a_live_learner_keeps_its_cached_results():
    X = _counts()
    est = LDA(n_components=3, n_passes=2, random_state=0).fit(X)
    lr = est.learner(X)
    lr.start()
    lr.join()
    gc.collect()
    held = len(CACHE)
    scope = lr._cache_scope()
    assert sum(1 for key in CACHE._store if key[0] == scope) > 0
    lr.fit(progress=None)  # a second run finds its containers again
    assert len(CACHE) == held
    del lr
    gc.collect()
    assert not any(key[0] == scope for key in CACHE._store)
