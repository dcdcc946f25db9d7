"""PageRank regressions: scores of a learner stopped early, extreme edge and teleport
weights, float16 and narrowing casts of the adjacency, non-numeric teleport weights."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_pagerank import oracle, random_graph

from bidlab.models import PageRank

CYCLE = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 0.0, 0.0]])


def test_a_gauss_seidel_learner_stopped_before_convergence_gives_scores_summing_to_1():
    A = random_graph(300, 0.02, 3, n_dangling=30)
    est = PageRank(tol=1e-10, method="gauss-seidel")
    est.learner(A, n_passes=4).fit(progress=None)
    assert est.model_.sweeping and not est.converged_
    assert abs(est.scores_.sum() - 1) < 1e-12


@pytest.mark.parametrize("method", ["power", "gauss-seidel"])
@pytest.mark.parametrize("dtype, tiny", [(np.float64, 1e-320), (np.float32, 1e-39)])
def test_subnormal_out_weights_rank_by_their_relative_weights(method, dtype, tiny):
    A = CYCLE.astype(dtype)
    A[0, 1] = tiny  # vertex 0's out-weight's inverse overflows
    want = oracle(CYCLE, tol=1e-12)[0]
    atol = 1e-6 if dtype == np.float32 else 1e-9
    got = PageRank(method=method, dtype=dtype, tol=1e-10).fit(sp.csr_matrix(A)).scores_
    np.testing.assert_allclose(got, want, atol=atol)
    est = PageRank(method="power", dtype=dtype, tol=1e-10)  # the block engine
    est.learner(sp.csr_matrix(A), batch_size=1).fit(progress=None)
    np.testing.assert_allclose(est.scores_, want, atol=atol)


def test_a_float32_cast_that_would_change_the_graph_is_refused():
    A = CYCLE.copy()
    A[0, 1] = 1e-50  # vertex 0 would turn dangling in float32
    with pytest.raises(ValueError, match="out-weights of vertex 0 are all below the smallest "
                                         "float32.*dtype=float64"):
        PageRank(dtype=np.float32).fit(A)
    A[0, 1] = 1e40
    with pytest.raises(ValueError, match="past the largest float32.*dtype=float64"):
        PageRank(dtype=np.float32).fit(A)
    A[0, :] = [0.0, 1.0, 1e-50]  # a negligible weight may round to 0: its vertex ranks
    np.testing.assert_allclose(PageRank(dtype=np.float32).fit(A).scores_,
                               oracle(CYCLE)[0], atol=1e-6)


def test_a_float16_dense_adjacency_is_ranked():
    got = PageRank(tol=1e-10).fit(CYCLE.astype(np.float16)).scores_
    np.testing.assert_allclose(got, oracle(CYCLE, tol=1e-12)[0], atol=1e-9)


@pytest.mark.parametrize("method", ["power", "gauss-seidel"])
def test_huge_personalization_weights_are_normalised_without_overflow(method):
    p = np.array([1e308, 1e308, 0.0])
    got = PageRank(method=method, personalization=p, tol=1e-10).fit(CYCLE).scores_
    np.testing.assert_allclose(got, oracle(CYCLE, tol=1e-12, p=[1, 1, 0])[0], atol=1e-9)
    assert abs(got.sum() - 1) < 1e-12


@pytest.mark.parametrize("weights", [{0: "x"}, {0: None}, {0: 1j},
                                     np.array(["a", "b", "c"]), np.array([1j, 1, 1])])
def test_non_numeric_teleport_weights_are_refused_with_the_fix(weights):
    for what in ("personalization", "dangling"):
        with pytest.raises(ValueError, match=f"{what} weights must be real numbers"):
            PageRank(**{what: weights}).fit(CYCLE)
