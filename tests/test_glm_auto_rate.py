"""GLM's ``lrate="auto"``: the pilot's rows, the rate it picks against every fixed rate of
its grid on normalised and unnormalised rows, per-target picks, and the paths that use it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import log_loss
from sklearn.preprocessing import normalize

from bidlab.datasets import synthetic_glm
from bidlab.models.glm import GLM
from bidlab.models.glm.auto_rate import RATE_GRID, pilot_rows, race_rates


def test_pilot_rows_are_a_disjoint_sample_of_an_eighth():
    tr, ev = pilot_rows(80_000, 500, np.random.default_rng(1))
    assert len(tr) + len(ev) == 10_000
    assert len(np.intersect1d(tr, ev)) == 0
    assert tr.max() < 80_000 and ev.max() < 80_000
    small_tr, small_ev = pilot_rows(1000, 500, np.random.default_rng(1))  # 4 minibatches
    assert len(small_tr) + len(small_ev) == 1000
    tiny_tr, tiny_ev = pilot_rows(5, 500, np.random.default_rng(1))
    assert np.array_equal(np.sort(tiny_tr), np.arange(5)) and np.array_equal(tiny_tr, tiny_ev)


def _data(normalised: bool):
    X, Y, _ = synthetic_glm(6000, 800, 20, n_targets=1, seed=5, values="lognormal")
    X = sp.csr_matrix(normalize(X) if normalised else X, dtype=np.float32)
    return X[:4500], Y[:4500, 0], X[4500:], Y[4500:, 0]


def _held_out_loss(m: GLM, X, y) -> float:
    return float(log_loss(y, m.predict_proba(X)[:, 1], labels=[0, 1]))


@pytest.mark.parametrize("normalised", [True, False])
def test_auto_is_near_the_best_fixed_rate(normalised):
    Xtr, ytr, Xte, yte = _data(normalised)
    fixed = {r: _held_out_loss(GLM(lrate=r, n_passes=3, random_state=0).fit(Xtr, ytr),
                               Xte, yte) for r in RATE_GRID}
    auto = GLM(n_passes=3, random_state=0).fit(Xtr, ytr)
    assert float(auto.lrate_) in RATE_GRID
    best, worst = min(fixed.values()), max(fixed.values())
    assert worst > best + 0.02  # the rate matters on this data
    assert _held_out_loss(auto, Xte, yte) <= best + 0.25 * (worst - best)


def test_unnormalised_rows_get_a_smaller_rate_than_normalised_ones():
    picks = {}
    for normalised in (True, False):
        Xtr, ytr, _, _ = _data(normalised)
        picks[normalised] = float(GLM(n_passes=1, random_state=0).fit(Xtr, ytr).lrate_)
    assert picks[False] < picks[True]


def test_rates_are_picked_per_target_and_kept_by_later_calls():
    X, Y, _ = synthetic_glm(3000, 400, 15, n_targets=3, seed=2)
    X = sp.csr_matrix(X, dtype=np.float32)
    Y = Y.astype(np.float64)
    Y[:, 2] = X @ np.linspace(-1, 1, 400)  # a linear target beside two logistic ones
    m = GLM(["logistic", "logistic", "linear"], n_passes=1, random_state=0).fit(X, Y)
    rates = np.atleast_1d(np.asarray(m.lrate_, dtype=float))
    assert rates.size in (1, 3) and set(rates.tolist()) <= set(RATE_GRID)
    assert m.get_params()["lrate"] == "auto"  # the parameter is untouched
    one = m.select(2)
    assert one.lrate == pytest.approx(rates[-1])

    p = GLM(random_state=0).partial_fit(X[:1500], Y[:1500, 0], classes=[0, 1])
    first = p.lrate_
    p.partial_fit(X[1500:], Y[1500:, 0])
    assert p.lrate_ == first


def test_fixed_rate_is_reported_and_live_learner_uses_the_pick():
    X, Y, _ = synthetic_glm(2000, 300, 10, n_targets=1, seed=3)
    m = GLM(lrate=0.7, n_passes=1).fit(X, Y[:, 0])
    assert m.lrate_ == 0.7
    auto = GLM(n_passes=1, random_state=0)
    lrn = auto.learner(X, Y[:, 0])
    assert float(auto.lrate_) in RATE_GRID
    assert float(np.atleast_1d(lrn.opts.lrate)[0]) == float(auto.lrate_)


def test_bad_rate_names_auto():
    X, Y, _ = synthetic_glm(200, 50, 5, n_targets=1, seed=3)
    with pytest.raises(ValueError, match=r"must be 'auto' or a float > 0.*Got 'fast'"):
        GLM(lrate="fast").fit(X, Y[:, 0])


def test_cli_reads_auto_and_numbers():
    from bidlab.cli.train_options import _parse_value

    spec = {s.name: s for s in GLM.PARAMS}["lrate"]
    assert _parse_value(spec, "auto") == "auto"
    assert _parse_value(spec, "0.5") == 0.5
    with pytest.raises(ValueError, match="'lrate'"):
        _parse_value(spec, "fast")


def test_ranks_of_a_thread_group_share_rank_zeros_pick():
    import threading

    from bidlab.learn import ThreadGroup

    X, Y, _ = synthetic_glm(4000, 300, 10, n_targets=1, seed=4)
    X = sp.csr_matrix(X, dtype=np.float32)
    halves = [(X[:2000], Y[:2000, 0]), (normalize(X[2000:]) * 50, Y[2000:, 0])]  # unlike rows
    group = ThreadGroup(2)
    ests = [GLM(n_passes=1, random_state=0) for _ in range(2)]
    picks = [None, None]

    def run(r: int) -> None:
        lrn = ests[r].learner(*halves[r], comm=group.comm(r))
        picks[r] = ests[r].lrate_
        lrn.fit(progress=None)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert picks[0] is not None and picks[0] == picks[1]


def test_race_candidates_start_at_the_pilot_pick():
    assert race_rates(0.3, 1).tolist() == [[0.3, 1.0, 3.0]]
    assert race_rates([10.0, 0.03], 2).tolist() == [[1.0, 3.0, 10.0], [0.03, 0.1, 0.3]]


def test_fit_continues_the_race_winner_as_a_fixed_rate_fit_would():
    Xtr, ytr, Xte, _ = _data(True)
    auto = GLM(n_passes=3, random_state=0).fit(Xtr, ytr)
    pilot = GLM(n_passes=1, random_state=0).partial_fit(Xtr, ytr, classes=[0, 1]).lrate_
    assert float(auto.lrate_) in race_rates(pilot, 1)[0]
    assert auto.n_iter_ == 3 and len(auto.loss_curve_) == 3
    fixed = GLM(lrate=float(auto.lrate_), n_passes=3, random_state=0).fit(Xtr, ytr)
    np.testing.assert_allclose(auto.decision_function(Xte), fixed.decision_function(Xte),
                               rtol=1e-4, atol=1e-5)
