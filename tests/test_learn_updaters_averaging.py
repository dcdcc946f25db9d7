"""Averaged iterates of Grad and ADAGrad: a run's end lands the mean of the kept iterates,
and the running sum round-trips through a checkpoint's state."""

from __future__ import annotations

import numpy as np
import pytest
from test_learn_updaters import Scripted, _run

from bidlab.learn import ADAGrad, Grad, Learner


@pytest.mark.parametrize("make", [
    lambda **kw: Grad(lrate=0.3, texp=0.5, **kw),
    lambda **kw: ADAGrad(lrate=0.2, epsilon=1e-3, **kw),
], ids=["grad", "adagrad"])
def test_a_run_with_averaging_ends_on_the_mean_of_its_iterates(make):
    steps = 10
    _, last = _run(make(), steps)  # the same run without averaging, iterate by iterate
    iterates = [_run(make(), t)[1] for t in range(1, steps + 1)]
    assert all(np.array_equal(a, b) for a, b in zip(iterates[-1], last, strict=True))
    _, end = _run(make(average_from=3, average_every=2), steps)
    kept = [iterates[t - 1] for t in range(1, steps + 1) if t > 3 and (t - 3) % 2 == 0]
    assert len(kept) == 3  # updates 5, 7 and 9
    for i, a in enumerate(end):
        np.testing.assert_allclose(a, np.mean([k[i] for k in kept], axis=0), rtol=1e-12)


def test_averaging_state_round_trips_and_an_unfinished_run_keeps_its_last_iterate():
    model = Scripted()
    lr = Learner(model, np.zeros((8, 1)), Grad(lrate=0.3, average_from=0), batch_size=1,
                 n_passes=1, val_every=0)
    lr.init()
    upd = lr.updater
    for step in range(4):
        model.update(None)
        upd.update(step)
    state = {k: np.array(v.numpy()) for k, v in upd.state().items()}
    counters = upd.counters()
    assert counters["average_n"] == 4 and set(state) == {"average_sum0", "average_sum1"}
    fresh = Learner(Scripted(), np.zeros((8, 1)), Grad(lrate=0.3, average_from=0),
                    batch_size=1, n_passes=1, val_every=0).init().updater
    fresh.load_state(state)
    fresh.set_counters(counters)
    assert fresh.counters()["average_n"] == 4
    for a, b in zip(fresh.state().values(), state.values(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b)
    before = [m.data.copy() for m in model.modelmats]
    upd.end_run(finished=False)  # stopped early or failed: no average lands yet
    assert all(np.array_equal(a, m.data) for a, m in zip(before, model.modelmats, strict=True))
    upd.end_run(finished=True)
    np.testing.assert_allclose(model.modelmats[0].data, state["average_sum0"] / 4)
    assert upd.counters()["average_n"] == 0
