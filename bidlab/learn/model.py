"""The base class of every trainable model (BIDMach's ``Model``).

A model owns a list of **model matrices** (``modelmats``: the learned parameters, e.g. a
targets x features weight matrix or a topics x words matrix) and, with the same shapes,
**update matrices** (``updatemats``): for each minibatch, :meth:`Model.update` writes the
update direction into them -- the gradient of the score for gradient updaters
(:class:`~bidlab.learn.updaters.Grad`, :class:`~bidlab.learn.updaters.ADAGrad`), or
sufficient statistics for :class:`~bidlab.learn.updaters.Batch` /
:class:`~bidlab.learn.updaters.IncNorm`. The updater then moves ``modelmats``.

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
from bidlab.mat import Mat

__all__ = ["Model", "MODELS", "register_model"]


class Model(Component):
    """Subclass and implement :meth:`init`, :meth:`update` and :meth:`evaluate`.

    Attributes:
        modelmats: the learned matrices (checkpointed, observable), set by :meth:`init`.
        updatemats: same shapes; the update direction of the current minibatch.
        score_name: what the score is (shown in progress lines), e.g. ``"-mse"``.
        row_groups: None, or one group number per row of the model matrices (which then
            all have that many rows): a vector hyperparameter with one value per group is
            read per group (a GLM's targets: a sweep's rates, one per configuration).
        converged: set it (e.g. in :meth:`end_pass`) when training has nothing left to
            do; the learner then stops as if ``n_passes`` were reached.
    """

    score_name: str = "score"
    row_groups: Any = None
    converged: bool = False

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.modelmats: list[Mat] = []
        self.updatemats: list[Mat] = []
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
            if not isinstance(m, Mat) or not isinstance(u, Mat) or m.shape != u.shape:
                raise RuntimeError(
                    f"{type(self).__name__}: modelmats[{i}] and updatemats[{i}] must be Mats "
                    f"of one shape; got {getattr(m, 'shape', m)} and {getattr(u, 'shape', u)}")

    def shapes(self) -> list[tuple[int, int]]:
        return [m.shape for m in self.modelmats]

    def host_modelmats(self) -> list[np.ndarray]:
        """numpy copies of the model matrices."""
        return [np.array(m.numpy(), copy=True) for m in self.modelmats]


MODELS: dict[str, Any] = {}


def register_model(name: str, factory: Any) -> None:
    """Make a model available to ``bidlab train <name>`` (factory(**options) -> Model).

    The factory may also be a class; its ``OPTIONS`` table is shown by ``--help``.
    """
    MODELS[name] = factory
