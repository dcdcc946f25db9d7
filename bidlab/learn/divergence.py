"""Divergence: NaN / inf in the model, or a model that grows by orders of magnitude.

A learning rate far too large does not always reach NaN or inf: in float64 a linear model
can climb to 1e199 and stop there when the passes run out, finite garbage that predicts
nonsense. :class:`DivergenceWatch` therefore measures the model's magnitude, the RMS of the
matrices its model names (:meth:`bidlab.learn.Model.divergence_mats`: by default every
floating-point model matrix) while it trains, and the learner stops with
:class:`DivergedError` when

* the magnitude is NaN or inf (then the message names the model matrix that holds NaN or
  inf, as the learner's pass-end check does), or
* it exceeds both ``GROWTH`` (1e6) times its value after the first ``EARLY_STEPS`` (4)
  training steps of the learner (the first nonzero one from there on), and the absolute
  floor ``FLOOR`` (an RMS of 1e8).

Both conditions hold for a diverging run within a few steps, and for no legitimate one:
a model that starts from zero gets the scale of its solution from its first steps, and
one that starts from data (centres, topic counts) starts at it; a growth of a million
times past an RMS entry of 1e8 is not training.

Cost: one sum of squares over the model matrices (no allocation for contiguous ones) at
``EARLY_STEPS``, at every pass end of several minibatches, and then every ``every``
training steps (a pass of one minibatch, as a full-batch model's often is, counts as a
step), ``every`` chosen from the measured cost of a check and of a step so that checks
take about ``BUDGET`` (1 %) of the training time (at least every ``MAX_EVERY`` = 4096
steps).
"""

from __future__ import annotations

import math
import time
from typing import Any

__all__ = ["DivergedError", "DivergenceWatch", "GROWTH", "FLOOR", "EARLY_STEPS"]

GROWTH = 1e6  #: growth of the RMS magnitude over its early value that counts as divergence
FLOOR = 1e8  #: RMS magnitude that the model must also exceed
EARLY_STEPS = 4  #: training steps after which the reference magnitude is taken
BUDGET = 0.01  #: fraction of the training time the checks may take
MIN_EVERY, MAX_EVERY = 16, 4096  #: bounds of the steps between two checks


class DivergedError(ArithmeticError):
    """Training diverged: NaN or inf model parameters, or a model whose magnitude grew
    more than ``GROWTH`` (1e6) times past the floor ``FLOOR`` (RMS 1e8); see
    :mod:`bidlab.learn.divergence`."""


class DivergenceWatch:
    """The growth check of one learner (see the module doc). ``trained`` counts its
    training steps; the loop calls :meth:`check` when ``trained >= next_check``."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the reference (after a checkpoint replaced the model)."""
        self.trained = 0
        self.next_check = EARLY_STEPS
        self.reference: float | None = None
        self.ref_step = 0
        self._t_last: float | None = None
        self._n_last = 0

    def check(self, learner: Any, when: str) -> None:
        """Measure the model's magnitude; raise :class:`DivergedError` when it diverged."""
        t0 = time.perf_counter()
        mag = magnitude(learner.model)
        if mag is not None:
            if not math.isfinite(mag):
                learner._check_finite(when)  # names the matrix holding NaN or inf
            if self.reference is None:
                if self.trained >= EARLY_STEPS and 0.0 < mag < math.inf:
                    self.reference, self.ref_step = mag, self.trained
            elif not mag <= max(GROWTH * self.reference, FLOOR):
                raise DivergedError(
                    f"the model diverged: the magnitude (RMS) of "
                    f"{type(learner.model).__name__}.modelmats grew from "
                    f"{self.reference:.3g} after {self.ref_step} training steps to {mag:.3g} "
                    f"at step {learner.step} ({when}), more than {GROWTH:g} times, with "
                    f"{options_in_force(learner)}. {after(learner)}")
        t1 = time.perf_counter()
        if self._t_last is not None and self.trained > self._n_last:
            per_step = (t0 - self._t_last) / (self.trained - self._n_last)
            every = math.ceil((t1 - t0) / max(BUDGET * per_step, 1e-12))
        else:
            every = MIN_EVERY
        self._t_last, self._n_last = t1, self.trained
        self.next_check = self.trained + min(MAX_EVERY, max(MIN_EVERY, every))


AFTER = "The learner stopped (state 'failed'); the last checkpoint written stays as it was."


def after(learner: Any) -> str:
    """What happened and what to try: a lower learning rate where the learner trains with
    one, else the data's scale and the regularisation (SFA, NMF, k-means have no rate)."""
    if "lrate" in _in_force(learner):
        return f"{AFTER} Lower the learning rate (or raise the regularisation) and train again."
    return (f"{AFTER} This model takes no learning rate: check the data's scale (rescale "
            "values far from 1) and the options named above, then train again.")


def magnitude(model: Any) -> float | None:
    """The RMS of the model's :meth:`~bidlab.learn.Model.divergence_mats` (each times its
    factor); None when it names none."""
    total, n = 0.0, 0
    for m, factor in model.divergence_mats():
        a = m.data
        if a.size == 0:
            continue
        flat = a.ravel(order="K")  # a view for C- or F-contiguous matrices
        squares = float(m.xp.vdot(flat, flat))
        if not math.isfinite(squares):
            # float32 squares overflow long before the entries do (a lazily scaled count
            # matrix holds entries near 1e19 times a tiny factor): bound the sum by the
            # largest entry instead, which is finite unless the matrix itself is not
            top = max(abs(float(m.xp.max(flat))), abs(float(m.xp.min(flat))))
            if not math.isfinite(top):
                return math.inf
            squares = top * top * a.size
        total += squares * float(factor) ** 2
        n += a.size
    return math.sqrt(total / n) if n else None


def _in_force(learner: Any) -> set[str]:
    """The learner's numeric options that change its training (not those its parts take
    but, as set up, ignore: :meth:`~bidlab.learn.hyper.Component.inert_options`)."""
    comps = learner._components()
    inert = {name for comp in comps for name in comp.inert_options()}
    return {spec.name for comp in comps for spec in type(comp).option_table()
            if spec.type in (float, int) and spec.name not in inert}


def options_in_force(learner: Any) -> str:
    """``name=value`` for the learner's numeric options in force (what a divergence
    message names)."""
    names = _in_force(learner)
    return ", ".join(f"{k}={_short(v)}" for k, v in learner.opts.as_dict().items()
                     if k in names)


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, tuple):
        return "[" + ", ".join(_short(x) for x in v[:4]) + (", ...]" if len(v) > 4 else "]")
    return repr(v)
