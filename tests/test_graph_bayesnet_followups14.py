"""PageRank and BayesNet as users call them: a ``max_iter`` set high "to be safe", evidence
that is possible but rare, and an undirected graph read from a SNAP edge list held against
networkx's rule (duplicates collapse to one edge of weight 1)."""

from __future__ import annotations

import sys
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from bayesnet_exact import exact_marginals as _brute

from bidlab.datasets.graphs import load_snap_edges
from bidlab.learn.checkpoint import load_checkpoint, save_checkpoint
from bidlab.models import BayesNet, PageRank
from bidlab.models.bayesnet import BayesNetError, Network


def _ring(n=300):
    """A ring with one chord: the power iteration takes ~2000 iterations at damping 0.99."""
    r = np.arange(n)
    return sp.csr_matrix((np.ones(n + 1), (np.r_[r, 0], np.r_[(r + 1) % n, n // 2])),
                         shape=(n, n))


_SMALL = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 0.0]]))


@pytest.mark.parametrize("max_iter", [10**8, 2**31, sys.maxsize])
@pytest.mark.parametrize("method", ["power", "gauss-seidel"])
def test_a_huge_max_iter_costs_only_the_iterations_run(max_iter, method):
    """max_iter=2**31 was refused (n_passes above the learner's 10**9), sys.maxsize failed
    with numpy's 'array is too big', and 10**8 reserved 800 MB for a 4-vertex graph."""
    want = PageRank(tol=1e-12, method=method).fit(_SMALL)
    PageRank(tol=1e-12, max_iter=max_iter, method=method).fit(_SMALL)  # warmed up
    tracemalloc.start()
    try:
        got = PageRank(tol=1e-12, max_iter=max_iter, method=method).fit(_SMALL)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak
    assert got.converged_ and got.n_iter_ == want.n_iter_
    np.testing.assert_array_equal(got.residuals_, want.residuals_)
    np.testing.assert_array_equal(got.scores_, want.scores_)


def test_the_residuals_grow_past_their_first_length_as_before():
    """A run of hundreds of iterations records every change, one learner pass each."""
    G = _ring()
    est = PageRank(damping=0.99, tol=1e-14, max_iter=5000, method="power")
    lrn = est.learner(G)
    lrn.fit(progress=None)
    res = est.residuals_
    assert est.converged_ and res.shape == (est.n_iter_,) and est.n_iter_ > 1000
    assert np.isfinite(res).all() and (res >= 0).all()
    hist = lrn.history()["score"]
    np.testing.assert_array_equal(res, hist[1:])
    capped = PageRank(damping=0.99, tol=1e-14, max_iter=150, method="power")
    with pytest.warns(Warning, match="max_iter=150"):
        capped.fit(G)
    assert capped.n_iter_ == 150 and capped.model_.residuals.shape == (150,)
    np.testing.assert_array_equal(capped.residuals_, res[:150])


@pytest.mark.parametrize("old_file", [False, True])
def test_a_checkpoint_resumes_its_changes_whatever_their_length(tmp_path, old_file):
    """Files of earlier versions kept the changes max_iter long; new ones as long as run."""
    G = _ring()
    whole = PageRank(damping=0.99, tol=1e-13, max_iter=5000, method="power").fit(G)
    ck = str(tmp_path / "pr.ckpt")
    PageRank(damping=0.99, tol=1e-13, max_iter=5000, method="power").learner(
        G, n_passes=100, checkpoint=ck).fit(progress=None)
    saved = load_checkpoint(ck)
    res = saved.arrays["model_extra/residuals"]
    assert res.shape == (1, 128)  # 64 doubled: what the run needed
    if old_file:
        full = np.full((1, 5000), np.nan)
        full[:, :128] = res
        saved.arrays["model_extra/residuals"] = full
        save_checkpoint(ck, saved.arrays, saved.meta)
    est = PageRank(damping=0.99, tol=1e-13, max_iter=5000, method="power")
    lrn = est.learner(G)
    lrn.load(ck)
    lrn.set(n_passes=5001)
    lrn.fit(progress=None)
    assert est.converged_ and est.n_iter_ == whole.n_iter_
    np.testing.assert_allclose(est.residuals_, whole.residuals_, rtol=1e-9)
    np.testing.assert_allclose(est.scores_, whole.scores_, rtol=1e-12)


def _rare_causes(p1: float = 1e-6, p2: float = 3e-6) -> Network:
    """``alarm`` is possible only through one of two rare causes (zeros in its table);
    single-site Gibbs cannot move between the causes, so the chains' start decides."""
    yn = ["no", "yes"]
    return Network(
        ["quake", "fire", "alarm", "call", "noise"], [yn] * 5, [[], [], [0, 1], [2, 4], []],
        [np.array([[1 - p1, p1]]), np.array([[1 - p2, p2]]),
         np.array([[1.0, 0.0], [0.5, 0.5], [0.1, 0.9], [0.05, 0.95]]),
         np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]]),
         np.array([[0.7, 0.3]])])


@pytest.mark.parametrize(("ev", "chains"), [
    ({"alarm": "yes"}, 200), ({"alarm": "yes"}, 2000), ({"alarm": "yes", "call": "no"}, 2000),
    ({"call": "yes", "alarm": "yes", "noise": "yes"}, 2000)])
def test_possible_but_rare_evidence_gives_the_exact_marginals(ev, chains):
    """Evidence of probability ~1e-6 was refused as 'probability zero ... or too small;
    raise init_tries' (200 chains: no ancestral draw agreed with it), or (2000 chains: a
    few of 2 million did) every chain started in the one mode those few were in."""
    net = _rare_causes()
    bn = BayesNet(net, n_chains=chains, n_samples=100, burn_in=10, random_state=3)
    bn.infer(ev)
    exact = _brute(net, {net.index(k): net.state_index(net.index(k), s)
                         for k, s in ev.items()})
    assert exact[0][1] > 0.2 and exact[1][1] > 0.2  # two modes, each a good share
    for v in range(net.n_vars):
        assert np.abs(bn.marginals_[v] - exact[v]).max() <= 5 * bn.mcse_ + 0.01, v


def test_evidence_of_probability_exactly_zero_is_still_refused():
    """Causes that are impossible (probability 0, not merely rare) leave the alarm
    impossible: the clear error, and the chains keep the evidence they had."""
    bn = BayesNet(_rare_causes(0.0, 0.0), n_chains=50, n_samples=5, burn_in=1,
                  init_tries=3, random_state=0)
    with pytest.raises(BayesNetError, match=r"the evidence \{'alarm': 'yes'\} has "
                       r"probability zero under the network"):
        bn.infer({"alarm": "yes"})
    with pytest.raises(BayesNetError, match="probability zero"):
        bn.infer({"quake": "no", "fire": "no", "alarm": "yes"})
    m = BayesNet(_rare_causes(0.0, 0.0), n_chains=50, n_samples=20, burn_in=2,
                 random_state=0).infer({"call": "yes"})
    assert m["alarm"]["yes"] == 0.0


def test_evidence_that_many_rare_causes_must_meet_is_found_by_annealing():
    """Twelve alarms, each possible only through its own cause of prior 1e-3: no ordinary
    or smoothed draw meets all twelve at once; annealed sweeps do (each cause is then
    certain)."""
    k, yn = 12, ["no", "yes"]
    cpts = [np.array([[0.999, 0.001]])] * k + [np.array([[1.0, 0.0], [0.2, 0.8]])] * k
    net = Network([f"cause{i}" for i in range(k)] + [f"alarm{i}" for i in range(k)],
                  [yn] * (2 * k), [[]] * k + [[i] for i in range(k)], cpts)
    bn = BayesNet(net, n_chains=100, n_samples=20, burn_in=5, init_tries=5, random_state=0)
    m = bn.infer({f"alarm{i}": "yes" for i in range(k)})
    assert all(m[f"cause{i}"]["yes"] == 1.0 for i in range(k))


def _networkx_graph(lines: list[str]) -> tuple[dict[tuple[int, int], float], list[int]]:
    """networkx's ``Graph`` built from an edge list, by its rule: each unordered pair is
    one edge, a later line's weight replacing an earlier one's (1 without weights)."""
    edges: dict[tuple[int, int], float] = {}
    for ln in lines:
        f = ln.split("#", 1)[0].split()
        if f:
            a, b = int(f[0]), int(f[1])
            edges[(min(a, b), max(a, b))] = float(f[2]) if len(f) > 2 else 1.0
    return edges, sorted({v for e in edges for v in e})


def _dense(edges: dict[tuple[int, int], float], ids: list[int]) -> np.ndarray:
    at = {v: k for k, v in enumerate(ids)}
    A = np.zeros((len(ids), len(ids)))
    for (a, b), w in edges.items():
        A[at[a], at[b]] = A[at[b], at[a]] = w
    return A


def test_an_undirected_edge_list_weighs_each_pair_once(tmp_path):
    """A pair listed both ways (or twice) had weight 2 beside a self-loop's 1."""
    lines = ["1 2", "2 1", "1 2", "2 3", "3 3", "3 3", "5 1"]
    (tmp_path / "g.txt").write_text("\n".join(lines))
    g = load_snap_edges(tmp_path / "g.txt", directed=False)
    edges, ids = _networkx_graph(lines)
    np.testing.assert_array_equal(g.A.toarray(), _dense(edges, ids))
    assert g.ids.tolist() == ids and g.n_edges == 7
    weighted = ["1 2 5", "2 1 7", "2 2 0.5", "2 3 1.5", "2 2 4"]
    (tmp_path / "w.txt").write_text("\n".join(weighted))
    g = load_snap_edges(tmp_path / "w.txt", directed=False)
    np.testing.assert_array_equal(g.A.toarray(), _dense(*_networkx_graph(weighted)))
    d = load_snap_edges(tmp_path / "g.txt")  # directed: duplicates still summed
    assert d.A[0, 1] == 2 and d.A[1, 0] == 1 and d.A[2, 2] == 2


def _dense_pagerank(A: np.ndarray, alpha: float = 0.85, tol: float = 1e-12) -> np.ndarray:
    """networkx's power iteration and stopping rule on a dense adjacency."""
    n = A.shape[0]
    out = A.sum(axis=1)
    P = A / np.where(out > 0, out, 1.0)[:, None]
    x = np.full(n, 1.0 / n)
    for _ in range(1000):
        last = x
        x = alpha * (x @ P + x[out == 0].sum() / n) + (1 - alpha) / n
        if np.abs(x - last).sum() < n * tol:
            return x
    raise AssertionError("the reference did not converge")


def test_pagerank_of_ca_grqc_read_undirected_matches_networkx(tmp_path, shared_data):
    """ca-GrQc as SNAP distributes it lists each collaboration both ways; here some are
    listed once, some both ways, some twice, with self-loops: read undirected, every one is
    one edge, and PageRank(directed=False) ranks it as networkx's Graph does."""
    text = (shared_data / "snap-ca-grqc" / "ca-GrQc.txt").read_text().splitlines()
    pairs = [ln for ln in text if ln.strip() and not ln.startswith("#")]
    rng = np.random.default_rng(0)
    lines = list(pairs)
    for ln in pairs:
        a, b = ln.split()
        r = rng.random()
        if r < 0.5:
            lines.append(f"{b}\t{a}")
        elif r < 0.6:
            lines.append(ln)
        elif r < 0.65:
            lines.append(f"{a}\t{a}")
    (tmp_path / "ca.txt").write_text("\n".join(text[:4] + lines) + "\n")
    g = load_snap_edges(tmp_path / "ca.txt", directed=False)
    edges, ids = _networkx_graph(lines)
    assert g.ids.tolist() == ids
    want = _dense_pagerank(_dense(edges, ids))
    for method, close in (("power", 1e-12), ("gauss-seidel", 1e-7)):  # (both tol-bound)
        got = PageRank(tol=1e-12, method=method, directed=False).fit(g.A).scores_
        assert np.abs(got - want).sum() < close, method
