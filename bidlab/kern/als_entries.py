"""The stored-entry products of the CG steps of :mod:`bidlab.kern.als` in array form
(its whole-array reference, which is also the GPU path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["CHUNK_ELEMENTS", "chunked_dots", "entry_products", "entry_rows"]


def entry_rows(S: Any, xp: Any) -> Any:
    """The row of each stored entry (CuPy's ``repeat`` takes no array of counts)."""
    return xp.searchsorted(S.indptr, xp.arange(S.nnz), side="right") - 1


#: elements of each temporary of the GPU's per-entry dot products: their work is cut into
#: chunks of ``CHUNK_ELEMENTS // f`` entries (256 MiB of float32 a temporary)
CHUNK_ELEMENTS = 1 << 26


def entry_products(S: Any, Zf: Any, xp: Any) -> tuple[Callable[[Any], Any], ...]:
    """The stored-entry products of :func:`solve_rows_reference` on ratings ``S`` against
    the other side's factors ``Zf``: ``dots(V)[p] = z_j . V[u]``, ``pull(w)[u] = sum_p w_p
    z_j`` and ``row_sums(e)[u] = sum_p e_p`` over each row's entries ``p = (u, j)``.

    Every entry's ``z_j`` is gathered once for all the steps; ``pull`` and ``row_sums`` are
    sparse products. ``dots`` is numpy's ``einsum`` on the CPU (the CPU kernels' oracle) and
    an element-wise product summed by rows, in chunks, on a GPU (:func:`chunked_dots`).

    Measured on an H200 (SFA, implicit feedback, 6.9 M ratings of 138,000 users x 27,000
    items, float32, seconds an iteration past the first): CuPy's ``einsum`` 0.334 at 64
    factors and 0.316 at 256; the element-wise product 0.098 and 0.319. bidlab's SDDMM and
    gather kernels in place of these products took 0.295 and 1.215: they give each row one
    warp, and an item with over 100,000 ratings holds its warp for the whole sweep.
    """
    Z = Zf[S.indices]  # each stored entry's z_j, gathered once for every step
    rows = entry_rows(S, xp)

    def csr(values: Any) -> Any:
        return type(S)((values, S.indices, S.indptr), shape=S.shape)

    if xp is np:
        def dots(V: Any) -> Any:
            return xp.einsum("ij,ij->i", Z, V[rows])
    else:
        def dots(V: Any) -> Any:
            return chunked_dots(Z, V, rows, xp)
    return dots, lambda w: csr(w) @ Zf, lambda e: csr(e).sum(axis=1).ravel()


def chunked_dots(Z: Any, V: Any, rows: Any, xp: Any, chunk: int | None = None) -> Any:
    """``out[p] = Z[p] . V[rows[p]]`` as element-wise products summed by rows, ``chunk``
    entries at a time (default: :data:`CHUNK_ELEMENTS` elements a temporary).

    >>> Z = np.arange(6.0).reshape(3, 2); V = np.ones((2, 2)); rows = np.array([0, 0, 1])
    >>> chunked_dots(Z, V, rows, np, chunk=2)
    array([1., 5., 9.])
    """
    n, f = Z.shape
    step = max(1, CHUNK_ELEMENTS // max(f, 1)) if chunk is None else max(1, int(chunk))
    if n <= step:
        return (Z * V[rows]).sum(axis=1)
    out = xp.empty(n, Z.dtype)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        xp.sum(Z[lo:hi] * V[rows[lo:hi]], axis=1, out=out[lo:hi])
    return out
