"""Random numbers keyed by the content of CSR rows: each row's draws are a hash of its
(column, value) pairs and a key, never of the row's position or of the other rows.

Used for per-row random starts that must not depend on how rows are grouped into
minibatches, ordered or shared between processes (LDA's E-step start). The hash is
SplitMix64's finaliser (:mod:`bidlab.kern.random`): each nonzero is mixed twice, the mixed
values are summed modulo 2**64 per row (so the pairs' order does not matter) and the sum,
xor the key, is mixed again; draw ``j`` of a row is the mix of that row key plus
``(j + 1)`` golden-ratio increments, its 53 high bits a uniform double in ``[0, 1)``.

:func:`row_uniforms` runs a numba kernel on the CPU (allocation-free) and the same
arithmetic as array operations on a GPU (CuPy) and while the kernel compiles
(:mod:`bidlab.kern.standin`): the same bits everywhere.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> X = sp.csr_matrix(np.array([[0.0, 2.0, 1.0], [1.0, 0.0, 0.0], [0.0, 2.0, 1.0]]))
>>> out = np.empty((3, 2))
>>> _ = row_uniforms(X, key=7, lo=0.5, hi=1.5, out=out)
>>> bool(np.array_equal(out[0], out[2])), bool(np.array_equal(out[0], out[1]))
(True, False)
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab import backend
from bidlab.kern.random import GOLD, mix64
from bidlab.kern.standin import stand_in

__all__ = ["row_uniforms", "value_bits"]

_MASK = (1 << 64) - 1
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))
_TWO_M53 = 2.0 ** -53


def value_bits(data: Any) -> Any:
    """The bit patterns of the nonzero values as an unsigned view of the same width (no
    copy): what the hash reads, so float32 and float64 values of a row hash differently
    only through their bits.

    Examples
    --------
    >>> value_bits(np.array([1.0], np.float32)).tolist()
    [1065353216]
    """
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[data.dtype.itemsize]
    return data.view(width)


@numba.njit(cache=True, nogil=True)
def _row_uniforms(indptr, indices, bits, key, lo, width, out):  # pragma: no cover - compiled
    rows, k = out.shape
    for r in range(rows):
        h = np.uint64(0)
        for p in range(indptr[r], indptr[r + 1]):
            x = np.uint64(indices[p]) * GOLD ^ np.uint64(bits[p])
            h += mix64(mix64(x))
        h = mix64(h ^ key)
        for j in range(k):
            x = mix64(h + np.uint64(j + 1) * GOLD)
            out[r, j] = lo + width * (float(x >> _S11) * _TWO_M53)


def _mix(x: Any) -> Any:
    """SplitMix64's finaliser over a uint64 array, in place (wrapping arithmetic)."""
    x ^= x >> _S30
    x *= _C1
    x ^= x >> _S27
    x *= _C2
    x ^= x >> _S31
    return x


@stand_in(_row_uniforms)
def _row_uniforms_arrays(indptr: Any, indices: Any, bits: Any, key: Any, lo: float,
                         width: float, out: Any) -> None:
    """:func:`_row_uniforms` as array operations (numpy or CuPy: the same bits)."""
    xp = backend.namespace(out)
    rows, k = out.shape
    h = indices[: int(indptr[rows])].astype(np.uint64)
    h *= GOLD
    h ^= bits[: h.shape[0]].astype(np.uint64)
    _mix(_mix(h))
    sums = backend.empty((h.shape[0] + 1,), np.uint64, xp)
    sums[0] = 0
    xp.cumsum(h, out=sums[1:])  # wraps modulo 2**64, as the kernel's row sums
    keys = sums[indptr[1 : rows + 1]] - sums[indptr[:rows]]
    keys ^= np.uint64(key)
    _mix(keys)
    steps = xp.arange(1, k + 1, dtype=np.uint64)
    steps *= GOLD
    x = keys[:, None] + steps[None, :]
    _mix(x)
    x >>= _S11
    u = x.astype(np.float64)
    u *= _TWO_M53 * width
    u += lo
    out[...] = u


def row_uniforms(X: Any, key: int, lo: float, hi: float, out: Any) -> Any:
    """Fill ``out`` (rows x k, float32 or float64, C-ordered; rows = ``X.shape[0]``)
    with uniforms in ``[lo, hi)``, row ``r``'s a function of row ``r`` of the CSR ``X``
    (scipy or CuPy, on ``out``'s device) and the 64-bit ``key`` only. Returns ``out``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 3.0]]))
    >>> u = row_uniforms(X, key=1, lo=0.0, hi=1.0, out=np.empty((2, 3)))
    >>> bool(((u >= 0.0) & (u < 1.0)).all())
    True
    """
    if out.shape[0] != X.shape[0]:
        raise ValueError(f"out has {out.shape[0]} rows but X has {X.shape[0]}: give one "
                         f"output row per row of X")
    args = (X.indptr, X.indices, value_bits(X.data), np.uint64(int(key) & _MASK),
            float(lo), float(hi) - float(lo), out)
    if isinstance(out, np.ndarray):
        _row_uniforms(*args)
    else:
        _row_uniforms_arrays(*args)
    return out
