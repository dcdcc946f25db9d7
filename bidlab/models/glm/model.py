"""The GLM engine: one :class:`bidlab.learn.Model` that ``GLM.fit``, ``partial_fit`` and
``GLM.learner`` all train.

Layout (BIDMach's): one row per weight column, grouped by target -- ``W`` is T x d and
``b`` T x 1 -- so the updater's and mixins' per-row hyperparameters (``lrate``, ``l1``,
``l2``) are per weight column, and a vector with one value per target (per configuration
of a sweep) is read per target through ``row_groups``. ``W`` is stored column-major: a
feature's T weights are contiguous, so ``W.T`` is the C-ordered d x T matrix that the
sparse products and the touched-rows step stream through. Per minibatch ``X`` (n x d CSR),
targets ``Y`` and optional sample weights ``w``::

    E = X @ W.T + b.T          # sparse_dense: the one shared product, n x T
    E <- dL/dE                 # the links, in place (see _glm_links)
    A = -E * w / (n * w_mean)  # the ascent direction per margin (w = 1: -E / n)
    dW = A.T @ X               # handed to the updater unformed (a SparseUpdate)
    db = sum over rows of A

The updater (:class:`bidlab.learn.ADAGrad` or ``Grad``) applies ``dW`` and the L1 / L2
mixins' terms over the rows the minibatch touches on the CPU (:mod:`bidlab.kern.touched`),
and forms ``dW`` otherwise. The score is minus the (weighted) mean loss per sample, summed
over targets (higher is better); ``train_loss=False`` skips it in training (``GLM.fit``).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.learn.datasource import DataInfo
from bidlab.learn.model import Model
from bidlab.learn.options import Option
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters import ADAGrad, SparseUpdate, Updater
from bidlab.models.glm.links import Layout, LinkStep, predict_transform

__all__ = ["GLMModel"]

_SCRATCH = ("_links", "_targets", "_sparse", "_sparse_map", "sparse_updates", "_loss",
            "_tm", "_Wt", "_bt", "loss_tally", "lazy_rows", "stopping", "converged",
            "_trainer", "weight_mean")


class GLMModel(Model):
    """Multi-target GLM: links and target map fixed at construction.

    Parameters
    ----------
    layout
        where each model target's weight columns sit (links and widths).
    targmap
        for each model target, the column of the (encoded) target matrix it
        learns (BIDMach's ``targmap``).
    """

    score_name = "-loss/sample"
    mat_names = ("W", "b")
    #: L1 / L2 terms of the rows a minibatch does not touch wait until the row is next
    #: touched (with its skipped-step count; bidlab.kern.touched), whatever share of rows
    #: the minibatch touches: set by :meth:`bind` when the learner's ranks exchange only
    #: changed rows, so the rows a rank did not touch stay unchanged between syncs
    lazy_rows = False
    #: a loaded model's shapes (bidlab.learn.persist_check): one row per model target
    #: (layout.T), one column per feature (the data's first matrix)
    STATE_SHAPES = {
        "modelmats.0": ("layout.T", "info.specs.0.cols"), "modelmats.1": ("layout.T", 1),
        "updatemats.0": ("layout.T", "info.specs.0.cols"), "updatemats.1": ("layout.T", 1),
        "_Wt": ("info.specs.0.cols", "layout.T"), "_bt": (1, "layout.T"),
        "row_groups": ("layout.T",)}
    OPTIONS = (
        Option("train_loss", bool, True, "compute each training minibatch's loss (the "
               "training score); off is a little faster"),
    )

    #: passes and minibatch steps trained (every learner's completed passes, and a ``fit``
    #: rate race's first pass), and each such pass's mean training loss per row when one was
    #: computed: the estimator's ``n_iter_``, ``n_steps_`` and ``loss_curve_``
    passes_done = 0
    steps_done = 0
    #: the biases a fresh model starts from (T,), or None for zeros: the engine starts a
    #: linear target at its targets' mean, so a target far from 0 needs no long climb
    bias_start: np.ndarray | None = None
    #: the mean sample weight of the rows a run trains on (set by the engine; None: each
    #: weighted minibatch's own). A weighted minibatch's gradient is its rows' weighted
    #: sum over (rows x this), so the passes' steps add up to the weighted mean over all
    #: rows: divided by each minibatch's own weight sum, the rows of a light minibatch
    #: counted as much as those of a heavy one, and ``fit`` settled away from the
    #: weighted optimum (a 1 to 5 % objective gap after 100 passes with lognormal or
    #: heavy-tailed weights, where unweighted fits reach 1e-4)
    weight_mean: float | None = None

    def bind(self, learner: Any) -> None:
        super().bind(learner)
        self.lazy_rows = bool(learner.comm.changed_rows_only)
        self._trainer = weakref.ref(learner)

    def __init__(self, layout: Layout, targmap: Any, **options: Any) -> None:
        super().__init__(**options)
        self.layout = layout
        # a vector hyperparameter with one value per target is read per target
        self.row_groups = np.asarray(layout.col_target, dtype=np.int64)
        self.pass_losses: list[float] = []
        self.targmap = np.asarray(targmap, dtype=np.int64).reshape(-1)
        if self.targmap.size != layout.K:
            raise ValueError(f"targmap has {self.targmap.size} entries but the layout has "
                             f"{layout.K} targets: give one data column per model target")
        self._reset_scratch()

    def _reset_scratch(self) -> None:
        self._links: dict[int, LinkStep] = {}
        self._targets: dict[int, Any] = {}
        self._sparse = SparseUpdate()
        self._sparse_map = {0: self._sparse}
        self.sparse_updates: dict[int, SparseUpdate] | None = None
        self._loss: Any = None
        #: [minibatches still to skip, per-target summed training loss (K,), summed
        #: weight]: set to tally each target's loss on the minibatches it had not yet
        #: trained on (progressive validation; the first-pass rate race sets it)
        self.loss_tally: list[Any] | None = None
        #: (fit's held-out stopping rule, the updater whose iterates it averages): set for
        #: the run it checks (bidlab.models.glm.stopping), which ends when it says so
        self.stopping: tuple[Any, Any] | None = None
        self.converged = False
        self._trainer: Any = None  # a weak reference to the learner training the model

    def end_pass(self, pass_: int) -> None:
        self._count_pass()
        if self.stopping is not None:
            held, updater = self.stopping
            self.converged = held.end_pass(self, updater, pass_)

    def _count_pass(self) -> None:
        """Count the pass the bound learner just completed: its minibatches and its mean
        training loss (the learner's running sums of the pass, when a loss was computed)."""
        self.passes_done += 1
        lrn = self._trainer() if self._trainer is not None else None
        if lrn is None:
            return
        self.steps_done += int(lrn.source.batches_per_pass or 0)
        stats = getattr(lrn, "_stats", None)
        score = float(stats.train) if stats is not None else float("nan")
        if score == score:
            self.pass_losses.append(-score)

    def made_with(self) -> dict[str, Any]:
        """Each target's link: a learner's checkpoint of a model with other links is
        refused (:mod:`bidlab.learn.learner_state`), the matrices being read per link."""
        return {"link": list(self.layout.links)}

    def default_updater(self, **options: Any) -> Updater:
        """ADAGrad (``options``: its options, e.g. lrate), GLM's default."""
        return ADAGrad(**options)

    # -- state ----------------------------------------------------------------------------
    def init(self, info: DataInfo) -> None:
        if len(info.specs) < 2:
            raise ValueError("GLMModel needs targets: give the data as (X, Y) or (X, Y, w), "
                             "samples as rows")
        q = info.n_targets
        if self.targmap.size and int(self.targmap.max()) >= q:
            raise ValueError(f"the target map names target column {int(self.targmap.max())} "
                             f"but the data has {q} target column(s)")
        dtype = np.promote_types(info.dtype, np.float32)
        self._allocate(info.n_features, dtype, info.xp)
        if self.bias_start is not None:
            b = self.modelmats[1].data
            b[...] = info.xp.asarray(np.asarray(self.bias_start).reshape(-1, 1), dtype=b.dtype)
        self.identity = bool(np.array_equal(self.targmap, np.arange(q)))

    def _allocate(self, d: int, dtype: Any, xp: Any) -> None:
        T = self.layout.T
        self.modelmats = [bl.Mat(backend.zeros((T, d), dtype, xp, "F")),
                          bl.Mat(backend.zeros((T, 1), dtype, xp))]
        self._make_updatemats()

    def _make_updatemats(self) -> None:
        """The update matrices (dW is written only when the updater forms it) and the
        transposed views the products use."""
        W, b = self.modelmats
        self.updatemats = [bl.Mat(backend.empty(W.shape, W.dtype, W.xp, "F")),
                           bl.Mat(backend.zeros(b.shape, b.dtype, b.xp))]
        # views made once (not Mat.T, whose cached view and the Mat refer to each other,
        # which would keep a dropped model's memory until the cyclic collector runs)
        self._Wt, self._bt = bl.Mat(W.data.T), bl.Mat(b.data.T)
        self.xp, self.dtype = W.xp, np.dtype(W.dtype)
        self._tm = self.xp.asarray(self.targmap)
        self._loss = backend.empty((1, self.layout.K), self.dtype, self.xp)

    @classmethod
    def from_weights(cls, layout: Layout, targmap: Any, W: Any, b: Any,
                     **options: Any) -> GLMModel:
        """A model holding copies of the weights ``W`` (T x d) and biases ``b`` (T x 1)."""
        model = cls(layout, targmap, **options)
        xp = backend.namespace(W)
        model._allocate(W.shape[1], W.dtype, xp)
        model.modelmats[0].data[...] = W
        model.modelmats[1].data[...] = xp.asarray(b).reshape(-1, 1)
        model.identity = bool(np.array_equal(model.targmap, np.arange(model.targmap.size)))
        return model

    def __getstate__(self) -> dict[str, Any]:
        """The weights and options; work buffers and update matrices are made again."""
        state = super().__getstate__()
        for name in _SCRATCH:
            state.pop(name, None)
        state["updatemats"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("pass_losses", [])  # a file written before the model counted passes
        super().__setstate__(state)
        self._reset_scratch()
        if self.modelmats:
            W = self.modelmats[0]
            if W.xp is np and not W.data.flags.f_contiguous:  # a C-ordered saved copy
                self.modelmats[0] = bl.Mat(np.asfortranarray(W.data))
            self._make_updatemats()

    # -- the step -------------------------------------------------------------------------
    def margins(self, X: Any) -> bl.Mat:
        """``X @ W.T + b.T`` (n x T, C-ordered) for an SMat or a dense Mat."""
        Wt = self._Wt
        E = bl.sparse_dense(X, Wt) if isinstance(X, bl.SMat) else bl.matmul(X, Wt)
        bl.add(E, self._bt, out=E)
        return E

    def predictions(self, X: Any) -> Any:
        """Margins passed through each target's link (probabilities for classifiers)."""
        E = self.margins(X).data
        predict_transform(self.layout, E)
        return E

    def _link(self, n: int) -> LinkStep:
        step = self._links.get(n)
        if step is None:
            step = self._links[n] = LinkStep(self.layout, n, self.dtype, self.xp)
        return step

    def _model_targets(self, Y: Any, n: int) -> Any:
        """Data targets (n x q) -> model targets (n x K) through the target map."""
        if self.identity:
            return Y
        buf = self._targets.get(n)
        if buf is None:
            buf = self._targets[n] = backend.empty((n, self.layout.K), self.dtype, self.xp)
        backend.take_into(Y, self._tm, out=buf, axis=1)
        return buf

    def _forward(self, batch: Minibatch, loss: Any) -> tuple[bl.Mat, Any, float]:
        """(E holding dL/dE, the weights column or None, the rows' total weight)."""
        mats = batch.mats
        n = batch.n
        E = self.margins(mats[0])
        w = mats[2].data if len(mats) > 2 else None
        if loss is not None:
            loss.fill(0)
        self._link(n)(E.data, self._model_targets(mats[1].data, n), loss, w)
        total = float(w.sum()) if w is not None else float(n)
        return E, w, total

    def update(self, batch: Minibatch) -> float | None:
        loss = self._loss if self.opts.train_loss else None
        E, w, total = self._forward(batch, loss)
        xp, A = self.xp, E.data
        if w is not None:
            xp.multiply(A, w, out=A)
        unit = self.weight_mean
        denom = total if w is None or unit is None else batch.n * unit
        xp.multiply(A, -1.0 / max(denom, np.finfo(self.dtype).tiny), out=A)
        xp.sum(A, axis=0, out=self.updatemats[1].data[:, 0])
        X = batch.mats[0]
        if isinstance(X, bl.SMat):
            self._sparse.reset(X, E)
            self._sparse.lazy = self.lazy_rows
            self.sparse_updates = self._sparse_map
        else:
            self.sparse_updates = None
            bl.matmul(E.T, X, out=self.updatemats[0])
        if loss is None:
            return None
        tally = self.loss_tally
        if tally is not None:
            if tally[0] > 0:
                tally[0] -= 1
            else:
                tally[1] += loss[0]
                tally[2] += total
        return -float(loss.sum()) / max(total, 1e-300)

    def evaluate(self, batch: Minibatch) -> float:
        _, _, total = self._forward(batch, self._loss)
        return -float(self._loss.sum()) / max(total, 1e-300)

    def flops(self, batch: Minibatch) -> float:
        X = batch.mats[0]
        work = X.nnz if isinstance(X, bl.SMat) else X.shape[0] * X.shape[1]
        return 4.0 * work * self.layout.T
