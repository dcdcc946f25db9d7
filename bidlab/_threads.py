"""The CPU threading policy of bidlab's numba kernels: idle OpenMP workers spin briefly.

Why: libgomp's idle workers spin for about 3 ms after each parallel region before they
sleep. A minibatch runs many short regions, so the workers spin nearly all the time and
take cores that a live dashboard, the Jupyter server or the pump thread need; sleeping at
once (``OMP_WAIT_POLICY=PASSIVE``) makes back-to-back regions pay a wake-up each instead.
A short spin (:data:`SPIN_COUNT`, about 0.2 ms) keeps most of both benefits.

libgomp reads ``GOMP_SPINCOUNT`` once, when numba first loads OpenMP, so importing this
module (the first thing :mod:`bidlab` imports) sets it. A user who set ``GOMP_SPINCOUNT``
or ``OMP_WAIT_POLICY`` keeps their choice.
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
