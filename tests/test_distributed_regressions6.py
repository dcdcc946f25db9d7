"""Ranked learners driven from this process through real ipyparallel engines (2 MPI ranks on
loopback), in the orders a notebook user takes: two learners training at once on the same
engines, a pause asked for before the run, closing while running and closing twice, a rank
that fails (its traceback on the proxy, as Dashboard reads it), and a fixed option's
message naming the argument that takes it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from bidlab.distributed import notebook

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class _Gone:
    """A learner whose engines are gone: closing it fails."""

    def close(self) -> None:
        raise RuntimeError("Client cannot be used after its sockets have been closed")


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def shutdown(self, **_: Any) -> None:
        self.calls.append("shutdown")

    def close(self) -> None:
        self.calls.append("close")

    def stop_cluster_sync(self) -> None:
        self.calls.append("stop_cluster")


def test_stop_engines_stops_the_cluster_when_a_learner_cannot_be_closed() -> None:
    cluster, client = _Recorder(), _Recorder()
    notebook.stop_engines(cluster, client, _Gone())
    assert client.calls == ["shutdown", "close"]
    assert cluster.calls == ["stop_cluster"]


# ---------------------------------------------------------------- on real engines
def _engines_available() -> bool:
    try:
        import ipyparallel  # noqa: F401
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


engines = pytest.mark.skipif(not _engines_available(), reason="mpi4py or ipyparallel is not "
                             "installed: pip install 'bidlab[mpi]'")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster, client = notebook.start_engines(2)
    made: list[Any] = []
    client.bidlab_made = made
    try:
        yield client
    finally:
        notebook.stop_engines(cluster, client, *made)


def _glm(client: Any, passes: int = 3) -> Any:
    from bidlab.datasets import synthetic_glm

    X, y, _ = synthetic_glm(2000, 50, 10, seed=0)
    ranked = notebook.RankedLearner(client, "glm", (X, y), params={"link": "logistic"},
                                    options={"n_passes": passes, "batch_size": 100})
    client.bidlab_made.append(ranked)
    return ranked


def _break_update(view: Any, name: str) -> None:
    """Make the learner's model raise at its next update on every engine of ``view``."""
    view.execute("from bidlab.distributed.notebook import _LEARNERS\n"
                 "def _boom(*_, **__):\n"
                 "    raise RuntimeError('boom on this rank')\n"
                 f"_LEARNERS[{name!r}][0].model.update = _boom\n", block=True)


@engines
def test_two_ranked_learners_train_at_the_same_time(client: Any) -> None:
    """Each learner has a communicator of its own: their collectives do not mix."""
    first, second = _glm(client), _glm(client)
    first.start()
    second.start()
    assert first.learner.join(timeout=60) and second.learner.join(timeout=60)
    assert first.states == ["done", "done"] and second.states == ["done", "done"]


@engines
def test_a_pause_before_start_does_not_pause_the_run(client: Any) -> None:
    """As on one learner, a pause asked for before the run changes nothing."""
    ranked = _glm(client)
    learner = ranked.learner
    learner.pause()
    learner.start()
    assert learner.join(timeout=60), f"still {ranked.states}"
    assert ranked.states == ["done", "done"]


@engines
def test_closing_shows_the_final_state_and_closing_again_does_nothing(client: Any) -> None:
    ranked = _glm(client, passes=500)
    learner = ranked.learner
    learner.start()
    time.sleep(0.3)
    ranked.close()
    assert learner.state == "stopped"
    assert learner.metrics["rank_states"] == ["stopped", "stopped"]
    ranked.close()  # again: nothing to do
    with pytest.raises(RuntimeError, match="is closed .*make a new RankedLearner"):
        ranked.states  # noqa: B018


@engines
def test_a_failed_run_shows_its_traceback_on_the_proxy(client: Any) -> None:
    ranked = _glm(client)
    learner = ranked.learner
    _break_update(ranked.view, ranked.name)  # every rank: none waits on another
    learner.start()
    with pytest.raises(RuntimeError, match="boom on this rank"):
        learner.join(timeout=60)
    assert learner.state == "failed"
    assert learner.traceback is not None and "Traceback" in learner.traceback
    assert "boom on this rank" in learner.traceback


@engines
def test_a_fixed_option_names_the_argument_that_takes_it(client: Any) -> None:
    ranked = _glm(client)
    with pytest.raises(ValueError, match=r"options=\{'record_size': \.\.\.\}"):
        ranked.set(record_size=10)
