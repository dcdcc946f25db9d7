"""Learners on 2 MPI engines of an ipyparallel cluster, steered from this process as a
notebook would: a new ``lrate`` set mid-run shows in both ranks' records from the same
minibatch on; pause stops both at the same step; stop ends both."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install 'bidlab[mpi]'")
pytest.importorskip("ipyparallel", reason="ipyparallel is not installed: pip install "
                    "'bidlab[mpi]'")


def _wait(cond, seconds: float, what: str) -> None:
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_two_mpi_engines_take_a_new_lrate_from_the_same_step():
    from bidlab.distributed.launch import mpiexec_path
    from bidlab.distributed.notebook import RankedLearner, start_engines

    try:
        mpiexec_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    rng = np.random.default_rng(0)
    X = sp.random(2000, 500, density=0.02, format="csr", random_state=0)
    y = (np.asarray(X @ rng.standard_normal(500)).ravel() > 0).astype(int)
    cluster, client = start_engines(2)
    try:
        lrn = RankedLearner(client, "glm", (X, y), params={"link": "logistic"},
                            options={"n_passes": 10**6, "batch_size": 50, "val_every": 0})
        assert sorted(lrn.engine_of_rank) == [0, 1]
        lrn.start()
        steps = lambda: [m["step"] for m in lrn.metrics(per_rank=True)]  # noqa: E731
        _wait(lambda: min(steps()) >= 20, 120, "20 steps on both ranks")
        before = [r["opts_version"].max() for r in lrn.records()]
        lrn.set(lrate=0.0123)
        _wait(lambda: all(np.isclose(np.ravel(v), 0.0123).all() for v in lrn.option("lrate")),
              60, "the new lrate on both ranks")
        lrn.pause()
        _wait(lambda: lrn.states == ["paused", "paused"], 60, "both ranks paused")
        paused_at = steps()
        assert paused_at[0] == paused_at[1]
        time.sleep(0.5)
        assert steps() == paused_at  # nobody trains while paused
        lrn.resume()
        _wait(lambda: min(steps()) > paused_at[0] + 5, 60, "training after resume")
        merged = lrn.metrics()
        assert merged["ranks"] == 2 and merged["samples"] > 0
        assert set(lrn.stop()) <= {"stopped", "done"}
        records = lrn.records()
        first = []
        for rec, v0 in zip(records, before, strict=True):
            changed = np.flatnonzero(rec["opts_version"] > v0)
            assert changed.size, "no minibatch ran with the new lrate"
            first.append(int(rec["step"][changed[0]]))
        assert first[0] == first[1], first
        final = steps()
        assert final[0] == final[1]  # both stopped at the same minibatch
    finally:
        cluster.stop_cluster_sync()
