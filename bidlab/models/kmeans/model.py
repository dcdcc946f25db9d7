"""The k-means engine: one :class:`KMeansModel` for the Learner, both algorithms.

The model matrices are the k x d centres and a k x 1 column of cluster weights (rows, or
summed sample weights). Distances are ``||x||^2 - 2 x.c + ||c||^2`` with the cross term
from one GEMM per minibatch (BLAS / cuBLAS; ``kern.sparse_dense`` for CSR) and a fused
nearest-centre pass (:mod:`bidlab.kern.kmeans`; whole-matrix distances in
:mod:`bidlab.models.kmeans.distances`).

The two algorithms live in the class's bases: ``algorithm="minibatch"`` (Sculley's steps,
scikit-learn's early stop) in :class:`~bidlab.models.kmeans.minibatch.MinibatchSteps`,
``algorithm="lloyd"`` (full batch, Hamerly's bounds, pass sums kept by checkpoints) in
:class:`~bidlab.models.kmeans.lloyd.LloydPasses`; their module docs give the rules. This
module holds what both share: the options, the buffers, the nearest-centre pass of a
minibatch, pickling, and the final labelling (:meth:`KMeansModel.label_pass`).

The score is minus the mean squared distance of a minibatch's rows to their centres
(weighted), measured before the step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.kmeans import (
    CenterWork,
    assign,
    assigned_sq_dist,
    center_sums,
    row_norms_sq,
)
from bidlab.kern.kmeans_lloyd import lloyd_block
from bidlab.learn.datasource import DataInfo, DataSource
from bidlab.learn.model import Model
from bidlab.learn.options import Option
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters import Batch, Grad, Updater
from bidlab.mat import Mat
from bidlab.models.kmeans.distances import cross, nearest, raw
from bidlab.models.kmeans.lloyd import LloydPasses
from bidlab.models.kmeans.minibatch import MinibatchSteps

__all__ = ["KMeansModel"]

_SCRATCH = ("_buf", "_rows", "_work", "_res", "_pending")


class KMeansModel(LloydPasses, MinibatchSteps, Model):
    """k-means on the Learner, started from the given k x d centres (see the module doc).

    Attributes (besides ``modelmats``):
        converged: set when Lloyd has converged (:meth:`end_pass`) or minibatch steps
            stop improving (:meth:`update`); the learner stops.
        stop_early: minibatch steps may set ``converged`` (True by default;
            ``partial_fit`` turns it off, as scikit-learn's does not stop early).
        n_updates: Lloyd centre updates that moved a centre (scikit-learn's ``n_iter_``).
        distance_evaluations: row-centre distances computed by GEMM so far (the bounds
            skip some).
    """

    OPTIONS = (
        Option("algorithm", str, "lloyd", "'lloyd' (full batch, with the Batch updater) or "
               "'minibatch' (Sculley's steps, with Grad at lrate 1)",
               choices=("lloyd", "minibatch"), live=False),
        Option("tol", float, 1e-4, "Lloyd: converged when the centres' total squared shift "
               "is at most tol x the mean feature variance", low=0.0),
        Option("bounds", bool, True, "Lloyd: skip the distances Hamerly's bounds rule out "
               "(same result)"),
        Option("reassign_every", int, 10, "minibatch: steps between re-seedings of starved "
               "centres (0: never)", low=0),
        Option("reassign_ratio", float, 0.01, "minibatch: a centre starves below this "
               "fraction of the busiest centre's weight", low=0.0, high=1.0),
        Option("max_no_improvement", int, 10, "minibatch: stop after this many steps in a "
               "row without a new low of the smoothed minibatch inertia (None: never)",
               low=1, none_ok=True),
    )
    score_name = "-sq.dist/sample"
    mat_names = ("centers", "counts")

    @property
    def full_batch(self) -> bool:  # type: ignore[override]
        """Lloyd is full-batch: its pass sums are its own, handed over at the last block."""
        return self.opts.algorithm == "lloyd"

    def default_updater(self, **options: Any) -> Updater:
        """Lloyd: Batch (the pass's sums replace the model). Minibatch: Grad at lrate 1
        (``options``: Grad's, e.g. a smaller ``lrate`` to damp the steps)."""
        if self.opts.algorithm == "lloyd":
            return Batch(**options)
        return Grad(**{"lrate": 1.0, **options})

    def __init__(self, centers: Any, *, random_state: int = 0, **options: Any) -> None:
        super().__init__(**options)
        self.start_centers = np.array(backend.to_host(centers), copy=True)
        if self.start_centers.ndim != 2:
            raise ValueError(f"centers must be a k x d array; got shape "
                             f"{self.start_centers.shape}")
        self.random_state = int(random_state)
        self.rng = np.random.default_rng(self.random_state)
        self.converged = False
        self.n_updates = 0
        self.distance_evaluations = 0
        self.steps = 0
        self.stop_early = True
        self._reset_early_stop()
        self._generation = 0  # Lloyd: centre updates so far; tags a pass's checkpointed sums
        self._clear_scratch()

    # -- pickling: scratch buffers and per-row state are rebuilt on demand ---------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in _SCRATCH:
            state[name] = None
        state["_pass_state"] = None
        return backend.portable_state(state)

    def _clear_scratch(self) -> None:
        self._buf: dict[str, Any] | None = None  # per-minibatch buffers
        self._rows: dict[str, Any] | None = None  # Lloyd: labels and bounds of every row
        self._work: CenterWork | None = None  # Lloyd: the pass's cluster sums so far
        self._res: dict[str, Any] | None = None  # Lloyd: the pass's farthest rows
        self._pending: Mat | None = None  # Lloyd: the pass's sums so far, checkpointed
        self._pass_state: dict[str, Any] | None = None

    def rebind(self, info: DataInfo) -> None:
        """Train on another source from now on (same features): partial_fit, a new learner
        on new data. The per-row state of the old data is dropped."""
        d = self.modelmats[0].shape[1] if self.modelmats else self.start_centers.shape[1]
        if info.n_features != d:
            raise ValueError(f"the data has {info.n_features} features while the centres "
                             f"have {d}")
        self.info = info
        self._rows = None
        self._pass_state = None
        self.converged = False
        self._reset_early_stop()

    def forget_rows(self) -> None:
        """Drop the per-row state and scratch buffers (memory; a later Lloyd pass without
        them computes every distance once and rebuilds the bounds)."""
        self._clear_scratch()

    # -- Model interface ------------------------------------------------------------------
    def init(self, info: DataInfo) -> None:
        k, d = self.start_centers.shape
        if info.n_features != d:
            raise ValueError(f"the data has {info.n_features} features while the centres "
                             f"have {d}")
        if info.specs[0].dtype.kind != "f":
            raise TypeError(f"k-means needs float features; got {info.specs[0].dtype}: "
                            "convert with X.astype(np.float32)")
        xp, dtype = info.xp, info.dtype
        self.xp = xp
        self.modelmats = [Mat(xp.asarray(self.start_centers.astype(dtype))),
                          Mat(backend.zeros((k, 1), dtype, xp))]
        self.updatemats = [Mat(backend.zeros((k, d), dtype, xp)),
                           Mat(backend.zeros((k, 1), dtype, xp))]

    @property
    def centers(self) -> Mat:
        """The k x d centres (the live model matrix)."""
        return self.modelmats[0]

    @property
    def counts(self) -> Any:
        """Weight per cluster (k,): absorbed so far (minibatch) or in the last pass (Lloyd)."""
        return self.modelmats[1].data[:, 0]

    def divergence_mats(self) -> list[tuple[Mat, float]]:
        """None: the centres are weighted means of rows (they cannot diverge; a Lloyd pass
        holds running sums in them) and the weights count rows."""
        return []

    def counters(self) -> dict[str, int]:
        return {"generation": int(self._generation)}

    def set_counters(self, values: dict[str, int]) -> None:
        self._generation = int(values.get("generation", self._generation))

    def restored(self, earlier: dict[str, Any]) -> None:
        """The per-row labels and bounds are not the checkpoint's: rebuilt next pass."""
        self._rows = None
        self._pass_state = None

    def extra_state(self) -> dict[str, Mat]:
        state: dict[str, Mat] = {}
        if self.modelmats and self.opts.algorithm == "lloyd":
            state["pass_sums"] = self._pass_sums_state()
        return state

    def flops(self, batch: Minibatch) -> float:
        return self._flops

    _flops = 0.0
    _generation = 0  # files saved before it existed load with 0

    def start_pass(self, pass_: int) -> None:
        if self.opts.algorithm == "lloyd":
            self._prepare_pass(pass_, at_start=True)

    def update(self, batch: Minibatch) -> float:
        if self.opts.algorithm == "lloyd":
            return self._lloyd_step(batch)
        return self._minibatch_step(batch)

    def evaluate(self, batch: Minibatch) -> float:
        X, w = self._batch_data(batch)
        C = self.modelmats[0].data
        _, dist = nearest(X, C)
        return self._score(dist, w)

    def end_pass(self, pass_: int) -> None:
        if self.opts.algorithm == "lloyd":
            self._lloyd_end(pass_)

    # -- shared pieces --------------------------------------------------------------------
    def _batch_data(self, batch: Minibatch) -> tuple[Any, Any]:
        X = raw(batch.mats[0])
        names = self.info.names if self.info is not None else ("X",)
        w = raw(batch.mats[names.index("w")])[:, 0] if "w" in names else None
        return X, w

    def _score(self, dist: Any, w: Any) -> float:
        if w is None:
            return -float(dist.mean())
        tot = float(w.sum())
        return -float((w * dist).sum()) / tot if tot > 0 else math.nan

    def _buffers(self, m: int) -> dict[str, Any]:
        """Buffers for minibatches of up to ``m`` rows, allocated once (the row-sized ones
        grow when a larger minibatch comes), and the centres' GEMM operand ``CT``."""
        C = self.modelmats[0].data
        xp, dtype = self.xp, C.dtype
        k, d = C.shape
        buf = self._buf
        if buf is None or buf["CT"].shape != (d, k) or buf["CT"].dtype != dtype:
            buf = self._buf = {
                "cap": 0,
                "S": backend.zeros((k, d), np.float64, xp),
                "N": backend.zeros((k,), np.float64, xp),
                "CT": backend.empty((d, k), dtype, xp),
                "cc": backend.empty((k,), dtype, xp),
                "kcol": backend.empty((k, 1), dtype, xp),
                "G": None,  # gathered rows (dense Lloyd pruning), made when first needed
            }
            self._work = CenterWork(k, d, xp)
        if buf["cap"] < m:
            buf["cap"] = m
            buf["D"] = backend.empty((m, k), dtype, xp)
            buf["G"] = None
            for name, dt in (("lab", np.int64), ("d1", dtype), ("d2", dtype), ("xx", dtype),
                             ("dist", dtype), ("need", np.int64)):
                buf[name] = backend.empty((m,), dt, xp)
        return buf

    def _set_centers(self, buf: dict[str, Any]) -> None:
        C = self.modelmats[0].data
        buf["CT"][...] = C.T
        row_norms_sq(C, out=buf["cc"])

    def _nearest_rows(self, X: Any, lab: Any, buf: dict[str, Any], m: int, w: Any = None,
                      add: bool = False) -> bool:
        """Nearest centre of every row of a minibatch into ``lab``, its squared distance
        into ``buf["d1"]``; with ``add``, dense CPU rows also go into the cluster sums
        ``buf["S"]`` / ``buf["N"]`` in the same kernel (returns whether they did)."""
        k = self.modelmats[0].shape[0]
        d1, d2, xx = buf["d1"][:m], buf["d2"][:m], buf["xx"][:m]
        self.distance_evaluations += m * k
        self._flops = 2.0 * (X.nnz if backend.is_sparse(X) else m * X.shape[1]) * k
        if self._fused(X):
            if add:
                self._work.reset()
            lloyd_block(X, self.modelmats[0].data, buf["cc"], xx, lab, d1, d2, self._work, w,
                        xx_ready=False, sums=add, root=False)
            if add:
                S, N = buf["S"], buf["N"]
                S.fill(0)
                N.fill(0)
                self._work.total(S, N)
            return add
        row_norms_sq(X, out=xx)
        cross(X, buf["CT"], buf["D"][:m])
        assign(buf["D"][:m], buf["cc"], xx, lab, d1, d2)
        return False

    def _stats(self, X: Any, lab: Any, w: Any, buf: dict[str, Any], m: int) -> None:
        S, N = buf["S"], buf["N"]
        S.fill(0)
        N.fill(0)
        center_sums(X, lab, S, N, w, self._work)

    def _fused(self, X: Any) -> bool:
        """Whether :func:`~bidlab.kern.kmeans_lloyd.lloyd_block` takes these rows (dense, CPU)."""
        return (isinstance(X, np.ndarray) and X.flags.c_contiguous and self._work is not None
                and self._work.cpu)

    # -- after training -------------------------------------------------------------------
    def label_pass(self, source: DataSource) -> tuple[Any, float]:
        """Labels of every row of one pass of ``source`` (unshuffled) and the inertia.

        After a Lloyd run this is the final assignment to the final centres, pruned by the
        bounds as in training (nothing to assign when the labels stopped changing);
        otherwise every distance is computed. The inertia is measured directly.
        """
        n = source.n_samples
        C = self.modelmats[0].data
        xp = self.xp
        rows = self._rows
        own = (self.opts.algorithm == "lloyd" and rows is not None and rows["n"] == n
               and rows["xx_ok"])
        labels = rows["labels"] if own else backend.empty((n,), np.int64, xp)
        ps = {"pruned": own and self.opts.bounds and rows["bounds_pass"] is not None,
              "labels_ok": True, "changed": 0}
        total = 0.0
        source.seek(0, 0)
        for _ in range(source.batches_per_pass):
            batch = source.next()
            X, w = self._batch_data(batch)
            m, a = batch.n, batch.start
            sl = slice(a, a + m)
            buf = self._buffers(m)
            if own and not rows["current"]:
                self._set_centers(buf)
                self._assign_rows(X, labels[sl], rows["u"][sl], rows["lo"][sl],
                                  rows["xx"][sl], buf, ps, m, count=False)
            elif not own:
                self._set_centers(buf)
                self._nearest_rows(X, labels[sl], buf, m)
            dist = buf["dist"][:m]
            assigned_sq_dist(X, labels[sl], C, dist)
            total += float(dist.sum(dtype=np.float64) if w is None
                           else (w * dist).sum(dtype=np.float64))
        return labels.copy(), total
