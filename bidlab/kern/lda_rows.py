"""The SAME Gibbs sampler's bookkeeping around its sweeps (host arrays, numba): the mask of
heated words, a minibatch's distinct words, and the moving-average step on their rows of
the counts. :mod:`bidlab.kern.lda_sampler` re-exports the public functions.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab.kern import lda_sampler_arrays as arrays
from bidlab.kern.standin import stand_in


@numba.njit(cache=True, nogil=True)
def _fill_heated(temp, out):
    vocab, k = temp.shape
    for w in range(vocab):
        out[w] = 0
        for j in range(k):
            if temp[w, j] != 1.0:
                out[w] = 1
                break


def heated_words(temp: Any, out: Any = None) -> np.ndarray:
    """The sampler's mask of heated words: ``out[w] = 1`` where row ``w`` of the V x k
    temperatures ``temp`` holds a value other than 1, else 0 (uint8, host, length V).

    Why: the CPU sampler reads a word's temperatures only where this says so. A notebook
    heats a handful of parameters, and reading ``temp[w, :]`` for every token doubled the
    sweep's random-access working set (beside the counts' row) and slowed a learner
    (BENCHMARKS.md, "design measurements"); a V-byte mask stays in L1. It is one pass
    over ``temp``: make it when the temperatures change (``LDAGibbs`` does), not every
    sweep.
    """
    temp = np.asarray(temp)
    if temp.ndim != 2:
        raise ValueError(f"heated_words: temp must be vocab x k; got shape {temp.shape}")
    if out is None:
        out = np.empty(temp.shape[0], dtype=np.uint8)
    if out.shape != (temp.shape[0],) or out.dtype != np.uint8:
        raise ValueError(f"heated_words: out must be uint8 of shape ({temp.shape[0]},); got "
                         f"{out.dtype} {out.shape}")
    _fill_heated(temp, out)
    return out


_NO_HEAT: dict[int, np.ndarray] = {}  # vocab -> all-zero mask (read only, shared)


@numba.njit(cache=True, nogil=True)
def _unique_cols(indices, stamp, tick, out):
    """The distinct values of ``indices`` into ``out`` (first-seen order); returns how many.

    ``stamp`` (one int64 per column) marks a column seen when it equals ``tick``; pass a
    new tick per call and nothing needs clearing.
    """
    n = 0
    for p in range(indices.shape[0]):
        w = indices[p]
        if stamp[w] != tick:
            stamp[w] = tick
            out[n] = w
            n += 1
    return n


@numba.njit(cache=True, nogil=True)
def _rows_step(counts, colsum, phi_hat, rows, s):
    for i in range(rows.shape[0]):
        w = rows[i]
        for j in range(counts.shape[1]):
            v = phi_hat[w, j]
            counts[w, j] += s * v
            colsum[j] += s * v
            phi_hat[w, j] = 0


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
stand_in(_fill_heated)(arrays.fill_heated)
stand_in(_unique_cols)(arrays.unique_cols)
stand_in(_rows_step)(arrays.rows_step)


def rows_step(counts: Any, colsum: Any, phi_hat: Any, rows: Any, s: float) -> None:
    """``counts[rows] += s * phi_hat[rows]``, ``colsum += s * phi_hat[rows].sum(0)``, then
    ``phi_hat[rows] = 0``: the sparse half of a moving-average step (host arrays)."""
    _rows_step(counts, colsum, phi_hat, rows, float(s))


def unique_columns(X: Any, stamp: Any, tick: int, out: Any) -> Any:
    """The distinct column indices of CSR ``X`` (host), as a view of ``out``.

    ``stamp`` is an int64 array with one entry per column and ``tick`` a number not used
    with it before (e.g. a minibatch counter): nothing is cleared or allocated.
    """
    n = _unique_cols(X.indices, stamp, np.int64(tick), out)
    return out[:n]
