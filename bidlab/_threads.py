"""The CPU threading policy of bidlab's numba kernels: idle OpenMP workers spin briefly.

Why: numba's parallel kernels run on OpenMP (libgomp), whose idle workers by default spin
for about 3 ms (300,000 iterations) after each parallel region before they sleep. A
minibatch runs dozens of short regions less than 3 ms apart, so a worker spins nearly all
the time it is not working. Alone on the machine that is harmless. Next to anything else
that wants a core (a live dashboard's browser, the Jupyter server, the pump thread), the
spinning takes that core, and a region then waits at its barrier for a descheduled worker.
Sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) fixes that but makes back-to-back regions
pay a wake-up each. Measured on the 2-core CI machine (details in BENCHMARKS.md,
dashboard):

* LDAGibbs on KOS, 64-document minibatches, with the dashboard rendering in chromium:
  25-38 minibatches/s with the default spin, 52-71 passive, 68-99 with 20,000 spins;
* GLM alone (``bench glm --quick``, 100 targets): 0.71-0.92 s default, 0.95-1.01 s passive,
  0.79 s with 20,000 spins.

So bidlab sets ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` (about 0.2 ms of spinning). libgomp
reads it once, when numba first loads OpenMP, so it must be set before the first parallel
kernel runs: importing this module (the first thing :mod:`bidlab` imports) does it. A user
who set ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` keeps their choice.
"""

from __future__ import annotations

import os

__all__ = ["SPIN_COUNT", "apply_spin_policy"]

SPIN_COUNT = 20_000


def apply_spin_policy() -> str | None:
    """Set ``GOMP_SPINCOUNT`` unless the user chose a spin count or a wait policy.

    Returns the spin count in force, or None when the user's ``OMP_WAIT_POLICY`` decides
    (it has effect only if OpenMP is not loaded yet)."""
    if "GOMP_SPINCOUNT" in os.environ or "OMP_WAIT_POLICY" in os.environ:
        return os.environ.get("GOMP_SPINCOUNT")
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    return os.environ["GOMP_SPINCOUNT"]


apply_spin_policy()
