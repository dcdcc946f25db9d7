"""Regressions of KMeans, PageRank and BayesNet as a user meets them: continuing a fit
after n_clusters changed, BIF files written with awkward state names or declaring huge
tables, DataFrames whose columns name the variables, set_params(network=...), sample(n),
nested-list graphs and out-weights that overflow."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from bidlab.models import BayesNet, KMeans, PageRank
from bidlab.models.base import load
from bidlab.models.bayesnet.bif import format_bif, parse_bif, read_bif
from bidlab.models.bayesnet.network import BayesNetError, Network


def _blobs() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((50, 3))


def _rain() -> Network:
    return Network(["rain", "wet"], [["no", "yes"], ["no", "yes"]], [[], [0]],
                   [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]])])


def _bn(net: Network | None = None, **params) -> BayesNet:
    return BayesNet(net or _rain(), n_chains=20, n_samples=20, burn_in=5, n_passes=2,
                    random_state=0, **params)


# -- KMeans -------------------------------------------------------------------------------
def test_kmeans_warm_start_with_changed_n_clusters_is_refused(tmp_path):
    """warm_start continued from the 3 fitted centres after n_clusters=4: the estimator
    claimed 4 clusters, held 3, and its saved file could not be loaded back."""
    X = _blobs()
    km = KMeans(3, warm_start=True, random_state=0).fit(X)
    km.set_params(n_clusters=4)
    with pytest.raises(ValueError, match=r"3 fitted centres, but n_clusters=4.*"
                                         r"warm_start=False"):
        km.fit(X)
    km.set_params(warm_start=False)
    assert km.fit(X).cluster_centers_.shape == (4, 3)
    assert load(km.save(tmp_path / "km")).cluster_centers_.shape == (4, 3)


@pytest.mark.parametrize("first", ["fit", "partial_fit"])
def test_kmeans_partial_fit_with_changed_n_clusters_is_refused(first):
    X = _blobs()
    km = getattr(KMeans(3, random_state=0, batch_size=16), first)(X)
    km.set_params(n_clusters=4)
    with pytest.raises(ValueError, match=r"partial_fit continues from the 3 fitted centres"):
        km.partial_fit(X)
    assert km.set_params(n_clusters=3).partial_fit(X).cluster_centers_.shape == (3, 3)


def test_kmeans_overflow_message_on_float64_data_does_not_say_pass_float64():
    X = _blobs() * 1e160
    with pytest.raises(ValueError, match="overflow float64") as err:
        KMeans(2).fit(X)
    assert "float64 data" not in str(err.value)
    with pytest.raises(ValueError, match="pass float64 data"):
        KMeans(2).fit((_blobs() * 1e19).astype(np.float32))


# -- BIF ----------------------------------------------------------------------------------
def test_bif_round_trip_keeps_parent_states_holding_a_comma(tmp_path):
    """format_bif split the parent configuration text at ', ', so a parent state named
    'low, mid' wrote a row naming two parent states: the file did not read back."""
    net = Network(["a", "b"], [["low, mid", "high"], ["0", "1"]], [[], [0]],
                  [np.array([[0.3, 0.7]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    back = parse_bif(format_bif(net))
    assert back.states == net.states
    np.testing.assert_array_equal(back.cpts[1], net.cpts[1])
    path = _bn(net).to_bif(tmp_path / "net.bif")
    np.testing.assert_array_equal(read_bif(path).cpts[1], net.cpts[1])
    assert net.config_text(1, 0) == "(low, mid)"


def test_bif_writer_refuses_a_name_with_a_double_quote(tmp_path):
    """A name holding '"' cannot be quoted in BIF: it was written and the file was not
    readable; now the writer says so and writes nothing."""
    net = Network(["a", "b"], [['say "hi"', "z"], ["0", "1"]], [[], [0]],
                  [np.array([[0.3, 0.7]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    with pytest.raises(BayesNetError, match="double quote.*rename"):
        format_bif(net)
    with pytest.raises(BayesNetError, match="double quote"):
        _bn(net).to_bif(tmp_path / "q.bif")
    assert not (tmp_path / "q.bif").exists()


def _wide_bif(n_parents: int, k: int, body: str) -> str:
    states = ", ".join(f"s{j}" for j in range(k))
    text = "".join(f"variable V{i} {{ type discrete [ {k} ] {{ {states} }}; }}\n"
                   for i in range(n_parents + 1))
    uniform = ", ".join([repr(1.0 / k)] * k)
    text += "".join(f"probability ( V{i} ) {{ table {uniform}; }}\n"
                    for i in range(1, n_parents + 1))
    parents = ", ".join(f"V{i}" for i in range(1, n_parents + 1))
    return text + f"probability ( V0 | {parents} ) {{ {body} }}\n"


@pytest.mark.parametrize(("n_parents", "k", "body"), [
    (40, 2, "default 0.5, 0.5;"),  # 2**40 rows: a MemoryError of 16 TiB
    (13, 50, "(" + ", ".join(["s0"] * 13) + ") " + ", ".join(["0.02"] * 50) + ";"),  # wraps
])
def test_bif_row_table_too_large_to_build_is_refused_clearly(n_parents, k, body):
    """A 'default' or row-by-row table whose parents have astronomically many
    configurations: numpy's 'negative dimensions' (int64 wrap) or a MemoryError before;
    now a ValueError naming the table and its size."""
    with pytest.raises(ValueError, match=r"the table of 'V0' \([\d,]+ parent configurations"
                                         r".*memory budget"):
        parse_bif(_wide_bif(n_parents, k, body))


def test_bif_row_table_of_ordinary_size_still_reads():
    net = parse_bif(_wide_bif(2, 3, "default 0.2, 0.3, 0.5;"))
    assert net.cpts[0].shape == (9, 3)


@pytest.mark.parametrize("body", [
    "(s0) 0.5, 0.5; (s1) 0.1, 0.9; (s0) 0.9, 0.1;",     # a row given twice: the last won
    "table 0.5, 0.5, 0.1, 0.9; (s0) 0.9, 0.1;",          # a table and rows: rows ignored
])
def test_bif_tables_that_say_two_things_are_refused(body):
    with pytest.raises(BayesNetError, match="twice|both a table and rows"):
        parse_bif(_wide_bif(1, 2, body))


# -- BayesNet -----------------------------------------------------------------------------
def test_bayesnet_dataframe_columns_are_matched_to_variables_by_name():
    """A DataFrame whose columns name the variables in another order was read by
    position: 'wet' was learned as 'rain'. Now the columns are matched by name."""
    rows = pd.DataFrame({"wet": [0] * 40, "rain": [1] * 40})
    bn = _bn().fit(rows)
    assert bn.network_.cpts[0][0, 1] > 0.9  # P(rain = yes): every row says yes
    ordered = _bn().fit(rows[["rain", "wet"]].to_numpy())
    np.testing.assert_allclose(bn.network_.cpts[0], ordered.network_.cpts[0])
    assert bn.log_likelihood(rows) == pytest.approx(ordered.log_likelihood(
        rows[["rain", "wet"]].to_numpy()))


def test_bayesnet_dataframe_with_other_column_names_is_refused():
    with pytest.raises(ValueError, match=r"unknown: \['damp'\], missing: \['wet'\]"):
        _bn().fit(pd.DataFrame({"rain": [0, 1], "damp": [1, 0]}))
    positional = pd.DataFrame(np.zeros((4, 2)))  # integer labels: read by position
    assert _bn().fit(positional).network_.n_vars == 2


def test_bayesnet_fit_without_rows_or_with_state_names_says_what_is_wrong():
    """No rows gave 'batch_size must be an int >= 1; got 0'; state names gave numpy's
    'could not convert string to float'."""
    with pytest.raises(ValueError, match="X has no rows"):
        _bn().fit(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="not numbers: map state names to indices"):
        _bn().fit(np.array([["no", "yes"], ["yes", "yes"]]))


def test_bayesnet_sample_checks_n():
    """sample(-1) raised numpy's 'negative dimensions', sample(0) 'zero-size array to
    reduction operation', and sample(2.5) drew 2 rows."""
    bn = _bn()
    assert bn.sample(0).shape == (0, 2)
    assert bn.sample(np.int64(3)).shape == (3, 2)
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(ValueError, match=r"sample\(n\): n must be an int >= 0"):
            bn.sample(bad)


def test_bayesnet_set_params_network_replaces_the_network_of_earlier_runs():
    """After a first infer, set_params(network=other) was ignored: the next infer ran on
    the cached first network."""
    two = Network(["a", "b"], [["x", "y"], ["p", "q"]], [[], [0]],
                  [np.array([[0.5, 0.5]]), np.array([[0.7, 0.3], [0.4, 0.6]])])
    bn = _bn()
    assert set(bn.infer()) == {"rain", "wet"}
    bn.set_params(network=two)
    assert set(bn.infer({"b": "q"})) == {"a", "b"}
    assert bn.network_ is two
    bn.fit(np.array([[0, 1], [1, 0], [-1, 1]]))
    assert bn.network_.names == ["a", "b"]
    bn.set_params(network=_rain())
    assert not bn.__sklearn_is_fitted__()
    assert set(bn.infer()) == {"rain", "wet"}


# -- PageRank -----------------------------------------------------------------------------
#: vertex 0's score when 0 -> {1, 2} and both come back to 0 (or 1 and 2 link only to 0):
#: x0 = 0.05 + 0.85 (0.1 + 0.85 x0)
X0 = 0.135 / (1 - 0.85**2)

def test_pagerank_takes_a_nested_list_adjacency():
    """A list of lists was refused as 'got list of shape None'."""
    pr = PageRank().fit([[0, 1, 1], [1, 0, 0], [1, 0, 0]])
    np.testing.assert_allclose(pr.scores_, PageRank().fit(
        np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], float)).scores_)


@pytest.mark.parametrize(("A", "dtype"), [
    (np.array([[0, 1e308, 1e308], [1, 0, 0], [1, 0, 0]]), None),
    (np.array([[0, 3e38, 3e38], [1, 0, 0], [1, 0, 0]]), "float32"),
])
def test_pagerank_out_weights_that_overflow_are_refused(A, dtype):
    """Vertex 0's out-weights summed to inf: the in-edge engine ranked vertex 0 at 0.574
    (0.486 is right) and the block engine leaked its score (the scores summed to ~1e-6),
    both silently."""
    G = sp.csr_matrix(A)
    with pytest.raises(ValueError, match="out-weights of vertex 0 sum past the largest"):
        PageRank(dtype=dtype).fit(G)
    with pytest.raises(ValueError, match="out-weights of vertex 0 sum past"):
        PageRank(dtype=dtype, method="power").learner(G, batch_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = PageRank(dtype=dtype, tol=1e-10).fit(sp.csr_matrix(A / A.max())).scores_
    np.testing.assert_allclose(scores, [X0, (1 - X0) / 2, (1 - X0) / 2], rtol=1e-5)


def test_pagerank_large_but_summable_weights_still_rank():
    A = sp.csr_matrix(np.array([[0, 1e308, 0], [1, 0, 0], [1e308, 0, 0]]))
    np.testing.assert_allclose(PageRank(tol=1e-10).fit(A).scores_,
                               [X0, 0.05 + 0.85 * X0, 0.05], rtol=1e-6)


def test_pagerank_defaults_put_the_top_vertices_in_their_exact_order():
    """The default tolerance (1e-8 x n in L1) orders a graph's top vertices as the exact
    scores do; networkx's 1e-6 left most of them out of place on collaboration graphs."""
    rng = np.random.default_rng(0)
    n = 3000
    rows = rng.integers(0, n, 6 * n)
    cols = (rows + rng.geometric(0.02, rows.size)) % n  # near-tied, locally clustered
    A = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    A = ((A + A.T) > 0).astype(np.float64)
    exact = PageRank(tol=1e-15, max_iter=100_000, method="power").fit(A).scores_
    top = np.argsort(-exact, kind="stable")[:50]
    got = np.argsort(-PageRank().fit(A).scores_, kind="stable")[:50]
    loose = np.argsort(-PageRank(tol=1e-6).fit(A).scores_, kind="stable")[:50]
    assert (got == top).sum() >= 45 > (loose == top).sum()


def test_an_inference_learner_refuses_learning_options_so_no_control_offers_them():
    from bidlab.widgets._controls import refusal

    lr = _bn().learner()
    with pytest.raises(ValueError, match="alpha: learning options"):
        lr.set(alpha=2.0)
    lr.set(burn_in=5, tol=0.01)  # inference options still move
    assert refusal(lr, "nsamps") and refusal(lr, "burn_in") is None
    learning = _bn().learner(_bn().sample(50))
    learning.set(alpha=2.0)  # learning takes it


def test_kmeans_counts_centres_of_equal_rows_as_one_cluster():
    rng = np.random.default_rng(0)
    points = rng.standard_normal((40, 5)) * 10
    X = points[rng.integers(0, 40, 20_000)]  # 40 distinct rows
    with pytest.warns(UserWarning, match="found 40 distinct clusters"):
        KMeans(n_clusters=50, random_state=0).fit(X)
