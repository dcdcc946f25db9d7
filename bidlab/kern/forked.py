"""Whether a forked child may launch numba's parallel kernels.

GNU OpenMP (libgomp) cannot be used again in a child made by ``os.fork()`` once the parent
has started its thread pool: numba's OpenMP threading layer checks for it and ends the
child with SIGTERM ("fork() called from a process already using GNU OpenMP, this is
unsafe") at its first parallel launch, whatever its thread count. :func:`unsafe` tells
whether a child forked now would be (in the child right after the fork: whether it is;
:mod:`bidlab.kern.standin` then runs every parallel kernel's array-level stand-in there
for good). It reads two of numba's module attributes, once a fork: a kernel call pays
nothing.

Examples
--------
>>> import numba
>>> from bidlab.kern import forked
>>> forked.unsafe() in (True, False)
True
>>> forked.is_parallel(numba.njit(parallel=True)(lambda x: x))
True
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["unsafe", "is_parallel"]


def unsafe() -> bool:
    """Whether numba's GNU OpenMP thread pool was started (in this process or, before a
    fork, in its parent), so that a forked child would be ended at a parallel launch.
    False when numba's threads were not started, or run on TBB, the workqueue or another
    OpenMP (fork-safe: they start their own threads in the child)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is None or not getattr(parallel, "_is_initialized", True):
        return False  # numba's thread pool was never started: the child starts its own
    layer = getattr(parallel, "_threading_layer", None)
    omp = sys.modules.get("numba.np.ufunc.omppool")
    if layer is not None and layer != "omp" or omp is None:
        return False
    return str(getattr(omp, "openmp_vendor", "GNU")).upper().startswith("GNU")


def is_parallel(dispatcher: Any) -> bool:
    """Whether a numba ``dispatcher`` was compiled with ``parallel=True`` (its calls
    launch numba's thread pool, even on one thread)."""
    return bool(getattr(dispatcher, "targetoptions", {}).get("parallel"))
