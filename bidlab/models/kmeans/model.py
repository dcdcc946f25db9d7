"""The k-means engines' common base, :class:`KMeansModel`, and what both algorithms share.

The model matrices are the k x d centres and a k x 1 column of cluster weights (rows, or
summed sample weights). Distances are ``||x||^2 - 2 x.c + ||c||^2`` with the cross term
from one GEMM per minibatch (BLAS / cuBLAS; ``kern.sparse_dense`` for CSR) and a fused
nearest-centre pass (:mod:`bidlab.kern.kmeans`; whole-matrix distances in
:mod:`bidlab.models.kmeans.distances`).

The algorithms are its two subclasses:
:class:`~bidlab.models.kmeans.lloyd.LloydKMeansModel` (full batch, Hamerly's bounds, pass
sums kept by checkpoints) and :class:`~bidlab.models.kmeans.minibatch.MinibatchKMeansModel`
(Sculley's steps through :class:`~bidlab.learn.updaters.RunningMean`, scikit-learn's early
stop); their module docs give the rules. This module holds what both share: the start
centres, the buffers, the nearest-centre pass of a minibatch, pickling, and the final
labelling (:meth:`KMeansModel.labels_of`). Files and pickles of the single class of
earlier versions (``KMeansModel`` with an ``algorithm`` option) load as the subclass that
option named (:func:`subclass_for`).

The score is minus the mean squared distance of a minibatch's rows to their centres
(weighted), measured before the step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.kmeans import CenterWork, assign, center_sums, row_norms_sq
from bidlab.kern.kmeans_lloyd import lloyd_block
from bidlab.kern.threads import one_blas_thread
from bidlab.learn.datasource import DataInfo
from bidlab.learn.model import Model
from bidlab.learn.persistable import UPGRADES
from bidlab.learn.staging import Minibatch
from bidlab.mat import Mat
from bidlab.models.kmeans.distances import cross, labels_inertia, nearest, raw
from bidlab.models.kmeans.shift import data_centres, set_origin

__all__ = ["KMeansModel", "subclass_for"]


class KMeansModel(Model):
    """What both k-means engines share (see the module doc); train one of its subclasses.

    Besides ``modelmats``, it has the attributes below.

    Attributes
    ----------
    converged
        set when the algorithm has nothing left to do; the learner stops.
    distance_evaluations
        row-centre distances computed by GEMM so far (Lloyd's bounds
        skip some).
    origin
        None, or the point (float64 host array, (d,)) the centres are measured from: the
        model then trains on rows less ``origin``, and its centres in the data's
        coordinates are ``centers + origin``
        (:func:`~bidlab.models.kmeans.shift.data_centres`; dense rows far from the
        origin, :mod:`bidlab.models.kmeans.shift`).

    Examples
    --------
    ::

        from bidlab.learn import BlockSource, Learner
        from bidlab.models.kmeans.lloyd import LloydKMeansModel

        model = LloydKMeansModel(X[:8].copy())      # start from 8 rows as centres
        Learner(model, BlockSource(X, batch_size=4096), n_passes=20).fit(progress=None)
        model.centers.data                           # 8 x d
    """

    score_name = "-sq.dist/sample"
    mat_names = ("centers", "counts")
    #: a checkpoint's numbers (bidlab.learn.checkpoint_values): counts, moves, row bounds
    CHECKPOINT_NONNEGATIVE = ("model/1", "drift", "rows.u.values", "rows.xx.values")
    CHECKPOINT_FINITE = ("pass_sums",)
    #: the estimator's ``algorithm`` name of an engine (a subclass)
    algorithm = ""
    #: each engine by its ``algorithm`` name, filled as the subclasses are defined
    ENGINES: dict[str, type[KMeansModel]] = {}
    # rebuilt on demand, never pickled
    _SCRATCH: tuple[str, ...] = ("_buf", "_work", "_origin_mat", "_vote", "_comm")
    origin: Any = None
    _origin_mat: Mat | None = None  # the checkpoint's copy of ``origin``
    _vote: Any = None  # the ranks' agreement on an origin, until made (shared_origin)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.algorithm:
            KMeansModel.ENGINES[cls.algorithm] = cls

    def __init__(self, centers: Any, *, random_state: int = 0, **options: Any) -> None:
        super().__init__(**options)
        self.start_centers = np.array(backend.to_host(centers), copy=True)
        if self.start_centers.ndim != 2:
            raise ValueError(f"centers must be a k x d array; got shape "
                             f"{self.start_centers.shape}")
        self.random_state = int(random_state)
        self.rng = np.random.default_rng(self.random_state)
        self.converged = False
        self.distance_evaluations = 0
        self._clear_scratch()

    # -- pickling: scratch buffers are rebuilt on demand ----------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in self._SCRATCH:
            state[name] = None
        return backend.portable_state(state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        if type(self) is KMeansModel:  # a pickle of the one class of earlier versions
            cls = subclass_for(KMeansModel, state)
            if cls is not None:
                self.__class__ = cls
        super().__setstate__(state)

    def _clear_scratch(self) -> None:
        self._buf: dict[str, Any] | None = None  # per-minibatch buffers
        self._work: CenterWork | None = None  # the cluster sums so far

    def rebind(self, info: DataInfo) -> None:
        """Train on another source from now on (same features): partial_fit, a new learner
        on new data. The per-row state of the old data is dropped."""
        d = self.modelmats[0].shape[1] if self.modelmats else self.start_centers.shape[1]
        if info.n_features != d:
            raise ValueError(f"the data has {info.n_features} features while the centres "
                             f"have {d}")
        self.info = info
        self.converged = False

    def forget_rows(self) -> None:
        """Drop the per-row state and scratch buffers (memory)."""
        self._clear_scratch()

    @classmethod
    def check_loaded(cls, state: dict[str, Any]) -> None:
        """A loaded model's ``origin`` (:mod:`bidlab.learn.persist_check`): None, or a
        finite float array with one value per feature of its centres; anything else would
        move every centre (NaN: every prediction cluster 0)."""
        origin = state.get("origin")
        if origin is None:
            return
        d = _features(state)
        if (not isinstance(origin, np.ndarray) or origin.dtype.kind != "f"
                or origin.ndim != 1 or (d is not None and origin.shape[0] != d)):
            what = (f"a {type(origin).__name__}" if not isinstance(origin, np.ndarray) else
                    f"an array of dtype {origin.dtype} and shape {origin.shape}")
            raise _field_error(f"{what}, where a k-means model's origin is None or a float "
                               f"array of its {d if d is not None else 'd'} features; the "
                               "file is corrupt: save the model again")
        if not np.isfinite(origin).all():
            raise _field_error("holds NaN or infinity, where a k-means model's origin is a "
                               "finite point; the file is corrupt: save the model again")

    # -- checkpoints: the origin the centres are measured from ----------------------------
    def extra_state(self) -> dict[str, Mat]:
        """``origin`` as a 1 x d float64 matrix (zeros: none; a shift is never all zeros),
        so a checkpoint's centres are read in the frame they were written in."""
        if not self.modelmats:
            return {}
        d = self.modelmats[0].shape[1]
        M = self._origin_mat
        if M is None or M.shape != (1, d):
            M = self._origin_mat = Mat(np.zeros((1, d)))
        M.data[0] = 0.0 if self.origin is None else self.origin
        return {"origin": M}

    def check_extra_state(self, saved: dict[str, np.ndarray]) -> None:
        """Refuse a checkpoint whose ``origin`` holds NaN or infinity (before it is loaded:
        the centres measured from it would be lost), or whose rows' labels name no centre
        (a kernel would index past the centres)."""
        labels, k = saved.get("rows.labels.values"), self.modelmats[0].shape[0]
        if labels is not None and labels.size and not (0 <= labels.min()
                                                       and labels.max() < k):
            raise ValueError(f"its rows' labels run from {labels.min()} to {labels.max()}, "
                             f"where each names one of the {k} centres (0..{k - 1}): the "
                             "file is corrupt; load another checkpoint")
        origin = saved.get("origin")
        if origin is not None and not np.isfinite(origin).all():
            raise ValueError("its k-means origin holds NaN or infinity, where it is a finite "
                             "point (zeros: none): the file is corrupt; load another "
                             "checkpoint, or train without one")

    def restored(self, earlier: dict[str, Any]) -> None:
        """The loaded centres (and pass sums) were measured from the file's ``origin``:
        measure them from this model's, the one its rows are less, as they are in the
        data's coordinates (a file without one, of an earlier version, was written in this
        model's frame: the same data)."""
        M = self._origin_mat
        if M is None:
            return
        saved = np.array(M.data[0], np.float64)  # finite: check_extra_state
        saved_origin = saved if saved.any() else None
        now = self.origin
        if (saved_origin is None) == (now is None) and (
                now is None or np.array_equal(saved, now)):
            return
        self.origin = saved_origin
        set_origin(self, now, start=False)  # the start centres are this model's own

    def frame_moved(self, step: Any) -> None:
        """Called when the centres moved by ``step`` (float64 (d,)) to another origin
        (:func:`~bidlab.models.kmeans.shift.set_origin`): move whatever else is measured
        from the origin. Nothing here."""

    def _agree_origin(self) -> None:
        """On a learner of several ranks, before its first minibatch: every rank takes the
        origin the ranks agree on (:mod:`bidlab.models.kmeans.shared_origin`; a collective,
        made once)."""
        vote, self._vote = self._vote, None
        set_origin(self, vote.agree(self.xp))

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

    def flops(self, batch: Minibatch) -> float:
        return self._flops

    _flops = 0.0

    def evaluate(self, batch: Minibatch) -> float:
        X, w = self._batch_data(batch)
        C = self.modelmats[0].data
        _, dist = nearest(X, C)
        return self._score(dist, w)

    # -- shared pieces --------------------------------------------------------------------
    def _batch_data(self, batch: Minibatch) -> tuple[Any, Any]:
        X = raw(batch.mats[0])
        names = self.info.names if self.info is not None else ("X",)
        w = raw(batch.mats[names.index("w")])[:, 0] if "w" in names else None
        return X, w

    def _score(self, dist: Any, w: Any) -> float:
        if w is None:  # float64 sums: float32 distances near their limit add up past it
            return -float(dist.mean(dtype=np.float64))
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
    def labels_of(self, X: Any, w: Any = None) -> tuple[Any, float]:
        """Labels of every row of ``X`` (n x d, the training data as the estimator checked
        it, in the data's coordinates: not less ``origin``) by the current centres, and
        the (``w``-weighted) inertia: every distance
        computed by :func:`~bidlab.models.kmeans.distances.labels_inertia`, the computation
        ``predict`` makes, so ``fit``'s labels are those ``predict`` gives on the same rows
        (bounds or a fused kernel's other GEMM blocking would round near-ties apart)."""
        C = data_centres(self)
        self.distance_evaluations += X.shape[0] * C.shape[0]
        if self.xp is not np:
            return labels_inertia(X, C, w)
        with one_blas_thread():  # BLAS threads left spinning slow the next fit's kernels
            return labels_inertia(X, C, w)


def _features(state: dict[str, Any]) -> int | None:
    """The number of features a loaded model's centres have (None: no centres held)."""
    for value in (*(state.get("modelmats") or [])[:1], state.get("start_centers")):
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) == 2:
            return int(shape[1])
    return None


def _field_error(text: str) -> ValueError:
    """A ValueError about the model's ``origin`` (its ``field``, named by the check)."""
    exc = ValueError(text)
    exc.field = "origin"  # type: ignore[attr-defined]
    return exc


def subclass_for(cls: type, state: Any) -> type | None:
    """The engine a state of the earlier single ``KMeansModel`` (an ``algorithm`` option)
    is, with that option taken out of its options; None for any other state. Files of
    earlier versions name that class; :data:`~bidlab.learn.persistable.UPGRADES` and
    unpickling build the subclass instead.

    Example::

        subclass_for(KMeansModel, old_state)   # LloydKMeansModel or MinibatchKMeansModel
    """
    if cls is not KMeansModel or not isinstance(state, dict):
        return None
    opts = state.get("opts")
    values = vars(opts).get("_values") if opts is not None else None
    if not isinstance(values, dict):
        return None
    algorithm = values.pop("algorithm", "lloyd")
    for table in ("_specs", "_history"):
        part = vars(opts).get(table)
        if isinstance(part, dict):
            part.pop("algorithm", None)
    return KMeansModel.ENGINES.get(algorithm)


UPGRADES[KMeansModel] = subclass_for
