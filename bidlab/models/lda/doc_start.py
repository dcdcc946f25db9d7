"""Each document's random start for the LDA E-step, drawn from the document itself.

The E-step starts each document's topic weights from a random point near 1 (mean 1,
standard deviation 0.1, like scikit-learn's Gamma(100, 0.01) start) so that documents
break the topics' symmetry. The point is a pure function of the model's seed and the
document's words and counts (a hash of its nonzeros), never of where the document sits:
a document starts from the same weights in any minibatch, at any row of it, in any order
and on any rank. Batch variational Bayes therefore sums the same per-document statistics
in a pass whatever the batch size or the number of ranks sharing the rows. Two documents
with the same words and counts start alike (and would end alike anyway).

The hash is SplitMix64's finaliser (:mod:`bidlab.kern.random`) in array form, so numpy
and CuPy give the same bits.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> X = sp.csr_matrix(np.array([[0.0, 2.0, 1.0], [1.0, 0.0, 0.0], [0.0, 2.0, 1.0]]))
>>> start = doc_start(X, seed=0, k=4, dtype=np.float64)
>>> start.shape, bool(np.array_equal(start[0], start[2]))
((3, 4), True)
>>> bool(np.array_equal(doc_start(X[1:], seed=0, k=4, dtype=np.float64)[0], start[1]))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.random import stream_key

__all__ = ["doc_start", "doc_keys", "START_SD"]

#: standard deviation of each start weight around 1 (Gamma(100, 0.01)'s)
START_SD = 0.1
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))
#: the step of :func:`bidlab.kern.random.stream_key` that keys the documents' starts
_START_STEP = 0x5D0C


def _mix(x: Any) -> Any:
    """SplitMix64's finaliser over a uint64 array, in place (wrapping arithmetic)."""
    x ^= x >> _S30
    x *= _C1
    x ^= x >> _S27
    x *= _C2
    x ^= x >> _S31
    return x


def _value_bits(data: Any, xp: Any) -> Any:
    """The bit patterns of the nonzero values, as uint64 (float16/32/64 or integer data)."""
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[data.dtype.itemsize]
    bits = xp.ascontiguousarray(data).view(width)
    return bits.astype(np.uint64)


def doc_keys(X: Any, seed: int) -> Any:
    """A 64-bit key per row of the CSR matrix ``X`` (scipy or CuPy): a hash of the row's
    (column, value) pairs and ``seed``, independent of the pairs' order and of the other
    rows. Returns a uint64 array of ``X.shape[0]`` on ``X``'s device."""
    xp = backend.namespace(X.data)
    h = X.indices.astype(np.uint64)
    h *= _GOLD
    h ^= _value_bits(X.data, xp)
    _mix(h)
    _mix(h)
    sums = xp.zeros(h.shape[0] + 1, np.uint64)
    xp.cumsum(h, out=sums[1:])  # wraps modulo 2**64, as the row sums below
    indptr = X.indptr
    keys = sums[indptr[1:]] - sums[indptr[:-1]]
    keys ^= np.uint64(stream_key(seed, _START_STEP))
    return _mix(keys)


def doc_start(X: Any, seed: int, k: int, dtype: Any = np.float32, out: Any = None) -> Any:
    """Each row's ``k`` start weights (mean 1, standard deviation :data:`START_SD`, in
    ``[1 - 0.1 sqrt(3), 1 + 0.1 sqrt(3))``), a function of the row's nonzeros and ``seed``
    only (see the module doc). ``X`` is CSR (scipy or CuPy); returns rows x ``k`` of
    ``dtype`` on ``X``'s device, written into ``out`` when given."""
    xp = backend.namespace(X.data)
    keys = doc_keys(X, seed)
    steps = xp.arange(1, k + 1, dtype=np.uint64)
    steps *= _GOLD
    bits = keys[:, None] + steps[None, :]
    _mix(bits)
    bits >>= _S11
    u = bits.astype(np.float64)
    u *= 2.0 ** -53  # uniform in [0, 1)
    half = START_SD * np.sqrt(3.0)  # a uniform of this half-width has sd START_SD
    u *= 2.0 * half
    u += 1.0 - half
    if out is None:
        return u.astype(dtype)
    out[...] = u
    return out
