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
ADAGrad    ``s`` = mean of ``u**2`` over the updates so far (kept as their sum ``S``, so an
           update that is zero somewhere leaves ``S`` there unchanged: ``s = S / (t + 1)``);
           ``m <- m + lrate * (t0 / (t0 + t)) ** texp * u / (s ** vexp + epsilon)``
           (+ momentum). With the default ``texp = vexp = 0.5`` this is classic AdaGrad.
=========  ==================================================================================

Momentum (Grad, ADAGrad): ``v <- momentum * v + step; m <- m + v``; its buffer is
allocated the first time momentum is non-zero.

Iterate averaging (Grad, ADAGrad; Polyak-Ruppert): with ``average_from = a >= 0`` the
model after every update ``t > a`` (every ``average_every``-th of them) is added to a
running sum, and when a run finishes its passes (:meth:`Updater.end_run`) the model becomes
the mean of those iterates. A run stopped early, or cut by ``max_steps``, keeps its last
iterate and the sum, which a resumed run goes on adding to. Averaging takes out most of the
noise of the last steps, so a large, slowly decaying learning rate both moves fast and ends
close to the optimum. Each added iterate costs one pass over the model; the sum
(:class:`~bidlab.learn.averaging.IterateSum`) and its count are checkpointed.

On the CPU, Grad and ADAGrad (``vexp`` 0.5) without momentum run each matrix's step as one
fused pass (:mod:`bidlab.kern.steps`: the same arithmetic bit for bit; ADAGrad on a
640 x 39,115 float32 matrix 100 -> 12 ms); other cases and other backends take the ufuncs.
State is allocated in each model matrix's memory order (:func:`bidlab.backend.empty_as`);
scratch space when a step first needs it.

**Sparse updates.** A model whose update of matrix ``i`` is a product with a sparse minibatch
(a GLM's gradient ``X.T @ A``) may hand it over unformed: it sets
``model.sparse_updates = {i: SparseUpdate}`` in its ``update`` instead of filling
``updatemats[i]``. The L1 / L2 mixins then record their terms on it, and Grad and ADAGrad
(vexp 0.5, no momentum) apply the whole step over the rows the minibatch touches
(:mod:`bidlab.kern.touched`: no dense gradient is formed). Any other case -- another
updater, momentum, the GPU -- calls :meth:`SparseUpdate.materialize`, which forms
``updatemats[i]`` and adds the recorded terms, and goes on as for a dense update.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern import steps
from bidlab.kern.touched import TouchedStep
from bidlab.learn.averaging import IterateSum
from bidlab.learn.hyper import Component, Hyper
from bidlab.learn.options import Option
from bidlab.mat import Mat, SMat, sparse_t_dense

__all__ = ["Updater", "Batch", "IncNorm", "Grad", "ADAGrad", "UPDATERS", "SparseUpdate",
           "sparse_updates", "form_sparse_updates"]


class SparseUpdate:
    """A model matrix's update given as a product with a sparse minibatch, not formed.

    ``updatemats[i] = (X.T @ A).T``: ``X`` the n x cols CSR minibatch (an SMat), ``A`` an
    n x rows C-ordered dense factor (a Mat; e.g. a GLM's loss gradient per margin, already
    scaled to an ascent direction). Mixins add their terms with :meth:`add_term`; updaters
    either apply everything over the touched rows or call :meth:`materialize`.
    """

    def __init__(self) -> None:
        self.X: SMat | None = None
        self.A: Mat | None = None
        self.terms: list[tuple[str, Any, Any, int]] = []
        self._out: tuple[Any, Mat] | None = None  # (U's array, a Mat of its transpose)

    def reset(self, X: SMat, A: Mat) -> None:
        """Describe this minibatch's update (the model calls this in ``update``)."""
        self.X, self.A = X, A
        self.terms.clear()

    def add_term(self, kind: str, column: Any, mixin: Any, i: int) -> None:
        """Record a regulariser's term: ``kind`` ``"l1"`` (``-column * sign(m)``) or ``"l2"``
        (``-column * m``); ``mixin._dense_term(i)`` adds it to a formed update."""
        self.terms.append((kind, column, mixin, i))

    @property
    def pending(self) -> bool:
        """Whether it describes a minibatch's update not yet applied or formed."""
        return self.X is not None

    def done(self) -> None:
        """Forget the minibatch (the updater has used it; no references are kept)."""
        self.X = self.A = None
        self.terms.clear()

    def columns(self, kind: str) -> Any:
        """The recorded ``kind`` column (rows x 1), None when absent, False when several."""
        found = [t[1] for t in self.terms if t[0] == kind]
        return None if not found else (found[0] if len(found) == 1 else False)

    def materialize(self, U: Mat) -> None:
        """Form the update in ``U`` (rows x cols), then add the recorded terms."""
        if self._out is None or self._out[0] is not U.data:
            self._out = (U.data, Mat(U.data.T))
        sparse_t_dense(self.X, self.A, out=self._out[1])
        for _kind, _col, mixin, i in self.terms:
            mixin._dense_term(i)


def sparse_updates(model: Any) -> dict[int, SparseUpdate] | None:
    """The model's unformed updates of the current minibatch (None: all are formed)."""
    return getattr(model, "sparse_updates", None)


def form_sparse_updates(model: Any) -> None:
    """Form every unformed update in ``updatemats`` (for updaters without a sparse step)."""
    for i, rec in (sparse_updates(model) or {}).items():
        if rec.pending:
            rec.materialize(model.updatemats[i])
            rec.done()


class _Scratch:
    """Scratch arrays shaped like each model matrix, allocated when first indexed."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.arrays: dict[int, Any] = {}

    def __getitem__(self, i: int) -> Any:
        a = self.arrays.get(i)
        if a is None:
            a = self.arrays[i] = backend.empty_as(self.model.modelmats[i].data)
        return a


class Updater(Component):
    """Base class. Subclasses implement :meth:`init` (allocate state) and :meth:`update`."""

    _SCRATCH: tuple[str, ...] = ("_tmp",)  # rebuilt on demand, never pickled or saved

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.model: Any = None
        self.t = 0
        self._tmp: Any = _Scratch(None)

    def init(self, model: Any) -> None:
        """Attach to an initialised model; allocate per-matrix state."""
        self.model = model
        mm = model.modelmats
        self.xp = mm[0].xp
        self.dtype = mm[0].dtype
        self.shapes = [m.shape for m in mm]
        self._new_scratch()

    def _new_scratch(self) -> None:
        """(Re)make the scratch space: arrays like each model matrix, on first use."""
        self._tmp = _Scratch(self.model)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in self._SCRATCH:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._new_scratch()

    def _hyper(self, name: str) -> Hyper:
        return self.hyper(name, self.shapes, self.xp, self.dtype, self.model.row_groups)

    def update(self, step: int) -> None:
        """Apply ``model.updatemats`` to ``model.modelmats`` (one training minibatch)."""
        raise NotImplementedError

    def pass_statistics(self) -> list[Any]:
        """Arrays this updater accumulates over a pass and applies at its end (a full-batch
        updater's sums): learners that share the rows sum them across ranks just before
        :meth:`end_pass`. None here."""
        return []

    def statistics_combined(self) -> None:
        """Called after :meth:`pass_statistics`' arrays were summed across ranks."""

    def end_pass(self, pass_: int) -> None:
        """Called at the end of each pass (before the model's end_pass)."""

    def sync(self) -> None:
        """Apply whatever the updater deferred, so the model matrices are exact (called at
        the end of each pass, before a checkpoint and when a run ends)."""

    def end_run(self, finished: bool) -> None:
        """A run ended (``finished``: it completed its passes or converged; not stopped,
        cut by ``max_steps`` or failed): make the model matrices exact. The base class
        syncs."""
        self.sync()

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
_AVERAGE_FROM = Option("average_from", int, -1,
                       "average the iterates after this many updates into the run's final "
                       "model (Polyak-Ruppert; -1: off)", low=-1)
_AVERAGE_EVERY = Option("average_every", int, 1,
                        "add every this many updates' iterate to the average", low=1)


class _Stepper(Updater):
    """Shared by Grad and ADAGrad: decayed learning rate, optional momentum."""

    _SCRATCH = ("_tmp", "_steps", "_zeros")

    def init(self, model: Any) -> None:
        super().init(model)
        self.lrate = self._hyper("lrate")
        self.momentum = self._hyper("momentum")
        self._velocity: list[Any] | None = None
        self.iterates = IterateSum()

    def _direction(self, i: int, u: Any, out: Any) -> None:
        raise NotImplementedError

    def _fused(self, i: int, m: Any, u: Any, scale: float) -> bool:
        """The whole step for matrix ``i`` as one CPU pass (no momentum); False if none."""
        return False

    def _sparse_step(self, i: int, m: Any, rec: SparseUpdate, scale: float) -> bool:
        """The whole step from an unformed sparse update, over the touched rows (CPU, no
        momentum); False when it does not apply."""
        return False

    def _sparse_args(self, i: int, m: Any, rec: SparseUpdate) -> tuple[Any, ...] | None:
        """(step, M, X, A, lr, l1, l2) for :mod:`bidlab.kern.touched`, or None."""
        if self.xp is not np or rec.X is None or rec.X.xp is not np:
            return None
        M = m.T  # the kernels walk a C-ordered rows x cols matrix
        A = rec.A.data
        if not (M.flags.c_contiguous and A.flags.c_contiguous):
            return None
        if any(t[0] not in ("l1", "l2") for t in rec.terms):
            return None  # a term the kernels do not know: form the update
        l1, l2 = rec.columns("l1"), rec.columns("l2")
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
        return step, M, rec.X, A, lr1, l1, l2

    def _new_scratch(self) -> None:
        super()._new_scratch()
        self._steps: dict[int, TouchedStep] = {}
        self._zeros: dict[int, Any] = {}

    def update(self, step: int) -> None:
        xp = self.xp
        scale = _decay(self.opts.t0, self.t, self.opts.texp)
        use_momentum = not self.momentum.is_zero()
        if use_momentum and self._velocity is None:
            self._velocity = [backend.zeros_as(m.data) for m in self.model.modelmats]
        sparse = sparse_updates(self.model)
        for i, (m, u) in enumerate(zip(self.model.modelmats, self.model.updatemats,
                                       strict=True)):
            rec = sparse.get(i) if sparse else None
            if rec is not None and rec.pending:
                done = not use_momentum and self._sparse_step(i, m.data, rec, scale)
                if not done:
                    rec.materialize(u)
                rec.done()
                if done:
                    continue
            touched = self._steps.get(i)
            if touched is not None and touched.deferring:
                touched.catch_up(self.t)  # a dense step next: the deferred terms first
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
        start = self.opts.average_from
        if start >= 0 and self.t > start and (self.t - start) % self.opts.average_every == 0:
            self.sync()  # every deferred term lands before the iterate is added
            self.iterates.add(self.model.modelmats, xp)

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
        if finished:
            self.iterates.land(self.model.modelmats, self.xp)

    def state(self) -> dict[str, Mat]:
        out: dict[str, Mat] = {}
        if self._velocity is not None:
            out.update({f"velocity{i}": Mat(v) for i, v in enumerate(self._velocity)})
        return out | self.iterates.state()

    def load_state(self, mats: dict[str, Any]) -> None:
        if any(k.startswith("velocity") for k in mats) and self._velocity is None:
            self._velocity = [backend.zeros_as(m.data) for m in self.model.modelmats]
        self.iterates.load(mats, self.model.modelmats, self.xp)
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

    def _fused(self, i: int, m: Any, u: Any, scale: float) -> bool:
        return self.xp is np and steps.grad(m, u, self.lrate[i], scale)

    def _sparse_step(self, i: int, m: Any, rec: SparseUpdate, scale: float) -> bool:
        args = self._sparse_args(i, m, rec)
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

    _SCRATCH = ("_tmp", "_tmp2", "_steps", "_zeros")

    def init(self, model: Any) -> None:
        super().init(model)
        self.vexp = self._hyper("vexp")
        self.epsilon = self._hyper("epsilon")
        self.sumsq = [backend.zeros_as(m.data) for m in model.modelmats]

    def _new_scratch(self) -> None:
        super()._new_scratch()
        self._tmp2 = _Scratch(self.model)

    def _fused(self, i: int, m: Any, u: Any, scale: float) -> bool:
        return (self.xp is np and self.vexp.scalar == 0.5
                and steps.adagrad(m, u, self.sumsq[i], self.lrate[i], self.epsilon[i],
                                  1.0 / (self.t + 1), scale))

    def _sparse_step(self, i: int, m: Any, rec: SparseUpdate, scale: float) -> bool:
        if self.vexp.scalar != 0.5:
            return False
        args = self._sparse_args(i, m, rec)
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
        xp.multiply(ss, 1.0 / (self.t + 1), out=tmp)
        if self.vexp.scalar == 0.5:
            xp.sqrt(tmp, out=tmp)
        else:
            xp.power(tmp, self.vexp[i], out=tmp)
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
        form_sparse_updates(self.model)
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
        self._count = np.zeros(1)  # the count as an array, summed with the sums
        self.lrate = self._hyper("lrate")

    def update(self, step: int) -> None:
        form_sparse_updates(self.model)
        xp = self.xp
        for s, u in zip(self.sums, self.model.updatemats, strict=True):
            xp.add(s, u.data, out=s)
        self.count += 1
        self.t += 1

    def pass_statistics(self) -> list[Any]:
        self._count[0] = self.count
        return [*self.sums, self._count]

    def statistics_combined(self) -> None:
        self.count = int(round(float(self._count[0])))

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
