"""Gradient updaters: Grad and ADAGrad (decayed learning rate, momentum, iterate averaging).

``Grad``: ``m <- m + lrate * (t0 / (t0 + t)) ** texp * u`` (+ momentum). ``ADAGrad``: ``s`` =
mean of ``u**2`` over the updates so far (kept as their sum ``S``, so an update that is zero
somewhere leaves ``S`` there unchanged: ``s = S / (t + 1)``);
``m <- m + lrate * (t0 / (t0 + t)) ** texp * u / (s ** vexp + epsilon)`` (+ momentum). With
the default ``texp = vexp = 0.5`` this is classic AdaGrad.

Momentum: ``v <- momentum * v + step; m <- m + v``; its buffer is allocated the first time
momentum is non-zero.

Iterate averaging (Polyak-Ruppert): with ``average_from = a >= 0`` the model after every
update ``t > a`` (every ``average_every``-th of them) is added to a running sum, and when a
run finishes its passes (:meth:`Updater.end_run`) the model becomes the mean of those
iterates. A run stopped early, or cut by ``max_steps``, keeps its last iterate and the sum,
which a resumed run goes on adding to. Each added iterate costs one pass over the model;
the sum (:class:`~bidlab.learn.averaging.IterateSum`) and its count are checkpointed.

On the CPU, Grad and ADAGrad (``vexp`` 0.5) without momentum run each matrix's step as one
fused pass (:mod:`bidlab.kern.steps`: the same arithmetic bit for bit, in one pass over
the matrix instead of nine); other cases and other backends take the ufuncs.
Unformed sparse updates (:mod:`bidlab.learn.updaters.sparse`) are stepped over the rows
the minibatch touches.

L1 (:class:`~bidlab.learn.L1Regularizer`) is a proximal step after each step, with each
weight's own step size ``eta`` (Grad: ``lrate * decay``; ADAGrad: that over its
denominator): ``w <- sign(w) * max(|w| - eta * l1, 0)``, so weights reach exact zeros
(a ``sign(w)`` subgradient oscillates around them), and ADAGrad's squares hold the data
and L2 terms only. The mean of averaged iterates is not sparse: when it lands, it takes
one such proximal step with the last step's sizes (:meth:`_Stepper.l1_shrink`; fit's
held-out candidates too), which zeroes the weights whose mean is within one step's
shrinkage of zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern import steps
from bidlab.kern.touched import TouchedStep
from bidlab.learn.averaging import IterateSum
from bidlab.learn.options import Option
from bidlab.learn.updaters.base import (
    _AVERAGE_EVERY,
    _AVERAGE_FROM,
    _LRATE,
    _MOMENTUM,
    _T0,
    _TEXP,
    Updater,
    _decay,
    _Scratch,
)
from bidlab.learn.updaters.sparse import SparseUpdate
from bidlab.mat import Mat

__all__ = ["Grad", "ADAGrad"]


class _Stepper(Updater):
    """Shared by Grad and ADAGrad: decayed learning rate, optional momentum."""

    _SCRATCH = ("_tmp", "_steps", "_zeros", "_l1")
    PROXIMAL_L1 = True
    _ADAGRAD = False  # the step leaves each weight's denominator in _tmp2

    def init(self, model: Any) -> None:
        super().init(model)
        self.lrate = self._hyper("lrate")
        self.momentum = self._hyper("momentum")
        self._velocity: list[Any] | None = None
        self.iterates = IterateSum()

    def _direction(self, i: int, u: Any, out: Any) -> None:
        raise NotImplementedError

    def _fused(self, i: int, m: Any, u: Any, scale: float, l1: Any) -> bool:
        """The whole step for matrix ``i`` as one CPU pass (no momentum), with L1's
        proximal step when ``l1`` (a rows x 1 column) is given; False if none."""
        return False

    def _sparse_step(self, i: int, m: Any, rec: SparseUpdate, scale: float, l1: Any) -> bool:
        """The whole step from an unformed sparse update, over the touched rows (CPU, no
        momentum); False when it does not apply."""
        return False

    def _eta(self, i: int, scale: float, den: Any) -> Any:
        """The step sizes of matrix ``i`` at decay ``scale`` (ADAGrad: into ``den``, its
        denominators)."""
        raise NotImplementedError

    def l1_shrink(self, i: int, W: Any) -> None:
        """L1's proximal step on ``W`` (an array like model matrix ``i``, e.g. a mean of
        iterates) with the last step's sizes and L1 column; nothing without L1."""
        l1 = self._l1.get(i)
        if l1 is None:  # no step this run (one resumed with none left): the one handed over
            prox = self.model.l1_prox
            l1 = self._l1[i] = prox.get(i) if prox else None
        if l1 is None or self.t == 0:
            return
        thr = self._eta(i, _decay(self.opts.t0, self.t - 1, self.opts.texp), None)
        _prox(self.xp, W, thr * l1, self._tmp[i])

    def _sparse_args(self, i: int, m: Any, rec: SparseUpdate,
                     l1col: Any = None) -> tuple[Any, ...] | None:
        """(step, M, X, A, lr, l1, l2) for :mod:`bidlab.kern.touched`, or None."""
        if self.xp is not np or rec.X is None or rec.X.xp is not np:
            return None
        M = m.T  # the kernels walk a C-ordered rows x cols matrix
        A = rec.A.data
        if not (M.flags.c_contiguous and A.flags.c_contiguous):
            return None
        if any(t[0] not in ("l1", "l2") for t in rec.terms):
            return None  # a term the kernels do not know: form the update
        l1, l2 = rec.columns("l1") if l1col is None else l1col, rec.columns("l2")
        if l1 is False or l2 is False:
            return None
        zeros = self._zeros.get(i)
        if zeros is None:
            zeros = self._zeros[i] = backend.zeros((m.shape[0], 1), m.dtype)
        lr1 = self.lrate[i][:, 0]
        l1 = (zeros if l1 is None else l1)[:, 0]
        l2 = (zeros if l2 is None else l2)[:, 0]
        step = self._steps.get(i)
        if step is None:
            step = self._steps[i] = TouchedStep(M.shape[0], M.shape[1], M.dtype)
        step.always_defer = rec.lazy
        return step, M, rec.X, A, lr1, l1, l2

    def _new_scratch(self) -> None:
        super()._new_scratch()
        self._steps: dict[int, TouchedStep] = {}
        self._zeros: dict[int, Any] = {}
        self._l1: dict[int, Any] = {}  # each matrix's L1 column of the last step

    def update(self, step: int) -> None:
        xp, mm = self.xp, self.model.modelmats
        scale = _decay(self.opts.t0, self.t, self.opts.texp)
        use_momentum = not self.momentum.is_zero()
        if use_momentum and self._velocity is None:
            self._velocity = self._per_mat(lambda i: backend.zeros_as(mm[i].data))
        sparse = self.model.sparse_updates
        mm, um = self.model.modelmats, self.model.updatemats
        prox = self.model.l1_prox or {}
        for i in self.mats:
            m, u = mm[i], um[i]
            l1 = self._l1[i] = prox.get(i)
            if l1 is not None:
                prox[i] = None  # taken: the next minibatch's mixin puts it there again
            rec = sparse.get(i) if sparse else None
            if rec is not None and rec.pending:
                done = not use_momentum and self._sparse_step(i, m.data, rec, scale, l1)
                if not done:
                    rec.materialize(u)
                rec.done()
                if done:
                    continue
            touched = self._steps.get(i)
            if touched is not None and touched.deferring:
                touched.catch_up(self.t)  # a dense step next: the deferred terms first
            if not use_momentum and self._fused(i, m.data, u.data, scale, l1):
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
            if l1 is not None:
                thr = self._eta(i, scale, self._tmp2[i] if self._ADAGRAD else None)
                if thr.shape == m.shape:
                    xp.multiply(thr, l1, out=thr)
                else:
                    thr = thr * l1
                _prox(xp, m.data, thr, self._tmp[i])
        self.t += 1
        start = self.opts.average_from
        if start >= 0 and self.t > start and (self.t - start) % self.opts.average_every == 0:
            self.sync()  # every deferred term lands before the iterate is added
            self.iterates.add(self._moved(), xp)

    def _moved(self) -> list[Mat]:
        """The model matrices this updater moves (those whose iterates it averages)."""
        return [self.model.modelmats[i] for i in self.mats]

    def end_pass(self, pass_: int) -> None:
        self.sync()

    def sync(self) -> None:
        for step in self._steps.values():
            step.catch_up(self.t)

    def end_run(self, finished: bool) -> None:
        """Sync; when a run with averaged iterates finishes, the model becomes their mean.
        A run stopped early keeps its last iterate and the sum, so resuming it (from a
        checkpoint too) continues the average exactly."""
        self.sync()
        if finished and self.iterates.n:
            self.iterates.land(self._moved(), self.xp)
            if self.model._comm is None:  # several ranks: once their models are combined
                for i in self.mats:
                    self.l1_shrink(i, self.model.modelmats[i].data)

    def state(self) -> dict[str, Mat]:
        out: dict[str, Mat] = {}
        if self._velocity is not None:
            out.update({f"velocity{i}": Mat(v) for i, v in enumerate(self._velocity)
                        if v is not None})
        return out | self.iterates.state()

    def load_state(self, mats: dict[str, Any]) -> None:
        if any(k.startswith("velocity") for k in mats) and self._velocity is None:
            mm = self.model.modelmats
            self._velocity = self._per_mat(lambda i: backend.zeros_as(mm[i].data))
        self.iterates.load(mats, self._moved(), self.xp)
        super().load_state({k: v for k, v in mats.items() if not IterateSum.owns(k)})

    def counters(self) -> dict[str, int]:
        return super().counters() | {"average_n": int(self.iterates.n)}

    def set_counters(self, values: dict[str, int]) -> None:
        super().set_counters(values)
        self.iterates.n = int(values.get("average_n", 0))


class Grad(_Stepper):
    """Gradient ascent: ``m += lrate * (t0/(t0+t))**texp * u`` (+ momentum)."""

    OPTIONS = (_LRATE, _TEXP, _T0, _MOMENTUM, _AVERAGE_FROM, _AVERAGE_EVERY)

    def _direction(self, i: int, u: Any, out: Any) -> None:
        self.xp.copyto(out, u)

    def _fused(self, i: int, m: Any, u: Any, scale: float, l1: Any) -> bool:
        return self.xp is np and steps.grad(m, u, self.lrate[i], scale, l1)

    def _eta(self, i: int, scale: float, den: Any) -> Any:
        return self.lrate[i] * scale

    def _sparse_step(self, i: int, m: Any, rec: SparseUpdate, scale: float, l1: Any) -> bool:
        args = self._sparse_args(i, m, rec, l1)
        if args is None:
            return False
        step, M, X, A, lr, l1, l2 = args
        step.grad(X, A, M, lr, l1, l2, scale, self.t)
        return True


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
        _AVERAGE_FROM,
        _AVERAGE_EVERY,
    )

    _SCRATCH = ("_tmp", "_tmp2", "_steps", "_zeros", "_l1")
    _ADAGRAD = True

    def init(self, model: Any) -> None:
        super().init(model)
        self.vexp = self._hyper("vexp")
        self.epsilon = self._hyper("epsilon")
        self.sumsq = self._per_mat(lambda i: backend.zeros_as(model.modelmats[i].data))

    def _new_scratch(self) -> None:
        super()._new_scratch()
        self._tmp2 = _Scratch(self.model)

    def _fused(self, i: int, m: Any, u: Any, scale: float, l1: Any) -> bool:
        return (self.xp is np and self.vexp.scalar == 0.5
                and steps.adagrad(m, u, self.sumsq[i], self.lrate[i], self.epsilon[i],
                                  1.0 / (self.t + 1), scale, l1))

    def _sparse_step(self, i: int, m: Any, rec: SparseUpdate, scale: float, l1: Any) -> bool:
        if self.vexp.scalar != 0.5:
            return False
        args = self._sparse_args(i, m, rec, l1)
        if args is None:
            return False
        step, M, X, A, lr, l1, l2 = args
        S = self.sumsq[i]
        if not S.T.flags.c_contiguous:  # e.g. loaded from a file: match the model's layout
            S = self.sumsq[i] = np.asfortranarray(S)
        step.adagrad(X, A, M, S.T, lr, l1, l2, self.epsilon[i][:, 0],
                     1.0 / (self.t + 1), scale, self.t)
        return True

    def _direction(self, i: int, u: Any, out: Any) -> None:
        xp, ss, tmp = self.xp, self.sumsq[i], self._tmp2[i]
        # the sum of u**2; its mean over the t + 1 updates is ss / (t + 1)
        xp.multiply(u, u, out=tmp)
        xp.add(ss, tmp, out=ss)
        self._denominator(i, 1.0 / (self.t + 1), tmp)
        xp.divide(u, tmp, out=out)

    def _denominator(self, i: int, inv_t: float, out: Any) -> None:
        """``out = (sumsq * inv_t) ** vexp + epsilon`` (the step's divisor)."""
        xp = self.xp
        xp.multiply(self.sumsq[i], inv_t, out=out)
        if self.vexp.scalar == 0.5:
            xp.sqrt(out, out=out)
        else:
            xp.power(out, self.vexp[i], out=out)
        xp.add(out, self.epsilon[i], out=out)

    def _eta(self, i: int, scale: float, den: Any) -> Any:
        if den is None:  # not just computed by a step: from the sums of squares
            den = self._tmp2[i]
            self._denominator(i, 1.0 / self.t, den)
        xp = self.xp
        xp.divide(self.lrate[i], den, out=den)
        if scale != 1.0:
            xp.multiply(den, scale, out=den)
        return den

    def state(self) -> dict[str, Mat]:
        out = super().state()
        out.update({f"sumsq{i}": Mat(s) for i, s in enumerate(self.sumsq) if s is not None})
        return out



def _prox(xp: Any, W: Any, thr: Any, tmp: Any) -> None:
    """``W <- sign(W) * max(|W| - thr, 0)`` in place (L1's proximal step; ``tmp``: a
    scratch array like ``W``)."""
    xp.abs(W, out=tmp)
    xp.subtract(tmp, thr, out=tmp)
    xp.maximum(tmp, 0, out=tmp)
    xp.copysign(tmp, W, out=W)
