"""GLM's iterate averaging: the default fit lands near the optimum where the last SGD
iterate stays noisy; which updates are averaged, and that partial_fit does not average."""

from __future__ import annotations

import math
import pickle

import numpy as np
import scipy.sparse as sp

from bidlab.models.glm import GLM


def _noisy_regression(seed: int = 3):
    """Sparse 0/1 features with a noisy linear target (R2 about 0.2 at best, as on a9a):
    the case where the last SGD iterate stays noisy and averaging pays."""
    rng = np.random.default_rng(seed)
    n, d = 12000, 120
    cols = rng.integers(0, d, size=(n, 8))
    X = sp.csr_matrix((np.ones(n * 8), (np.repeat(np.arange(n), 8), cols.ravel())),
                      shape=(n, d))
    X.sum_duplicates()
    X.data[:] = 1.0
    y = X @ (rng.standard_normal(d) * 0.3) + rng.standard_normal(n) * 1.5
    return X[:9000], y[:9000], X[9000:], y[9000:]


def test_default_fit_averages_its_iterates_and_lands_near_the_least_squares_optimum():
    from sklearn.metrics import r2_score

    Xtr, ytr, Xte, yte = _noisy_regression()
    design = np.c_[Xtr.toarray(), np.ones(Xtr.shape[0])]
    best = np.linalg.lstsq(design, ytr, rcond=None)[0]
    r2_opt = r2_score(yte, np.c_[Xte.toarray(), np.ones(Xte.shape[0])] @ best)
    gap_avg, gap_last = [], []
    for seed in range(3):
        # a large fixed rate, whose last iterate is noisy (what averaging is for)
        # every pass (tol=None): the averaging of a whole run, not where a stop lands
        avg = GLM("linear", lrate=0.3, random_state=seed, tol=None).fit(Xtr, ytr)
        last = GLM("linear", lrate=0.3, random_state=seed, average=0.0, tol=None).fit(Xtr, ytr)
        assert avg.average_every_ == 1  # a narrow model: every iterate is averaged
        gap_avg.append(r2_opt - r2_score(yte, avg.predict(Xte)))
        gap_last.append(r2_opt - r2_score(yte, last.predict(Xte)))
    assert max(gap_avg) < 1e-3, gap_avg
    assert np.mean(gap_last) > 3 * np.mean(gap_avg), (gap_last, gap_avg)


def test_averaging_spans_the_last_fraction_of_fit_and_partial_fit_does_not_average():
    Xtr, ytr, _, _ = _noisy_regression()
    m = GLM("linear", n_passes=4, batch_size=1000, average=0.25, random_state=0, tol=None)
    m.fit(Xtr, ytr)
    assert m.n_steps_ == 36 and m.updater_.opts.average_from == 27  # the last 9 updates
    assert m.updater_.counters()["average_n"] == 0  # landed in the model, sum emptied
    assert not any(k.startswith("average") for k in m.updater_.state())
    assert pickle.loads(pickle.dumps(m)).updater_.iterates.sums is None  # not carried along
    off = GLM("linear", n_passes=4, average=0.0).fit(Xtr, ytr)
    assert off.updater_.opts.average_from == -1
    p = GLM("linear").partial_fit(Xtr, ytr)
    assert p.updater_.opts.average_from == -1
    lrn = GLM("linear", n_passes=2, batch_size=1000).learner(Xtr, ytr)
    assert lrn.opts.average_from == 9  # half of 2 x 9 updates
    assert GLM("linear").learner(Xtr, ytr, average_from=-1).opts.average_from == -1
    wide = sp.random(200, 50_000, density=1e-4, format="csr", random_state=0)
    w = GLM("linear", batch_size=100).fit(wide, np.ones(200))
    assert w.average_every_ == math.ceil(5 * 50_000 / (100 * wide.nnz / 200))
