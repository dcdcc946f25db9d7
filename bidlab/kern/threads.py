"""Threads for the CPU kernels: numba's thread count under threadpoolctl
(``threadpool_limits(1)`` limits bidlab's kernels), and a pool that runs one-thread
kernels side by side (:func:`run_together`).

threadpoolctl finds the thread pools of the native libraries a process loaded (BLAS,
OpenMP) and sets their thread counts. numba's own count (``numba.set_num_threads``, which
every ``prange`` kernel reads when it starts) is not one of them: numba's threading layer is
visible to threadpoolctl only in some setups (its OpenMP layer, and even then the count numba
passes to each parallel region is its own). :func:`register` adds a threadpoolctl library
controller for it, so ``threadpool_limits(limits=n)`` and
``ThreadpoolController().limit(limits=n)`` set numba's count for the calling thread and put
it back afterwards, and ``threadpool_info()`` lists it (``user_api`` ``"numba"``).
:mod:`bidlab.kern.adaptive` reads that count on every call: under a limit of one thread
the kernels run serially.

The controller is matched to numba's ``_helperlib`` extension, which is loaded whenever
numba is, so it is there before any kernel has run. numba's count is per thread, like
threadpoolctl's OpenMP limits: a limit set in one thread does not reach a learner's
background thread.

:func:`run_together` runs a GIL-free one-thread kernel on several ranges of its input at
once, in the calling thread and a process-wide pool: a kernel written once runs serially or
in parallel, so a fresh installation compiles one specialization instead of a serial and
a ``prange`` one (the SAME Gibbs sampler's E-step, :mod:`bidlab.kern.lda_sampler`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numba

from bidlab import _forksafe

__all__ = ["register", "NUMBA_USER_API", "max_threads", "run_together", "one_blas_thread"]

#: threadpoolctl's ``user_api`` name of numba's thread pool
NUMBA_USER_API = "numba"


def max_threads() -> int:
    """The most threads numba can use (``NUMBA_NUM_THREADS``)."""
    return int(numba.config.NUMBA_NUM_THREADS)


def _controller_class() -> type | None:
    try:
        import threadpoolctl
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return None

    class NumbaController(threadpoolctl.LibController):
        """numba's thread count for the calling thread (``numba.get/set_num_threads``)."""

        user_api = NUMBA_USER_API
        internal_api = "numba"
        filename_prefixes = ("_helperlib",)

        def get_num_threads(self) -> int:
            return int(numba.get_num_threads())

        def set_num_threads(self, num_threads: int | None) -> None:
            if num_threads is None:
                return
            numba.set_num_threads(max(1, min(int(num_threads), max_threads())))

        def get_version(self) -> str:
            return str(numba.__version__)

    return NumbaController


_registered = False


def register() -> bool:
    """Make numba's thread count a threadpoolctl library (once; True when it is)."""
    global _registered
    if _registered:
        return True
    cls = _controller_class()
    if cls is None:  # pragma: no cover
        return False
    import threadpoolctl

    threadpoolctl.register(cls)
    _registered = True
    return True


_pool: ThreadPoolExecutor | None = None
_pool_pid = 0  # the process that made _pool (a forked child makes its own)
_pool_lock = _forksafe.lock(__name__, "_pool_lock")


def _executor() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max(max_threads() - 1, 1),
                                       thread_name_prefix="bidlab-kernel")
            _pool_pid = os.getpid()
        return _pool


def run_together(kernel: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> None:
    """``kernel(*args)`` for every ``args`` in ``calls`` at once: the first in the calling
    thread, the others in a process-wide pool of ``max_threads() - 1`` threads. For
    kernels that release the GIL (numba ``nogil=True``) on disjoint outputs. Returns when
    all are done; the first exception raised by any of them is raised here, after all of
    them have finished (none is left writing into its outputs).

    Examples
    --------
    >>> import numpy as np
    >>> out = np.zeros(4)
    >>> def fill(lo, hi):
    ...     out[lo:hi] = lo
    >>> run_together(fill, [(0, 2), (2, 4)])
    >>> out.tolist()
    [0.0, 0.0, 2.0, 2.0]
    """
    futures: list[Future[Any]] = []
    if len(calls) > 1:
        pool = _executor()
        futures = [pool.submit(kernel, *args) for args in calls[1:]]
    error: BaseException | None = None
    try:
        if calls:
            kernel(*calls[0])
    except BaseException as exc:  # noqa: BLE001 - raised below, once the others finish
        error = exc
    for f in futures:
        exc = f.exception()
        if exc is not None and error is None:
            error = exc
    if error is not None:
        raise error


@functools.cache
def _blas() -> Any:
    """The BLAS libraries' thread controls (numba's ``np.dot`` calls SciPy's BLAS)."""
    import scipy.linalg.cython_blas  # noqa: F401 - load it before listing the libraries
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


#: OpenBLAS runs a product of at most this many multiply-adds (m n k) on one thread
#: whatever its thread setting (its GEMM threads above 65,536 x GEMM_MULTITHREAD_THRESHOLD,
#: 4 by default): :func:`one_blas_thread` has nothing to limit below it
BLAS_ONE_THREAD_UP_TO = 262_144


def one_blas_thread(work: float | None = None) -> Any:
    """Context manager: BLAS (NumPy's and SciPy's) on the calling thread only.

    For small products between bidlab's own kernels (k-means' between Lloyd blocks, NMF's
    k x k Gram matrices): a multi-threaded BLAS call leaves its worker threads spinning
    for a while, and they take the cores from the next kernel's threads. ``work``: the
    largest product's multiply-adds inside the block, when known; at most
    :data:`BLAS_ONE_THREAD_UP_TO` BLAS runs on one thread anyway, and the limit (about
    30 us to set and restore) is skipped.

    Examples
    --------
    >>> import numpy as np
    >>> with one_blas_thread(4 * 4 * 4):   # a small product: nothing to limit
    ...     p = np.ones((4, 4)) @ np.ones((4, 4))
    >>> float(p[0, 0])
    4.0
    """
    if work is not None and work <= BLAS_ONE_THREAD_UP_TO:
        return contextlib.nullcontext()
    return _blas().limit(limits=1)
