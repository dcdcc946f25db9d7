"""NMF, SFA, PageRank and BayesNet trained by learners of several ranks (in-process groups):
what one process on all the rows reports and decides, each rank agrees with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import needs_mpi
from test_pagerank import random_graph

from bidlab.distributed.sharding import shard
from bidlab.learn.comm import ThreadGroup
from bidlab.models import NMF, SFA, BayesNet, PageRank

CANCER_BIF = """
network cancer { }
variable Pollution { type discrete [ 2 ] { low, high }; }
variable Smoker { type discrete [ 2 ] { True, False }; }
variable Cancer { type discrete [ 2 ] { True, False }; }
variable Xray { type discrete [ 2 ] { positive, negative }; }
variable Dyspnoea { type discrete [ 2 ] { True, False }; }
probability ( Pollution ) { table 0.9, 0.1; }
probability ( Smoker ) { table 0.3, 0.7; }
probability ( Cancer | Pollution, Smoker ) {
  (low, True) 0.03, 0.97; (high, True) 0.05, 0.95;
  (low, False) 0.001, 0.999; (high, False) 0.02, 0.98;
}
probability ( Xray | Cancer ) { (True) 0.9, 0.1; (False) 0.2, 0.8; }
probability ( Dyspnoea | Cancer ) { (True) 0.65, 0.35; (False) 0.3, 0.7; }
"""



def low_rank_ratings(seed: int, users: int, rank: int, items: int,
                     density: float) -> sp.csr_matrix:
    """Ratings of ``users`` x ``items`` from a rank-``rank`` matrix, about ``density`` of
    them stored, every user's first item among them."""
    rng = np.random.default_rng(seed)
    full = rng.standard_normal((users, rank)) @ rng.standard_normal((rank, items)) + 3
    mask = rng.random(full.shape) < density
    mask[:, 0] = True
    r, c = np.nonzero(mask)
    return sp.csr_matrix((full[r, c], (r, c)), shape=full.shape)


def sfa_on_ranks(R: sp.csr_matrix, kw: dict, ranks: int, batch_size: int,
                 train_together) -> tuple:
    """The in-process rank group and the (estimator, learner) of SFA(**kw) on each of its
    ``ranks``, each on its shard of R, trained together."""
    group = ThreadGroup(ranks, timeout=60)
    made = [(est := SFA(**kw), est.learner(shard(group.comm(k), R)[0], comm=group.comm(k),
                                           batch_size=batch_size)) for k in range(ranks)]
    train_together([lrn for _, lrn in made])
    return group, made

def _on_ranks(size, make, train_together):
    """``make(comm)`` -> (estimator, learner) on each of ``size`` in-process ranks, trained
    together; the estimators by rank."""
    group = ThreadGroup(size, timeout=60)
    made = [make(group.comm(r)) for r in range(size)]
    train_together([lrn for _, lrn in made], timeout=120)
    return [est for est, _ in made]


def test_bayesnet_learns_on_ranks_the_normalised_tables_of_one_process(tmp_path,
                                                                       train_together):
    """Each rank's M-step normalised its own counts and the updater summed the ranks'
    tables: on 2 ranks every row of every table summed to 2, and the pass end failed with
    "row 0 of the table of 'Pollution' ... sums to 2"."""
    (tmp_path / "cancer.bif").write_text(CANCER_BIF)
    truth = BayesNet.from_bif(tmp_path / "cancer.bif")
    X = truth.sample(1000, random_state=3).astype(float)
    X[np.random.default_rng(1).random(X.shape) < 0.3] = np.nan
    kw = {"n_passes": 4, "random_state": 5}
    one = BayesNet(truth.network_.uniform(), **kw).fit(X)

    def make(comm):
        est = BayesNet(truth.network_.uniform(), **kw)
        return est, est.learner(shard(comm, X)[0], comm=comm)

    parts = _on_ranks(2, make, train_together)
    test = truth.sample(2000, random_state=9)
    for part in parts:
        for got, ref, first in zip(part.network_.cpts, one.network_.cpts,
                                   parts[0].network_.cpts, strict=True):
            np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)
            np.testing.assert_array_equal(got, first)  # every rank the same tables
            assert np.abs(got - ref).max() < 0.2  # measured 0.14: other draws, same counts
        assert part.log_likelihood(test) == pytest.approx(one.log_likelihood(test), rel=1e-3)


def test_bayesnet_infers_on_ranks_with_the_tables_unchanged(tmp_path, train_together):
    """Inference hands the tables back unchanged at each pass end, and the updater summed
    them over the ranks: on 2 ranks they doubled every pass, until the run failed with
    'the model diverged' (4.3e+10 at pass 36)."""
    (tmp_path / "cancer.bif").write_text(CANCER_BIF)
    truth = BayesNet.from_bif(tmp_path / "cancer.bif")

    def make(comm):
        est = BayesNet(truth.network_, n_chains=50, burn_in=20, n_samples=50,
                       random_state=comm.rank)
        return est, est.learner(comm=comm)

    for est in _on_ranks(2, make, train_together):
        for got, want in zip(est.model_.network.cpts, truth.network_.cpts, strict=True):
            np.testing.assert_array_equal(got, want)
        cancer = est.marginals_[est.network_.index("Cancer")]
        assert cancer[0] == pytest.approx(0.0115, abs=0.01)  # exact: 0.0116


def _noisy_half(n=60, d=20, k=3, seed=3):
    """Rows of rank k, the second half with noise that no rank-k fit removes: a rank
    holding only one half sees its own errors stall at another pass than the whole."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, k)) @ rng.random((k, d))
    X[n // 2:] += 2.0 * rng.random((n // 2, d))
    return X, rng.random((n, k)) + 0.1, rng.random((k, d)) + 0.1


@pytest.mark.parametrize("solver", ["mu", "cd"])
def test_nmf_ranks_stop_and_report_as_one_process(solver, train_together):
    """Each rank's errors were its own rows' only: the stopping rule of one rank (the
    smooth half) ended the run of both at pass 20 where one process goes on to pass 30,
    with other components, and each rank's ``reconstruction_err_`` was its own share's
    (3.4 and 12.1 where the whole's is 12.6)."""
    X, W0, H0 = _noisy_half()
    kw = {"init": "custom", "max_iter": 300, "tol": 1e-2, "solver": solver}
    one = NMF(3, **kw)
    one.learner(X, W=W0, H=H0, batch_size=10).fit(progress=None)
    assert 10 < one.n_iter_ < 300

    def make(comm):
        est = NMF(3, **kw)
        Xr, Wr = shard(comm, X, W0)
        return est, est.learner(Xr, W=Wr, H=H0, batch_size=10, comm=comm)

    for part in _on_ranks(2, make, train_together):
        assert part.n_iter_ == one.n_iter_
        assert part.reconstruction_err_ == pytest.approx(one.reconstruction_err_, rel=1e-10)
        np.testing.assert_allclose(part.components_, one.components_, rtol=1e-9, atol=1e-12)


def test_nmf_online_ranks_report_the_error_of_every_row(train_together):
    X, W0, H0 = _noisy_half()
    kw = {"init": "custom", "max_iter": 5, "tol": 0.0, "method": "online", "random_state": 0}

    def make(comm):
        est = NMF(3, **kw)
        Xr, Wr = shard(comm, X, W0)
        return est, est.learner(Xr, W=Wr, H=H0, batch_size=10, comm=comm)

    parts = _on_ranks(2, make, train_together)
    assert parts[0].model_.errors == parts[1].model_.errors
    # the smooth half alone reports a far smaller error than the rows together
    assert parts[0].reconstruction_err_ > 10.0


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_sfa_ranks_report_the_training_rmse_of_every_user(feedback, train_together):
    """The items were those of one process but each rank's ``rmse_`` was its own users'
    (1.34, 1.50 and 1.62 on 3 ranks where one process reports 1.50)."""
    rng = np.random.default_rng(0)
    full = rng.standard_normal((61, 3)) @ rng.standard_normal((3, 15)) + 3
    mask = rng.random(full.shape) < 0.4
    mask[:, 0] = True
    r, c = np.nonzero(mask)
    vals = full[r, c] if feedback == "explicit" else np.ceil(np.abs(full[r, c]))
    R = sp.csr_matrix((vals, (r, c)), shape=full.shape)
    kw = {"n_components": 3, "feedback": feedback, "max_iter": 4, "random_state": 0}
    one = SFA(**kw).fit(R)

    def make(comm):
        est = SFA(**kw)
        return est, est.learner(shard(comm, R)[0], comm=comm, batch_size=7)

    for part in _on_ranks(3, make, train_together):
        np.testing.assert_allclose(part.rmse_, one.rmse_, rtol=1e-10)
        np.testing.assert_allclose(part.item_factors_, one.item_factors_, rtol=1e-9,
                                   atol=1e-12)


def test_pagerank_resumed_within_a_pass_keeps_the_pass_totals(tmp_path):
    """A checkpoint written between two blocks of a pass left out the totals the first
    blocks had added: the resumed run lost their share of the scores (they summed to 0.66
    and were 3e-3 off networkx's)."""
    A = random_graph(300, 0.02, 14, n_dangling=10)
    one = PageRank(tol=1e-10, method="power").fit(A)
    first = PageRank(tol=1e-10).learner(A, batch_size=100, max_steps=7)
    first.fit(progress=None)
    assert first.model.n_iter == 2  # stopped after the first block of the third pass
    first.save(str(tmp_path / "ck.npz"))
    again = PageRank(tol=1e-10)
    lrn = again.learner(A, batch_size=100)
    lrn.load(str(tmp_path / "ck.npz"))
    lrn.set(max_steps=None)  # the file's budget of steps is spent
    lrn.fit(progress=None)
    assert again.scores_.sum() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(again.scores_, one.scores_, rtol=1e-10, atol=1e-15)
    assert again.n_iter_ == one.n_iter_


def test_pagerank_ranks_resumed_within_a_pass_from_their_files(tmp_path, train_together):
    """The same on 2 ranks, each resuming from its own file (``ck.rank<r>.npz``)."""
    A = random_graph(300, 0.02, 14, n_dangling=10)
    one = PageRank(tol=1e-10, method="power").fit(A)
    ck = str(tmp_path / "ck.npz")

    def first(comm):
        est = PageRank(tol=1e-10)
        return est, est.learner(shard(comm, A)[0], comm=comm, batch_size=50, max_steps=7,
                                checkpoint=ck)

    _on_ranks(2, first, train_together)

    def again(comm):
        est = PageRank(tol=1e-10)
        lrn = est.learner(shard(comm, A)[0], comm=comm, batch_size=50)
        lrn.load(ck)  # its own file: ck.rank<r>.npz
        assert lrn._pos == (2, 1)  # within the third pass
        lrn.set(max_steps=None)
        return est, lrn

    for part in _on_ranks(2, again, train_together):
        np.testing.assert_allclose(part.scores_, one.scores_, rtol=1e-10, atol=1e-15)


def _sharing_one_file(size):
    """An in-process group whose ranks share one checkpoint file as MPI ranks do
    (:meth:`bidlab.distributed.MPIComm.checkpoint_file`: rank 0 writes it, all read it)."""
    group = ThreadGroup(size, timeout=60)
    for r in range(size):
        comm = group.comm(r)
        comm.shared_checkpoint = True
        comm.checkpoint_file = (lambda path, write, rank=r: path if not write or rank == 0
                                else None)
    return group


@pytest.mark.parametrize("size", [2, 3])
def test_pagerank_ranks_resumed_within_a_pass_from_one_shared_file(size, tmp_path,
                                                                   train_together):
    """Ranks sharing one file found there rank 0's share of the pass's totals and each
    added its own to it: resumed on 2 or 3 ranks, the scores summed to 1.014 and stayed
    1e-4 off networkx's."""
    A = random_graph(300, 0.02, 14, n_dangling=10)
    one = PageRank(tol=1e-10, method="power").fit(A)
    ck = str(tmp_path / "ck.npz")
    group = _sharing_one_file(2)
    made = [(est := PageRank(tol=1e-10), est.learner(shard(group.comm(r), A)[0],
                                                      comm=group.comm(r), batch_size=50,
                                                      max_steps=7, checkpoint=ck))
            for r in range(2)]
    train_together([lrn for _, lrn in made])
    assert made[0][1]._pos == (2, 1)  # the file: within the third pass
    group = _sharing_one_file(size)
    parts = []
    for r in range(size):
        est = PageRank(tol=1e-10)
        lrn = est.learner(shard(group.comm(r), A)[0], comm=group.comm(r), batch_size=50)
        lrn.load(ck)
        lrn.set(max_steps=None)
        parts.append((est, lrn))
    train_together([lrn for _, lrn in parts])
    for est, _ in parts:
        assert est.scores_.sum() == pytest.approx(1.0, rel=1e-12)
        np.testing.assert_allclose(est.scores_, one.scores_, rtol=1e-10, atol=1e-15)
        assert est.n_iter_ == one.n_iter_
        np.testing.assert_allclose(est.residuals_, one.residuals_, rtol=1e-6, atol=1e-15)


@pytest.mark.parametrize("writer", ["one process", "two ranks"])
def test_pagerank_whole_graph_learner_resumes_a_file_written_within_a_pass(writer, tmp_path,
                                                                            train_together):
    """A file written between two blocks of a pass (blocks of one process, or ranks
    sharing it), loaded into a learner of the whole graph (the in-edge engine, one block
    a pass), handed that engine the rest of the pass as a block of its own: IndexError
    'index 300 is out of bounds for axis 0 with size 251'."""
    A = random_graph(300, 0.02, 14, n_dangling=10)
    one = PageRank(tol=1e-10, method="power").fit(A)
    ck = str(tmp_path / "ck.npz")
    if writer == "one process":
        PageRank(tol=1e-10).learner(A, batch_size=100, max_steps=7,
                                    checkpoint=ck).fit(progress=None)
    else:
        group = _sharing_one_file(2)
        train_together([PageRank(tol=1e-10).learner(
            shard(group.comm(r), A)[0], comm=group.comm(r), batch_size=50, max_steps=7,
            checkpoint=ck) for r in range(2)])
    est = PageRank(tol=1e-10)
    lrn = est.learner(A).load(ck)
    assert lrn._pos[1] > 0 and est.model_.pull  # within a pass, on the in-edge engine
    lrn.set(max_steps=None)
    lrn.fit(progress=None)
    assert est.converged_ and est.scores_.sum() == pytest.approx(1.0, rel=1e-12)
    # within the bound of tol on both: d / (1 - d) * tol * n in L1
    assert np.abs(est.scores_ - one.scores_).sum() < 2 * 0.85 / 0.15 * 1e-10 * 300


def test_sfa_ranks_gather_their_users_for_a_saved_recommender(tmp_path, train_together):
    """``bidlab train sfa --ranks 2 --save PATH`` saved rank 0's estimator, which held
    rank 0's users only: the saved model said 'user id 45 is out of range: the model has
    30 users' for a user of rank 1. Gathered, every rank's estimator answers as one
    process's for every user."""
    import threading

    from bidlab.models import load

    R = low_rank_ratings(1, 61, 3, 15, 0.4)
    kw = {"n_components": 3, "max_iter": 4, "random_state": 0}
    one = SFA(**kw).fit(R)
    group, made = sfa_on_ranks(R, kw, 3, 7, train_together)
    threads = [threading.Thread(target=made[k][0].gather_ranks, args=(group.comm(k),))
               for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    made[0][0].save(tmp_path / "sfa.bidlab")
    for est in (made[2][0], load(tmp_path / "sfa.bidlab")):
        assert est.n_users_ == 61
        assert (est.train_ != R).nnz == 0
        np.testing.assert_allclose(est.user_factors_, one.user_factors_, rtol=1e-9,
                                   atol=1e-12)
        for user in (0, 45, 60):
            got, want = est.recommend(user, n=4), one.recommend(user, n=4)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_allclose(got[1], want[1], rtol=1e-9)


@needs_mpi
def test_bidlab_train_sfa_on_ranks_saves_every_user(tmp_path):
    """The shell's way to the same: the model saved by ``--ranks 2`` held 30 of 60 users."""
    from bidlab.models import load

    rng = np.random.default_rng(0)
    lines = ["userId,movieId,rating,timestamp"]
    for u in range(60):
        lines += [f"{u + 1},{j * 10},{rng.integers(1, 6)},{1000 + 12 * u + p}"
                  for p, j in enumerate(rng.choice(40, 12, replace=False))]
    (tmp_path / "ratings.csv").write_text("\n".join(lines) + "\n")
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "bidlab.cli", "train", "sfa", "--ranks", "2", "--data",
         str(tmp_path / "ratings.csv"), "--n_components", "3", "--max_iter", "3",
         "--save", str(tmp_path / "sfa.bidlab"), "--progress", "none"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    est = load(tmp_path / "sfa.bidlab")
    assert est.n_users_ == 60 and est.train_.nnz == 720
    assert len(est.recommend(45, n=3)[0]) == 3  # a user of rank 1
