"""What ``python -m bidlab.bench kernels`` measures: its workload and the six kernel cases.

:func:`power_law_csr` makes the sparse operand (Zipf-like columns, log-normal rows: the
shape of a bag-of-words matrix, where a uniform random matrix would flatter the kernels'
load balance). :func:`build_cases` pairs each kernel of :mod:`bidlab.kern` (SDDMM, the four
sparse-dense products, ``expdigamma``) with the numpy / scipy way of computing the same
result, in one thread and split into row blocks (:func:`row_blocks`, balanced by nonzeros)
on a thread pool, every output preallocated so that the timings see no allocation. The
timing, the roofline and the report are :mod:`bidlab.bench.kernels`'; kept apart so that
what is measured reads separately from how it is timed.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

# ----------------------------------------------------------------------------- workload


def power_law_csr(m: int, n: int, nnz: int, seed: int = 0) -> sp.csr_matrix:
    """An m x n float32 CSR matrix with about ``nnz`` nonzeros and Zipf-like columns.

    Column j is drawn with probability proportional to ~1/(j + 1) (continuous inverse CDF),
    row lengths are log-normal (sigma 1, capped at n / 2), and repeated draws in a row are
    merged, as in a bag-of-words matrix. To land on ``nnz`` after merging, each row's number
    of draws is chosen from the expected number of distinct columns ``g(L) = sum_j 1 - (1 -
    p_j)^L`` for L draws. Fast and sort-free: a row's sorted uniforms are the normalised
    running sums of exponentials, and the inverse CDF is monotone, so every row's columns come
    out sorted and duplicates are neighbours. Values are uniform in [0.5, 1.5).
    """
    rng = np.random.default_rng(seed)
    lg = np.log1p(n)
    p = np.diff(np.log1p(np.arange(n + 1, dtype=np.float64)) / lg)
    log_miss = np.log1p(-np.minimum(p, 1 - 1e-12))
    grid = np.unique(np.round(np.geomspace(1, 200 * n, 400)))
    distinct = np.array([-np.expm1(draws * log_miss).sum() for draws in grid])
    want = rng.lognormal(0.0, 1.0, m)
    for _ in range(3):  # rescale to the target total, then cap; repeat to settle
        want = np.clip(want * (nnz / want.sum()), 1.0, 0.5 * n)
    draws = np.maximum(1, np.rint(np.interp(want, distinct, grid))).astype(np.int64)
    total = int(draws.sum())

    expo = rng.standard_exponential(total + m)
    run = np.cumsum(expo, out=expo)
    ends = np.cumsum(draws + 1) - 1
    base = np.concatenate(([0.0], run[ends[:-1]]))
    span = run[ends] - base
    keep = np.ones(total + m, bool)
    keep[ends] = False
    row_of = np.repeat(np.arange(m, dtype=np.int32), draws)
    u = run[keep]
    del run, expo, keep
    u -= base[row_of]
    u /= span[row_of]
    u *= lg
    cols = np.expm1(u, out=u).astype(np.int32)
    del u
    np.minimum(cols, n - 1, out=cols)
    first = np.ones(total, bool)
    np.not_equal(cols[1:], cols[:-1], out=first[1:])
    first[1:] |= row_of[1:] != row_of[:-1]
    cols = cols[first]
    counts = np.bincount(row_of[first], minlength=m)
    del row_of, first
    itype = np.int32 if cols.shape[0] < 2**31 else np.int64
    indptr = np.zeros(m + 1, itype)
    np.cumsum(counts, out=indptr[1:])
    data = rng.random(cols.shape[0], dtype=np.float32) + np.float32(0.5)
    S = sp.csr_matrix((data, cols.astype(itype, copy=False), indptr), shape=(m, n))
    S.has_sorted_indices = True
    S.has_canonical_format = True
    return S


def row_blocks(indptr: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Split the rows into ``parts`` contiguous blocks holding about equal nonzero counts."""
    m = indptr.shape[0] - 1
    cuts = np.searchsorted(indptr, np.linspace(0, indptr[-1], parts + 1)[1:-1], side="left")
    edges = np.unique(np.concatenate(([0], np.clip(cuts, 0, m), [m])))
    return [(int(lo), int(hi)) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


# ----------------------------------------------------------------------------- a case


@dataclass
class Case:
    """One kernel: bidlab's call and the numpy/scipy ways (each returns its result)."""

    name: str
    what: str
    work: float  # flops (products) or elements (expdigamma)
    unit: str
    bidlab: Callable[[], np.ndarray]
    single: Callable[[], np.ndarray]
    blocked: Callable[[], np.ndarray]
    single_how: str
    blocked_how: str
    bytes_per_work: float = 8.0 / 2.0  # the roofline's 2/8 flops per byte
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- the numpy ways


def sddmm_numpy(AT: np.ndarray, BT: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                out: np.ndarray, lo: int, hi: int, chunk: int) -> None:
    """out[p] = AT[rows[p]] . BT[cols[p]] for p in [lo, hi): np.take gathers, einsum reduces.

    Works ``chunk`` nonzeros at a time into two reused (chunk, k) buffers, so memory stays
    bounded whatever nnz is.
    """
    k = AT.shape[1]
    ga = np.empty((min(chunk, max(hi - lo, 1)), k), AT.dtype)
    gb = np.empty_like(ga)
    for p0 in range(lo, hi, chunk):
        p1 = min(p0 + chunk, hi)
        w = p1 - p0
        np.take(AT, rows[p0:p1], axis=0, out=ga[:w])
        np.take(BT, cols[p0:p1], axis=0, out=gb[:w])
        np.einsum("ij,ij->i", ga[:w], gb[:w], out=out[p0:p1])


def _numpy_expdigamma(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """numpy's exp(digamma(x)) into ``out`` (scipy.special.digamma then np.exp, in place)."""
    from scipy import special

    special.digamma(x, out=out)
    np.exp(out, out=out)
    return out


# ----------------------------------------------------------------------------- the cases


def build_cases(S: sp.csr_matrix, k: int, threads: int, chunk: int,
                pool: ThreadPoolExecutor, seed: int = 1) -> list[Case]:
    """The six kernels on S with K = k, their outputs preallocated (bidlab's ``out=``)."""
    from bidlab import kern

    rng = np.random.default_rng(seed)
    m, n = S.shape
    nnz = S.nnz
    f32 = np.float32
    # Dense operands as the models hold them: k x (rows or cols) F-ordered, i.e. every
    # column's k values contiguous; their .T are the C-ordered row views the kernels use.
    A_m = np.asfortranarray(rng.random((k, m), dtype=f32))   # k x m
    A_n = np.asfortranarray(rng.random((k, n), dtype=f32))   # k x n
    B_n = np.ascontiguousarray(A_n.T)                          # n x k
    B_m = np.ascontiguousarray(A_m.T)                          # m x k
    blocks = row_blocks(S.indptr, threads)
    Sb = [S[lo:hi] for lo, hi in blocks]
    flops = 2.0 * k * nnz
    cases: list[Case] = []

    def par(fn: Callable[[int], Any]) -> list[Any]:
        return list(pool.map(fn, range(len(blocks))))

    # SDDMM: A k x m, B k x n -> values on S's pattern
    rows = np.repeat(np.arange(m, dtype=S.indices.dtype), np.diff(S.indptr))
    sd_out = np.empty(nnz, f32)
    sd_np = np.empty(nnz, f32)
    pblocks = [(int(S.indptr[lo]), int(S.indptr[hi])) for lo, hi in blocks]

    def sd_single() -> np.ndarray:
        sddmm_numpy(A_m.T, A_n.T, rows, S.indices, sd_np, 0, nnz, chunk)
        return sd_np

    def sd_blocked() -> np.ndarray:
        par(lambda b: sddmm_numpy(A_m.T, A_n.T, rows, S.indices, sd_np, *pblocks[b], chunk))
        return sd_np

    cases.append(Case(
        "sddmm", f"A ({k}x{m}) . B ({k}x{n}) on S's pattern", flops, "GFLOP/s",
        lambda: kern.sddmm(A_m, A_n, S, out=sd_out), sd_single, sd_blocked,
        f"np.take row gathers + einsum, chunks of {chunk}",
        f"same, nonzeros split in {len(blocks)} blocks on {threads} threads",
        extra={"rows_index_precomputed": True}))

    # dense_sparse: A (k x m) @ S -> k x n (scatter in bidlab)
    ds_out = np.empty((k, n), f32, order="F")

    def ds_blocked() -> np.ndarray:
        parts = par(lambda b: A_m[:, blocks[b][0]:blocks[b][1]] @ Sb[b])
        return sum(parts[1:], parts[0])

    cases.append(Case(
        "dense_sparse", f"A ({k}x{m}) @ S -> {k}x{n}", flops, "GFLOP/s",
        lambda: kern.dense_sparse(A_m, S, out=ds_out), lambda: A_m @ S, ds_blocked,
        "A @ S (scipy)", f"A[:, rows_b] @ S[rows_b] in {len(blocks)} row blocks, summed"))

    # dense_sparse_t: A (k x n) @ S.T -> k x m (gather in bidlab)
    dst_out = np.empty((k, m), f32, order="F")
    dst_np = np.empty((k, m), f32, order="F")

    def dst_blocked() -> np.ndarray:
        def one(b: int) -> None:
            lo, hi = blocks[b]
            dst_np[:, lo:hi] = A_n @ Sb[b].T
        par(one)
        return dst_np

    cases.append(Case(
        "dense_sparse_t", f"A ({k}x{n}) @ S.T -> {k}x{m}", flops, "GFLOP/s",
        lambda: kern.dense_sparse_t(A_n, S, out=dst_out), lambda: A_n @ S.T, dst_blocked,
        "A @ S.T (scipy)", f"A @ S[rows_b].T into out[:, rows_b], {len(blocks)} row blocks"))

    # sparse_dense: S @ B (n x k) -> m x k (gather)
    sdn_out = np.empty((m, k), f32)
    sdn_np = np.empty((m, k), f32)

    def sdn_blocked() -> np.ndarray:
        def one(b: int) -> None:
            lo, hi = blocks[b]
            sdn_np[lo:hi] = Sb[b] @ B_n
        par(one)
        return sdn_np

    cases.append(Case(
        "sparse_dense", f"S @ B ({n}x{k}) -> {m}x{k}", flops, "GFLOP/s",
        lambda: kern.sparse_dense(S, B_n, out=sdn_out), lambda: S @ B_n, sdn_blocked,
        "S @ B (scipy)", f"S[rows_b] @ B into out[rows_b], {len(blocks)} row blocks"))

    # sparse_t_dense: S.T @ B (m x k) -> n x k (scatter)
    std_out = np.empty((n, k), f32)

    def std_blocked() -> np.ndarray:
        parts = par(lambda b: Sb[b].T @ B_m[blocks[b][0]:blocks[b][1]])
        return sum(parts[1:], parts[0])

    cases.append(Case(
        "sparse_t_dense", f"S.T @ B ({m}x{k}) -> {n}x{k}", flops, "GFLOP/s",
        lambda: kern.sparse_t_dense(S, B_m, out=std_out), lambda: S.T @ B_m, std_blocked,
        "S.T @ B (scipy)", f"S[rows_b].T @ B[rows_b] in {len(blocks)} row blocks, summed"))

    # expdigamma on a k x m matrix (LDA's doc-topic update), float32
    x = np.asfortranarray(rng.random((k, m), dtype=f32) * 10 + 0.01)
    ed_out = np.empty_like(x)
    ed_np = np.empty_like(x)
    cblocks = row_blocks(np.linspace(0, m, m + 1).astype(np.int64), threads)

    def ed_blocked() -> np.ndarray:
        par(lambda b: _numpy_expdigamma(x[:, cblocks[b][0]:cblocks[b][1]],
                                        ed_np[:, cblocks[b][0]:cblocks[b][1]]))
        return ed_np

    cases.append(Case(
        "expdigamma", f"exp(digamma(x)), x {k}x{m}", float(x.size), "Gelem/s",
        lambda: kern.expdigamma(x, out=ed_out), lambda: _numpy_expdigamma(x, ed_np),
        ed_blocked, "np.exp(scipy.special.digamma(x))",
        f"same on {len(cblocks)} column blocks", bytes_per_work=8.0))
    return cases
