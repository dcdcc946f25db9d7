"""PageRank and BayesNet as users call them, held against references written here (a
dense power iteration with networkx's update and stopping rule; brute-force enumeration of
small networks): sparse formats, edge lists given where an adjacency goes, BIF text given
where a path goes."""

from __future__ import annotations

import gzip
import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from bayesnet_exact import exact_marginals as _brute

from bidlab.datasets.graphs import load_snap_edges
from bidlab.models import BayesNet, PageRank
from bidlab.models.bayesnet import BayesNetError, Network, read_bif


def _power(A, alpha=0.85, p=None, u=None, tol=1e-15, max_iter=10_000):
    """networkx's PageRank update and stopping rule on a dense or sparse adjacency."""
    A = sp.csr_array(A, dtype=np.float64)
    n = A.shape[0]
    out = np.asarray(A.sum(axis=1)).ravel()
    P = sp.diags_array(np.divide(1.0, out, out=np.zeros(n), where=out > 0)) @ A
    p = np.full(n, 1.0 / n) if p is None else np.asarray(p, float) / np.sum(p)
    u = p if u is None else np.asarray(u, float) / np.sum(u)
    x = np.full(n, 1.0 / n)
    for it in range(1, max_iter + 1):
        last = x
        x = alpha * (x @ P + x[out == 0].sum() * u) + (1 - alpha) * p
        if np.abs(x - last).sum() < n * tol:
            return x, it
    raise AssertionError("the reference did not converge")


_SMALL = np.array([[0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 2, 0]], dtype=float)


@pytest.mark.parametrize("kind", [sp.dok_matrix, sp.dok_array])
def test_a_dok_adjacency_is_ranked_like_its_csr(kind):
    """A DOK matrix (scipy's format for building a graph edge by edge) failed with
    AttributeError: 'dok_matrix' object has no attribute 'data'."""
    want = PageRank(tol=1e-12).fit(sp.csr_matrix(_SMALL)).scores_
    got = PageRank(tol=1e-12).fit(kind(_SMALL)).scores_
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)


def test_an_edge_list_given_as_the_adjacency_says_how_to_build_one():
    """A DataFrame (or array) of edges, one row per edge, was refused only as a matrix
    that is not square, with no word of what PageRank takes instead."""
    edges = pd.DataFrame({"src": [0, 1, 2, 0], "dst": [1, 2, 0, 2]})
    with pytest.raises(ValueError, match=r"got 4 x 2 \(an edge list.*csr_matrix\(\(weights, "
                       r"\(sources, targets\)\)"):
        PageRank().fit(edges)
    with pytest.raises(ValueError, match=r"got 3 x 5$"):  # no edge-list hint here
        PageRank().fit(np.ones((3, 5)))
    A = sp.csr_matrix((np.ones(4), (edges["src"], edges["dst"])), shape=(3, 3))
    np.testing.assert_allclose(PageRank(tol=1e-13).fit(A).scores_, _power(A)[0], atol=1e-10)


@pytest.mark.parametrize("method", ["power", "gauss-seidel"])
def test_scores_match_the_reference_on_crafted_graphs(method):
    """Self-loops, duplicate COO entries (summed), explicit zeros, dangling and isolated
    vertices, personalisations with zeros, dangling weights, undirected reading."""
    rows, cols = [0, 0, 1, 1, 3, 3, 4, 5], [1, 1, 1, 2, 0, 3, 4, 0]
    coo = sp.coo_array((np.array([1.0, 2, 0.5, 0, 1, 1, 3, 1]), (rows, cols)), shape=(7, 7))
    dense = coo.toarray()
    p, u = np.array([0, 1, 0, 0, 2, 0, 1.0]), np.array([1.0, 0, 0, 0, 0, 0, 0])
    cases = [({}, dense, None, None), ({"personalization": p}, dense, p, None),
             ({"personalization": {1: 1.0, 4: 2.0, 6: 1.0}, "dangling": {0: 1.0}}, dense, p,
              u),
             ({"directed": False}, np.maximum(dense, dense.T), None, None)]
    for params, ref, p_ref, u_ref in cases:
        want, _ = _power(ref, p=p_ref, u=u_ref)
        for G in (coo, sp.csr_array(coo), dense):
            got = PageRank(tol=1e-13, max_iter=1000, method=method, **params).fit(G).scores_
            assert np.abs(got - want).sum() < 1e-9, (params, type(G).__name__)


def test_power_iterations_follow_networkx_on_a_snap_graph(shared_data):
    """method='power' is networkx's iteration: the same iterations to each tolerance and
    the same scores (to rounding), directed and undirected."""
    g = load_snap_edges(shared_data / "snap-email-eu-core" / "email-Eu-core.txt.gz")
    for A, directed in ((g.A, True), (g.A, False)):
        ref = A if directed else A.maximum(A.T)
        for tol in (1e-6, 1e-8):
            want, iters = _power(ref, tol=tol)
            pr = PageRank(tol=tol, method="power", directed=directed).fit(A)
            assert pr.n_iter_ == iters
            assert np.abs(pr.scores_ - want).sum() < 1e-12


_BIF = """network tiny { }
variable rain { type discrete [ 2 ] { no, yes }; }
variable wet { type discrete [ 2 ] { no, yes }; }
probability ( rain ) { table 0.8, 0.2; }
probability ( wet | rain ) { (no) 0.9, 0.1; (yes) 0.2, 0.8; }
"""


def test_bif_text_given_for_a_path_says_to_parse_it(tmp_path, shared_data):
    """BIF text where a file path goes failed with OSError 'File name too long' (or, for a
    short text, 'not found: expected a BIF file there; check the path')."""
    text = gzip.decompress((shared_data / "bnlearn" / "asia.bif.gz").read_bytes()).decode()
    for t, call in itertools.product((text, _BIF), (read_bif, lambda t: BayesNet(t).infer(),
                                                    BayesNet.from_bif)):
        with pytest.raises(BayesNetError, match=r"this is BIF text: read the text with "
                           r"bidlab\.models\.bayesnet\.bif\.parse_bif\(text\)"):
            call(t)
    (tmp_path / "tiny.bif").write_text(_BIF)  # a path still reads
    assert read_bif(tmp_path / "tiny.bif").names == ["rain", "wet"]
    with pytest.raises(FileNotFoundError):
        read_bif(str(tmp_path / "none {variable}.bif"))  # a path that looks odd: a path


def _zeros_net() -> Network:
    return Network(
        ["A", "B", "C", "D"], [["a0", "a1", "a2"], ["b0", "b1"], ["c0", "c1"], ["d0", "d1"]],
        [[], [0], [0, 1], [2]],
        [np.array([[0.2, 0.5, 0.3]]), np.array([[1.0, 0.0], [0.3, 0.7], [0.0, 1.0]]),
         np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8], [0.0, 1.0], [1.0, 0.0], [0.4, 0.6]]),
         np.array([[1 - 1e-6, 1e-6], [0.3, 0.7]])])


@pytest.mark.parametrize("ev", [{}, {"A": "a2"}, {"D": "d1"}, {"C": 0, "D": "d0"},
                                {"B": "b0"}, {1: 1, "C": "c0"}])
def test_marginals_with_zero_entries_match_enumeration(ev):
    """Evidence on a root, a leaf, and evidence that rules other states out; names and
    indices alike: the marginals are within a few MCSE of the exact ones."""
    net = _zeros_net()
    bn = BayesNet(net, n_chains=200, n_samples=200, burn_in=20, random_state=1)
    bn.infer(ev)
    keys = {(k if isinstance(k, int) else net.index(k)): s for k, s in ev.items()}
    exact = _brute(net, {v: net.state_index(v, s) for v, s in keys.items()})
    for v in range(net.n_vars):
        assert np.abs(bn.marginals_[v] - exact[v]).max() <= 5 * bn.mcse_ + 2e-3


def test_contradictory_evidence_is_a_clear_error():
    net = _zeros_net()
    bn = BayesNet(net, n_chains=20, n_samples=5, burn_in=1, init_tries=2, random_state=0)
    with pytest.raises(BayesNetError, match=r"has probability zero under the network"):
        bn.infer({"A": "a0", "B": "b1"})  # P(b1 | a0) = 0
