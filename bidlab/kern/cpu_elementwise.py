"""The CPU element-wise kernels and sums of :mod:`bidlab.kern`, in numba.

* :func:`expdigamma` ``out = exp(digamma(x))`` element by element: LDA's variational
  update takes it over the whole doc-topic matrix each minibatch, so it is one fused loop
  (no digamma array in between) with a shifted asymptotic series that needs no log and no
  data-dependent loop for positive arguments;
* :func:`csr_row_sums` / :func:`csr_col_sums`, a CSR matrix's stored values summed per row
  (parallel over rows) or per column (one sequential pass: memory-bound).

The sparse products are in :mod:`bidlab.kern.cpu`. As there, every compiled kernel
releases the GIL (``nogil=True``), and each ``prange`` kernel is an
:func:`~bidlab.kern.adaptive.adaptive_kernel` (all threads or the calling one, whichever
is measured cheaper now; the split never changes a result).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from . import arrays
from .adaptive import adaptive_kernel
from .standin import stand_in

# ----------------------------------------------------------------------------- sums


@adaptive_kernel(cache=True, nogil=True)
def _csr_row_sums(indptr, data, out):
    for i in prange(indptr.shape[0] - 1):
        s = out[i] * 0
        for p in range(indptr[i], indptr[i + 1]):
            s += data[p]
        out[i] = s


@numba.njit(cache=True, nogil=True)
def _csr_col_sums(indices, data, nnz, out):
    out[:] = 0
    for p in range(nnz):
        out[indices[p]] += data[p]


def csr_row_sums(indptr: Any, data: Any, out: Any) -> None:
    """out[i] = sum of CSR row i's stored values."""
    out[:] = 0
    _csr_row_sums(float(indptr[-1]), indptr, data, out)


def csr_col_sums(indptr: Any, indices: Any, data: Any, out: Any) -> None:
    """out[j] = sum of the stored values in column j (one sequential pass: memory-bound)."""
    _csr_col_sums(indices, data, int(indptr[-1]), out)


# ----------------------------------------------------------------------------- exp(digamma)


@numba.njit(inline="always")
def _digamma_pos(x):
    acc = 0.0
    while x < 6.0:
        acc -= 1.0 / x
        x += 1.0
    r = 1.0 / x
    r2 = r * r
    series = r2 * (1.0 / 12 - r2 * (1.0 / 120 - r2 * (1.0 / 252 - r2 * (1.0 / 240 - r2 / 132))))
    return acc + np.log(x) - 0.5 * r - series


@numba.njit(inline="always")
def _digamma(x):
    if np.isnan(x):
        return x
    if x <= 0.0:
        if x == np.floor(x):
            return -np.inf if x == 0.0 else np.nan
        return _digamma_pos(1.0 - x) - np.pi / np.tan(np.pi * x)
    if np.isinf(x):
        return x
    return _digamma_pos(x)


@numba.njit(inline="always")
def _expdigamma_pos(x):
    """exp(digamma(x)) for finite x > 0 with one division for the shift and no log.

    For x < 6 the recurrence digamma(x) = digamma(x + 6) - sum_{i<6} 1/(x + i) is taken in
    one step, the six reciprocals summed as one fraction (pairwise: 1/a + 1/b = (a+b)/ab);
    then exp(log(z) - 1/2z - series) = z * exp(-1/2z - series) saves the log call. No loop
    and no data-dependent branch (its speed against the step-by-step form: BENCHMARKS.md,
    "design measurements").
    """
    small = x < 6.0
    a1 = x + 1.0
    a2 = x + 2.0
    a3 = x + 3.0
    a4 = x + 4.0
    a5 = x + 5.0
    p01 = x * a1
    p23 = a2 * a3
    p45 = a4 * a5
    num = (x + a1) * p23 * p45 + (a2 + a3) * p01 * p45 + (a4 + a5) * p01 * p23
    z = x + 6.0 if small else x
    acc = -(num / (p01 * p23 * p45)) if small else 0.0
    r = 1.0 / z
    r2 = r * r
    series = r2 * (1.0 / 12 - r2 * (1.0 / 120 - r2 * (1.0 / 252 - r2 * (1.0 / 240 - r2 / 132))))
    return z * np.exp(acc - 0.5 * r - series)


@numba.njit(inline="always")
def _expdigamma1(x):
    if x > 0.0 and x < np.inf:
        return _expdigamma_pos(x)
    return np.exp(_digamma(x))  # NaN, +-inf, zero and negative arguments


@adaptive_kernel(cache=True, nogil=True)
def _expdigamma_flat(x, out):
    for i in prange(x.shape[0]):
        out[i] = _expdigamma1(np.float64(x[i]))


@adaptive_kernel(cache=True, nogil=True)
def _expdigamma_2d(x, out):
    for i in prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = _expdigamma1(np.float64(x[i, j]))


def _same_flat_layout(x: np.ndarray, out: np.ndarray) -> bool:
    if x.shape != out.shape:
        return False
    if x.flags.c_contiguous and out.flags.c_contiguous:
        return True
    return x.flags.f_contiguous and out.flags.f_contiguous


def expdigamma(x: np.ndarray, out: np.ndarray) -> None:
    """out = exp(digamma(x)) element-wise; in place (x is out) is allowed."""
    if _same_flat_layout(x, out):
        _expdigamma_flat(x.size, x.ravel(order="K"), out.ravel(order="K"))
    elif x.ndim == 2:
        _expdigamma_2d(x.size, x, out)
    else:
        _expdigamma_flat(x.size, np.ravel(x), out.reshape(-1))


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
stand_in(_csr_row_sums)(arrays.csr_row_sums)
stand_in(_csr_col_sums)(arrays.csr_col_sums)
stand_in(_expdigamma_flat)(arrays.expdigamma)
stand_in(_expdigamma_2d)(arrays.expdigamma)
