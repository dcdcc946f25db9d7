"""IncNorm: the incremental moving average of online EM (online variational and Gibbs LDA).

The model writes, for each minibatch, the full-data estimate ``u`` of its statistics (a
minibatch's statistics scaled to the whole data); IncNorm blends it into the model matrix::

    m <- (1 - r) m + r u,    r = min(1, (t0 / (tau0 + t)) ** kappa) * model.step_weight

with ``t = 1, 2, ...`` the updates made. With ``t0 = 1`` this is Hoffman et al.'s online
step ``rho_t = (tau0 + t)^-kappa`` (online LDA); ``kappa`` in (0.5, 1] makes the steps sum
to infinity while their squares do not, so the average converges. A short minibatch takes
the partial step ``step_weight`` says (:attr:`bidlab.learn.Model.step_weight`). A model
that keeps its matrix in another form (LDA Gibbs's lazily scaled counts) takes the step
itself: :meth:`bidlab.learn.Model.blend` gets ``r`` and returns True.
"""

from __future__ import annotations

from typing import Any

from bidlab import backend
from bidlab.learn.option_upgrade import rebuild_options
from bidlab.learn.options import Option, Options
from bidlab.learn.updaters.base import Updater
from bidlab.learn.updaters.sparse import form_sparse_updates

__all__ = ["IncNorm"]

KAPPA = Option("kappa", float, 0.7, "forgetting rate: the step decays as (t0 / (tau0 + "
               "t))**kappa", low=0.5, low_open=True, high=1.0, vector=True)
TAU0 = Option("tau0", float, 0.0, "delay of the step schedule: larger slows the early "
              "steps", low=0.0, vector=True)
T0 = Option("t0", float, 1.0, "time scale: the step is 1 until tau0 + t exceeds t0", low=0.0,
            low_open=True, vector=True)
ISPROB = Option("isprob", bool, False, "normalise each row of the update to sum 1 first")
#: option names of IncNorm files written before it took LDA's schedule -> today's names
_RENAMED = {"power": "kappa"}


class IncNorm(Updater):
    """Incremental moving average for online EM: ``m <- (1 - r) m + r u``.

    ``r = min(1, (t0 / (tau0 + t)) ** kappa)`` times the model's ``step_weight``, with
    ``t = 1, 2, ...`` updates (see the module doc). With ``isprob`` each row of ``u`` is
    first scaled to sum 1. The model's ``update`` writes the full-data estimate of its
    statistics into ``updatemats``, or takes the step itself in :meth:`Model.blend`.

    Examples
    --------
    >>> from bidlab.learn import IncNorm
    >>> up = IncNorm(kappa=0.7, tau0=1.0)   # online LDA's rho_t = (1 + t)^-0.7
    >>> round(up.rate(1), 4)
    0.6156
    """

    OPTIONS = (KAPPA, TAU0, T0, ISPROB)

    def init(self, model: Any) -> None:
        super().init(model)
        self.kappa = self._hyper("kappa")
        self.tau0 = self._hyper("tau0")
        self.t0 = self._hyper("t0")
        self._rate = self._per_mat(
            lambda i: backend.empty((self.shapes[i][0], 1), self.dtype, self.xp))
        self._rowsum = self._per_mat(
            lambda i: backend.empty((self.shapes[i][0], 1), self.dtype, self.xp))

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        _upgrade_options(self)

    def rate(self, t: int) -> float:
        """The step ``min(1, (t0 / (tau0 + t)) ** kappa)`` of update ``t`` (1, 2, ...)
        for scalar options, before the model's ``step_weight``."""
        t0, tau0, kappa = self._first()
        return min(1.0, (t0 / (tau0 + t)) ** kappa)

    def next_step(self) -> float:
        """The step of the next update, with the model's ``step_weight`` (scalar options;
        per-row options give their first row's)."""
        return self.rate(self.t + 1) * float(self.model.step_weight)

    def _first(self) -> tuple[float, float, float]:
        """``t0``, ``tau0`` and ``kappa`` as numbers: a vector option's first value (all of
        them when its values are equal, e.g. ``kappa=[0.7, 0.7]``)."""
        o = self.opts
        return tuple(float(v if not hasattr(v, "__len__") else list(v)[0])
                     for v in (o.t0, o.tau0, o.kappa))

    def _scalar(self) -> bool:
        return all(h.scalar is not None for h in (self.kappa, self.tau0, self.t0))

    def update(self, step: int) -> None:
        form_sparse_updates(self.model, self.mats)
        t = self.t + 1
        weight = float(self.model.step_weight)
        if self._scalar():
            rho = self.rate(t) * weight
            if not self.model.blend(rho):
                for i in self.mats:
                    self._blend(i, rho)
        else:
            self._blend_rows(t, weight)
        self.t += 1

    def _source(self, i: int) -> Any:
        """The update of matrix ``i``, its rows scaled to sum 1 with ``isprob`` (into the
        scratch array)."""
        src = self.model.updatemats[i].data
        if self.opts.isprob:
            xp, rs, tmp = self.xp, self._rowsum[i], self._tmp[i]
            xp.sum(src, axis=1, keepdims=True, out=rs)
            xp.maximum(rs, xp.finfo(rs.dtype).tiny, out=rs)
            xp.divide(src, rs, out=tmp)
            return tmp
        return src

    def _blend(self, i: int, rho: float) -> None:
        """``m <- (1 - rho) m + rho u`` with one number ``rho``."""
        xp, m, tmp = self.xp, self.model.modelmats[i].data, self._tmp[i]
        xp.multiply(self._source(i), rho, out=tmp)
        xp.multiply(m, 1.0 - rho, out=m)
        xp.add(m, tmp, out=m)

    def _blend_rows(self, t: int, weight: float) -> None:
        """The step with a rate per row (vector ``kappa``, ``tau0`` or ``t0``)."""
        model, xp = self.model, self.xp
        if type(model).blend.__qualname__ != "Model.blend":  # it steps from one number
            raise ValueError(f"{type(model).__name__} takes IncNorm's step itself, from one "
                             "rate: give kappa, tau0 and t0 as single numbers")
        for i in self.mats:
            m, r, tmp = model.modelmats[i].data, self._rate[i], self._tmp[i]
            xp.add(self.tau0[i], float(t), out=r)
            xp.divide(self.t0[i], r, out=r)
            xp.power(r, self.kappa[i], out=r)
            xp.minimum(r, 1.0, out=r)
            xp.multiply(r, weight, out=r)
            src = self._source(i)
            xp.subtract(src, m, out=tmp)
            xp.multiply(tmp, r, out=tmp)
            xp.add(m, tmp, out=m)


def _upgrade_options(up: IncNorm) -> None:
    """Rebuild the options of an IncNorm saved under earlier names: IncNorm's ``power``
    (now ``kappa``), or online LDA's step (``RhoStep``: ``tau0`` and ``kappa``, ``t0`` 1)."""
    old = up.__dict__.get("opts")
    if not isinstance(old, Options):
        return
    names = set(old.specs)
    if names & set(_RENAMED) or ("tau0" in names and "t0" not in names):
        rebuild_options(up, _RENAMED)
        up.model = None  # its rate columns were never made: the next learner makes them
