"""Updaters: how a model's matrices move given each minibatch's ``updatemats``.

The model writes an ascent direction (a gradient of its score, or sufficient statistics)
into ``model.updatemats``; mixins add their terms; then the updater changes
``model.modelmats`` in place. All arithmetic is raw ``xp`` ufuncs with ``out=`` into
state allocated once in :meth:`Updater.init`, so a step allocates nothing; every
hyperparameter (``lrate``, ``vexp``, ...) is a :class:`~bidlab.learn.hyper.Hyper`: a
number, one value per model-matrix row, or one per model matrix, changeable live.

``t`` counts the updates made so far (it is checkpointed, so a resumed run continues the
schedules where they were).

=========  ==================================================================================
Batch      accumulates ``updatemats`` over a pass; at the pass end either replaces the model
           with the sums (``batch_mode="replace"``: EM-style sufficient statistics; the model
           normalises in its ``end_pass``) or takes one step ``lrate * mean`` (``"step"``).
IncNorm    moving average ``m <- (1 - r) m + r u`` with ``r = min(1, (t0 / t) ** power)``,
           ``t = 1, 2, ...`` (online variational LDA's schedule), optionally normalising each
           row of ``u`` to sum 1 first (``isprob``).
Grad       ``m <- m + lrate * (t0 / (t0 + t)) ** texp * u`` (+ momentum).
ADAGrad    ``s`` = running mean of ``u**2``;
           ``m <- m + lrate * (t0 / (t0 + t)) ** texp * u / (s ** vexp + epsilon)``
           (+ momentum). With the default ``texp = vexp = 0.5`` this is classic AdaGrad.
=========  ==================================================================================

Momentum (Grad, ADAGrad): ``v <- momentum * v + step; m <- m + v``; its buffer is
allocated the first time momentum is non-zero.

On the CPU, Grad and ADAGrad (``vexp`` 0.5) without momentum run each matrix's step as one
fused pass (:mod:`bidlab.kern.steps`: the same arithmetic bit for bit; ADAGrad on a
640 x 39,115 float32 matrix 100 -> 12 ms); other cases and other backends take the ufuncs.
State is allocated in each model matrix's memory order (:func:`bidlab.backend.empty_as`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern import steps
from bidlab.learn.hyper import Component, Hyper
from bidlab.learn.options import Option
from bidlab.mat import Mat

__all__ = ["Updater", "Batch", "IncNorm", "Grad", "ADAGrad", "UPDATERS"]


class Updater(Component):
    """Base class. Subclasses implement :meth:`init` (allocate state) and :meth:`update`."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.model: Any = None
        self.t = 0
        self._tmp: list[Any] = []

    def init(self, model: Any) -> None:
        """Attach to an initialised model; allocate per-matrix state."""
        self.model = model
        mm = model.modelmats
        self.xp = mm[0].xp
        self.dtype = mm[0].dtype
        self.shapes = [m.shape for m in mm]
        self._tmp = [backend.empty_as(m.data) for m in mm]

    def _hyper(self, name: str) -> Hyper:
        return self.hyper(name, self.shapes, self.xp, self.dtype, self.model.row_groups)

    def update(self, step: int) -> None:
        """Apply ``model.updatemats`` to ``model.modelmats`` (one training minibatch)."""
        raise NotImplementedError

    def end_pass(self, pass_: int) -> None:
        """Called at the end of each pass (before the model's end_pass)."""

    def state(self) -> dict[str, Mat]:
        """Matrices to checkpoint (name -> Mat); ``t`` is saved separately."""
        return {}

    def load_state(self, mats: dict[str, Any]) -> None:
        """Restore matrices saved by :meth:`state` (host arrays, same shapes)."""
        own = self.state()
        for name, arr in mats.items():
            if name in own:
                dst = own[name]
                dst.data[...] = dst.xp.asarray(arr)

    def counters(self) -> dict[str, int]:
        """Integer state to checkpoint (the update count ``t``, ...)."""
        return {"t": int(self.t)}

    def set_counters(self, values: dict[str, int]) -> None:
        self.t = int(values.get("t", 0))


def _decay(t0: float, t: int, texp: float) -> float:
    return 1.0 if texp == 0.0 else (t0 / (t0 + t)) ** texp


_LRATE = Option("lrate", float, 0.1, "learning rate (number, per-row or per-model vector)",
                low=0.0, low_open=True, vector=True)
_TEXP = Option("texp", float, 0.0, "learning-rate decay exponent: lrate * (t0/(t0+t))**texp",
               low=0.0)
_T0 = Option("t0", float, 1.0, "time offset of the decay schedules (in updates)", low=0.0,
             low_open=True)
_MOMENTUM = Option("momentum", float, 0.0, "momentum of the step (0: none)", low=0.0, high=1.0,
                   high_open=True, vector=True)


class _Stepper(Updater):
    """Shared by Grad and ADAGrad: decayed learning rate, optional momentum."""

    def init(self, model: Any) -> None:
        super().init(model)
        self.lrate = self._hyper("lrate")
        self.momentum = self._hyper("momentum")
        self._velocity: list[Any] | None = None

    def _direction(self, i: int, u: Any, out: Any) -> None:
        raise NotImplementedError

    def _fused(self, i: int, m: Any, u: Any, scale: float) -> bool:
        """The whole step for matrix ``i`` as one CPU pass (no momentum); False if none."""
        return False

    def update(self, step: int) -> None:
        xp = self.xp
        scale = _decay(self.opts.t0, self.t, self.opts.texp)
        use_momentum = not self.momentum.is_zero()
        if use_momentum and self._velocity is None:
            self._velocity = [backend.zeros_as(m.data) for m in self.model.modelmats]
        for i, (m, u) in enumerate(zip(self.model.modelmats, self.model.updatemats,
                                       strict=True)):
            if not use_momentum and self._fused(i, m.data, u.data, scale):
                continue
            tmp = self._tmp[i]
            self._direction(i, u.data, tmp)
            xp.multiply(tmp, self.lrate[i], out=tmp)
            if scale != 1.0:
                xp.multiply(tmp, scale, out=tmp)
            if use_momentum:
                v = self._velocity[i]
                xp.multiply(v, self.momentum[i], out=v)
                xp.add(v, tmp, out=v)
                tmp = v
            xp.add(m.data, tmp, out=m.data)
        self.t += 1

    def state(self) -> dict[str, Mat]:
        if self._velocity is None:
            return {}
        return {f"velocity{i}": Mat(v) for i, v in enumerate(self._velocity)}

    def load_state(self, mats: dict[str, Any]) -> None:
        if any(k.startswith("velocity") for k in mats) and self._velocity is None:
            self._velocity = [backend.zeros_as(m.data) for m in self.model.modelmats]
        super().load_state(mats)


class Grad(_Stepper):
    """Gradient ascent: ``m += lrate * (t0/(t0+t))**texp * u`` (+ momentum)."""

    OPTIONS = (_LRATE, _TEXP, _T0, _MOMENTUM)

    def _direction(self, i: int, u: Any, out: Any) -> None:
        self.xp.copyto(out, u)

    def _fused(self, i: int, m: Any, u: Any, scale: float) -> bool:
        return self.xp is np and steps.grad(m, u, self.lrate[i], scale)


class ADAGrad(_Stepper):
    """ADAGrad: steps scaled by the running mean of squared updates, ``s ** vexp + epsilon``."""

    OPTIONS = (
        _LRATE,
        Option("texp", float, 0.5, "learning-rate decay exponent: lrate * (t0/(t0+t))**texp",
               low=0.0),
        _T0,
        _MOMENTUM,
        Option("vexp", float, 0.5, "exponent of the squared-gradient mean in the denominator",
               low=0.0, vector=True),
        Option("epsilon", float, 1e-5, "added to the denominator", low=0.0, low_open=True,
               vector=True),
    )

    def init(self, model: Any) -> None:
        super().init(model)
        self.vexp = self._hyper("vexp")
        self.epsilon = self._hyper("epsilon")
        self.sumsq = [backend.zeros_as(m.data) for m in model.modelmats]
        self._tmp2 = [backend.empty_as(m.data) for m in model.modelmats]

    def _fused(self, i: int, m: Any, u: Any, scale: float) -> bool:
        return (self.xp is np and self.vexp.scalar == 0.5
                and steps.adagrad(m, u, self.sumsq[i], self.lrate[i], self.epsilon[i],
                                  1.0 / (self.t + 1), scale))

    def _direction(self, i: int, u: Any, out: Any) -> None:
        xp, ss, tmp = self.xp, self.sumsq[i], self._tmp2[i]
        # running mean of u**2: s += (u*u - s) / (t + 1)
        xp.multiply(u, u, out=tmp)
        xp.subtract(tmp, ss, out=tmp)
        xp.multiply(tmp, 1.0 / (self.t + 1), out=tmp)
        xp.add(ss, tmp, out=ss)
        if self.vexp.scalar == 0.5:
            xp.sqrt(ss, out=tmp)
        else:
            xp.power(ss, self.vexp[i], out=tmp)
        xp.add(tmp, self.epsilon[i], out=tmp)
        xp.divide(u, tmp, out=out)

    def state(self) -> dict[str, Mat]:
        out = super().state()
        out.update({f"sumsq{i}": Mat(s) for i, s in enumerate(self.sumsq)})
        return out


class IncNorm(Updater):
    """Incremental moving average for online EM (online variational LDA).

    ``m <- (1 - r) m + r u`` with ``r = min(1, (t0 / t) ** power)`` and ``t = 1, 2, ...``
    updates. With ``isprob`` each row of ``u`` is first scaled to sum 1. The model's
    ``update`` writes the full-data estimate of the statistics into ``updatemats``.
    """

    OPTIONS = (
        Option("power", float, 0.7, "decay exponent of the averaging rate (t0/t)**power",
               low=0.0, vector=True),
        Option("t0", float, 1.0, "time offset: the rate is 1 until t exceeds t0", low=0.0,
               low_open=True, vector=True),
        Option("isprob", bool, False, "normalise each row of the update to sum 1 first"),
    )

    def init(self, model: Any) -> None:
        super().init(model)
        self.power = self._hyper("power")
        self.t0 = self._hyper("t0")
        self._rate = [backend.empty((s[0], 1), self.dtype, self.xp) for s in self.shapes]
        self._rowsum = [backend.empty((s[0], 1), self.dtype, self.xp) for s in self.shapes]

    def update(self, step: int) -> None:
        xp = self.xp
        t = float(self.t + 1)
        for i, (m, u) in enumerate(zip(self.model.modelmats, self.model.updatemats,
                                       strict=True)):
            r, tmp = self._rate[i], self._tmp[i]
            xp.divide(self.t0[i], t, out=r)
            xp.power(r, self.power[i], out=r)
            xp.minimum(r, 1.0, out=r)
            src = u.data
            if self.opts.isprob:
                rs = self._rowsum[i]
                xp.sum(src, axis=1, keepdims=True, out=rs)
                xp.maximum(rs, xp.finfo(rs.dtype).tiny, out=rs)
                xp.divide(src, rs, out=tmp)
                src = tmp
            xp.subtract(src, m.data, out=tmp)
            xp.multiply(tmp, r, out=tmp)
            xp.add(m.data, tmp, out=m.data)
        self.t += 1


class Batch(Updater):
    """Once per pass: accumulate ``updatemats`` over the pass, then apply at its end.

    ``batch_mode="replace"`` (EM, k-means): the model matrices become the sums of the
    pass's updates (the model normalises them in its ``end_pass``). ``"step"``: one
    gradient step ``m += lrate * mean(u)`` per pass (full-batch gradient ascent).
    """

    OPTIONS = (
        Option("batch_mode", str, "replace", "what a pass's summed updates do: replace the "
               "model, or step along their mean", choices=("replace", "step"), live=False),
        _LRATE,
    )

    def init(self, model: Any) -> None:
        super().init(model)
        self.sums = [backend.zeros_as(m.data) for m in model.modelmats]
        self.count = 0
        self.lrate = self._hyper("lrate")

    def update(self, step: int) -> None:
        xp = self.xp
        for s, u in zip(self.sums, self.model.updatemats, strict=True):
            xp.add(s, u.data, out=s)
        self.count += 1
        self.t += 1

    def end_pass(self, pass_: int) -> None:
        if self.count == 0:
            return
        xp = self.xp
        for i, (m, s) in enumerate(zip(self.model.modelmats, self.sums, strict=True)):
            if self.opts.batch_mode == "replace":
                xp.copyto(m.data, s)
            else:
                tmp = self._tmp[i]
                xp.multiply(s, 1.0 / self.count, out=tmp)
                xp.multiply(tmp, self.lrate[i], out=tmp)
                xp.add(m.data, tmp, out=m.data)
            s.fill(0)
        self.count = 0

    def state(self) -> dict[str, Mat]:
        return {f"sums{i}": Mat(s) for i, s in enumerate(self.sums)}

    def counters(self) -> dict[str, int]:
        return {**super().counters(), "count": int(self.count)}

    def set_counters(self, values: dict[str, int]) -> None:
        super().set_counters(values)
        self.count = int(values.get("count", 0))


UPDATERS: dict[str, type[Updater]] = {
    "grad": Grad, "adagrad": ADAGrad, "incnorm": IncNorm, "batch": Batch,
}
