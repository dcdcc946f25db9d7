"""GPU code paths checked without a GPU where CuPy's documented behaviour can be stood for
on the host, and the same cases on CuPy itself where a device is here (marked ``gpu``).

An undirected PageRank graph (``directed=False``) symmetrises the adjacency with
``maximum(A, A.T)``. CuPy's ``csr_matrix.maximum`` before 14.2 takes a CSR operand only
(a CSC one, which ``A.T`` is, raises NotImplementedError), so a graph already on the GPU
has to be given its transpose as CSR.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab import backend
from bidlab.models import PageRank
from bidlab.models.graph.transition import as_adjacency


class _CsrOnlyMaximum(sp.csr_matrix):
    """A scipy CSR matrix whose ``maximum`` takes what cupyx's (CuPy 13 to 14.1) takes: a
    scalar, a dense array or another CSR matrix; any other sparse format raises
    NotImplementedError, as ``cupyx.scipy.sparse.csr_matrix.maximum`` does."""

    def maximum(self, other: Any) -> Any:
        if sp.issparse(other) and other.format != "csr":
            raise NotImplementedError
        return super().maximum(other)


def _directed_graph(n: int = 40, seed: int = 3) -> sp.csr_matrix:
    A = sp.random(n, n, density=0.1, format="csr", random_state=seed)
    A.setdiag(0)
    A.eliminate_zeros()
    return A


def test_undirected_graph_symmetrises_with_a_csr_only_maximum():
    A = _directed_graph()
    G = as_adjacency(_CsrOnlyMaximum(A), np.float64, directed=False)
    want = A.maximum(A.T).tocsr()
    assert G.format == "csr"
    np.testing.assert_array_equal(G.toarray(), want.toarray())
    assert (G != G.T).nnz == 0


@pytest.mark.gpu
def test_undirected_pagerank_of_a_graph_on_the_gpu_ranks_as_on_the_cpu():
    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: the CSR-only maximum is checked on the host")
    A = _directed_graph()
    cpu = PageRank(directed=False, tol=1e-12).fit(A)
    gpu = PageRank(directed=False, tol=1e-12).fit(backend.to_device(A))
    # (the CPU ranks by in-edge sweeps, the GPU by power iterations: both to tol)
    np.testing.assert_allclose(gpu.scores_, cpu.scores_, rtol=0, atol=1e-9)
