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
order, so a run with the same number of copies is reproducible bit for bit. The split is
fixed by the copies, not by the threads that run it, so the kernels are
:func:`~bidlab.kern.adaptive.adaptive_kernel` s: on all cores or on one, whichever is
cheaper now, with the same result.

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
from bidlab.kern import arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.cpu import _FM, WORKSPACE_LIMIT, _part, push_rows
from bidlab.kern.standin import stand_in

__all__ = ["ScatterSums", "transpose_into"]


@numba.njit(inline="always")
def _push_each(indptr, indices, data, G, dst, lo, hi):  # pragma: no cover - compiled
    """Rows [lo, hi) pushed into dst one nonzero at a time (for small k: the four-at-a-time
    :func:`~bidlab.kern.cpu.push_rows` keeps four output rows in flight, which pays at
    k = 64 and costs at k = 20; the crossover: BENCHMARKS.md, "design measurements")."""
    k = G.shape[1]
    for i in range(lo, hi):
        g = G[i]
        for p in range(indptr[i], indptr[i + 1]):
            o = dst[indices[p]]
            v = data[p]
            for c in range(k):
                o[c] += v * g[c]


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _push_parts(indptr, indices, data, G, out, work, each):  # pragma: no cover - compiled
    """Part t of the rows pushes into work[t - 1] (part 0 into out); nothing is zeroed."""
    nparts = work.shape[0] + 1
    for t in prange(nparts):
        lo, hi = _part(indptr, t, nparts)
        if t == 0:
            if each:
                _push_each(indptr, indices, data, G, out, lo, hi)
            else:
                push_rows(indptr, indices, data, G, out, lo, hi)
        elif each:
            _push_each(indptr, indices, data, G, work[t - 1], lo, hi)
        else:
            push_rows(indptr, indices, data, G, work[t - 1], lo, hi)


@adaptive_kernel(cache=True, nogil=True)
def _fold(out, work, dst):  # pragma: no cover - compiled
    """out += the sum of the copies (zeroed); dst (k x n, or 0 x 0) = out transposed, in
    blocks of rows that stay in cache."""
    n, k = out.shape
    nb = (n + 255) // 256
    for b in prange(nb):
        lo, hi = b * 256, min(n, b * 256 + 256)
        for j in range(lo, hi):
            for w in range(work.shape[0]):
                for c in range(k):
                    out[j, c] += work[w, j, c]
                    work[w, j, c] = 0
        if dst.shape[0]:
            for c in range(k):
                for j in range(lo, hi):
                    dst[c, j] = out[j, c]


# array-level forms, run while the kernels compile in the background (bidlab.kern.standin)
stand_in(_push_parts)(arrays.push_parts)
stand_in(_fold)(arrays.fold)


def transpose_into(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst[...] = src.T`` for a C-ordered n x k ``src`` and k x n ``dst``, in blocks of
    rows (a strided numpy copy of a tall, narrow matrix is several times slower)."""
    if dst.shape != src.shape[::-1]:
        raise ValueError(f"transpose_into: {src.shape} does not transpose to {dst.shape}")
    none = _NO_WORK.get(src.dtype)
    if none is None:
        none = _NO_WORK[src.dtype] = np.zeros((0, 0, 0), src.dtype)
    _fold(float(src.size), src, none, dst)


_NO_WORK: dict[np.dtype, np.ndarray] = {}
#: below this many columns a nonzero is pushed at a time (see :func:`_push_each`)
EACH_BELOW_K = 32


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
        self._none = np.zeros((0, 0), np.dtype(dtype))
        self._clean = self._work_clean = True

    def add(self, S: Any, G: Any) -> None:
        """Add ``S.T @ G`` (``S`` an m x n scipy CSR matrix, ``G`` m x k) to the total."""
        n, k = self.out.shape
        if S.shape[1] != n or G.shape != (S.shape[0], k):
            raise ValueError(f"ScatterSums: S {S.shape} and G {G.shape} do not fit a "
                             f"{n} x {k} total (S m x {n}, G m x {k})")
        _push_parts(float(S.indptr[-1]) * k, S.indptr, S.indices, S.data, G, self.out,
                    self.work, k < EACH_BELOW_K)
        self._clean = self._work_clean = False

    def mark(self) -> None:
        """Note that a kernel of its own pushed into ``out`` and ``work`` (as
        :func:`bidlab.kern.nmf_kl.kl_h_push` does), so :meth:`zero` must clear them."""
        self._clean = self._work_clean = False

    def total(self, transposed: np.ndarray | None = None) -> np.ndarray:
        """The total so far (the private copies are folded into it and zeroed); with
        ``transposed`` (k x n), also written there transposed, in the same pass."""
        dst = self._none if transposed is None else transposed
        if transposed is not None and transposed.shape != self.out.shape[::-1]:
            raise ValueError(f"ScatterSums: the transposed total is {self.out.shape[::-1]}, "
                             f"not {transposed.shape}")
        if self.work.shape[0] or transposed is not None:
            _fold(float(self.out.size) * (self.work.shape[0] + 1), self.out, self.work, dst)
            self._work_clean = True
        return self.out

    def zero(self) -> None:
        """Start a new total (nothing to do when nothing was pushed since the last)."""
        if not self._clean:
            self.out.fill(0)
            if not self._work_clean:  # a fold zeroed the copies already
                self.work.fill(0)
            self._clean = self._work_clean = True
