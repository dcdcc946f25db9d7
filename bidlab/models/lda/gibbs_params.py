"""The option rows of SAME Gibbs LDA (:mod:`bidlab.models.lda.gibbs`) and its annealing
schedule of the number of samples per token."""

from __future__ import annotations

import math

from bidlab.learn import Option

__all__ = ["ANNEAL_SCHEDULES", "NSAMPS", "NSAMPS0", "ANNEAL", "ANNEAL_PASSES", "TEMPERATURE",
           "anneal_nsamps"]

ANNEAL_SCHEDULES = ("constant", "linear", "log", "inverse_linear")

NSAMPS = Option("nsamps", float, 100.0, "SAME samples per token (m) once annealed; higher "
                "is colder", low=0.0, low_open=True)
NSAMPS0 = Option("nsamps0", float, 1.0, "m at the start of annealing", low=0.0,
                 low_open=True)
ANNEAL = Option("anneal", str, "constant", "annealing schedule of m", choices=ANNEAL_SCHEDULES)
ANNEAL_PASSES = Option("anneal_passes", int, None, "passes over which m anneals (None: the "
                       "planned passes)", low=1, none_ok=True)
TEMPERATURE = Option("temperature", float, 1.0, "a parameter's temperature", low=0.0,
                     low_open=True)


def anneal_nsamps(schedule: str, progress: float, m0: float, m1: float) -> float:
    """The number of samples m at ``progress`` (0 at the start, >= 1 once annealed)."""
    t = min(max(progress, 0.0), 1.0)
    if schedule == "constant":
        return m1
    if schedule == "linear":
        return m0 + (m1 - m0) * t
    if schedule == "log":
        return m0 + (m1 - m0) * math.log1p(9.0 * t) / math.log(10.0)
    if schedule == "inverse_linear":
        return 1.0 / (1.0 / m0 + (1.0 / m1 - 1.0 / m0) * t)
    raise ValueError(
        f"The 'anneal' parameter of LDAGibbs must be one of {ANNEAL_SCHEDULES}. "
        f"Got {schedule!r} instead."
    )
