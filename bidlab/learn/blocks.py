"""``BlockSource``: the same consecutive row blocks of in-memory data, every pass.

A full-batch model (Lloyd k-means, PageRank) visits every row once a pass in any order; fed
the same blocks in the same order each pass, its per-row state
(:class:`~bidlab.learn.rowstate.RowState`) is one consecutive run per block and is read and
written in place. These blocks are views of the caller's matrices, so a pass copies nothing.

Example::

    src = BlockSource(X, batch_size=4096)       # X: dense array or CSR matrix
    batch = src.next()                           # rows 0..4095, ids 0..4095
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.datasource import DataInfo, DataSource
from bidlab.learn.source_inputs import check_aligned
from bidlab.learn.staging import MatSpec, Minibatch
from bidlab.mat import Mat, SMat

__all__ = ["BlockSource"]


class BlockSource(DataSource):
    """Consecutive row blocks of in-memory matrices as views (no copy), the same blocks in
    the same order every pass: per-row state stays in place, at no copying cost.

    Parameters
    ----------
    *mats
        aligned matrices (features first): C-ordered dense numpy / CuPy arrays or
        CSR matrices; a 1-D array becomes one column.
    batch_size
        rows per block.
    names
        one name per matrix (default ``("X", "w", "m2", ...)``).
    n_passes
        stop after this many passes (None: repeat forever).
    """

    def __init__(self, *mats: Any, batch_size: int, names: tuple[str, ...] | None = None,
                 n_passes: int | None = None) -> None:
        super().__init__(batch_size, n_passes, None)
        if not mats:
            raise ValueError("BlockSource needs at least one data matrix (the features)")
        names = tuple(names) if names is not None else (
            ("X", "w") + tuple(f"m{i}" for i in range(2, len(mats))))[: len(mats)]
        if len(names) != len(mats):
            raise ValueError(f"got {len(names)} names for {len(mats)} data matrices")
        raws = [_block_input(m, i, name)
                for i, (name, m) in enumerate(zip(names, mats, strict=True))]
        n = check_aligned(names, raws)
        if n == 0:
            raise ValueError("the data set is empty (0 samples): nothing to train on")
        specs = []
        for r in raws:
            sparse = backend.is_sparse(r)
            specs.append(MatSpec(int(r.shape[1]), np.dtype(r.dtype), sparse,
                                 np.dtype(r.indices.dtype) if sparse else None))
        gpu = backend.is_cupy_array(raws[0].data if backend.is_sparse(raws[0]) else raws[0])
        b = min(int(batch_size), n)
        self.batch_size = b
        self._info = DataInfo(n, names, tuple(specs), "gpu" if gpu else "cpu", b)
        self._batches = []
        for i, a in enumerate(range(0, n, b)):
            z = min(n, a + b)
            views = tuple(_view(r, a, z) for r in raws)
            nbytes = sum(_nbytes(v) for v in views)
            self._batches.append(Minibatch(views, z - a, 0, i, z >= n, a, nbytes,
                                           np.arange(a, z, dtype=np.int64), run=a))
        self._raws = raws

    _row_seek = True

    def next(self) -> Minibatch | None:
        if self.n_passes is not None and self._pass >= self.n_passes:
            return None
        a = self._first_row(self._pass, self._index)
        if a != self._index * self.batch_size:  # a pass resumed at a row of another batch size
            batch = self._block(a, self._index)
        else:
            batch = self._batches[self._index]
        batch.pass_ = self._pass
        if batch.last:
            self._pass, self._index = self._pass + 1, 0
        else:
            self._index += 1
        return batch

    def _block(self, a: int, index: int) -> Minibatch:
        """Minibatch ``index``: ``batch_size`` rows from row ``a`` on (views, made now)."""
        n = self._info.n_samples
        z = min(n, a + self.batch_size)
        views = tuple(_view(r, a, z) for r in self._raws)
        return Minibatch(views, z - a, self._pass, index, z >= n, a,
                         sum(_nbytes(v) for v in views), np.arange(a, z, dtype=np.int64), run=a)


def _block_input(m: Any, i: int, name: str) -> Any:
    """One aligned input as a 2-D array or a CSR matrix (a 1-D array becomes one column).

    Another sparse format is converted to CSR once: the blocks slice row pointers, and a
    CSC matrix's ``indptr`` points to columns (its "rows" would be columns, silently)."""
    x = raw(m)
    if backend.is_sparse(x):
        return x if x.format == "csr" else x.tocsr()
    if not hasattr(x, "shape") or not hasattr(x, "reshape"):
        x = np.asarray(x)  # lists
    if x.ndim == 1:
        x = x.reshape(-1, 1)
    if x.ndim != 2:
        raise ValueError(f"data matrix {name!r} (argument {i}) must be 2-D (samples x "
                         f"columns); got shape {tuple(x.shape)}")
    return x


def raw(X: Any) -> Any:
    """The raw array (or CSR matrix) of a ``Mat`` / ``SMat``; anything else as given."""
    return X.csr if isinstance(X, SMat) else (X.data if isinstance(X, Mat) else X)


def _view(m: Any, a: int, z: int) -> Any:
    if backend.is_sparse(m):
        if a == 0 and z == m.shape[0] and int(m.indptr[z]) == m.indices.shape[0]:
            return SMat(m)  # the whole matrix, no spare room: wrapped as it is
        p0, p1 = int(m.indptr[a]), int(m.indptr[z])
        csp = backend.sparse_module(backend.namespace(m.data))
        part = csp.csr_matrix((m.data[p0:p1], m.indices[p0:p1], m.indptr[a : z + 1] - p0),
                              shape=(z - a, m.shape[1]), copy=False)
        return SMat(part)
    return Mat(m[a:z])


def _nbytes(v: Any) -> int:
    if isinstance(v, SMat):  # its arrays, without making a scipy matrix of them
        return int(v.data.nbytes + v.indices.nbytes + v.indptr.nbytes)
    return int(v.data.nbytes)
