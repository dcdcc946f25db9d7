"""The CUDA launch of the Bayesian-network Gibbs sweep (source ``kernels/bn_gibbs.cu``): one
thread per row, the same arithmetic and random streams as the numba kernel
:func:`bidlab.kern.bn_gibbs._sweep_rows`, so a sweep draws the same states on either
device.

:func:`sweep_gpu` takes :func:`bidlab.kern.bn_gibbs.sweep`'s arguments (without the work
size) as CuPy arrays. :func:`launch_args` turns them into the kernel's argument list; the
tests build the same source for the host (``BIDLAB_HOST_EMULATION``) and call it with that
list, so the kernel's draws are checked against the numba kernel's without a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend

__all__ = ["SOURCE", "KERNEL", "THREADS", "scratch", "launch_args", "sweep_gpu"]

#: the kernel's source file in ``kernels/`` and its entry point
SOURCE = "bn_gibbs.cu"
KERNEL = "bidlab_bn_sweep"
#: threads per block of a launch (one row each)
THREADS = 128

_INT_ARRAYS = ("X", "obs", "ev")


def scratch(xp: Any, card: np.ndarray, rows: int) -> Any:
    """The kernel's scratch for ``rows`` threads: ``max(card) ** 2`` doubles each (a unit
    and its partner's joint states), as a ``rows x kk_max`` array of module ``xp``.
    ``card``: the variables' state counts, a host array."""
    kk_max = int(np.max(card)) ** 2 if len(card) else 1
    return xp.empty((max(int(rows), 1), kk_max))


def launch_args(xp: Any, X: Any, obs: Any, ev: Any, n_obs: int, m_active: int, lo: int,
                hi: int, cpt: Any, off: Any, card: Any, par_ptr: Any, par_idx: Any,
                par_stride: Any, unit_a: Any, unit_b: Any, fac_ptr: Any, fac_idx: Any,
                fac_step_a: Any, fac_step_b: Any, det_ptr: Any, det_idx: Any, blk_ptr: Any,
                blk_units: Any, cond: Any, cond_ptr: Any, mb_ptr: Any, mb_idx: Any,
                mb_stride: Any, key: Any, rb: Any, rb_off: Any, record: bool,
                bad: Any, work: Any = None) -> tuple[tuple[Any, ...], int]:
    """(the kernel's arguments for every row of the sweep, the rows) with arrays of module
    ``xp`` (numpy or cupy): checked dtypes, ``det_ptr``/``det_idx`` None made empty
    ranges, ``work`` the :func:`scratch` (made here when None; a caller sweeping again
    passes the one it keeps).

    Examples
    --------
    >>> import numpy as np
    >>> i64 = lambda *v: np.array(v, np.int64)
    >>> X = np.zeros((2, 1), np.int32)
    >>> args, rows = launch_args(
    ...     np, X, np.full((2, 1), -1, np.int32), np.full(1, -1, np.int32), 2, 1, 0, 2,
    ...     np.array([0.5, 0.5]), i64(0), i64(2), i64(0, 0), i64(), i64(), i64(0), i64(-1),
    ...     i64(0, 1), i64(0), i64(1), i64(0), None, None, i64(0, 1), i64(0),
    ...     np.zeros(0), i64(-1), i64(0, 0), i64(), i64(), np.uint64(7), np.zeros((2, 2)),
    ...     i64(0), True, np.zeros(2, np.uint8))
    >>> rows, len(args), args[-1]
    (2, 39, np.int64(4))
    """
    for name, a in zip(_INT_ARRAYS, (X, obs, ev), strict=True):
        if a.dtype != np.int32 or not a.flags.c_contiguous:
            raise TypeError(f"bn sweep on the GPU: {name} must be C-contiguous int32; got "
                            f"{a.dtype}")
    for name, a in (("cpt", cpt), ("cond", cond), ("rb", rb)):
        if a.dtype != np.float64 or not a.flags.c_contiguous:
            raise TypeError(f"bn sweep on the GPU: {name} must be C-contiguous float64; got "
                            f"{a.dtype}")
    if bad.dtype != np.uint8:
        raise TypeError(f"bn sweep on the GPU: bad must be uint8; got {bad.dtype}")
    if det_ptr is None:
        det_ptr = xp.zeros(unit_a.shape[0] + 1, np.int64)
        det_idx = xp.zeros(0, np.int64)
    index = (off, card, par_ptr, par_idx, par_stride, unit_a, unit_b, fac_ptr, fac_idx,
             fac_step_a, fac_step_b, det_ptr, det_idx, blk_ptr, blk_units)
    if any(a.dtype != np.int64 for a in index + (cond_ptr, mb_ptr, mb_idx, mb_stride, rb_off)):
        raise TypeError("bn sweep on the GPU: the network's index arrays must be int64 "
                        "(bidlab.models.bayesnet.tables.Tables builds them so)")
    rows = int(m_active) * (int(hi) - int(lo))
    if work is None:
        work = scratch(xp, backend.to_host(card), rows)
    if work.shape[0] < rows:
        raise ValueError(f"bn sweep on the GPU: scratch for {work.shape[0]} rows, {rows} "
                         "to sweep: make it with scratch(xp, card, rows)")
    args = (X, obs, ev, np.int64(n_obs), np.int64(lo), np.int64(hi), np.int64(0),
            np.int64(rows), cpt, *index, cond, cond_ptr, mb_ptr, mb_idx, mb_stride,
            np.uint64(key), rb, rb_off, np.int32(bool(record)), bad,
            np.int64(X.shape[1]), np.int64(blk_ptr.shape[0] - 1), np.int64(rb.shape[1]),
            work, np.int64(work.shape[1]))
    return args, rows


def sweep_gpu(X: Any, obs: Any, ev: Any, n_obs: int, m_active: int, lo: int, hi: int,
              *tables: Any, work: Any = None) -> Any:
    """One Gibbs sweep on the GPU over observations ``lo..hi`` of the first ``m_active``
    replicas: :func:`bidlab.kern.bn_gibbs.sweep`'s arguments after the work size, as CuPy
    arrays (the tables of :class:`~bidlab.models.bayesnet.tables.Tables` copied to the
    device); ``work`` a :func:`scratch` kept between sweeps. Returns ``bad`` (the last
    argument)."""
    cp = backend.cupy()
    args, rows = launch_args(cp, X, obs, ev, n_obs, m_active, lo, hi, *tables, work=work)
    if rows > 0:
        from bidlab.kern.cuda import _module

        kernel = _module(cp.cuda.Device().id, SOURCE, (KERNEL,)).get_function(KERNEL)
        kernel(((rows + THREADS - 1) // THREADS,), (THREADS,), args)
    return tables[-1]
