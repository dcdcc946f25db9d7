"""The base class of every trainable model (BIDMach's ``Model``).

A model owns a list of **model matrices** (``modelmats``: the learned parameters, e.g. a
targets x features weight matrix or a topics x words matrix) and, with the same shapes,
**update matrices** (``updatemats``), one entry per model matrix: for each minibatch,
:meth:`Model.update` writes the update direction into them -- the gradient of the score for
gradient updaters (:class:`~bidlab.learn.updaters.Grad`,
:class:`~bidlab.learn.updaters.ADAGrad`), or sufficient statistics for
:class:`~bidlab.learn.updaters.Batch` / :class:`~bidlab.learn.updaters.IncNorm` (a Mat of
the model matrix's shape) -- or the named statistics another updater declares in its
``STATS`` (a dict: ``{"num": N, "den": D}`` for the multiplicative updaters, ``{"rhs": B,
"gram": G}`` for :class:`~bidlab.learn.updaters.CG`). The updater then moves ``modelmats``;
each model matrix may have an updater of its own (``Learner(..., updater={"W": IncMult(),
"H": CG()})``).

**Sign convention (BIDMach's):** a model maximises its score (e.g. log-likelihood per
sample, or minus the mean squared error), so ``updatemats`` hold an *ascent* direction and
updaters *add* it.

Writing a model::

    class MyModel(Model):
        OPTIONS = (Option("dim", int, 10, "latent dimension", low=1, live=False),)
        score_name = "ll/sample"

        def init(self, info):                      # info: DataInfo (shapes of the data)
            self.modelmats = [bl.rand((self.opts.dim, info.n_features), device=info.device)]
            self.updatemats = [bl.zeros((self.opts.dim, info.n_features), device=info.device)]

        def update(self, batch):                   # fill updatemats from batch.mats
            X = batch.mats[0]                      # samples are rows
            ...
            return score                           # optional training score (float or 1x1 Mat)

        def evaluate(self, batch):                 # held-out score, higher is better
            ...

Rules that keep training allocation-free and thread-safe:

* Do the numeric work with the cached core (``bidlab`` ops: the learner switches
  ``bidlab.caching()`` on in its thread) or with raw ``xp`` ufuncs and ``out=``.
* Never replace a model matrix object after :meth:`init`: write into it
  (``m <<= new`` or ``m.data[...] = ...``), so observers, checkpoints and updaters keep
  pointing at the live matrix.
* Read options as ``self.opts.<name>`` (the learner's merged, live set); hyperparameters
  that feed cached ops belong in ``Mat`` containers (see :class:`Hyper`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab.learn.datasource import DataInfo
from bidlab.learn.hyper import Component
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters.base import Updater
from bidlab.learn.updaters.gradient import Grad
from bidlab.learn.updaters.sparse import SparseUpdate
from bidlab.mat import Mat

__all__ = ["Model", "MODELS", "register_model", "hold_out_none"]


class Model(Component):
    """Subclass and implement :meth:`init`, :meth:`update` and :meth:`evaluate`.

    Attributes
    ----------
    modelmats
        the learned matrices (checkpointed, observable), set by :meth:`init`.
    updatemats
        one entry per model matrix: a Mat of its shape (the update direction
        of the current minibatch) or a dict of the named statistics its updater
        declares (``Updater.STATS``; the updater checks them and names what is missing).
    score_name
        what the score is (shown in progress lines), e.g. ``"-mse"``.
    row_groups
        None, or one group number per row of the model matrices (which then
        all have that many rows): a vector hyperparameter with one value per group is
        read per group (a GLM's targets: a sweep's rates, one per configuration).
    converged
        set it (e.g. in :meth:`end_pass`) when training has nothing left to
        do; the learner then stops as if ``n_passes`` were reached.
    combine
        how learners that share the rows (a communicator of several ranks)
        combine each model matrix at their step sync point: ``"mean"``, ``"sum"`` or
        ``"local"`` (kept per rank); one word for all or one per matrix; None: mean
        (``"local"`` for a ``full_batch`` model, whose matrices the ranks already share).

    Notes
    -----
    The contract's optional parts, each with a default (override what the model needs):

        mat_names: names of the model matrices, in order (``("W", "H")``), the keys of a
            per-matrix updater mapping besides their indices; default none (indices only).
        full_batch: True for a model whose every pass is one step over the whole data
            (Lloyd k-means): the learner holds out no minibatch for validation
            (``val_every`` is 0 and may not be set), and the model accumulates a pass's
            statistics itself, writing the totals into ``updatemats`` at the pass's last
            minibatch -- :class:`~bidlab.learn.updaters.Batch` and
            :class:`~bidlab.learn.updaters.BatchMult` read them once at the pass end and
            never sum the other minibatches' update matrices. Default False.
        totals_reduced: True for a full-batch model whose pass totals are already the
            same on every rank (it reduced them itself, e.g. within an iterative solve that
            needs one sum per iteration): the updater does not sum them across ranks
            again. Default False (each rank's totals are its rows' share, summed).
        sparse_updates: None, or ``{i: SparseUpdate}`` set in :meth:`update` to hand over
            the update of matrix ``i`` unformed (:mod:`bidlab.learn.updaters.sparse`).
            Default None (every update is formed).
        step_weight: how large a step this minibatch deserves relative to a full one
            (documents / batch rows for the LDA models; :class:`~bidlab.learn.IncNorm`
            multiplies its rate by it). Default 1.
        :meth:`blend`: a model that applies IncNorm's blending step
            ``m <- (1 - rho) m + rho u`` itself (LDA's lazily scaled Gibbs counts) does it
            there and returns True. Default: False.
        :meth:`default_updater`: the updater (or mapping of model matrix -> updater) a
            learner uses when given none. Default :class:`~bidlab.learn.updaters.Grad`.
    """

    score_name: str = "score"
    row_groups: Any = None
    converged: bool = False
    combine: Any = None
    mat_names: tuple[str, ...] = ()
    full_batch: bool = False
    totals_reduced: bool = False
    sparse_updates: dict[int, SparseUpdate] | None = None
    step_weight: float = 1.0
    #: the learner's communicator while several ranks train this model, else None
    #: (:meth:`bind`); never saved: the next learner binds its own
    _comm: Any = None
    #: model matrices whose updater takes L1 as a proximal step -> the L1 column of the
    #: current minibatch (set up by the updater, filled by :class:`~bidlab.learn.
    #: L1Regularizer`, taken by the updater's step; :func:`~bidlab.learn.updaters.base.
    #: l1_proximal`); None: no such updater. Never saved
    l1_prox: dict[int, Any] | None = None
    #: what a checkpoint's numbers must be (:mod:`bidlab.learn.checkpoint_values`): keys of
    #: :meth:`extra_state` or ``"model/i"`` whose numbers are finite, finite and >= 0, and
    #: counters that are whole numbers >= 0 (at most the length of the key named)
    CHECKPOINT_FINITE: tuple[str, ...] = ()
    CHECKPOINT_NONNEGATIVE: tuple[str, ...] = ()
    CHECKPOINT_COUNTS: dict[str, str | None] = {}
    #: :meth:`extra_state` keys whose length grows with the run (a record of its passes): a
    #: checkpoint's arrays for them are handed to :meth:`restored` (``earlier``), not
    #: checked against the model's own and written in place
    grown_state: tuple[str, ...] = ()
    #: matrices a loaded model must hold as float32 or float64 (bidlab.learn.persist_check)
    FLOAT_STATE: tuple[str, ...] = ("modelmats", "updatemats")
    #: ... held in lists, present in every saved model (empty before it is built)
    STATE_KINDS: dict[str, type] = {"modelmats": list, "updatemats": list}
    REQUIRED_STATE: tuple[str, ...] = ("modelmats", "updatemats")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.modelmats: list[Mat] = []
        self.updatemats: list[Mat | dict[str, Any]] = []
        self.info: DataInfo | None = None

    # -- to implement ---------------------------------------------------------------------
    def init(self, info: DataInfo) -> None:
        """Create ``modelmats`` and ``updatemats`` from the data's shape and device."""
        raise NotImplementedError(f"{type(self).__name__} must implement init(info)")

    def update(self, batch: Minibatch) -> Any:
        """Write this minibatch's update direction into ``updatemats``.

        Return a training score for the minibatch (a float or a 1 x 1 ``Mat``, mean per
        sample, higher is better) when it comes for free, else None.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement update(batch)")

    def evaluate(self, batch: Minibatch) -> Any:
        """The score of the current model on ``batch`` (float or 1 x 1 Mat; higher is
        better), e.g. log-likelihood per sample. Must not change the model."""
        raise NotImplementedError(f"{type(self).__name__} must implement evaluate(batch)")

    # -- optional hooks -------------------------------------------------------------------
    def flops(self, batch: Minibatch) -> float:
        """Floating-point operations of one :meth:`update` on ``batch`` (for GFLOP/s)."""
        return 0.0

    def start_pass(self, pass_: int) -> None:
        """Called before the first minibatch of each pass."""

    def end_pass(self, pass_: int) -> None:
        """Called after the last minibatch of each pass (after the updater's end_pass)."""

    def divergence_mats(self) -> list[tuple[Mat, float]]:
        """The matrices whose growth by orders of magnitude means training diverged, each
        with the factor its stored values are multiplied by (a lazily scaled matrix).

        Default: every floating-point model matrix, factor 1. Override it for matrices
        that legitimately grow without bound (counts), or return ``[]`` for none; the NaN /
        inf check covers every model matrix regardless (:mod:`bidlab.learn.divergence`).
        """
        return [(m, 1.0) for m in self.modelmats if m.dtype.kind == "f"]

    def extra_state(self) -> dict[str, Mat]:
        """Further matrices to checkpoint besides ``modelmats`` (name -> Mat)."""
        return {}

    def refresh(self) -> None:
        """Called after ``modelmats`` were changed from outside the model (combined with
        other ranks' at a sync point): recompute whatever the model derives from them."""

    def bind(self, learner: Any) -> None:
        """Called when a learner takes this model (a model that acts differently while it
        is trained, e.g. queues changes for the next minibatch, keeps a weak reference).
        The base keeps the learner's communicator while several ranks train (``_comm``,
        else None); an override calls it."""
        self._comm = learner.comm if learner.comm.size > 1 else None

    def shares_checkpoint(self) -> bool:
        """Whether this model trains on ranks that share one checkpoint file (one rank
        writes it, every rank reads it): a file loaded then holds that rank's sums of a
        pass so far, not this rank's, and no rank's per-row state
        (:attr:`~bidlab.learn.comm.Communicator.shared_checkpoint`)."""
        return self._comm is not None and not self._comm.file_keeps_rows

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop("_comm", None)  # the learner's, bound again by the next learner
        state.pop("l1_prox", None)  # the updater's, set up again by its init
        return state

    def counters(self) -> dict[str, int]:
        """Integer counters to checkpoint beside the matrices (name -> int)."""
        return {}

    def pass_label(self) -> str | None:
        """The head of the learner's progress line at a pass end, in the model's own words
        (PageRank: the iterations run, or how the run ended); None: the pass and the share
        done, as for every model."""
        return None

    def made_with(self) -> dict[str, Any]:
        """What the model was built with that no option records (name -> JSON-able value,
        e.g. a GLM's links): a checkpoint keeps it, and one whose values differ is refused
        rather than read into a model that would take its matrices another way."""
        return {}

    def set_counters(self, values: dict[str, int]) -> None:
        """Take back a checkpoint's :meth:`counters` (a name it lacks keeps its value)."""

    def rows_reset(self) -> None:
        """Called after a checkpoint loaded without this model's per-row state
        (:class:`~bidlab.learn.rowstate.RowState`, zeroed: a file shared by MPI ranks keeps
        none, or one written before the model kept it): forget whatever says the rows'
        values are current (the rows are then as if never seen)."""

    def run_ended(self, state: str, error: BaseException | None) -> None:
        """Called when a learner's run ends (``state`` ``"done"``, ``"stopped"`` or
        ``"failed"``; ``error`` what ended it, None for a clean end), once before the end
        checkpoint and once after the final state is set: a model that queues changes for
        its next minibatch applies or refuses them here, so none waits for a later run."""

    def check_extra_state(self, saved: dict[str, np.ndarray]) -> None:
        """Check a checkpoint's :meth:`extra_state` matrices (name -> numpy array; their
        shapes already match this model's) before anything of the file is written: raise
        ValueError naming what is wrong, and the learner refuses the file with the model
        as it was (what :meth:`restored` would find wrong there is too late: the model
        matrices are written by then). Nothing by default."""

    def restored(self, earlier: dict[str, Any]) -> None:
        """Called after a checkpoint was written into ``modelmats``, :meth:`extra_state` and
        the counters: rebuild what derives from them and forget per-run scratch (row
        bounds, a pass's partial sums). ``earlier``: arrays a checkpoint of an earlier
        version saved under names this model no longer lists (name -> numpy array)."""
    def default_updater(self, **options: Any) -> Updater | dict[str | int, Updater]:
        """The updater a learner uses for this model when given none (``options``: the
        updater's options). Return a mapping of model matrix (name or index) -> Updater to
        move each matrix its own way. The base class returns ``Grad(**options)``."""
        return Grad(**options)

    def blend(self, rho: float) -> bool:
        """Take the blending step ``m <- (1 - rho) m + rho u`` in the model's own
        representation and return True; False (the default) lets the updater blend
        ``modelmats`` with ``updatemats``."""
        return False

    # -- helpers --------------------------------------------------------------------------
    @property
    def initialised(self) -> bool:
        return bool(self.modelmats)

    def init_from(self, info: DataInfo) -> None:
        """Call :meth:`init` and check what it made (same shapes, Mats)."""
        self.info = info
        self.init(info)
        if not self.modelmats:
            raise RuntimeError(f"{type(self).__name__}.init made no modelmats")
        if len(self.updatemats) != len(self.modelmats):
            raise RuntimeError(f"{type(self).__name__}.init made {len(self.modelmats)} "
                               f"modelmats but {len(self.updatemats)} updatemats")
        for i, (m, u) in enumerate(zip(self.modelmats, self.updatemats, strict=True)):
            if not isinstance(m, Mat):
                raise RuntimeError(f"{type(self).__name__}: modelmats[{i}] must be a Mat; got "
                                   f"{type(m).__name__}")
            if isinstance(u, dict):
                if not u or not all(isinstance(k, str) for k in u):
                    raise RuntimeError(
                        f"{type(self).__name__}: updatemats[{i}] is a dict, so it must name "
                        f"the statistics its updater reads (non-empty, string keys); got "
                        f"{list(u)}")
            elif not isinstance(u, Mat) or m.shape != u.shape:
                raise RuntimeError(
                    f"{type(self).__name__}: updatemats[{i}] must be a Mat of modelmats[{i}]'s "
                    f"shape {m.shape} or a dict of named statistics; got "
                    f"{getattr(u, 'shape', type(u).__name__)}")

    def mat_name(self, i: int) -> str:
        """The name of model matrix ``i`` (its index as a string when unnamed)."""
        return self.mat_names[i] if i < len(self.mat_names) else str(i)

    def mat_index(self, key: str | int) -> int:
        """The index of the model matrix named or numbered ``key`` (ValueError if none)."""
        n = len(self.modelmats)
        if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < n:
            return key
        if isinstance(key, str):
            if key in self.mat_names[:n]:
                return self.mat_names.index(key)
            if key.isdigit() and int(key) < n:
                return int(key)
        names = [self.mat_name(i) for i in range(n)]
        raise ValueError(f"{type(self).__name__} has no model matrix {key!r}: its model "
                         f"matrices are {names} (or their indices 0..{n - 1})")

    def shapes(self) -> list[tuple[int, int]]:
        return [m.shape for m in self.modelmats]

    def host_modelmats(self) -> list[np.ndarray]:
        """numpy copies of the model matrices."""
        return [np.array(m.numpy(), copy=True) for m in self.modelmats]


def hold_out_none(model: Model, opts: Any, given: dict[str, Any]) -> None:
    """For a full-batch ``model``: set the learner options ``opts`` to hold out no
    minibatch (``val_every`` 0) and refuse any other value, given now (``given``: the
    learner's keyword options) or set later."""
    name = type(model).__name__

    def check(values: dict[str, Any]) -> None:
        if values.get("val_every", 0):
            raise ValueError(f"{name} is full-batch: it needs every minibatch of every "
                             "pass, so val_every must stay 0")

    check(given)
    opts.set(val_every=0)
    opts.add_validator(check)


MODELS: dict[str, Any] = {}


def register_model(name: str, factory: Any) -> None:
    """Make a model available to ``bidlab train <name>`` (factory(**options) -> Model).

    The factory may also be a class; its ``OPTIONS`` table is shown by ``--help``.
    """
    MODELS[name] = factory
