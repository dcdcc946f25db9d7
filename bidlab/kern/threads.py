"""numba's thread count under threadpoolctl: ``threadpool_limits(1)`` limits bidlab's kernels.

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
"""

from __future__ import annotations

import numba

__all__ = ["register", "NUMBA_USER_API", "max_threads"]

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
