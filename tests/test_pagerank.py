"""PageRank (bidlab.models.PageRank) against an independent power iteration, on the Learner.

networkx is not a dependency, so the oracle below is networkx's scipy PageRank written
out: ``x = d (x P + sum(x[dangling]) u) + (1 - d) p`` from ``x = 1/n``, stopping when the
L1 change is below ``n * tol``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

import bidlab as bl
from bidlab.datasets.graphs import load_snap_edges
from bidlab.learn.comm import ThreadGroup
from bidlab.mat import SMat
from bidlab.models import PageRank
from bidlab.models.graph.transition import transition

SNAP = {"ca-grqc": "snap-ca-grqc/ca-GrQc.txt",
        "email-eu-core": "snap-email-eu-core/email-Eu-core.txt.gz",
        "wiki-vote": "snap-wiki-vote/wiki-Vote.txt"}


def oracle(A, d=0.85, tol=1e-10, max_iter=1000, p=None, u=None):
    """networkx.pagerank's iteration (its scipy form) on a scipy adjacency matrix."""
    A = sp.csr_matrix(A, dtype=np.float64)
    A.sum_duplicates()
    n = A.shape[0]
    out = np.asarray(A.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros(n), where=out != 0)
    P = sp.diags(inv) @ A
    p = np.full(n, 1.0 / n) if p is None else np.asarray(p, float) / np.sum(p)
    u = p if u is None else np.asarray(u, float) / np.sum(u)
    dangling = out == 0
    x = np.full(n, 1.0 / n)
    for it in range(max_iter):
        last = x
        x = d * (last @ P + last[dangling].sum() * u) + (1 - d) * p
        if np.abs(x - last).sum() < n * tol:
            return x, it + 1
    raise AssertionError("the oracle did not converge")


def random_graph(n, density, seed, n_dangling=0, loops=True):
    rng = np.random.default_rng(seed)
    A = sp.random(n, n, density=density, format="lil", random_state=rng,
                  data_rvs=lambda k: rng.integers(1, 5, k).astype(float))
    for i in rng.choice(n, n_dangling, replace=False):
        A[i, :] = 0
    if not loops:
        A.setdiag(0)
    A = sp.csr_matrix(A)
    A.eliminate_zeros()
    return A


# ------------------------------------------------------------------------ against the oracle
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_equal_the_power_iteration_oracle_with_dangling_vertices(seed):
    A = random_graph(80, 0.04, seed, n_dangling=10)
    assert (np.diff(A.indptr) == 0).sum() >= 10
    pr = PageRank(tol=1e-10, method="power").fit(A)
    x, it = oracle(A)
    assert np.abs(pr.scores_ - x).sum() <= 1e-6
    assert pr.n_iter_ == it and pr.converged_
    assert abs(pr.scores_.sum() - 1) < 1e-12
    assert pr.residuals_.shape == (it,) and pr.residuals_[-1] < 80 * 1e-10
    assert (pr.residuals_[:-1] >= 80 * 1e-10).all()


def test_personalization_and_dangling_weights_as_arrays_and_dicts():
    A = random_graph(50, 0.06, 3, n_dangling=6)
    rng = np.random.default_rng(4)
    p, u = rng.random(50), rng.random(50)
    pr = PageRank(damping=0.7, tol=1e-10, personalization=p, dangling=u).fit(A)
    x, _ = oracle(A, d=0.7, p=p, u=u)
    assert np.abs(pr.scores_ - x).sum() <= 1e-6
    # a dict names some vertices (the others weigh 0); dangling follows it when not given
    pd = {0: 1.0, 7: 3.0, 49: 2.0}
    dense = np.zeros(50)
    dense[[0, 7, 49]] = [1.0, 3.0, 2.0]
    pr = PageRank(tol=1e-10, personalization=pd).fit(A)
    x, _ = oracle(A, p=dense)
    assert np.abs(pr.scores_ - x).sum() <= 1e-6
    assert np.abs(pr.scores_ - oracle(A)[0]).sum() > 0.1  # personalisation did change it


def test_blocks_of_rows_give_the_scores_of_one_block():
    A = random_graph(90, 0.05, 5, n_dangling=8)
    whole = PageRank(tol=1e-10, method="power").fit(A)
    est = PageRank(tol=1e-10)
    lrn = est.learner(A, batch_size=20)  # 5 blocks per pass, the last one short
    lrn.fit(progress=None)
    np.testing.assert_allclose(est.scores_, whole.scores_, rtol=1e-12, atol=1e-15)
    assert est.n_iter_ == whole.n_iter_


@pytest.mark.parametrize("name", list(SNAP))
def test_snap_graphs_match_the_oracle(shared_data, name):
    g = load_snap_edges(shared_data / SNAP[name])
    pr = PageRank(tol=1e-10, method="power").fit(g.A)
    x, it = oracle(g.A)
    assert np.abs(pr.scores_ - x).sum() <= 1e-6, name
    assert pr.n_iter_ == it
    top = pr.top(3, labels=g.ids)
    assert top[0][0] == g.ids[int(np.argmax(x))] and top[0][1] == pytest.approx(x.max())


def test_snap_loader_sizes_and_id_map(shared_data):
    g = load_snap_edges(shared_data / SNAP["ca-grqc"])
    assert (g.n_nodes, g.n_edges) == (5242, 28980)
    assert g.ids[0] == 13 and g.ids[-1] == 26196
    assert (g.A != g.A.T).nnz == 0  # every undirected edge listed both ways
    e = load_snap_edges(shared_data / SNAP["email-eu-core"])
    assert (e.n_nodes, e.n_edges) == (1005, 25571) and e.A.diagonal().astype(bool).sum() == 642
    w = load_snap_edges(shared_data / SNAP["wiki-vote"])
    assert w.n_nodes == 7115


# ------------------------------------------------------------------------ graphs and input
def test_undirected_graphs_each_stored_edge_is_both_directions():
    A = sp.triu(random_graph(40, 0.1, 6), format="csr")  # each edge stored once
    sym = A.maximum(A.T).tocsr()
    pr = PageRank(tol=1e-10, directed=False).fit(A)
    assert np.abs(pr.scores_ - oracle(sym)[0]).sum() <= 1e-6
    # a symmetric input is the same graph either way
    both = PageRank(tol=1e-10, directed=False).fit(sym)
    np.testing.assert_allclose(both.scores_, pr.scores_, atol=1e-15)
    assert np.abs(PageRank(tol=1e-10).fit(A).scores_ - pr.scores_).sum() > 0.01


def test_duplicate_edges_are_summed_and_self_loops_kept():
    rows, cols = [0, 0, 0, 1, 2, 2, 3], [1, 1, 2, 1, 0, 3, 3]  # 0->1 twice, 1->1, 3->3
    A = sp.coo_matrix((np.ones(7), (rows, cols)), shape=(5, 5))  # 4 is dangling
    summed = sp.csr_matrix(A)  # scipy sums duplicates on conversion
    assert summed[0, 1] == 2 and summed[1, 1] == 1
    pr = PageRank(tol=1e-10).fit(A)
    assert np.abs(pr.scores_ - oracle(summed)[0]).sum() <= 1e-6
    # a non-canonical CSR (duplicates stored apart) means the same
    raw = sp.csr_matrix((np.ones(7), np.array(cols), np.array([0, 3, 4, 6, 7, 7])),
                        shape=(5, 5))
    assert not raw.has_canonical_format
    np.testing.assert_allclose(PageRank(tol=1e-10).fit(raw).scores_, pr.scores_, atol=1e-15)
    # the self-loop counts: without it vertex 1 is dangling and ranks differently
    no_loop = summed.tolil()
    no_loop[1, 1] = 0
    no_loop = sp.csr_matrix(no_loop)
    no_loop.eliminate_zeros()
    assert np.abs(pr.scores_ - oracle(no_loop)[0]).sum() > 0.01


def test_inputs_dense_smat_edge_list_and_csr_taken_as_is(tmp_path):
    A = random_graph(30, 0.1, 7, n_dangling=3)
    ref = PageRank(tol=1e-10).fit(A).scores_
    for G in (A.toarray(), SMat(A), A.tocoo(), A.tocsc()):
        np.testing.assert_allclose(PageRank(tol=1e-10).fit(G).scores_, ref, atol=1e-14)
    est = PageRank()
    lrn = est.learner(A)
    S = lrn.source.next().mats[0].csr
    # the in-edge engine ranks A itself, not a copy
    assert np.shares_memory(S.indices, A.indices) and np.shares_memory(S.data, A.data)
    assert lrn.source.next() is not None and lrn.source.next().mats[0].csr.indices is S.indices
    P, _ = transition(A)  # blocks of rows hold the transition, on A's structure
    assert np.shares_memory(P.indices, A.indices)
    np.testing.assert_allclose(np.asarray(P.sum(axis=1)).ravel()[np.diff(A.indptr) > 0], 1.0)


def test_float32_scores():
    A = random_graph(60, 0.05, 8, n_dangling=4)
    pr = PageRank(tol=1e-6, dtype=np.float32).fit(A)
    assert pr.model_.modelmats[0].dtype == np.float32
    assert np.abs(pr.scores_ - oracle(A)[0]).sum() < 1e-4


def test_max_iter_keeps_the_scores_and_warns():
    A = random_graph(60, 0.05, 9)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        pr = PageRank(tol=1e-14, max_iter=5).fit(A)
    assert pr.n_iter_ == 5 and not pr.converged_ and pr.residuals_.shape == (5,)
    assert abs(pr.scores_.sum() - 1) < 1e-12


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("G, match", [
    (sp.csr_matrix((3, 4)), "must be square"),
    (sp.csr_matrix((0, 0)), "empty"),
    (np.ones(5), "2-D adjacency"),
    (sp.csr_matrix(np.array([[0.0, 1.0], [-2.0, 0.0]])), r"negative weights \(first: edge 1 -> 0"),
    (sp.csr_matrix(np.array([[0.0, np.nan], [1.0, 0.0]])), "NaN or infinite"),
    (np.array([["a", "b"], ["c", "d"]]), "must be numbers"),
])
def test_bad_graphs_are_refused_with_the_fix(G, match):
    with pytest.raises((ValueError, TypeError), match=match):
        PageRank().fit(G)


@pytest.mark.parametrize("params, match", [
    ({"damping": 0.0}, r"'damping' parameter of PageRank must be a float in \(0, 1\). Got 0"),
    ({"damping": 1.0}, "'damping' parameter"),
    ({"damping": 1.5}, "'damping' parameter"),
    ({"tol": -1.0}, "'tol' parameter"),
    ({"max_iter": 0}, "'max_iter' parameter"),
    ({"personalization": {0: 1.0, 9: 1.0}}, "names vertex 9, out of range for a graph of 4"),
    ({"personalization": {-1: 1.0}}, "names vertex -1, out of range"),
    ({"personalization": np.ones(3)}, "has 3 entries but the graph has 4 vertices"),
    ({"personalization": np.zeros(4)}, "all 0"),
    ({"dangling": np.array([1.0, -1.0, 0.0, 0.0])}, "finite and >= 0"),
])
def test_bad_parameters_are_refused_with_the_fix(params, match):
    A = random_graph(4, 0.5, 1)
    with pytest.raises(ValueError, match=match):
        PageRank(**params).fit(A)


def test_a_graph_without_edges_ranks_by_the_teleport_weights():
    A = sp.csr_matrix((6, 6))
    pr = PageRank(tol=1e-10).fit(A)
    np.testing.assert_allclose(pr.scores_, 1 / 6)
    p = np.arange(1.0, 7.0)
    np.testing.assert_allclose(PageRank(tol=1e-10, personalization=p).fit(A).scores_,
                               p / p.sum(), atol=1e-12)


# ------------------------------------------------------------------------ the live learner
def test_live_learner_pauses_resumes_and_records_one_residual_per_iteration():
    A = random_graph(3000, 0.002, 10, n_dangling=100)
    for _ in range(5):  # a run of milliseconds: on a busy machine it may end before the
        est = PageRank(tol=1e-12)  # pause lands (then it is tried again)
        lrn = est.learner(A)
        lrn.start()
        lrn.pause(wait=True)
        if lrn.state != "done":
            break
    assert lrn.state == "paused"
    paused_at = lrn.step
    threading.Event().wait(0.05)
    assert lrn.step == paused_at
    lrn.resume()
    assert lrn.join(timeout=120)
    assert lrn.state == "done" and est.converged_
    h = lrn.history()["score"]
    # pass 0 has no change to report yet; pass t reports iteration t's; the last pass
    # only measures the last change
    assert np.isnan(h[0]) and h.shape == (est.n_iter_ + 1,)
    np.testing.assert_allclose(h[1:], est.residuals_)
    assert np.abs(est.scores_ - oracle(A, tol=1e-12)[0]).sum() <= 1e-6


def test_a_checkpointed_run_resumes_to_the_same_scores(tmp_path):
    A = random_graph(500, 0.01, 18, n_dangling=40)
    whole = PageRank(tol=1e-10).fit(A)
    ck = str(tmp_path / "pr.ckpt")
    first = PageRank(tol=1e-10).learner(A, n_passes=6, checkpoint=ck)
    first.fit(progress=None)
    est = PageRank(tol=1e-10)
    lrn = est.learner(A)
    lrn.load(ck)  # the checkpoint's options come back too: n_passes 6
    lrn.set(n_passes=101)
    lrn.fit(progress=None)
    np.testing.assert_allclose(est.scores_, whole.scores_, rtol=1e-12, atol=1e-15)
    assert est.n_iter_ == whole.n_iter_ and est.converged_
    np.testing.assert_allclose(est.residuals_[5:], whole.residuals_[5:], rtol=1e-9)


def test_two_ranks_each_on_half_the_rows_give_the_scores_of_one_learner(train_together):
    A = random_graph(400, 0.01, 11, n_dangling=30)
    p = np.random.default_rng(12).random(400)
    one = PageRank(tol=1e-10, personalization=p, method="power").fit(A)
    group = ThreadGroup(2, timeout=60)
    halves = [PageRank(tol=1e-10, personalization=p) for _ in range(2)]
    learners = [halves[0].learner(A[:200], first_row=0, comm=group.comm(0)),
                halves[1].learner(A[200:], first_row=200, comm=group.comm(1))]
    train_together(learners)
    for h in halves:
        np.testing.assert_allclose(h.scores_, one.scores_, rtol=1e-12, atol=1e-15)
        assert h.n_iter_ == one.n_iter_
    with pytest.raises(ValueError, match="outside the graph"):
        PageRank().learner(A[:200], first_row=300)


def test_ranks_given_their_shares_find_their_first_rows(train_together):
    """Without ``first_row`` a rank's block is its contiguous share of the rows, as
    ``bidlab.distributed.shard`` cuts them (``bidlab train pagerank --ranks N``)."""
    from bidlab.distributed.sharding import shard

    A = random_graph(301, 0.02, 14, n_dangling=10)
    one = PageRank(tol=1e-10, method="power").fit(A)
    group = ThreadGroup(3, timeout=60)
    parts = [PageRank(tol=1e-10) for _ in range(3)]
    train_together([p.learner(shard(group.comm(r), A)[0], comm=group.comm(r))
                    for r, p in enumerate(parts)])
    for p in parts:
        np.testing.assert_allclose(p.scores_, one.scores_, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="not its contiguous share.*first_row="):
        PageRank().learner(A[:50], comm=ThreadGroup(3).comm(1))
    with pytest.raises(ValueError, match="not its contiguous share"):
        PageRank().learner(A, comm=ThreadGroup(2).comm(0))  # every rank the whole graph


@pytest.mark.parametrize("method", ["power", "gauss-seidel"])
def test_iterations_allocate_nothing_after_the_first(traced_allocations, method):
    n = 20_000
    A = random_graph(n, 5 / n, 13, n_dangling=500)
    est = PageRank(tol=0.0, max_iter=1000, method=method)
    lrn = est.learner(A, n_passes=2)
    lrn.fit(progress=None)
    lrn.set(n_passes=12)
    before = bl.cache_stats()["allocations"]
    with traced_allocations() as trace:
        lrn.fit(progress=None)
    assert est.n_iter_ == 11
    assert bl.cache_stats()["allocations"] == before
    assert trace.peak_bytes < n * 8 // 4, trace  # well below one score vector


@pytest.mark.parametrize("method", ["power", "gauss-seidel"])
def test_iterations_grouped_in_passes_give_the_same_scores_and_residuals(method):
    from bidlab.learn import Learner
    from bidlab.learn.blocks import BlockSource
    from bidlab.models.graph.model import PageRankModel

    A = random_graph(300, 0.02, 8, n_dangling=20)
    n, runs = A.shape[0], {}
    for seconds in (0.0, 60.0):  # one iteration a pass; all of them in the first pass
        model = PageRankModel(n, pull=True, gauss_seidel=method == "gauss-seidel",
                              pass_seconds=seconds, tol=1e-10, max_iter=500)
        lrn = Learner(model, BlockSource(A, batch_size=n, names=("A",)), n_passes=501)
        lrn.fit(progress=None)
        runs[seconds] = (lrn.step, model.n_iter, model.residuals[: model.n_iter].copy(),
                         model.modelmats[0].numpy().ravel().copy())
    (steps1, it1, res1, x1), (steps2, it2, res2, x2) = runs[0.0], runs[60.0]
    assert it1 == it2 > 10 and steps1 == it1 + 1 and steps2 == 1
    np.testing.assert_array_equal(res2, res1)
    np.testing.assert_array_equal(x2, x1)
    fitted = PageRank(tol=1e-10, max_iter=500, method=method).fit(A)  # grouped
    np.testing.assert_array_equal(fitted.scores_, x1)
    np.testing.assert_array_equal(fitted.residuals_, res1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_in_edge_lists_are_the_csc_and_the_row_sums_compiled_or_not(dtype):
    from bidlab.kern import standin
    from bidlab.kern.pagerank import in_edges

    for weighted, A in ((True, random_graph(400, 0.02, 5, n_dangling=30)),
                        (False, (random_graph(300, 0.03, 6, n_dangling=10) > 0).astype(float))):
        A = sp.csr_matrix(A, dtype=dtype)
        C = A.tocsc()
        runs = standin.runs()
        for forced in (False, True):
            if forced:
                with standin.forced():
                    got = in_edges(A.indptr, A.indices, A.data, A.shape[0])
                assert standin.runs() > runs, "the stand-in did not run"
            else:
                got = in_edges(A.indptr, A.indices, A.data, A.shape[0])
            in_ptr, in_src, in_w, out_w = got
            np.testing.assert_array_equal(in_ptr, C.indptr)
            np.testing.assert_array_equal(in_src, C.indices)
            if weighted:
                np.testing.assert_array_equal(in_w, C.data)
            else:
                assert in_w.size == 0  # every weight 1: the kernel reads no weights
            np.testing.assert_allclose(out_w, np.asarray(A.sum(axis=1)).ravel(), rtol=1e-6)
            assert out_w.dtype == np.float64
