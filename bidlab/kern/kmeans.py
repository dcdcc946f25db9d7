"""k-means kernels: nearest two centres from a distance GEMM, per-cluster statistics and
Hamerly's bound test.

Squared distances come from one GEMM, ``||x||^2 - 2 x.c + ||c||^2``; the caller computes
``D = X @ C.T`` (BLAS / cuBLAS) and :func:`assign` finishes the job. Each function has a
fused numba kernel for the CPU and a generic ``xp`` version (numpy or CuPy) that the tests
compare it with. The fused Lloyd step over a block of dense CPU rows (bound test, GEMM,
nearest two and sums in one kernel) is in :mod:`bidlab.kern.kmeans_lloyd`. Numpy oracles::

    vals = cc[None, :] - 2 * D                    # ||x||^2 is the same for every centre
    labels = vals.argmin(1); d1 = max(xx + vals.min(1), 0); d2 = the second smallest + xx
    sums[j] += (w * X)[labels == j].sum(0); counts[j] += w[labels == j].sum()
    dist = ((X - C[labels]) ** 2).sum(1)          # computed directly, no cancellation
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab import backend
from bidlab.kern import arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.kmeans_centres import centre_drift, centre_means
from bidlab.kern.kmeans_csr import csr_center_sums
from bidlab.kern.standin import stand_in
from bidlab.kern.threads import max_threads

__all__ = ["assign", "center_sums", "assigned_sq_dist", "CenterWork", "centre_drift",
           "centre_means",
           "chunk_rows", "csr_center_sums", "hamerly", "row_norms_sq"]

_NO_WEIGHTS = np.empty(0, np.float64)


@numba.njit(fastmath={"reassoc", "contract", "arcp", "nsz"}, cache=True, nogil=True,
            inline="always")
def _two_smallest(row, cc):  # pragma: no cover - compiled
    # (index, value) of the smallest cc[j] - 2 row[j] and the second smallest value, in the
    # data's dtype (no conversions); the outer test fails for most j, so it rarely branches
    b1 = cc[0] - (row[0] + row[0])
    b2 = np.float32(np.inf)
    j1 = 0
    for j in range(1, row.shape[0]):
        v = cc[j] - (row[j] + row[j])
        if v < b2:
            if v < b1:
                b2 = b1
                b1 = v
                j1 = j
            else:
                b2 = v
    return j1, b1, b2


@adaptive_kernel(fastmath={"reassoc", "contract", "arcp", "nsz"}, cache=True, nogil=True)
def _assign_cpu(D, cc, xx, labels, d1, d2):  # pragma: no cover - compiled
    m, k = D.shape
    for i in numba.prange(m):
        j1, b1, b2 = _two_smallest(D[i], cc)
        labels[i] = j1
        d1[i] = max(xx[i] + b1, 0.0)
        d2[i] = max(xx[i] + b2, 0.0)


def assign(D: Any, cc: Any, xx: Any, labels: Any, d1: Any, d2: Any) -> None:
    """Nearest centre, its squared distance and the second-nearest's, per row of ``D``.

    ``D`` m x k = X @ C.T, ``cc`` (k,) squared centre norms, ``xx`` (m,) squared row norms;
    writes ``labels`` (m,) int64, ``d1`` / ``d2`` (m,) floats.
    """
    if isinstance(D, np.ndarray) and D.flags.c_contiguous:
        _assign_cpu(D.size, D, cc, xx, labels, d1, d2)
        return
    xp = backend.namespace(D)
    vals = cc[None, :] - 2.0 * D
    labels[...] = xp.argmin(vals, axis=1)
    if vals.shape[1] > 1:
        two = xp.partition(vals, 1, axis=1)[:, :2]
    else:
        two = xp.concatenate([vals, xp.full_like(vals, xp.inf)], axis=1)
    xp.maximum(two[:, 0] + xx, 0.0, out=d1)
    xp.maximum(two[:, 1] + xx, 0.0, out=d2)


class CenterWork:
    """Per-thread partial sums for :func:`center_sums` on the CPU, allocated once and
    reused, so a training step allocates nothing.

    It also accumulates statistics over many row blocks (a Lloyd pass): :meth:`reset`,
    then :meth:`add` per block (no zeroing, no reduction), then :meth:`total` once, so a
    pass pays for the k x d partials once instead of once per block. On the GPU (``xp``
    CuPy) there is one partial, added to with the generic ``xp`` code.

    The rows are split into ``nparts`` shares, one per thread numba can run
    (``NUMBA_NUM_THREADS``), whatever thread limit (``n_jobs``, ``threadpool_limits``) is
    set: the shares fix the GEMM blocks and the order of the sums, so a limit changes the
    time, never a label or a bit of the centres.
    """

    def __init__(self, k: int, d: int, xp: Any = np) -> None:
        self.cpu = xp is np
        self.nparts = max(1, max_threads()) if self.cpu else 1
        self.part = backend.zeros((self.nparts, k, d), np.float64, xp)
        self.pc = backend.zeros((self.nparts, k), np.float64, xp)
        self._blocks: tuple[Any, ...] | None = None
        self._tmp: tuple[Any, Any] | None = None
        self.dirty = self.nparts  # partials that may hold values: reset zeroes those

    def blocks(self, dtype: Any) -> tuple[Any, ...]:
        """Per-thread scratch of :func:`~bidlab.kern.kmeans_lloyd.lloyd_block` (made on
        first use): distances (k x chunk, flat) and their rows-first product (chunk x k,
        flat), gathered rows (chunk x d), row numbers, the two smallest values and the
        nearest centre per row, and counters."""
        dtype = np.dtype(dtype)
        if self._blocks is None or self._blocks[0].dtype != dtype:
            _, k, d = self.part.shape
            rows = chunk_rows(k, d, dtype.itemsize)
            p = self.nparts
            self._blocks = (np.empty((p, k * rows), dtype), np.empty((p, k * rows), dtype),
                            np.empty((p, rows, d), dtype),
                            np.empty((p, rows), np.int64), np.empty((p, rows), dtype),
                            np.empty((p, rows), dtype), np.empty((p, rows), np.int64),
                            np.zeros((p, 2), np.int64))
        return self._blocks

    def reset(self) -> None:
        """Zero the partials (start of an accumulation); on the CPU only those written."""
        if not self.cpu:
            self.part.fill(0)
            self.pc.fill(0)
            return
        if self.dirty:
            self.part[:self.dirty].fill(0)  # a memset: no kernel to compile
            self.pc[:self.dirty].fill(0)
        self.dirty = 0

    def add(self, X: Any, labels: Any, w: Any = None) -> None:
        """Add a block's per-cluster (weighted) row sums and weights to the partials.

        CSR rows on the CPU go into the first partial alone, each thread adding the
        columns of its share (:func:`csr_center_sums`): the other partials stay zero, and
        a pass over wide sparse rows zeroes and reduces one k x d block, not one per
        thread."""
        if not self.cpu:
            center_sums(X, labels, self.part[0], self.pc[0], w, self)
        elif backend.is_sparse(X):
            csr_center_sums(X, labels, self.part[0], self.pc[0], w)
            self.dirty = max(self.dirty, 1)
        else:
            _accumulate(X, labels, w, self.part, self.pc, self.nparts, False, True)
            self.dirty = self.nparts

    def total(self, sums: Any, counts: Any) -> None:
        """Add the accumulated sums and weights to ``sums`` (k x d) and ``counts`` (k,)."""
        if not self.cpu:
            sums += self.part.sum(axis=0)
            counts += self.pc.sum(axis=0)
        elif self.dirty <= 1:
            sums += self.part[0]
            counts += self.pc[0]
        else:
            if self._tmp is None or self._tmp[0].dtype != sums.dtype:
                self._tmp = (np.empty(sums.shape, sums.dtype),
                             np.empty(counts.shape, counts.dtype))
            _reduce_parts(self.part, self.pc, self.dirty, sums, counts, self._tmp)

    def total_into(self, sums: Any, counts: Any) -> None:
        """Write (not add) the accumulated sums and weights into ``sums`` (k x d, any float
        dtype) and ``counts`` (k,): with one partial written, a copy of it, no k x d
        zeroing and addition first."""
        if self.cpu and self.dirty <= 1:
            np.copyto(sums, self.part[0], casting="unsafe")
            np.copyto(counts, self.pc[0], casting="unsafe")
            return
        sums[...] = 0
        counts[...] = 0
        self.total(sums, counts)

    def seed(self, sums: Any, counts: Any) -> None:
        """Start an accumulation from given sums and weights (a resumed pass)."""
        self.reset()
        self.part[0] = sums
        self.pc[0] = counts
        self.dirty = max(self.dirty, 1)

    def written(self) -> None:
        """Note that a kernel wrote every partial (the fused Lloyd block)."""
        self.dirty = self.nparts



@numba.njit(inline="always")
def _bounds_fail(i, labels, u, lo, drift, s, top, m1, m2):  # pragma: no cover - compiled
    """Move row i's Hamerly bounds by the centres' drift; True when they cannot clear it."""
    j = labels[i]
    ui = u[i] + drift[j]
    u[i] = ui
    li = lo[i] - (m2 if j == top else m1)
    lo[i] = li
    # float32 distances from the GEMM formula carry rounding error: a small margin
    return ui + 1e-3 * (ui + 1e-12) > max(s[j], li)


@numba.njit(inline="always")
def _add_to_sums(P, pc, t, X, i, j, w, weighted):  # pragma: no cover - compiled
    """Add row i of X (times w[i] when weighted) to thread t's sums of cluster j."""
    row, x = P[j], X[i]
    if weighted:
        wi = w[i]
        pc[t, j] += wi
        for q in range(x.shape[0]):
            row[q] += wi * x[q]
    else:
        pc[t, j] += 1.0
        for q in range(x.shape[0]):
            row[q] += x[q]

@adaptive_kernel(fastmath={"reassoc", "contract"}, cache=True, nogil=True)
def _sums_dense_cpu(X, labels, w, part, pc, nparts, zero):  # pragma: no cover - compiled
    # Each part adds its rows into a private k x d float64 block through 1-D row views
    # (contiguous, so the inner loop vectorises: 4x faster than 3-D indexing, measured).
    n, d = X.shape
    weighted = w.shape[0] > 0
    step = (n + nparts - 1) // nparts
    for t in numba.prange(nparts):
        P = part[t]
        if zero:
            P[:, :] = 0.0
            pc[t, :] = 0.0
        for i in range(t * step, min(n, (t + 1) * step)):
            _add_to_sums(P, pc, t, X, i, labels[i], w, weighted)


@adaptive_kernel(cache=True, nogil=True)
def _sums_csr_cpu(indptr, indices, data, labels, w, part, pc, nparts,
                  zero):  # pragma: no cover - compiled
    n = indptr.shape[0] - 1
    weighted = w.shape[0] > 0
    step = (n + nparts - 1) // nparts
    for t in numba.prange(nparts):
        if zero:
            part[t, :, :] = 0.0
            pc[t, :] = 0.0
        for i in range(t * step, min(n, (t + 1) * step)):
            j = labels[i]
            wi = w[i] if weighted else 1.0
            pc[t, j] += wi
            for p in range(indptr[i], indptr[i + 1]):
                part[t, j, indices[p]] += wi * data[p]


def _reduce_parts(part: Any, pc: Any, nparts: int, sums: Any, counts: Any,
                  tmp: tuple[Any, Any] | None = None) -> None:
    """Add the first ``nparts`` partials to ``sums`` and ``counts``, part 0 first.

    numpy, not a compiled loop: k x d x nparts additions are little beside the pass that
    filled the partials, and a parallel numba kernel here cost seconds of compiling on
    first use. ``tmp`` (k x d, k): kept buffers, so a step allocates nothing.
    """
    ts, tc = tmp if tmp is not None else (np.empty_like(sums), np.empty_like(counts))
    np.sum(part[:nparts], axis=0, out=ts)
    sums += ts
    np.sum(pc[:nparts], axis=0, out=tc)
    counts += tc


def _accumulate(X: Any, labels: Any, w: Any, part: Any, pc: Any, nparts: int,
                zero: bool, adaptive: bool) -> None:
    """Add rows into the partials: row range t of ``nparts`` goes into ``part[t]``.

    The ranges are fixed by ``nparts``, not by the threads that run them, so the adaptive
    choice of one thread or all (:mod:`bidlab.kern.adaptive`) changes no bit of the
    result: right after a multi-threaded BLAS call one thread is often faster.
    """
    ww = _NO_WEIGHTS if w is None else np.asarray(w, np.float64).reshape(-1)
    if backend.is_sparse(X):
        args = (X.indptr, X.indices, X.data, labels, ww, part, pc, nparts, zero)
        if adaptive:
            _sums_csr_cpu(X.nnz, *args)
        else:
            _sums_csr_cpu.parallel(*args)
    else:
        args = (np.ascontiguousarray(X), labels, ww, part, pc, nparts, zero)
        if adaptive:
            _sums_dense_cpu(X.size, *args)
        else:
            _sums_dense_cpu.parallel(*args)


def center_sums(X: Any, labels: Any, sums: Any, counts: Any, w: Any = None,
                work: CenterWork | None = None) -> None:
    """Add each cluster's (weighted) row sum to ``sums`` and its total weight to ``counts``.

    ``X`` m x d (dense or CSR), ``labels`` (m,) int64, ``sums`` k x d float64, ``counts``
    (k,) float64, ``w`` (m,) float64 sample weights (None: all 1), ``work`` reusable CPU
    buffers (:class:`CenterWork`; made here when not given).
    """
    k, d = sums.shape
    if isinstance(sums, np.ndarray) and not backend.is_cupy_array(X):
        if backend.is_sparse(X) and sums.dtype == np.float64 and sums.flags.c_contiguous:
            csr_center_sums(X, labels, sums, counts, w)
            return
        if work is None or not work.cpu or work.part.shape[1:] != (k, d):
            work = CenterWork(k, d)
        nparts = max(1, min(work.nparts, X.shape[0]))
        _accumulate(X, labels, w, work.part, work.pc, nparts, True, False)
        work.dirty = max(work.dirty, nparts)
        _reduce_parts(work.part, work.pc, nparts, sums, counts)
        return
    xp = backend.namespace(sums)
    csp = backend.sparse_module(xp)
    n = X.shape[0]
    ww = xp.ones(n, dtype=sums.dtype) if w is None else xp.asarray(w, sums.dtype).reshape(-1)
    onehot = csp.csr_matrix((ww, labels, xp.arange(n + 1)), shape=(n, k))
    part = onehot.T @ X
    sums += part.toarray() if backend.is_sparse(part) else part
    counts += xp.bincount(labels, weights=ww, minlength=k).astype(counts.dtype)


_CHUNK_BYTES = 1 << 19  # a chunk's distances and gathered rows: part of an L2 cache


def chunk_rows(k: int, d: int, itemsize: int) -> int:
    """Rows per chunk of :func:`~bidlab.kern.kmeans_lloyd.lloyd_block`: its k distances
    and d gathered values per row stay within ``_CHUNK_BYTES``, between 32 and 1024 rows."""
    return int(min(1024, max(32, _CHUNK_BYTES // ((k + d) * itemsize))))


@adaptive_kernel(fastmath={"reassoc", "contract"}, cache=True, nogil=True)
def _dist_dense_cpu(X, labels, C, out):  # pragma: no cover - compiled
    n, d = X.shape
    for i in numba.prange(n):
        x = X[i]
        c = C[labels[i]]
        acc = 0.0
        for q in range(d):
            diff = np.float64(x[q] - c[q])
            acc += diff * diff
        out[i] = acc


@adaptive_kernel(cache=True, nogil=True)
def _dist_csr_cpu(indptr, indices, data, labels, C, cc, out):  # pragma: no cover - compiled
    n = indptr.shape[0] - 1
    for i in numba.prange(n):
        j = labels[i]
        c = C[j]
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v = data[p]
            acc += v * (v - 2.0 * c[indices[p]])
        out[i] = max(acc + cc[j], 0.0)


def assigned_sq_dist(X: Any, labels: Any, C: Any, out: Any, cc: Any = None) -> None:
    """``out[i] = ||x_i - C[labels_i]||^2``, measured directly (no GEMM cancellation; for
    CSR rows ``||x||^2 - 2 x.c + ||c||^2`` over the stored entries, with ``cc`` the
    centres' squared norms when the caller has them)."""
    if isinstance(C, np.ndarray) and not backend.is_cupy_array(X):
        if backend.is_sparse(X):
            if cc is None:
                cc = np.einsum("ij,ij->i", C, C, dtype=np.float64)
            _dist_csr_cpu(float(X.nnz + X.shape[0]), X.indptr, X.indices, X.data, labels, C,
                          cc, out)
        else:
            _dist_dense_cpu(float(X.size), np.ascontiguousarray(X), labels, C, out)
        return
    xp = backend.namespace(C)
    Cl = C[labels]
    if backend.is_sparse(X):
        xx = xp.asarray(X.multiply(X).sum(axis=1)).reshape(-1)
        cross = xp.asarray(X.multiply(Cl).sum(axis=1)).reshape(-1)
        xp.maximum(xx - 2.0 * cross + (Cl * Cl).sum(axis=1), 0.0, out=out)
    else:
        diff = X - Cl
        xp.sum(diff * diff, axis=1, out=out)


@numba.njit(cache=True, nogil=True)
def _hamerly_cpu(labels, u, lo, drift, s, top, m1, m2, need):  # pragma: no cover - compiled
    cnt = 0
    for i in range(labels.shape[0]):
        if _bounds_fail(i, labels, u, lo, drift, s, top, m1, m2):
            need[cnt] = i
            cnt += 1
    return cnt


def hamerly(labels: Any, u: Any, lo: Any, drift: Any, s: Any, top: int, m1: float, m2: float,
            need: Any) -> int:
    """Move Hamerly's bounds by the centres' drift and list the rows they cannot clear.

    ``u`` (upper bound on the distance to the own centre) grows by the own centre's drift,
    ``lo`` (lower bound on the distance to any other) shrinks by the largest drift of
    another centre (``m1``, or ``m2`` for rows of centre ``top``, the one that moved most).
    A row keeps its centre when ``u <= max(s[label], lo)`` (``s``: half the distance from
    each centre to its nearest other centre). Writes the others' positions into ``need``
    and returns how many there are.
    """
    if isinstance(u, np.ndarray):
        return int(_hamerly_cpu(labels, u, lo, drift, s, top, m1, m2, need))
    xp = backend.namespace(u)
    u += drift[labels]
    lo -= xp.where(labels == top, m2, m1).astype(lo.dtype)
    idx = xp.flatnonzero(u + 1e-3 * (u + 1e-12) > xp.maximum(s[labels], lo))
    cnt = int(idx.shape[0])
    need[:cnt] = idx
    return cnt


def row_norms_sq(X: Any, out: Any = None) -> Any:
    """Squared L2 norm of every row (dense or CSR), into ``out`` when given."""
    sparse = backend.is_sparse(X)
    xp = backend.namespace(X.data if sparse else X)
    if sparse:
        v = xp.asarray(X.multiply(X).sum(axis=1)).reshape(-1).astype(X.dtype)
        if out is None:
            return v
        out[...] = v
        return out
    if out is None:
        return xp.einsum("ij,ij->i", X, X)
    if xp is np:
        np.einsum("ij,ij->i", X, X, out=out)
    else:  # CuPy's einsum takes no out=: a pooled temporary, copied
        out[...] = xp.einsum("ij,ij->i", X, X)
    return out


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
stand_in(_assign_cpu)(arrays.assign)
stand_in(_dist_dense_cpu)(arrays.dist_dense)
stand_in(_dist_csr_cpu)(arrays.dist_csr)
stand_in(_sums_dense_cpu)(arrays.sums_dense_parts)
stand_in(_sums_csr_cpu)(arrays.sums_csr_parts)
