"""Timed windows of one learner in this process: the rate of ``steps`` minibatches.

Used by ``python -m bidlab.bench dashboard`` (its ``--page-only`` bare learner, in a
process of its own) and ``python -m bidlab.bench temperature`` (two learners taking turns).
A learner is started and paused once (compiled, counts initialised); each window resumes
it for a number of minibatches and pauses it again, and the window's rate comes from the
learner's own per-minibatch record, not from a clock around the calls: the time to resume
and pause, and this process's polling, stay out of the figure.
"""

from __future__ import annotations

import time
from typing import Any


def window_rate(steps: list[int], times: list[float], first: int, count: int) -> float:
    """Minibatches per second over a learner's record rows ``first`` .. ``first + count - 1``
    (end of the first to end of the last: ``count - 1`` intervals)."""
    t = [ti for s, ti in zip(steps, times, strict=True) if first <= s < first + count]
    return (len(t) - 1) / (t[-1] - t[0])


def paused_learner(X: Any, k: int) -> Any:
    """An ``LDAGibbs`` learner with the notebook's options on ``X``, started and paused after
    its first minibatch (compiled, counts initialised): ready for :func:`train_window`."""
    from bidlab.models import LDAGibbs

    lr = LDAGibbs(n_components=k, nsamps=20, batch_size=64,
                  random_state=0).learner(X, n_passes=100_000)
    lr.start()
    lr.pause(wait=True)
    return lr


def train_window(lr: Any, steps: int, timeout: float = 300.0) -> float:
    """Resume the paused learner ``lr`` for ``steps`` minibatches, pause it, and return its
    rate over them from its own record (minibatches per second)."""
    s0 = lr.step
    lr.resume()
    end = time.monotonic() + timeout
    while lr.step < s0 + steps and lr.state in ("running", "paused"):
        if time.monotonic() > end:
            raise TimeoutError(f"{steps} minibatches took more than {timeout} s")
        time.sleep(0.02)
    lr.pause(wait=True)
    if lr.step < s0 + steps:
        raise RuntimeError(f"the learner ended ({lr.state}) after {lr.step - s0} of {steps} "
                           f"minibatches: {lr.error}")
    rec = lr.record.as_dict()
    return window_rate(rec["step"].tolist(), rec["time"].tolist(), s0, steps)
