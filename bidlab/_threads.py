"""The CPU threading policy of bidlab's numba kernels: idle OpenMP workers sleep.

Why: numba's parallel kernels run on OpenMP (libgomp), whose idle workers by default spin
for a while after each parallel region. A minibatch runs dozens of short regions, so a
worker spins most of the time it is not working; alone on the machine that costs nothing,
but beside anything else that wants a core (a live dashboard's browser, the Jupyter server,
the pump thread) the spinning steals it, and a region then waits at its barrier for a
descheduled worker. Measured on the 2-core CI machine (LDAGibbs, KOS, 64-document
minibatches, dashboard rendering in chromium): 25-38 minibatches/s with spinning workers,
60-63 with sleeping ones; alone, both give the same speed (8.0k docs/s at 64 documents,
15-18k at 512, within noise). See BENCHMARKS.md, dashboard.

The policy is an environment variable that libgomp reads once, when numba first loads it,
so it must be set before the first parallel kernel runs: importing this module (the first
thing :mod:`bidlab` imports) does it.
A value the user has already set is kept (``OMP_WAIT_POLICY=ACTIVE`` restores spinning).
"""

from __future__ import annotations

import os

__all__ = ["WAIT_POLICY", "apply_wait_policy"]

WAIT_POLICY = "PASSIVE"


def apply_wait_policy() -> str:
    """Set ``OMP_WAIT_POLICY`` to :data:`WAIT_POLICY` unless the user chose one; return the
    policy in force (it has effect only if OpenMP is not loaded yet)."""
    return os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)


apply_wait_policy()
