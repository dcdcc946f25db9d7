"""Learners on real MPI processes (mpiexec from the mpich wheel, 2 and 4 ranks on loopback):
the collectives against numpy, the exact sufficient-statistic models against one process,
GLM averaging against serial training, butterfly mixing on a9a, faults, and a 2-rank
checkpoint resumed on 1 and on 4 ranks.

The 2-rank checks share one job (tests/mpi_programs.py ``suite``), the 4-rank ones another
(``suite4``): every MPI process pays bidlab's imports, which dominate on a small machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install 'bidlab[mpi]'")

from bidlab.distributed.launch import mpiexec_path  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mpi_programs as progs  # noqa: E402

#: seconds from a rank's failure to the end of the whole job (the fault tests' bound)
FAULT_TIMEOUT = 15.0


def _mpiexec() -> str:
    try:
        return mpiexec_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def _run(n: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE)]))
    return subprocess.run([_mpiexec(), "-n", str(n), sys.executable,
                           str(HERE / "mpi_programs.py"), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("mpi") / "suite"
    done = _run(2, "suite", str(out))
    assert done.returncode == 0, done.stderr[-4000:]
    return out, [dict(np.load(f"{out}.rank{r}.npz")) for r in range(2)]


def test_allreduce_and_broadcast_equal_numpy(suite):
    _, ranks = suite
    for got in ranks:
        np.testing.assert_allclose(got["a"], ranks[0]["mine_a"] + ranks[1]["mine_a"])
        np.testing.assert_allclose(got["f"], ranks[0]["mine_f"] + ranks[1]["mine_f"])
        np.testing.assert_allclose(got["m"], (ranks[0]["mine_a"] + ranks[1]["mine_a"]) / 2)
        assert (got["b"] == 1.0).all()  # rank 1's
        assert bool(got["any_some"]) and not bool(got["any_none"])


def test_sparse_allreduce_equals_the_dense_one(suite):
    _, ranks = suite
    for got in ranks:
        dense = got["dense"]  # the dense allreduce of the same rows
        touched = np.flatnonzero(np.abs(dense).sum(1))
        np.testing.assert_array_equal(got["rows"], touched)
        np.testing.assert_allclose(got["vals"], dense[touched], rtol=1e-12)


def test_batch_vb_lda_on_two_ranks_equals_one_process(suite):
    from bidlab.models import LDA

    _, ranks = suite
    one = LDA(4, method="batch", n_passes=4, batch_size=100, random_state=0)
    one.learner(progs.topics(800), val_every=0).fit(progress=None)
    for got in ranks:
        np.testing.assert_allclose(got["lda"], one.components_, rtol=1e-5, atol=1e-8)


def _lloyd_kmeans_one_process() -> np.ndarray:
    """The centres the ranks' Lloyd k-means job must reach, trained in this process."""
    from bidlab.datasets import blobs
    from bidlab.models import KMeans

    X = blobs(4000, 8, 6, spread=1.5, seed=4).X
    start = X[np.random.default_rng(5).choice(4000, 6, replace=False)]
    one = KMeans(6, algorithm="lloyd", random_state=0, tol=0.0, init=start)
    one.learner(X, n_passes=6, batch_size=500, val_every=0).fit(progress=None)
    return one.cluster_centers_


def test_lloyd_kmeans_on_two_ranks_equals_one_process(suite):
    _, ranks = suite
    centres = _lloyd_kmeans_one_process()
    for got in ranks:
        np.testing.assert_allclose(got["kmeans"], centres, rtol=1e-6, atol=1e-8)


def test_a_lloyd_checkpoint_of_two_ranks_resumes_exactly(suite):
    """Each rank's labels and Hamerly bounds are its own rows': the shared checkpoint
    keeps none (rank 1 used to load rank 0's and prune with them), so the resumed run
    equals the straight one."""
    _, ranks = suite
    for got in ranks:
        np.testing.assert_array_equal(got["km_resumed"], got["km_full"])


def test_sfa_on_two_ranks_equals_one_process(suite):
    """Each rank holds half the users; the item step's CG terms are summed over ranks."""
    from bidlab.models import SFA

    _, ranks = suite
    one = SFA(3, max_iter=4, random_state=0).fit(progs.ratings())
    for got in ranks:
        np.testing.assert_allclose(got["sfa"], one.item_factors_, rtol=1e-9, atol=1e-12)


def test_pagerank_on_two_ranks_equals_one_process(suite):
    from bidlab.models import PageRank

    _, ranks = suite
    one = PageRank(tol=1e-10, method="power").fit(progs.graph())
    for got in ranks:
        np.testing.assert_allclose(got["pagerank"], one.scores_, rtol=1e-12, atol=1e-15)


def _serial_glm(passes: int):
    from bidlab.models import GLM

    X, y = progs.glm_data()
    one = GLM("logistic", batch_size=200, n_passes=passes, random_state=0, updater="grad",
              lrate=0.3)
    lrn = one.learner(X[:3200], y[:3200], val_every=0)
    lrn.fit(progress=None)
    return one, lrn


def _log_loss(coef, X, y) -> float:
    z = np.asarray(X @ np.asarray(coef).ravel()).ravel()
    p = np.clip(1 / (1 + np.exp(-z)), 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


#: GLM averaged every step on 2 ranks (100 rows each) against serial steps of 200 rows:
#: held-out log loss within this much (both learn: below 0.95 log 2)
GLM_TOLERANCE = 0.005


def test_glm_averaged_every_step_matches_serial_and_sparse_equals_dense(suite):
    _, ranks = suite
    X, y = progs.glm_data()
    Xe, ye = X[3200:], y[3200:]
    one, _ = _serial_glm(4)
    serial = _log_loss(one.coef_, Xe, ye)
    np.testing.assert_allclose(ranks[0]["glm_avg"], ranks[1]["glm_avg"], rtol=1e-12)
    averaged = _log_loss(ranks[0]["glm_avg"], Xe, ye)
    assert abs(averaged - serial) < GLM_TOLERANCE and averaged < 0.95 * np.log(2), (
        averaged, serial)


def test_sparse_rows_give_the_average_for_much_fewer_bytes(suite):
    """Text-like data: a minibatch of 100 rows with about 20 nonzeros each touches about
    1/10 of the 20,000 columns. Each rank sends the touched rows the other owns (half of
    its own) and the summed rows it owns (half of the union), 16 B a row (index, value)
    against 8 B a column dense: about 0.28 of the dense bytes, plus the first sync, which
    is dense (it makes the common start). Bound: 0.4."""
    _, ranks = suite
    for got in ranks:
        np.testing.assert_allclose(got["wide_sparse"], got["wide_avg"], rtol=1e-9,
                                   atol=1e-12)
        assert np.abs(got["wide_avg"]).max() > 0
        assert got["bytes_sparse"] < 0.4 * got["bytes_avg"], (got["bytes_sparse"],
                                                              got["bytes_avg"])


def test_sparse_rows_keep_l2_lazy_so_untouched_rows_do_not_travel(suite):
    """With L2 on, a minibatch of 100 rows touching ~40 % of 2,000 columns: one process
    would sweep the decay over every row at every step (every row changed, every row
    sent); under the sparse exchange the decay of an untouched row waits until the row
    is next touched, so a rank sends about the rows it touched (plus every row once a
    pass, when the waiting decay lands at the pass end)."""
    _, ranks = suite
    for got in ranks:
        assert 0.2 < float(got["lazy_touched"]) < 0.6, float(got["lazy_touched"])


def test_sparse_rows_go_dense_when_the_rows_would_cost_more(suite):
    """Synced every 8 steps, minibatches touching ~40 % of 2,000 columns change nearly
    every row between syncs: 12 B a sparse row (index and value) against 8 B dense, so
    after the first sparse sync the exchange is dense (a sparse probe every
    ``combine.REPROBE`` syncs), with the same result and never much above dense's bytes."""
    from bidlab.distributed import combine

    _, ranks = suite
    for got in ranks:
        np.testing.assert_allclose(got["wide8_sparse"], got["wide8_avg"], rtol=1e-9,
                                   atol=1e-12)
        syncs = int(got["syncs8"])
        probes = 1 + (syncs - 2) // (combine.REPROBE + 1)  # the first sync is dense anyway
        assert int(got["dense_syncs8"]) >= syncs - 1 - probes >= 1, (got["dense_syncs8"],
                                                                     syncs)
        assert got["bytes8_sparse"] < 1.3 * got["bytes8_avg"], (got["bytes8_sparse"],
                                                                got["bytes8_avg"])


def test_commands_and_a_one_rank_stop_take_effect_at_one_step_on_every_rank(suite):
    """Rank 0 queues ``set`` at step 5 and ``pause`` at step 15 (the first pass's last)
    from inside training, and another ``set`` while every rank is paused; rank 1 alone asks
    to stop at step 20. The ranks combine every 5 steps and meet there (the boundary's
    flags ride with the combine), at pass ends, and right after a meeting that delivered
    commands; so each takes effect at the first boundary after the next meeting, the same
    on both ranks, and the set made while paused as soon as training resumes. Between
    meetings no rank waits for the other."""
    _, ranks = suite
    for key in ("steer_changed", "steer_paused", "steer_stopped", "steer_set_while_paused"):
        assert int(ranks[0][key]) == int(ranks[1][key]), (key, ranks[0][key], ranks[1][key])
    got = ranks[0]
    every = progs.STEER_SYNC_EVERY
    assert 5 < int(got["steer_changed"]) <= 5 + every + 1, int(got["steer_changed"])
    # the pass end (after step 15) is a meeting: the pause lands before the next sync
    assert int(got["steer_paused"]) == 17, int(got["steer_paused"])
    paused = int(got["steer_paused"])
    assert paused < int(got["steer_set_while_paused"]) <= paused + 2, (
        int(got["steer_set_while_paused"]), paused)
    assert 20 < int(got["steer_stopped"]) <= 20 + every + 1, int(got["steer_stopped"])
    assert all(str(r["steer_state"]) == "stopped" for r in ranks)
    assert all(float(r["steer_lrate"]) == 0.05 for r in ranks)
    # a combine every 5 steps; a meeting of its own only at the first boundary, after
    # the pass end and after meetings that delivered commands (at every boundary: ~25)
    assert int(got["steer_syncs"]) <= int(got["steer_stopped"]) // every + 1
    meetings = np.asarray(got["steer_meetings"])
    assert 1 <= meetings.size <= 8 and meetings[0] == 0, meetings.tolist()


def test_a_checkpoint_of_two_ranks_resumes_on_one(suite):
    from bidlab.models import GLM

    out, ranks = suite
    ck = Path(f"{out}.ck.npz")
    assert ck.exists() and not list(ck.parent.glob("*.ck.rank*"))  # rank 0 wrote the one file
    X, y = progs.glm_data()
    est = GLM("logistic", batch_size=200, n_passes=4, random_state=0, updater="grad", lrate=0.3)
    lrn = est.learner(X[:3200], y[:3200], val_every=0)
    lrn.load(str(ck))
    np.testing.assert_allclose(lrn.model.modelmats[0].numpy().ravel(),
                               np.asarray(ranks[0]["glm_ck"]).ravel(), rtol=1e-12)
    assert lrn.metrics["pass"] == 2
    lrn.set(n_passes=4)
    lrn.fit(progress=None)
    assert lrn.step == 4 * 16  # two more passes of 16 minibatches on one rank
    one, _ = _serial_glm(4)
    Xe, ye = X[3200:], y[3200:]
    assert abs(_log_loss(est.coef_, Xe, ye) - _log_loss(one.coef_, Xe, ye)) < GLM_TOLERANCE


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_failing_rank_ends_the_job_with_its_message(tmp_path, how):
    out = tmp_path / "fail"
    done = _run(2, "fail", str(out), how, timeout=240)
    ended = time.time()
    assert done.returncode != 0
    failed_at = float(Path(f"{out}.when").read_text())
    assert ended - failed_at < FAULT_TIMEOUT, ended - failed_at
    text = done.stdout + done.stderr
    if how == "raise":
        assert "rank 1 of 2 failed: RuntimeError: rank 1 failed on purpose" in text, text[-3000:]
        assert "Traceback" in text
    else:
        assert "KILLED" in text or "signal 9" in text or "Killed" in text, text[-3000:]


def test_a_rank_failing_without_a_job_abort_releases_the_others_at_once(tmp_path):
    """On notebook engines nothing aborts the job: the failing rank tells the others,
    whose waits end with its error instead of lasting the 60 s timeout."""
    out = tmp_path / "alone"
    done = _run(2, "fail_alone", str(out), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    ends = [Path(f"{out}.rank{r}.txt").read_text().split("\n", 1) for r in range(2)]
    assert "rank 1 failed on purpose" in ends[1][1]
    assert ends[0][1].startswith("OtherRankFailed: rank 1 of 2 failed (RuntimeError: rank "
                                 "1 failed on purpose"), ends[0][1]  # a RuntimeError
    assert float(ends[0][0]) < FAULT_TIMEOUT


def test_bidlab_train_on_two_ranks_then_resumed_on_one(tmp_path, shared_data, capsys):
    """The shell command on a9a: ``bidlab train glm --ranks 2`` writes one checkpoint (rank
    0's) at each pass end; ``bidlab train`` on one process resumes it."""
    from bidlab.cli import main

    _mpiexec()
    data = shared_data / "libsvm-a9a" / "a9a"
    ck = tmp_path / "glm.ck"
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    done = subprocess.run([sys.executable, "-m", "bidlab.cli", "train", "glm", "--ranks", "2",
                           "--data", str(data), "--n_passes", "1", "--checkpoint", str(ck),
                           "--progress", "none", "--comm-mode", "sparse"],
                          env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on 2 ranks" in done.stderr and done.stdout.count("done:") == 1, done.stdout
    assert ck.exists() and not list(tmp_path.glob("*rank*"))
    assert main(["train", "glm", "--data", str(data), "--n_passes", "2", "--checkpoint",
                 str(ck), "--progress", "none"]) == 0
    err = capsys.readouterr().err
    assert "resuming from" in err and "at pass 2" in err, err[-2000:]


# ------------------------------------------------------------------ 4 ranks, one job
@pytest.fixture(scope="module")
def suite4(suite, tmp_path_factory):
    """The 4-rank checks in one job (4 processes oversubscribe a 2-core machine): it
    resumes the 2-rank suite's checkpoint and, with the shared data, trains on a9a."""
    from conftest import SHARED_DATA

    out2, _ = suite
    out = tmp_path_factory.mktemp("mpi4") / "suite4"
    a9a = SHARED_DATA / "libsvm-a9a"
    done = _run(4, "suite4", str(out), f"{out2}.ck.npz",
                str(SHARED_DATA) if a9a.is_dir() else "", timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    return [dict(np.load(f"{out}.rank{r}.npz")) for r in range(4)]


def test_four_ranks_collectives_equal_numpy(suite4):
    ranks = suite4
    total_a = sum(r["mine_a"] for r in ranks)
    total_f = sum(r["mine_f"] for r in ranks)
    for got in ranks:
        np.testing.assert_allclose(got["a"], total_a)
        np.testing.assert_allclose(got["f"], total_f)
        np.testing.assert_allclose(got["m"], total_a / 4)
        assert (got["b"] == 3.0).all()  # rank 3's
        assert bool(got["any_some"]) and not bool(got["any_none"])
        touched = np.flatnonzero(np.abs(got["dense"]).sum(1))
        np.testing.assert_array_equal(got["rows"], touched)
        np.testing.assert_allclose(got["vals"], got["dense"][touched], rtol=1e-12)


def test_nested_sparse_allreduce_equals_the_dense_one(suite4):
    for got in suite4:
        assert int(got["nest_layers"]) == 2
        assert int(got["nest_index_bytes"]) == 4  # 1,000 rows: 4-byte indices
        touched = np.flatnonzero(np.abs(got["nest_dense"]).sum(1))
        np.testing.assert_array_equal(got["nest_rows"], touched)
        np.testing.assert_allclose(got["nest_vals"], got["nest_dense"][touched], rtol=1e-12)
    for got in suite4[1:]:
        np.testing.assert_array_equal(got["nest_rows"], suite4[0]["nest_rows"])
        np.testing.assert_array_equal(got["nest_vals"], suite4[0]["nest_vals"])


def test_freed_communicators_give_their_contexts_back(suite, suite4):
    # a ranked learner closed in a notebook frees its Dup'd communicator (MPICH has 2,048
    # contexts a process): 2,100 Dups on 2 ranks, 750 Dups with two layers each on 4
    assert [int(r["freed"]) for r in suite[1]] == [2100, 2100]
    assert [int(r["freed"]) for r in suite4] == [750] * 4


def test_nest_degrees_must_multiply_to_the_ranks():
    from bidlab.distributed.combine import check_nest

    assert check_nest(None, 4) == (4,)
    assert check_nest((2, 2), 4) == (2, 2)
    assert check_nest([1, 4], 4) == (4,)
    assert check_nest((1,), 1) == (1,)
    for bad in [(3,), (2, 3), (0, 4), (-2, -2), ()]:
        with pytest.raises(ValueError, match="multiply to the number of ranks, 4"):
            check_nest(bad, 4)
    with pytest.raises(ValueError, match="whole numbers"):
        check_nest("ab", 4)
    from bidlab.distributed.rank_options import nest_degrees

    assert nest_degrees(None) is None and nest_degrees("4,8") == [4, 8]
    with pytest.raises(ValueError, match="--nest 2,x: give the layer degrees as whole"):
        nest_degrees("2,x")


def test_lloyd_kmeans_on_four_ranks_equals_one_process(suite4):
    centres = _lloyd_kmeans_one_process()
    for got in suite4:
        np.testing.assert_allclose(got["kmeans"], centres, rtol=1e-6, atol=1e-8)


def test_a_checkpoint_of_two_ranks_resumes_on_four(suite4):
    X, y = progs.glm_data()
    one, _ = _serial_glm(4)
    serial = _log_loss(one.coef_, X[3200:], y[3200:])
    for got in suite4:
        assert int(got["resumed_at"]) == 2
        # two more passes on 4 ranks after the 2 x 16 minibatches of the 2-rank run
        assert int(got["resumed_step"]) == 32 + 2 * int(got["resumed_batches"])
        np.testing.assert_allclose(got["glm_resumed"], suite4[0]["glm_resumed"], rtol=1e-12)
    resumed = _log_loss(suite4[0]["glm_resumed"], X[3200:], y[3200:])
    assert abs(resumed - serial) < GLM_TOLERANCE, (resumed, serial)


def test_butterfly_mixing_on_four_ranks_within_half_a_percent_of_serial(suite4,
                                                                       shared_data):
    """GLM on a9a, 4 ranks of 100 rows a minibatch, butterfly-mixed every minibatch,
    against one process with 400 rows a minibatch (the same rows a step)."""
    from bidlab.datasets import load_a9a
    from bidlab.models import GLM

    X, y, X_test, y_test = load_a9a(shared_data, zero_one=True)
    one = GLM("logistic", batch_size=400, n_passes=2, random_state=0)
    one.learner(X, y, val_every=0).fit(progress=None)
    serial = one.score(X_test, y_test)
    got = float(suite4[0]["butterfly_acc"])
    assert abs(got - serial) <= 0.005 * serial, (got, serial)
