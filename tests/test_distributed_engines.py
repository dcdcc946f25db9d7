"""Learners on MPI ranks steered from this process through real ipyparallel engines
(``start_engines``: an MPI job of 2 engines on loopback), beyond what notebook 07 shows:
pause and resume keep one learner's meaning when asked for more than once or in quick
succession, so a run never stays paused after its last resume."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install 'bidlab[mpi]'")
pytest.importorskip("ipyparallel", reason="ipyparallel is not installed: pip install "
                    "'bidlab[mpi]'")

from bidlab.datasets import synthetic_glm  # noqa: E402
from bidlab.distributed import RankedLearner, start_engines, stop_engines  # noqa: E402

#: passes of each GLM run: a few seconds on 2 ranks, so that a pause lands mid-run
PASSES = 40


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster, client = start_engines(2)
    made: list[RankedLearner] = []
    client.bidlab_made = made
    try:
        yield client
    finally:
        stop_engines(cluster, client, *made)


def _glm(client: Any, passes: int = PASSES) -> RankedLearner:
    X, y, _ = synthetic_glm(4000, 200, 20, seed=0)
    ranked = RankedLearner(client, "glm", (X, y), params={"link": "logistic"},
                           options={"n_passes": passes, "batch_size": 100})
    client.bidlab_made.append(ranked)
    return ranked


def _steps(ranked: RankedLearner) -> list[int]:
    return [int(m["step"]) for m in ranked.metrics(per_rank=True)]


def _wait_running(ranked: RankedLearner, steps: int = 20) -> None:
    end = time.monotonic() + 60
    while min(_steps(ranked)) < steps:
        assert time.monotonic() < end, "the ranks did not start training"
        time.sleep(0.01)


def test_a_second_pause_while_paused_does_not_pause_again_after_resume(client: Any) -> None:
    # a run far longer than the test (stopped at its end), so the first pause lands
    # mid-run however slowly the engines answer on a loaded machine
    ranked = _glm(client, passes=100 * PASSES)
    learner = ranked.learner
    ranked.start()
    _wait_running(ranked)
    learner.pause(wait=True, timeout=60)
    assert ranked.states == ["paused", "paused"], ranked.states
    at = _steps(ranked)
    assert at[0] == at[1], at
    learner.pause()  # asked again while paused: nothing more to do
    time.sleep(0.2)
    learner.resume()
    # the ranks meet every 8 steps: 40 more steps mean the second pause was not taken
    _wait_running(ranked, at[0] + 40)
    assert ranked.states == ["running", "running"], ranked.states
    assert ranked.stop() == ["stopped", "stopped"]


def test_pause_then_resume_at_once_leaves_the_ranks_running(client: Any) -> None:
    ranked = _glm(client)
    learner = ranked.learner
    ranked.start()
    _wait_running(ranked)
    for _ in range(3):  # the pause may or may not be taken before the resume arrives
        learner.pause()
        learner.resume()
    assert learner.join(timeout=60), f"still {ranked.states} at steps {_steps(ranked)}"
    assert ranked.states == ["done", "done"]
    est = ranked.estimator()
    assert np.isfinite(np.asarray(est.coef_)).all()


def test_set_refuses_on_rank_0_what_every_rank_would_refuse(client: Any) -> None:
    """A value a single learner refuses (a vector of 3 rates for 1 target, a fixed option)
    is refused by set() itself, not sent to fail every rank later."""
    ranked = _glm(client)
    ranked.start()
    _wait_running(ranked)
    with pytest.raises(ValueError, match="vector length"):
        ranked.set(lrate=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="'record_size' option is not live"):
        ranked.set(record_size=10)
    ranked.set(lrate=0.05)
    assert ranked.learner.join(timeout=60)
    assert ranked.states == ["done", "done"]


def test_set_while_the_ranks_are_idle_takes_effect_at_once_on_every_rank(client: Any) -> None:
    """Before a run and after one, no meeting would deliver a queued set: every rank sets
    it now (as one stopped learner does), and the next run trains with it."""
    ranked = _glm(client)
    version = ranked.set(lrate=0.02)
    assert ranked.option("lrate") == [0.02, 0.02]
    ranked.set(n_passes=2)
    ranked.start()
    assert ranked.learner.join(timeout=60) and ranked.states == ["done", "done"]
    assert ranked.option("lrate") == [0.02, 0.02]
    after = ranked.set(lrate=0.07)
    assert after > version and ranked.option("lrate") == [0.07, 0.07]
    rows = ranked.records()
    assert all(max(r["opts_version"]) < after for r in rows)
    ranked.set(n_passes=4)
    ranked.start()
    assert ranked.learner.join(timeout=60)
    assert ranked.option("lrate") == [0.07, 0.07]
    assert [max(r["opts_version"]) for r in ranked.records()] == [after + 1, after + 1]
