"""``python -m bidlab.bench kernels --gpu``: the same kernels on the GPU against its roofline.

The workload of :mod:`bidlab.bench.kernels` (the power-law CSR matrix and K-wide dense
operands, float32) is copied to the device once; each of bidlab's sparse kernels then runs on
the CuPy arrays (``bidlab.kern`` dispatches on the array module) and is timed whole, best of
``repeats`` after a warm-up call, the clock stopped after the device has finished. Beside
each: the library way on the same device (cuSPARSE through ``cupyx.scipy.sparse`` for the
products; row gathers and a reduction in chunks for SDDMM), and the result's relative error
against it.

Roofline: a STREAM-style triad ``a = b + s c`` on the device (float64, 24 bytes per
element, the best of ``repeats``) and, as on the CPU, 2/8 flops per byte. Target (issue
text): SDDMM and the sparse products at >= 0.7 of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.bench._common import log, target

#: the roofline's flops per byte (the CPU benchmark's model)
FLOPS_PER_BYTE = 2.0 / 8.0


def _sync(cp: Any) -> None:
    cp.cuda.Device().synchronize()


def _best(cp: Any, fn: Callable[[], Any], repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` calls after one warm-up call."""
    fn()
    _sync(cp)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(cp)
        best = min(best, time.perf_counter() - t0)
    return best


def triad_bandwidth(cp: Any, elements: int, repeats: int) -> float:
    """Device bytes per second of ``a = b + s c`` over float64 arrays (STREAM's count)."""
    a = cp.zeros(elements)
    b = cp.ones(elements)
    c = cp.full(elements, 2.0)
    if hasattr(cp, "ElementwiseKernel"):
        kernel = cp.ElementwiseKernel("T b, T c, T s", "T a", "a = b + s * c", "bidlab_triad")

        def triad() -> Any:
            return kernel(b, c, 3.0, a)
    else:  # an array module without custom kernels: two passes (a lower bound)
        def triad() -> Any:
            return cp.add(b, cp.multiply(c, 3.0), out=a)
    return 24.0 * elements / _best(cp, triad, repeats)


def _rel_err(cp: Any, got: Any, want: Any) -> float:
    got = np.asarray(got.get() if hasattr(got, "get") else got, np.float64)
    want = np.asarray(want.get() if hasattr(want, "get") else want, np.float64)
    scale = max(float(np.abs(want).max()), 1e-30)
    return float(np.abs(got - want).max() / scale)


def gpu_run(S: sp.csr_matrix, k: int, repeats: int, triad_elements: int,
            chunk: int = 1 << 22, seed: int = 1) -> dict[str, Any]:
    """Every sparse kernel on the device: rates, the roofline share, the cuSPARSE way."""
    from bidlab import backend, kern

    cp = backend.cupy()
    rng = np.random.default_rng(seed)
    m, n = S.shape
    nnz = int(S.nnz)
    f32 = np.float32
    Sd = backend.to_device(S.astype(f32))
    A_m = cp.asfortranarray(cp.asarray(rng.random((k, m), dtype=f32)))  # k x m
    A_n = cp.asfortranarray(cp.asarray(rng.random((k, n), dtype=f32)))  # k x n
    B_m, B_n = cp.ascontiguousarray(A_m.T), cp.ascontiguousarray(A_n.T)
    rows = cp.asarray(np.repeat(np.arange(m, dtype=S.indices.dtype), np.diff(S.indptr)))
    cols = Sd.indices
    bw = triad_bandwidth(cp, triad_elements, max(repeats, 5))
    log(f"GPU triad bandwidth {bw / 1e9:.1f} GB/s")

    def sddmm_lib() -> Any:
        out = cp.empty(nnz, f32)
        for lo in range(0, nnz, chunk):
            hi = min(nnz, lo + chunk)
            out[lo:hi] = (B_m[rows[lo:hi]] * B_n[cols[lo:hi]]).sum(axis=1)
        return out

    outs = {"sddmm": cp.empty(nnz, f32), "sparse_dense": cp.empty((m, k), f32),
            "sparse_t_dense": cp.empty((n, k), f32),
            "dense_sparse": cp.empty((k, n), f32, order="F"),
            "dense_sparse_t": cp.empty((k, m), f32, order="F")}
    St = Sd.T.tocsr()
    cases: list[tuple[str, str, Callable[[], Any], Callable[[], Any], str]] = [
        ("sddmm", f"A ({k}x{m}) . B ({k}x{n}) on S's pattern",
         lambda: kern.sddmm(A_m, A_n, Sd, out=outs["sddmm"]), sddmm_lib,
         "row gathers + sum, in chunks"),
        ("sparse_dense", f"S @ B ({n}x{k}) -> {m}x{k}",
         lambda: kern.sparse_dense(Sd, B_n, out=outs["sparse_dense"]), lambda: Sd @ B_n,
         "cuSPARSE S @ B"),
        ("sparse_t_dense", f"S.T @ B ({m}x{k}) -> {n}x{k}",
         lambda: kern.sparse_t_dense(Sd, B_m, out=outs["sparse_t_dense"]), lambda: St @ B_m,
         "cuSPARSE S.T @ B (S.T stored)"),
        ("dense_sparse", f"A ({k}x{m}) @ S -> {k}x{n}",
         lambda: kern.dense_sparse(A_m, Sd, out=outs["dense_sparse"]), lambda: (St @ B_m).T,
         "cuSPARSE (S.T @ A.T).T"),
        ("dense_sparse_t", f"A ({k}x{n}) @ S.T -> {k}x{m}",
         lambda: kern.dense_sparse_t(A_n, Sd, out=outs["dense_sparse_t"]),
         lambda: (Sd @ B_n).T, "cuSPARSE (S @ A.T).T"),
    ]
    results: dict[str, Any] = {}
    flops = 2.0 * k * nnz
    roof = bw * FLOPS_PER_BYTE / 1e9
    for name, what, ours, lib, how in cases:
        err = _rel_err(cp, ours(), lib())
        t_ours = _best(cp, ours, repeats)
        t_lib = _best(cp, lib, repeats)
        rate = flops / t_ours / 1e9
        results[name] = {"what": what, "unit": "GFLOP/s", "seconds": t_ours, "rate": rate,
                         "roofline": roof, "roofline_ratio": rate / roof,
                         "library": {"how": how, "seconds": t_lib,
                                     "rate": flops / t_lib / 1e9},
                         "speedup_vs_library": t_lib / t_ours, "max_rel_err": err}
        log(f"GPU {name:<15} {rate:8.1f} GFLOP/s ({rate / roof:.2f} of roof); "
            f"{how} {flops / t_lib / 1e9:.1f}")
    targets = [target(f"GPU {name} / the roofline", r["roofline_ratio"], 0.7)
               for name, r in results.items()]
    device = cp.cuda.runtime.getDeviceProperties(0)["name"] if hasattr(
        cp.cuda, "runtime") else "device"
    return {"device": device.decode() if isinstance(device, bytes) else str(device),
            "triad": {"bandwidth_GBps": bw / 1e9, "elements": triad_elements,
                      "dtype": "float64", "bytes_per_element": 24},
            "roofline_gflops": roof, "kernels": results, "targets": targets}
