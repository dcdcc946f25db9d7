"""Running sums of ``S.T @ G`` over many CSR blocks, reduced once: :class:`ScatterSums`.

A full-batch pass of a factor model (NMF's ``W.T @ X`` statistic of the components) adds
the product ``S.T @ G`` of every minibatch ``S`` (m x n CSR) and its row factors ``G``
(m x k) into one n x k total. Forming each minibatch's product and adding it costs three
passes over the n x k output per minibatch (zeroing the product, summing the threads'
private copies, the addition) besides the O(nnz k) work; on wide data (a vocabulary of
100,000 words, a few thousand documents per minibatch) those passes cost as much as the
product itself. Here each thread keeps its private copy for the whole pass: a minibatch
only pushes its rows into the copies (O(nnz k), nothing else), and :meth:`ScatterSums.total`
sums the copies once, at the pass end.

The rows of a block are split between the copies by nonzero count (as
:func:`bidlab.kern.cpu.scatter_rows` splits them); a row's contribution is summed in row
order, so a run with the same thread count is reproducible bit for bit.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> from bidlab.kern.scatter_sums import ScatterSums
>>> S = sp.random(6, 5, density=0.5, format="csr", random_state=0)
>>> G = np.ones((6, 2))
>>> sums = ScatterSums(5, 2, np.float64)
>>> sums.add(S, G); sums.add(S, G)
>>> bool(np.allclose(sums.total(), 2 * (S.T @ G)))
True
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from bidlab import backend
from bidlab.kern.cpu import _FM, WORKSPACE_LIMIT, _part, push_rows

__all__ = ["ScatterSums"]


@numba.njit(parallel=True, fastmath=_FM, cache=True, nogil=True)
def _push_parts(indptr, indices, data, G, out, work):  # pragma: no cover - compiled
    """Part t of the rows pushes into work[t - 1] (part 0 into out); nothing is zeroed."""
    nparts = work.shape[0] + 1
    for t in prange(nparts):
        lo, hi = _part(indptr, t, nparts)
        if t == 0:
            push_rows(indptr, indices, data, G, out, lo, hi)
        else:
            push_rows(indptr, indices, data, G, work[t - 1], lo, hi)


@numba.njit(parallel=True, cache=True, nogil=True)
def _fold(out, work):  # pragma: no cover - compiled
    """out += the sum of the copies; the copies are zeroed."""
    n, k = out.shape
    for j in prange(n):
        for w in range(work.shape[0]):
            for c in range(k):
                out[j, c] += work[w, j, c]
                work[w, j, c] = 0


class ScatterSums:
    """The running total ``sum over blocks of S.T @ G`` (n x k), pushed block by block.

    Parameters
    ----------
    n, k
        The total's shape: ``n`` = columns of the blocks, ``k`` = columns of ``G``.
    dtype
        The arithmetic's float type (the blocks' values and ``G`` are read as they are).
    copies
        Private copies besides the total (one per extra thread); None: numba's thread
        count less one, as many as fit in ``bidlab.kern.cpu.WORKSPACE_LIMIT`` bytes.
        Allocated once, here.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> sums = ScatterSums(3, 1, np.float64, copies=1)
    >>> sums.add(sp.csr_matrix(np.eye(3)), np.arange(3.0)[:, None])
    >>> sums.total()[:, 0].tolist()
    [0.0, 1.0, 2.0]
    """

    def __init__(self, n: int, k: int, dtype: Any, copies: int | None = None) -> None:
        if copies is None:
            size = max(n * k * np.dtype(dtype).itemsize, 1)
            copies = max(min(numba.get_num_threads() - 1, WORKSPACE_LIMIT // size), 0)
        self.out = backend.zeros((n, k), np.dtype(dtype), np)
        self.work = backend.zeros((copies, n, k), np.dtype(dtype), np)

    def add(self, S: Any, G: Any) -> None:
        """Add ``S.T @ G`` (``S`` an m x n scipy CSR matrix, ``G`` m x k) to the total."""
        n, k = self.out.shape
        if S.shape[1] != n or G.shape != (S.shape[0], k):
            raise ValueError(f"ScatterSums: S {S.shape} and G {G.shape} do not fit a "
                             f"{n} x {k} total (S m x {n}, G m x {k})")
        _push_parts(S.indptr, S.indices, S.data, G, self.out, self.work)

    def total(self) -> np.ndarray:
        """The total so far (the private copies are folded into it and zeroed)."""
        if self.work.shape[0]:
            _fold(self.out, self.work)
        return self.out

    def zero(self) -> None:
        """Start a new total."""
        self.out.fill(0)
        self.work.fill(0)
