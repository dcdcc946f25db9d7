"""PageRank by Gauss-Seidel sweeps (bidlab.kern.pagerank_gs and the in-edge engine's
``method="gauss-seidel"``) against the power iteration (networkx's, the oracle of
test_pagerank).

The sweeps converge to the power iteration's fixed point; the run stops where the result is
within the power iteration's own error bound (``d / (1 - d) * tol * n`` in L1), checked
here against a reference solved far tighter than that.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_pagerank import SNAP, oracle, random_graph

from bidlab.datasets.graphs import load_snap_edges
from bidlab.kern import standin
from bidlab.kern.pagerank import in_edges
from bidlab.kern.pagerank_gs import gauss_seidel_sweep, own_weights
from bidlab.models import PageRank
from bidlab.models.graph.estimator import GAUSS_SEIDEL_EDGES, sweeps

D = 0.85


def bound(tol, n, d=D):
    """The power iteration's L1 error bound at its stopping rule."""
    return d / (1 - d) * tol * n


def loops_and_dangling(n=120, seed=21):
    """A weighted graph with self-loops on some vertices and a tenth of them dangling."""
    A = random_graph(n, 0.05, seed, n_dangling=n // 10).tolil()
    rng = np.random.default_rng(seed)
    for i in rng.choice(np.flatnonzero(np.asarray(A.sum(axis=1)).ravel() > 0), n // 8,
                        replace=False):
        A[i, i] = float(rng.integers(1, 4))
    A = sp.csr_matrix(A)
    assert A.diagonal().astype(bool).sum() >= n // 8
    assert (np.diff(A.indptr) == 0).sum() >= n // 10
    return A


ARGS = ("in_ptr", "in_src", "in_w", "inv", "own", "x", "y", "d", "dangling", "total", "u",
        "p")


def sweep_inputs(A, dtype=np.float64, d=D, seed=0, uniform=False):
    """The sweep's arguments (by name, in :data:`ARGS` order) for the adjacency ``A`` at
    random scores summing to 1, with random teleport and dangling distributions (networkx's
    uniform ones with ``uniform``)."""
    n = A.shape[0]
    rng = np.random.default_rng(seed)
    a = dict(zip(("in_ptr", "in_src", "in_w"), in_edges(A.indptr, A.indices, A.data, n),
                 strict=False))
    out_w = np.asarray(A.sum(axis=1), dtype=np.float64).ravel()
    a["inv"] = inv = np.divide(1.0, out_w, out=np.zeros(n), where=out_w != 0)
    u, p = (np.ones(n), np.ones(n)) if uniform else (rng.random(n), rng.random(n))
    a["u"], a["p"] = (u / u.sum()).astype(dtype), (p / p.sum()).astype(dtype)
    a["own"] = own_weights(A, inv, u / u.sum(), p / p.sum(), d)
    a["d"] = d
    set_scores(a, (lambda x: x / x.sum())(rng.random(n)).astype(dtype))
    return a


def set_scores(a, x):
    """The scores ``x`` and what the sweep keeps with them."""
    a["x"], a["y"] = x, x * a["inv"]
    a["dangling"], a["total"] = float(x[a["inv"] == 0].sum()), float(x.sum())


def sweep(a):
    """One sweep; the dangling mass and the total carried into ``a``; returns the change."""
    a["dangling"], a["total"], change = gauss_seidel_sweep(*(a[k] for k in ARGS))
    return change


# ------------------------------------------------------------------------ the kernel
@pytest.mark.parametrize("weighted", [True, False])
def test_sweep_compiled_equals_its_python_form_and_keeps_y_in_step(weighted):
    A = loops_and_dangling()
    if not weighted:
        A = (A > 0).astype(float)
    start = sweep_inputs(A)
    assert (start["in_w"].size > 0) == weighted
    got = {}
    for forced in (False, True):
        a = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in start.items()}
        runs = standin.runs()
        if forced:
            with standin.forced():
                change = sweep(a)
            assert standin.runs() > runs, "the Python form did not run"
        else:
            change = sweep(a)
        x, inv = a["x"], a["inv"]
        np.testing.assert_array_equal(a["y"], x * inv)
        assert a["total"] == pytest.approx(x.sum(), rel=1e-14)
        assert a["dangling"] == pytest.approx(x[inv == 0].sum(), rel=1e-14)
        assert change == pytest.approx(np.abs(x - start["x"]).sum(), rel=1e-12)
        got[forced] = (x, a["dangling"], a["total"], change)
    np.testing.assert_allclose(got[True][0], got[False][0], rtol=1e-13, atol=0)
    np.testing.assert_allclose(got[True][1:], got[False][1:], rtol=1e-12)


def test_sweep_solves_each_vertex_from_the_newest_values():
    """Vertex by vertex, the swept value satisfies its own equation with the values
    written before it (earlier vertices new, later ones old, itself new)."""
    A = loops_and_dangling(60, 3)
    a = sweep_inputs(A, seed=4)
    old = a["x"].copy()
    sweep(a)
    new, n = a["x"], A.shape[0]
    out = np.asarray(A.sum(axis=1)).ravel()
    dang = out == 0
    P = (sp.diags(np.divide(1.0, out, out=np.zeros(n), where=~dang)) @ A).tocsc()
    for j in range(n):
        z = np.concatenate([new[: j + 1], old[j + 1:]])  # the values vertex j saw
        rhs = (D * (P[:, j].toarray().ravel() @ z + z[dang].sum() * a["u"][j])
               + (1 - D) * z.sum() * a["p"][j])
        assert new[j] == pytest.approx(rhs, rel=1e-12, abs=1e-15), j


def test_the_exact_scores_are_the_sweeps_fixed_point_and_the_change_bounds_the_error():
    A = loops_and_dangling(200, 5)
    x_star = oracle(A, tol=1e-15)[0]
    a = sweep_inputs(A, uniform=True)  # networkx's teleport and dangling weights
    set_scores(a, x_star.copy())
    assert sweep(a) < 1e-13 and a["total"] == pytest.approx(1.0, abs=1e-14)
    # from the uniform start: after each sweep the scores scaled to sum 1 are within
    # change / (total * (1 - d)) of the solution
    set_scores(a, np.full(A.shape[0], 1.0 / A.shape[0]))
    for _ in range(30):
        change = sweep(a)
        err = np.abs(a["x"] / a["total"] - x_star).sum()
        assert err <= change / (a["total"] * (1 - D)) + 1e-13


# ------------------------------------------------------------------------ the engine
@pytest.mark.parametrize("graph", ["loops-and-dangling", "no-edges", "cycle"])
def test_gauss_seidel_scores_meet_the_power_iterations_bound(graph):
    A = {"loops-and-dangling": loops_and_dangling(300, 8), "no-edges": sp.csr_matrix((7, 7)),
         "cycle": sp.csr_matrix((np.ones(5), ([0, 1, 2, 3, 4], [1, 2, 3, 4, 0])),
                                shape=(5, 5))}[graph]
    n = A.shape[0]
    ref = oracle(A, tol=1e-15)[0]
    for tol in (1e-6, 1e-8, 1e-10):
        gs = PageRank(tol=tol, method="gauss-seidel").fit(A)
        assert gs.model_.sweeping and gs.converged_
        assert np.abs(gs.scores_ - ref).sum() <= bound(tol, n), (graph, tol)
        assert abs(gs.scores_.sum() - 1) < 1e-12
        power = PageRank(tol=tol, method="power").fit(A)
        assert not power.model_.sweeping
        assert gs.n_iter_ <= power.n_iter_


def test_gauss_seidel_with_personalization_dangling_weights_and_float32():
    A = loops_and_dangling(150, 9)
    rng = np.random.default_rng(10)
    p, u = rng.random(150), rng.random(150)
    ref = oracle(A, d=0.7, tol=1e-15, p=p, u=u)[0]
    gs = PageRank(damping=0.7, tol=1e-9, personalization=p, dangling=u,
                  method="gauss-seidel").fit(A)
    assert np.abs(gs.scores_ - ref).sum() <= bound(1e-9, 150, 0.7)
    f32 = PageRank(tol=1e-6, dtype=np.float32, method="gauss-seidel").fit(A)
    assert f32.model_.modelmats[0].dtype == np.float32
    assert np.abs(f32.scores_ - oracle(A, tol=1e-15)[0]).sum() < 1e-4


@pytest.mark.parametrize("case", ["one vertex", "one self-loop", "teleport to a sink",
                                  "teleport to a self-loop"])
def test_a_vertex_that_keeps_all_its_mass_absorbs_what_flows_in(case):
    """Its own coefficient is 1 (all its out-weight returns to it and all the teleport
    lands on it): its equation cannot be solved for it, and it takes the power step."""
    chain = sp.csr_matrix(([1.0, 1.0], ([0, 1], [1, 2])), shape=(3, 3))
    looped = sp.csr_matrix(([1.0, 1.0, 1.0], ([0, 1, 2], [1, 2, 2])), shape=(3, 3))
    A, p = {"one vertex": (sp.csr_matrix((1, 1)), None),
            "one self-loop": (sp.csr_matrix(np.ones((1, 1))), None),
            "teleport to a sink": (chain, {2: 1.0}),
            "teleport to a self-loop": (looped, {2: 1.0})}[case]
    gs = PageRank(personalization=p, method="gauss-seidel", tol=1e-12).fit(A)
    power = PageRank(personalization=p, method="power", tol=1e-12).fit(A)
    np.testing.assert_allclose(gs.scores_, power.scores_, atol=1e-12)
    assert gs.scores_[-1] == pytest.approx(1.0)


@pytest.mark.parametrize("name", list(SNAP))
def test_snap_graphs_by_gauss_seidel_match_the_reference_in_fewer_iterations(shared_data,
                                                                           name):
    g = load_snap_edges(shared_data / SNAP[name])
    n = g.A.shape[0]
    ref = oracle(g.A, tol=1e-14)[0]  # networkx's iteration, to an L1 change of 1e-14 n
    tol = 1e-7 / n  # the benchmark's rule: stop at an L1 change of 1e-7
    gs = PageRank(tol=tol, max_iter=1000).fit(g.A)  # "auto": a small graph is swept
    assert gs.model_.sweeping
    assert np.abs(gs.scores_ - ref).sum() <= min(1e-6, bound(tol, n)), name
    power = PageRank(tol=tol, max_iter=1000, method="power").fit(g.A)
    assert gs.n_iter_ < power.n_iter_
    assert [v for v, _ in gs.top(5)] == [v for v, _ in power.top(5)]


def test_auto_sweeps_small_graphs_only_and_gauss_seidel_needs_the_whole_graph():
    assert sweeps("auto", GAUSS_SEIDEL_EDGES) and not sweeps("auto", GAUSS_SEIDEL_EDGES + 1)
    assert sweeps("gauss-seidel", 10**9) and not sweeps("power", 1)
    A = random_graph(40, 0.1, 2)
    assert PageRank().fit(A).model_.sweeping
    est = PageRank()
    est.learner(A, batch_size=10)  # blocks of rows: the transition's power iteration
    assert not est.model_.gauss_seidel
    with pytest.raises(ValueError, match="method='gauss-seidel' ranks the whole graph"):
        PageRank(method="gauss-seidel").learner(A, batch_size=10)
    with pytest.raises(ValueError, match="'method' parameter"):
        PageRank(method="jacobi").fit(A)
