"""The GPU kernels of :mod:`bidlab.kern`: CuPy RawModules over the sources in ``kernels/``.

Each ``.cu`` file is one RawModule, compiled once per device, value type and index type
(:func:`_function`); this file only wires launches to it. The launch functions take the
same row views as :mod:`bidlab.kern.cpu` and pass each view's strides (in elements), so
no transpose or copy is made. Operands must share one floating dtype (float32 or float64);
the dispatcher in :mod:`bidlab.kern` casts mixed ones first.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from bidlab import backend

THREADS = 256
WARP = 32

_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_ITYPE = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}


@functools.cache
def _module(device_id: int, source: str, names: tuple[str, ...]) -> Any:
    """One compiled RawModule per (device, source file); kernels are prefixed ``bidlab_``."""
    del device_id  # part of the memo key: CuPy modules are per device
    from bidlab._source_checkout import cuda_source_dir

    cp = backend.cupy()
    code = (cuda_source_dir() / source).read_text()
    return cp.RawModule(code=code, options=("--std=c++17",), name_expressions=list(names))


#: lanes per stored entry that the SDDMM kernel is built for (powers of two up to a warp)
SDDMM_LANES = (4, 8, 16, 32)

_SPARSE_NAMES = tuple(
    f"bidlab_sddmm<{t}, {i}, {g}>"
    for t in ("float", "double")
    for i in ("int", "long long")
    for g in SDDMM_LANES
) + tuple(
    f"bidlab_{k}<{t}, {i}>"
    for k in ("gather", "scatter")
    for t in ("float", "double")
    for i in ("int", "long long")
) + tuple(
    f"bidlab_csr_{k}<{t}, {t}, {i}>"
    for k in ("row_sums", "col_sums")
    for t in ("float", "double")
    for i in ("int", "long long")
)
_EXPDIGAMMA_NAMES = ("bidlab_expdigamma<float>", "bidlab_expdigamma<double>")


def _function(source: str, names: tuple[str, ...], name: str) -> Any:
    cp = backend.cupy()
    return _module(cp.cuda.Device().id, source, names).get_function(name)


def _ctype(values: Any) -> str:
    try:
        return _CTYPE[np.dtype(values.dtype)]
    except KeyError as exc:
        raise TypeError(f"the GPU kernels take float32/float64 values; got {values.dtype}") from exc


def _types(values: Any, index: Any) -> tuple[str, str]:
    try:
        itype = _ITYPE[np.dtype(index.dtype)]
    except KeyError as exc:
        raise TypeError(f"the GPU kernels take int32/int64 indices; got {index.dtype}") from exc
    return _ctype(values), itype


def _strides(a: Any) -> tuple[np.int64, np.int64]:
    """Row and column strides of a 2-D cupy array, in elements."""
    return np.int64(a.strides[0] // a.itemsize), np.int64(a.strides[1] // a.itemsize)


def _warp_grid(rows: int) -> tuple[int]:
    return ((rows * WARP + THREADS - 1) // THREADS,)


def sddmm_lanes(k: int) -> int:
    """Lanes of a warp that share one stored entry of SDDMM with ``k``-vectors: about eight
    products per lane, within :data:`SDDMM_LANES`.

    >>> [sddmm_lanes(k) for k in (1, 16, 64, 100, 256, 1024)]
    [4, 4, 8, 16, 32, 32]
    """
    want = max(1, -(-int(k) // 8))
    return next((g for g in SDDMM_LANES if g >= want), SDDMM_LANES[-1])


def sddmm_rows(indptr: Any, indices: Any, R: Any, C: Any, out: Any,
               lanes: int | None = None) -> None:
    """out[p] = R[i] . C[indices[p]] (one warp per CSR row; ``lanes`` lanes per entry,
    :func:`sddmm_lanes` by default, their sums met by shuffles)."""
    m, k = R.shape
    if m == 0 or out.size == 0:
        return
    g = sddmm_lanes(k) if lanes is None else int(lanes)
    if g not in SDDMM_LANES:
        raise ValueError(f"sddmm_rows: lanes={lanes} is not one of {SDDMM_LANES}")
    t, i = _types(out, indices)
    fn = _function("sparse_products.cu", _SPARSE_NAMES, f"bidlab_sddmm<{t}, {i}, {g}>")
    fn(_warp_grid(m), (THREADS,),
       (indptr, indices, np.int64(m), np.int32(k), R, *_strides(R), C, *_strides(C), out))


def gather_rows(indptr: Any, indices: Any, data: Any, G: Any, out: Any) -> None:
    """out[i] = sum_p data[p] * G[indices[p]] (one warp per output row, no atomics)."""
    _csr_rows_times("bidlab_gather", out.shape, indptr, indices, data, G, out)


def scatter_rows(indptr: Any, indices: Any, data: Any, G: Any, out: Any) -> None:
    """out[indices[p]] += data[p] * G[i] (atomicAdd; out zeroed here first)."""
    out.fill(0)
    _csr_rows_times("bidlab_scatter", G.shape, indptr, indices, data, G, out)


def _csr_rows_times(kernel: str, rows_cols: tuple[int, int], indptr: Any, indices: Any,
                    data: Any, G: Any, out: Any) -> None:
    """Launch ``kernel`` (gather or scatter: one warp per CSR row of m rows, k columns of
    G and out) on the CSR (indptr, indices, data), dense G and out."""
    m, k = rows_cols
    if m == 0 or k == 0:
        return
    t, i = _types(out, indices)
    fn = _function("sparse_products.cu", _SPARSE_NAMES, f"{kernel}<{t}, {i}>")
    fn(_warp_grid(m), (THREADS,),
       (indptr, indices, data, np.int64(m), np.int32(k), G, *_strides(G), out, *_strides(out)))


def csr_row_sums(indptr: Any, data: Any, out: Any) -> None:
    """out[i] = sum of CSR row i's stored values (out: float32/float64, data cast to it)."""
    m = out.shape[0]
    if m == 0:
        return
    t, i = _types(out, indptr)
    fn = _function("sparse_products.cu", _SPARSE_NAMES, f"bidlab_csr_row_sums<{t}, {t}, {i}>")
    fn(_warp_grid(m), (THREADS,), (indptr, data.astype(out.dtype, copy=False), np.int64(m), out))


def csr_col_sums(indptr: Any, indices: Any, data: Any, out: Any) -> None:
    """out[j] = sum of column j's stored values (atomicAdd; out zeroed here first)."""
    out.fill(0)
    nnz = int(indices.shape[0])
    if nnz == 0:
        return
    t, i = _types(out, indices)
    fn = _function("sparse_products.cu", _SPARSE_NAMES, f"bidlab_csr_col_sums<{t}, {t}, {i}>")
    fn(((nnz + THREADS - 1) // THREADS,), (THREADS,),
       (indices, data.astype(out.dtype, copy=False), np.int64(nnz), out))


def expdigamma(x: Any, out: Any) -> None:
    """out = exp(digamma(x)) for contiguous arrays of one layout (grid-stride loop)."""
    n = int(x.size)
    if n == 0:
        return
    t = _ctype(out)
    fn = _function("expdigamma.cu", _EXPDIGAMMA_NAMES, f"bidlab_expdigamma<{t}>")
    blocks = min((n + THREADS - 1) // THREADS, 65535)
    fn((blocks,), (THREADS,), (x.astype(out.dtype, copy=False), out, np.int64(n)))
