"""A test model's update step that writes scripted statistics: the numerator and
denominator of its first model matrix drawn from a fixed random sequence, so a test can
recompute what a multiplicative updater must make of them."""

from __future__ import annotations

import numpy as np


class ScriptedStatsSteps:
    """Mixin for a :class:`bidlab.learn.Model` whose ``updatemats[0]`` holds ``num`` and
    ``den`` of shape :attr:`SHAPE`: step ``s`` writes :meth:`stats` ``(s)``."""

    #: the statistics' shape (the first model matrix's)
    SHAPE: tuple[int, int] = (2, 3)
    #: step ``s`` draws from ``default_rng(SEED + s)``
    SEED = 0

    @classmethod
    def stats(cls, step: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(cls.SEED + step)
        return rng.random(cls.SHAPE) + 0.5, rng.random(cls.SHAPE) + 0.5

    def update(self, batch) -> None:  # noqa: ANN001 - the Model hook's signature
        num, den = self.stats(self.calls)
        self.updatemats[0]["num"].data[...] = num
        self.updatemats[0]["den"].data[...] = den
        self.calls += 1

    def evaluate(self, batch) -> float:  # noqa: ANN001
        return 0.0
