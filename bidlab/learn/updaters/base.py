"""The updater base class: what every updater shares (state, scratch, checkpoints).

An updater moves the model matrices it owns (all of them, or those a
:class:`~bidlab.learn.updaters.per_matrix.PerMatrix` gives it) from the statistics the model
wrote into ``updatemats``. It declares what it reads in :attr:`Updater.STATS`; :meth:`init`
checks the model's ``updatemats`` against that declaration and names what is missing.
"""

from __future__ import annotations

from typing import Any

from bidlab import backend
from bidlab.learn.hyper import Component, Hyper
from bidlab.learn.options import Option
from bidlab.mat import Mat

__all__ = ["Updater"]


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
    """Base class. Subclasses implement :meth:`init` (allocate state) and :meth:`update`.

    Attributes
    ----------
    STATS
        the statistics read for each model matrix ``i`` it moves. ``()`` (the
        default): ``updatemats[i]`` is one Mat of ``modelmats[i]``'s shape (a gradient,
        sufficient statistics). Names (e.g. ``("num", "den")``): ``updatemats[i]`` is a
        dict holding at least those entries, of shapes the updater checks in
        :meth:`check_stats`.
    mats
        the indices of the model matrices this updater moves (all of them unless a
        :class:`~bidlab.learn.updaters.per_matrix.PerMatrix` gave it some).
    """

    STATS: tuple[str, ...] = ()
    #: whether it applies an L1 penalty as a proximal step (:func:`l1_proximal`)
    PROXIMAL_L1 = False
    _SCRATCH: tuple[str, ...] = ("_tmp",)  # rebuilt on demand, never pickled or saved

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.model: Any = None
        self.t = 0
        self._own: tuple[int, ...] | None = None
        self._tmp: Any = _Scratch(None)

    def own(self, mats: tuple[int, ...]) -> None:
        """Move only the model matrices ``mats`` (call before :meth:`init`)."""
        self._own = tuple(int(i) for i in mats)

    @property
    def mats(self) -> tuple[int, ...]:
        if self._own is not None:
            return self._own
        return tuple(range(len(self.model.modelmats))) if self.model is not None else ()

    def init(self, model: Any) -> None:
        """Attach to an initialised model; check its statistics; allocate state."""
        self.model = model
        mm = model.modelmats
        self.xp = mm[0].xp
        self.dtype = mm[0].dtype
        self.shapes = [m.shape for m in mm]
        for i in self.mats:
            self.check_stats(i)
        l1_proximal(model, self.mats, self.PROXIMAL_L1)
        self._new_scratch()

    def l1_shrink(self, i: int, W: Any) -> None:
        """L1's proximal step on ``W`` (an array like model matrix ``i``, e.g. a mean of
        iterates), for an updater that takes L1 that way (``PROXIMAL_L1``); nothing by
        default."""

    def check_stats(self, i: int) -> None:
        """Raise ValueError unless ``updatemats[i]`` is what :attr:`STATS` declares."""
        model, name = self.model, type(self).__name__
        m, u = model.modelmats[i], model.updatemats[i]
        where = f"{type(model).__name__}.updatemats[{i}] (model matrix {model.mat_name(i)!r})"
        if not self.STATS:
            if not isinstance(u, Mat) or u.shape != m.shape:
                got = (f"a dict of {sorted(u)}" if isinstance(u, dict)
                       else f"shape {getattr(u, 'shape', type(u).__name__)}")
                raise ValueError(f"{name} reads one update matrix of shape {m.shape} from "
                                 f"{where}; got {got}. Make the model write a Mat of its model "
                                 "matrix's shape there, or give that matrix an updater that "
                                 "reads the statistics it writes")
            return
        missing = [s for s in self.STATS if not isinstance(u, dict) or s not in u]
        if missing:
            got = f"a dict of {sorted(u)}" if isinstance(u, dict) else "one Mat"
            raise ValueError(f"{name} reads the statistics {list(self.STATS)} from {where}; "
                             f"got {got}, missing {missing}. Make the model's init set "
                             f"updatemats[{i}] = {{{', '.join(repr(s) for s in self.STATS)}: "
                             "...}, or give that matrix another updater")

    def stat_mat(self, i: int, stat: str, shapes: tuple[tuple[int, int], ...]) -> Mat:
        """Statistic ``stat`` of model matrix ``i``, checked to be a Mat of one of
        ``shapes`` (ValueError naming the fix otherwise)."""
        u = self.model.updatemats[i][stat]
        if not isinstance(u, Mat) or u.shape not in shapes:
            got = getattr(u, "shape", type(u).__name__)
            raise ValueError(f"{type(self).__name__}: statistic {stat!r} of model matrix "
                             f"{self.model.mat_name(i)!r} must be a Mat of shape "
                             f"{' or '.join(str(s) for s in shapes)}; got {got}")
        return u

    def _new_scratch(self) -> None:
        """(Re)make the scratch space: arrays like each model matrix, on first use."""
        self._tmp = _Scratch(self.model)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in self._SCRATCH:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_own", None)  # files written before updaters could own matrices
        super().__setstate__(state)
        self._new_scratch()

    def _hyper(self, name: str) -> Hyper:
        return self.hyper(name, self.shapes, self.xp, self.dtype, self.model.row_groups)

    def _per_mat(self, make: Any) -> list[Any]:
        """``make(i)`` for each model matrix this updater moves, None for the others."""
        own = set(self.mats)
        return [make(i) if i in own else None for i in range(len(self.model.modelmats))]

    def update(self, step: int) -> None:
        """Apply ``model.updatemats`` to ``model.modelmats`` (one training minibatch)."""
        raise NotImplementedError

    def apply_own_changes(self) -> None:
        """Apply the option changes made on the updaters this one holds, which keep options
        of their own outside the learner's set (a PerMatrix's); called by the training
        thread at each minibatch boundary. None here."""

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


def l1_proximal(model: Any, mats: tuple[int, ...], on: bool) -> None:
    """Say whether the updater of model matrices ``mats`` applies an L1 penalty as a
    proximal step. The model's ``l1_prox`` maps each such matrix to the L1 column of the
    current minibatch: :class:`~bidlab.learn.L1Regularizer` puts it there instead of
    adding ``-l1 * sign(w)`` to the update, and the updater takes it out in its step."""
    prox = model.l1_prox
    if on:
        if prox is None:
            prox = model.l1_prox = {}
        for i in mats:
            prox[i] = None
    elif prox:
        for i in mats:
            prox.pop(i, None)


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

