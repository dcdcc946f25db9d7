"""NMF and SFA on several ranks (in-process groups): the components a rank may ask for,
a pass resumed within from one checkpoint file the ranks share, and ranks given uneven
numbers of minibatches."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import needs_mpi
from test_ranks_families_hunt13 import _sharing_one_file, low_rank_ratings, sfa_on_ranks

from bidlab.distributed.sharding import shard
from bidlab.learn.comm import ThreadGroup
from bidlab.models import NMF, SFA


def _run_ranks(learners, timeout: float = 120) -> list[BaseException | None]:
    """``fit`` of each learner in its own thread; what each raised (None: nothing)."""
    errors: list[BaseException | None] = [None] * len(learners)

    def run(r: int) -> None:
        try:
            learners[r].fit(progress=None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors[r] = exc

    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(learners))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a learner of the group hung"
    return errors


# -- the components a rank's share of the rows allows -----------------------------------------
def test_nmf_on_ranks_takes_as_many_components_as_every_row_allows(train_together):
    """NMF(5) on 12 rows over 3 ranks was refused with 'larger than X allows (4 samples x
    8 features): give n_components <= 4', which one process on the 12 rows accepts."""
    rng = np.random.default_rng(0)
    X = rng.random((12, 8))
    W0, H0 = rng.random((12, 5)) + 0.1, rng.random((5, 8)) + 0.1
    kw = {"init": "custom", "max_iter": 5, "tol": 0.0}
    one = NMF(5, **kw)
    one.learner(X, W=W0, H=H0, batch_size=2).fit(progress=None)
    group = ThreadGroup(3, timeout=60)
    made = []
    for r in range(3):
        est = NMF(5, **kw)
        Xr, Wr = shard(group.comm(r), X, W0)
        made.append((est, est.learner(Xr, W=Wr, H=H0, batch_size=2, comm=group.comm(r))))
    train_together([lrn for _, lrn in made])
    for est, _ in made:
        np.testing.assert_allclose(est.components_, one.components_, rtol=1e-9, atol=1e-12)


def test_nmf_on_ranks_still_bounds_the_components_by_the_features_and_nndsvda():
    group = ThreadGroup(3, timeout=60)
    X = np.random.default_rng(0).random((12, 8))
    part = shard(group.comm(0), X)[0]
    with pytest.raises(ValueError, match="larger than the 8 features"):
        NMF(9).learner(part, comm=group.comm(0))
    # the NNDSVDa start is an SVD of each rank's own rows: 4 give 4 components at most
    with pytest.raises(ValueError, match="init='nndsvda' on 3 ranks .* this rank's 4 rows"):
        NMF(5, init="nndsvda").learner(part, comm=group.comm(0))


def test_sfa_on_ranks_takes_as_many_factors_as_every_user_allows(train_together):
    """SFA(n_components=5) on 12 users over 3 ranks: 'larger than X allows (4 users x 15
    items)'."""
    R = low_rank_ratings(2, 12, 5, 15, 0.6)
    kw = {"n_components": 5, "max_iter": 3, "random_state": 0}
    one = SFA(**kw).fit(R)
    _, made = sfa_on_ranks(R, kw, 3, 2, train_together)
    for est, _ in made:
        np.testing.assert_allclose(est.item_factors_, one.item_factors_, rtol=1e-9,
                                   atol=1e-12)
        np.testing.assert_allclose(est.rmse_, one.rmse_, rtol=1e-10)


# -- a pass resumed within from one shared file ------------------------------------------------
def _nmf_data(sparse: bool):
    rng = np.random.default_rng(3)
    X = rng.random((60, 3)) @ rng.random((3, 20)) + 0.1 * rng.random((60, 20))
    if sparse:
        X[X < 0.6] = 0
        return sp.csr_matrix(X)
    return X


def _first_run(X, kw, steps, ck, train_together):
    """2 ranks sharing one file, 3 minibatches a pass each, stopped after ``steps``."""
    group = _sharing_one_file(2)
    learners = [NMF(3, **kw).learner(shard(group.comm(r), X)[0], comm=group.comm(r),
                                     batch_size=10, max_steps=steps, checkpoint=ck)
                for r in range(2)]
    train_together(learners)
    return learners[0]._pos


def _resumed(X, kw, ck, size, n_passes, train_together):
    """The estimators of ``size`` ranks sharing one file (``size`` 1: one process) that
    load ``ck`` and train to ``n_passes``."""
    group = _sharing_one_file(size) if size > 1 else None
    made = []
    for r in range(size):
        est = NMF(3, **kw)
        if group is None:
            lrn = est.learner(X, batch_size=20)
        else:
            lrn = est.learner(shard(group.comm(r), X)[0], comm=group.comm(r), batch_size=10)
        lrn.load(ck)
        lrn.set(max_steps=None, n_passes=n_passes)
        made.append((est, lrn))
    train_together([lrn for _, lrn in made])
    return [est for est, _ in made]


@pytest.mark.parametrize("solver,sparse,size", [("mu", False, 2), ("mu", True, 3),
                                                ("cd", False, 2), ("mu", True, 1)])
def test_nmf_resumed_within_a_pass_from_a_shared_file_runs_that_pass_again(
        solver, sparse, size, tmp_path, train_together):
    """Every rank loaded rank 0's sums of the pass so far and added its own rows' to them:
    rank 0's first rows counted once per rank in that pass's step and the others' not at
    all (components 0.02 to 0.12 off on 2 or 3 ranks; one process loading the file:
    likewise). The row factors are not in a shared file, so the pass is run again from
    its start: the run equals one resumed from the file written at that pass's start,
    the void pass aside."""
    X = _nmf_data(sparse)
    kw = {"max_iter": 6, "tol": 0.0, "solver": solver, "random_state": 0}
    at_start, within = str(tmp_path / "start.npz"), str(tmp_path / "within.npz")
    assert _first_run(X, kw, 6, at_start, train_together) == (2, 0)
    assert _first_run(X, kw, 7, within, train_together) == (2, 1)
    want = _resumed(X, kw, at_start, size, 6, train_together)[0]
    for got in _resumed(X, kw, within, size, 7, train_together):  # one pass is void
        assert got.n_iter_ == want.n_iter_ == 6
        np.testing.assert_allclose(got.model_.errors, want.model_.errors, rtol=1e-12)
        np.testing.assert_allclose(got.components_, want.components_, rtol=1e-12,
                                   atol=1e-14)


def test_nmf_file_written_during_a_void_pass_voids_it_again(tmp_path, train_together):
    """A checkpoint written within the void pass holds row factors (one process's) that
    never met the pass's first rows: it says the pass is void, and a run resumed from it
    runs that pass again too."""
    X = _nmf_data(False)
    kw = {"max_iter": 6, "tol": 0.0, "random_state": 0}
    at_start, within = str(tmp_path / "start.npz"), str(tmp_path / "within.npz")
    _first_run(X, kw, 6, at_start, train_together)
    _first_run(X, kw, 7, within, train_together)
    want = _resumed(X, kw, at_start, 1, 6, train_together)[0]
    est = NMF(3, **kw)
    lrn = est.learner(X, batch_size=20).load(within)
    lrn.set(max_steps=lrn.step + 1)  # one minibatch of the void pass
    lrn.fit(progress=None)
    assert lrn._pos == (2, 2)
    lrn.save(str(tmp_path / "void.npz"))
    got = _resumed(X, kw, str(tmp_path / "void.npz"), 1, 7, train_together)[0]
    assert got.n_iter_ == 6
    np.testing.assert_allclose(got.components_, want.components_, rtol=1e-12, atol=1e-14)


NMF_ON_MPI = """
import sys

import numpy as np
from bidlab.distributed import MPIComm
from bidlab.distributed.sharding import shard
from bidlab.models import NMF

comm = MPIComm(timeout=120)
rng = np.random.default_rng(3)
X = rng.random((60, 3)) @ rng.random((3, 20)) + 0.1 * rng.random((60, 20))
ck, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
est = NMF(3, max_iter=6, tol=0.0, random_state=0)
if mode == "first":  # stopped after n minibatches: rank 0 writes the file
    lrn = est.learner(shard(comm, X)[0], comm=comm, batch_size=10, max_steps=n,
                      checkpoint=ck)
else:  # every rank reads it and trains to pass n
    lrn = est.learner(shard(comm, X)[0], comm=comm, batch_size=10).load(ck)
    lrn.set(max_steps=None, n_passes=n)
lrn.fit(progress=None)
if mode != "first":
    np.save(f"{sys.argv[4]}.rank{comm.rank}.npy", est.components_)
"""


@needs_mpi
def test_nmf_mpi_ranks_resumed_within_a_pass_from_their_shared_file(tmp_path):
    """The same on 2 MPI ranks, whose learners share one checkpoint file."""
    from bidlab.distributed.launch import mpiexec_path

    (tmp_path / "prog.py").write_text(NMF_ON_MPI)
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_NUM_THREADS="1")

    def mpi(*args: str) -> None:
        done = subprocess.run([mpiexec_path(), "-n", "2", sys.executable,
                               str(tmp_path / "prog.py"), *args], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]

    mpi(str(tmp_path / "start.npz"), "first", "6")  # at the third pass's start
    mpi(str(tmp_path / "within.npz"), "first", "7")  # after its first minibatch
    mpi(str(tmp_path / "start.npz"), "resume", "6", str(tmp_path / "want"))
    mpi(str(tmp_path / "within.npz"), "resume", "7", str(tmp_path / "got"))
    want = np.load(tmp_path / "want.rank0.npy")
    for r in range(2):
        np.testing.assert_allclose(np.load(tmp_path / f"got.rank{r}.npy"), want, rtol=1e-12,
                                   atol=1e-14)


# -- uneven minibatches ------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["nmf", "nmf-online", "sfa"])
def test_ranks_given_uneven_minibatches_say_they_are_out_of_step(family):
    """12 and 8 rows in minibatches of 4 (3 and 2 a pass), handed to the learners directly:
    a rank read another's arrays of another collective, IndexError 'list index out of
    range' or 'could not broadcast input array from shape (3,8) into shape (2,)'."""
    X = np.random.default_rng(0).random((20, 8))
    group = ThreadGroup(2, timeout=30)
    learners = []
    for r, part in enumerate((X[:12], X[12:])):
        comm = group.comm(r)
        if family == "sfa":
            lrn = SFA(n_components=3, max_iter=3).learner(sp.csr_matrix(part), comm=comm,
                                                         batch_size=4)
        else:
            method = "online" if family == "nmf-online" else "batch"
            lrn = NMF(3, max_iter=3, method=method).learner(part, comm=comm, batch_size=4)
        learners.append(lrn)
    errors = _run_ranks(learners)
    for exc in errors:
        assert isinstance(exc, RuntimeError), repr(exc)
        assert "each rank must make as many minibatches a pass" in str(exc)
        assert "rank_batch_size" in str(exc)


def test_thread_ranks_at_different_collectives_say_so_on_every_rank():
    group = ThreadGroup(2, timeout=30)
    said: dict[int, BaseException] = {}

    def rank(r: int) -> None:
        c = group.comm(r)
        try:
            c.allreduce([np.ones(3)])  # in step
            if r == 0:
                c.allreduce([np.ones((3, 8)), np.ones(2)])
            else:
                c.any_of(True)
        except RuntimeError as exc:
            said[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(said) == [0, 1]
    for exc in said.values():
        assert "the ranks are out of step" in str(exc)
        assert "rank 0: allreduce of arrays shaped (3, 8), (2,); rank 1: any_of" in str(exc)
