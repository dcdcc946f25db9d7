"""``python -m bidlab.bench kernels [--json] [--scale F]``: the CPU kernels against the roofline.

Workload: a power-law sparse 100,000 x 50,000 float32 CSR matrix with ~50 M
nonzeros (Zipf-like column popularity, log-normal row lengths, sorted unique indices) and
dense operands with K = 64. For each kernel of :mod:`bidlab.kern` it measures, in one run:

* bidlab's rate (best of ``--repeats`` after a warm-up, writing into a preallocated ``out``):
  GFLOP/s at 2 K nnz flops for the products, Gelem/s for ``expdigamma``;
* the STREAM-style triad bandwidth ``a = b + s c`` (numba, all threads, float64 arrays far
  larger than the last-level cache; STREAM's byte count, 24 bytes per element) and the
  roofline ``bandwidth x 2/8`` flops per byte (``bandwidth / 8`` elements per second for the
  float32 ``expdigamma``, 4 bytes in and 4 out);
* the numpy / scipy way of doing the same thing, single-threaded and split over all cores in
  row blocks of S (balanced by nonzeros) on a thread pool -- scipy's sparse products and
  numpy's gathers, einsum and ufuncs release the GIL, so the blocks really run in parallel.
  SDDMM's numpy way gathers both operands' rows (``np.take``) and reduces them with
  ``einsum`` in chunks of ``--chunk`` nonzeros, so its memory stays bounded; its row index
  array is precomputed outside the timing (a generous baseline).

Each bidlab result is checked against the numpy / scipy one (``max_rel_err``). Targets on the
2-core CPU machines: SDDMM >= 4x the numpy way and >= 0.8 of the roofline; dense x sparse
(``dense_sparse``, ``dense_sparse_t``) >= scipy's best row-blocked product on all cores.
Progress goes to stderr; with ``--json`` stdout holds only the JSON document.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.bench._common import emit, log, machine, print_targets, target

FULL_ROWS, FULL_COLS, FULL_NNZ, FULL_K = 100_000, 50_000, 50_000_000, 64

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


# ----------------------------------------------------------------------------- bandwidth


def triad_bandwidth(elements: int, repeats: int) -> float:
    """STREAM triad ``a = b + s c`` over float64 arrays, all numba threads: bytes/s (best).

    STREAM's count of 24 bytes per element (two reads, one write; write-allocate traffic is
    not counted). The arrays are touched once before timing so page faults are excluded.
    """
    import numba

    @numba.njit(parallel=True, cache=False)
    def triad(a, b, c, s):  # pragma: no cover - numba
        for i in numba.prange(a.shape[0]):
            a[i] = b[i] + s * c[i]

    a = np.zeros(elements)
    b = np.ones(elements)
    c = np.full(elements, 2.0)
    triad(a, b, c, 3.0)
    best = _best(lambda: triad(a, b, c, 3.0), repeats)
    return 24.0 * elements / best


# ----------------------------------------------------------------------------- timing


def _best(fn: Callable[[], Any], repeats: int, warmup: int = 0) -> float:
    """Best wall time of ``repeats`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return float(best)


def _best_interleaved(ways: list[tuple[Callable[[], Any], int]]) -> list[float]:
    """Best wall time of each (fn, repeats), the calls taken in rounds (a, b, c, a, b, c...).

    Interleaving spreads a noisy neighbour's load over every way alike, so the ratios
    between them stay meaningful on a shared machine.
    """
    best = [np.inf] * len(ways)
    for r in range(max(reps for _, reps in ways)):
        for w, (fn, reps) in enumerate(ways):
            if r < reps:
                t0 = time.perf_counter()
                fn()
                best[w] = min(best[w], time.perf_counter() - t0)
    return [float(b) for b in best]


def row_blocks(indptr: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Split the rows into ``parts`` contiguous blocks holding about equal nonzero counts."""
    m = indptr.shape[0] - 1
    cuts = np.searchsorted(indptr, np.linspace(0, indptr[-1], parts + 1)[1:-1], side="left")
    edges = np.unique(np.concatenate(([0], np.clip(cuts, 0, m), [m])))
    return [(int(lo), int(hi)) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def _rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (float64), a scale-free agreement check."""
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    diff = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    return diff / scale if scale > 0 else diff


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


# ----------------------------------------------------------------------------- run


def run(m: int, n: int, nnz: int, k: int, repeats: int, base_repeats: int, slow_repeats: int,
        chunk: int, triad_elements: int, seed: int = 0) -> dict[str, Any]:
    """Generate the workload, measure bandwidth and every kernel; return the JSON document."""
    import numba

    threads = numba.get_num_threads()
    t0 = time.perf_counter()
    S = power_law_csr(m, n, nnz, seed)
    gen_s = time.perf_counter() - t0
    log(f"matrix {m} x {n}, nnz {S.nnz:,} generated in {gen_s:.1f} s; {threads} threads")
    bw = triad_bandwidth(triad_elements, repeats=max(repeats, 5))
    log(f"triad bandwidth {bw / 1e9:.2f} GB/s")

    results: dict[str, Any] = {}
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for case in build_cases(S, k, threads, chunk, pool):
            # warm-up (compiles numba; checks agreement), then best-of timings
            got = np.asarray(case.bidlab())
            want = np.asarray(case.single())
            err = _rel_err(got, want)
            err_blocked = _rel_err(np.asarray(case.blocked()), want)
            reps_np = slow_repeats if case.name == "sddmm" else base_repeats
            t_bid, t_one, t_blk = _best_interleaved(
                [(case.bidlab, repeats), (case.single, reps_np), (case.blocked, reps_np)])
            scale = 1e9
            rate = case.work / t_bid / scale
            roof = bw / case.bytes_per_work / scale
            best_other = min(t_one, t_blk)
            r = {
                "what": case.what,
                "unit": case.unit,
                "seconds": t_bid,
                "rate": rate,
                "bytes_per_unit": case.bytes_per_work,
                "roofline": roof,
                "roofline_ratio": rate / roof,
                "single": {"how": case.single_how, "seconds": t_one,
                           "rate": case.work / t_one / scale},
                "blocked": {"how": case.blocked_how, "threads": threads, "seconds": t_blk,
                            "rate": case.work / t_blk / scale},
                "speedup_vs_single": t_one / t_bid,
                "speedup_vs_blocked": t_blk / t_bid,
                "speedup_vs_best": best_other / t_bid,
                "max_rel_err": err,
                "max_rel_err_blocked_vs_single": err_blocked,
                **case.extra,
            }
            results[case.name] = r
            log(f"{case.name:<15} {rate:7.2f} {case.unit} ({r['roofline_ratio']:.2f} of roof); "
                 f"numpy/scipy 1 thread {r['single']['rate']:.2f}, blocked "
                 f"{r['blocked']['rate']:.2f}")
            del got, want
    bw_end = triad_bandwidth(triad_elements, repeats=max(repeats, 5))
    log(f"triad bandwidth at the end {bw_end / 1e9:.2f} GB/s")
    bw_start, bw = bw, max(bw, bw_end)
    for r in results.values():  # the roofline from the best triad of the run
        r["roofline"] = bw / r.pop("bytes_per_unit") / 1e9
        r["roofline_ratio"] = r["rate"] / r["roofline"]

    sd, ds, dst = results["sddmm"], results["dense_sparse"], results["dense_sparse_t"]
    targets = [
        target("sddmm / the numpy way", sd["speedup_vs_single"], 4.0),
        target("sddmm / the roofline", sd["roofline_ratio"], 0.8),
        target("dense_sparse / scipy's best row-blocked product",
               ds["speedup_vs_blocked"], 1.0),
        target("dense_sparse_t / scipy's best row-blocked product",
               dst["speedup_vs_blocked"], 1.0),
    ]
    return {
        "benchmark": "kernels",
        "machine": machine(numba_threads=threads,
                           numba_threading_layer=numba.threading_layer()),
        "workload": {"rows": m, "cols": n, "nnz": int(S.nnz), "k": k, "dtype": "float32",
                     "format": "csr", "columns": "Zipf ~1/(j+1)", "rows_length": "log-normal",
                     "generate_s": gen_s},
        "repeats": {"bidlab": repeats, "numpy_sddmm": slow_repeats, "baselines": base_repeats,
                    "statistic": "best after one warm-up call"},
        "triad": {"bandwidth_GBps": bw / 1e9, "start_GBps": bw_start / 1e9,
                  "end_GBps": bw_end / 1e9, "elements": triad_elements, "dtype": "float64",
                  "bytes_per_element": 24, "statistic": "best of the start and end runs"},
        "roofline_gflops": bw * 2 / 8 / 1e9,
        "kernels": results,
        "targets": targets,
    }


def print_report(res: dict[str, Any]) -> None:
    """The readable table: rate, roofline share, the numpy/scipy ways and the ratios."""
    w, mach = res["workload"], res["machine"]
    print(f"== kernels: {w['rows']:,} x {w['cols']:,} CSR, nnz {w['nnz']:,}, K={w['k']}, "
          f"{w['dtype']}; {mach['cpu']}, {mach['numba_threads']} threads")
    print(f"   triad bandwidth {res['triad']['bandwidth_GBps']:.2f} GB/s -> roofline "
          f"{res['roofline_gflops']:.2f} GFLOP/s (2/8 flop/byte)")
    head = (f"   {'kernel':<15}{'bidlab':>9}{'unit':>9}{'of roof':>9}{'1-thread':>10}"
            f"{'blocked':>10}{'x 1-thr':>9}{'x blocked':>11}{'x best':>8}{'rel err':>10}")
    print(head)
    for name, r in res["kernels"].items():
        print(f"   {name:<15}{r['rate']:>9.2f}{r['unit']:>9}{r['roofline_ratio']:>9.2f}"
              f"{r['single']['rate']:>10.2f}{r['blocked']['rate']:>10.2f}"
              f"{r['speedup_vs_single']:>9.2f}{r['speedup_vs_blocked']:>11.2f}"
              f"{r['speedup_vs_best']:>8.2f}{r['max_rel_err']:>10.1e}")
    print("   (1-thread / blocked: the numpy/scipy way in one thread / in row blocks on all "
          "threads; x = bidlab's speed-up)")
    print_targets(res["targets"], indent="   ")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bidlab.bench kernels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="shrink rows, columns and nonzeros by this factor (e.g. 0.01)")
    ap.add_argument("--k", type=int, default=FULL_K, help="dense dimension K (default 64)")
    ap.add_argument("--repeats", type=int, default=5, help="timed bidlab calls (best kept)")
    ap.add_argument("--baseline-repeats", type=int, default=3,
                    help="timed calls of each scipy / numpy way (best kept)")
    ap.add_argument("--numpy-sddmm-repeats", type=int, default=2,
                    help="timed calls of the (slow) numpy SDDMM ways")
    ap.add_argument("--chunk", type=int, default=1 << 18,
                    help="nonzeros per chunk of the numpy SDDMM (bounds its memory)")
    ap.add_argument("--triad-mib", type=float, default=256.0,
                    help="size of each of the 3 triad arrays in MiB (default 256)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", choices=("parallel", "adaptive", "serial"), default="parallel",
                    help="kernel thread policy (default parallel: the roofline figures are "
                         "for all cores; adaptive is what models use)")
    args = ap.parse_args(argv)
    from bidlab.kern import adaptive as policy

    policy.set_policy(args.threads)
    if not 0 < args.scale <= 1:
        ap.error("--scale must be in (0, 1]")
    # numba's OpenMP workers spin after a parallel region and would steal the cores from the
    # scipy thread pool timed next; must be set before numba's first parallel launch.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    m = max(64, round(FULL_ROWS * args.scale))
    n = max(64, round(FULL_COLS * args.scale))
    nnz = max(m, round(FULL_NNZ * args.scale))
    triad_elements = max(1 << 16, int(args.triad_mib * 2**20 / 8))
    res = run(m, n, nnz, args.k, max(1, args.repeats), max(1, args.baseline_repeats),
              max(1, args.numpy_sddmm_repeats), max(1, args.chunk), triad_elements, args.seed)
    passed = sys.argv[1:] if argv is None else argv
    res["command"] = " ".join(["python -m bidlab.bench kernels", *passed])
    res["kernel_threads"] = args.threads
    return emit(res, args.json, print_report)


if __name__ == "__main__":
    raise SystemExit(main())
