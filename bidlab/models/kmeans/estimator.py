"""``KMeans``: k-means by GEMM, full-batch (Lloyd, with exact pruning) or minibatch.

A scikit-learn face on two engines, :class:`~bidlab.models.kmeans.lloyd.LloydKMeansModel`
and :class:`~bidlab.models.kmeans.minibatch.MinibatchKMeansModel` (``algorithm`` picks
one), trained by the :class:`bidlab.learn.Learner`: ``fit`` runs it to completion in the calling
thread, ``partial_fit`` runs one pass of minibatch steps over the given rows, and
``learner(X)`` hands out a live learner on the same kind of model (and makes it this
estimator's model, so ``predict`` follows the training). Each Lloyd iteration is one
``X @ C.T`` per block of rows plus a fused nearest-centre / cluster-sum pass, and
Hamerly's bounds skip the distances that cannot change an assignment. Dense and sparse
(CSR) inputs, numpy or CuPy::

    from bidlab.models import KMeans
    km = KMeans(n_clusters=256, random_state=0).fit(X)
    km.cluster_centers_, km.labels_, km.inertia_, km.predict(X_new), km.transform(X_new)

Scikit-learn conventions and names (``n_clusters``, ``n_jobs``, ``verbose``, ``warm_start``;
``clone``, ``Pipeline``, ``GridSearchCV``, pandas input).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from bidlab import backend
from bidlab.learn import BlockSource, MemorySource, Option
from bidlab.learn.model import register_model
from bidlab.models.base import BidlabEstimator
from bidlab.models.kmeans import distances
from bidlab.models.kmeans.distances import CHUNK_ENTRIES, labels_inertia, sq_distances
from bidlab.models.kmeans.inputs import KMeansInputs, valid_dtype, valid_init
from bidlab.models.kmeans.live_fit import KMeansFitLearner, final_labels
from bidlab.models.kmeans.lloyd import LloydKMeansModel
from bidlab.models.kmeans.minibatch import MinibatchKMeansModel
from bidlab.models.kmeans.model import KMeansModel
from bidlab.models.kmeans.seeding import init_seeding
from bidlab.models.kmeans.shift import data_centres, data_shift, moved, rows_less, unshift
from bidlab.models.sk_params import COMMON
from bidlab.models.validation import RANDOM_STATE

__all__ = ["KMeans"]

#: the engine of each ``algorithm``
ENGINES: dict[str, type[KMeansModel]] = {
    cls.algorithm: cls for cls in (LloydKMeansModel, MinibatchKMeansModel)}
#: the engines' options that are estimator parameters, and the engine that declares each
_ENGINE_PARAMS: dict[str, type[KMeansModel]] = {
    "tol": LloydKMeansModel, "max_no_improvement": MinibatchKMeansModel,
    "bounds": LloydKMeansModel}


def _engine_param(name: str) -> Option:
    """The parameter row ``name``: its engine's option row."""
    return next(s for s in _ENGINE_PARAMS[name].option_table() if s.name == name)


class KMeans(KMeansInputs, KMeansFitLearner, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
             ClusterMixin, BidlabEstimator):
    """k-means clustering with distances by GEMM.

    Parameters
    ----------
    n_clusters
        number of clusters.
    init
        ``"k-means++"`` (default: greedy k-means++, 2 + int(2 ln k) candidates a step; on
        dense CPU rows its assignment of the rows starts the first Lloyd pass),
        ``"k-means||"`` (5 oversampling rounds, then k-means++ on the weighted
        candidates), ``"random"`` (n_clusters distinct rows), k x d centres (dense or
        sparse), or a callable ``init(X, n_clusters, random_state)`` returning them
        (scikit-learn's; called with the checked data in its own coordinates and a
        ``numpy.random.RandomState``, once per run of ``n_init``).
    n_init
        runs from different seeds; the lowest inertia wins.
    max_iter
        most Lloyd iterations (``"lloyd"``) or the passes over the data
        (``"minibatch"``).
    tol
        Lloyd stops when the centres' total squared shift in an iteration is at most
        ``tol`` times the mean of the features' (weighted) variances, or when no label
        changes: scikit-learn's ``KMeans`` rule and meaning of ``tol``. The shift comes
        from the centres themselves and the variance from the first pass's row norms
        and sums, so checking costs no pass over the data. Minibatch steps stop on
        ``max_no_improvement`` only.
    algorithm
        ``"lloyd"`` (full batch) or ``"minibatch"`` (Sculley's update).
    batch_size
        rows per minibatch (``"minibatch"`` and ``partial_fit``; Lloyd works in
        blocks of about 4M distances).
    max_no_improvement
        minibatch ``fit`` stops after this many steps in a row in
        which the smoothed minibatch inertia reaches no new low (scikit-learn's
        MiniBatchKMeans rule: per-sample inertia before each step, averaged
        exponentially with weight ``min(1, 2 batch_size / (n + 1))``); None: never.
        ``partial_fit`` never stops early.
    bounds
        prune Lloyd's distance computations with Hamerly's bounds (same result).
    random_state
        seed (None, an int, a numpy ``RandomState`` or ``Generator``) for
        initialisation, re-seeding and minibatch order.
    dtype
        float32 or float64; None (default) follows the input (other types become
        float64).
    device
        ``"cpu"`` or ``"gpu"`` (CuPy; needs ``bidlab[gpu]``).
    warm_start
        a fitted estimator's ``fit`` continues from its centres (one run,
        ``n_iter_`` and ``n_steps_`` add up) instead of starting again.
    n_jobs
        CPU threads of the kernels in fit, predict, transform and score, through
        threadpoolctl (None: as the process is set; -1: every core).
    verbose
        0 silent, 1 a progress bar with the pass summaries, 2 a line per pass (on
        stderr).

    Notes
    -----

    Learned: ``cluster_centers_`` (n_clusters x d), ``labels_``, ``inertia_`` (weighted sum of
    squared distances to the nearest centre), ``n_iter_`` (Lloyd iterations run, as
    scikit-learn counts them: the last one may find no label changed; or passes
    over the data begun by minibatch steps), ``n_steps_`` (minibatches),
    ``n_features_in_`` (and ``feature_names_in_`` for DataFrames), ``model_`` (the engine: a
    :class:`~bidlab.models.kmeans.lloyd.LloydKMeansModel` or
    :class:`~bidlab.models.kmeans.minibatch.MinibatchKMeansModel`).

    Examples
    --------
    >>> from bidlab.datasets import blobs
    >>> from bidlab.models import KMeans
    >>> data = blobs(600, 2, 3, seed=0)
    >>> km = KMeans(n_clusters=3, random_state=0).fit(data.X)
    >>> km.cluster_centers_.shape
    (3, 2)
    >>> km.predict(data.X[:4]).shape
    (4,)
    """

    #: a loaded estimator's shapes (bidlab.learn.persist_check): k centres x the features
    STATE_SHAPES: ClassVar[dict[str, tuple[str | int, ...]]] = {
        "model_.modelmats.0": ("n_clusters", "n_features_in_"),
        "model_.modelmats.1": ("n_clusters", 1),
        "model_.updatemats.0": ("n_clusters", "n_features_in_"),
        "model_.updatemats.1": ("n_clusters", 1),
        "model_.start_centers": ("n_clusters", "n_features_in_")}
    FIT_ONLY = ("n_init",)  # held-out stopping / restarts: fit only
    PARAMS = (
        Option("n_clusters", int, 8, "number of clusters", low=1),
        Option("init", str, "k-means++", "initial centres", test=valid_init,
               text="one of 'k-means++', 'k-means||', 'random', an n_clusters x d array "
               "of centres or a callable(X, n_clusters, random_state) returning one"),
        Option("n_init", int, 1, "runs from different seeds (the best is kept)", low=1),
        Option("max_iter", int, 100, "most Lloyd iterations, or minibatch passes", low=1),
        _engine_param("tol"),
        Option("algorithm", str, "lloyd", "full-batch or minibatch k-means",
               choices=tuple(ENGINES)),
        Option("batch_size", int, 4096, "rows per minibatch", low=1),
        _engine_param("max_no_improvement"),
        _engine_param("bounds"),
        dataclasses.replace(RANDOM_STATE, default=None, doc="seed of the initialisation, "
                            "the re-seedings and the minibatch order"),
        Option("dtype", str, None, "float type of the centres", test=valid_dtype,
               none_ok=True, text="None (follow the input), float32 or float64"),
        Option("device", str, "cpu", "where to compute", choices=("cpu", "gpu")),
        *COMMON,
    )

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: Any = "k-means++",
        n_init: int = 1,
        max_iter: int = 100,
        tol: float = 1e-4,
        algorithm: str = "lloyd",
        batch_size: int = 4096,
        max_no_improvement: int | None = 10,
        bounds: bool = True,
        random_state: Any = None,
        dtype: Any = None,
        device: str = "cpu",
        warm_start: bool = False,
        n_jobs: int | None = None,
        verbose: int = 0,
    ) -> None:
        self._keep_params(locals())

    @classmethod
    def _upgrade_state(cls, state: dict[str, Any]) -> None:
        if "k" in state:  # written before the scikit-learn names
            state["n_clusters"] = state.pop("k")

    def _facts(self) -> list[tuple[str, Any]]:
        C = self.model_.modelmats[0]
        facts = [("cluster_centers_", f"{C.shape[0]} x {C.shape[1]}")]
        facts += [(name, getattr(self, name)) for name in ("n_iter_", "n_steps_", "inertia_")
                  if hasattr(self, name)]
        return facts

    # -- fitted state -----------------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return getattr(self, "model_", None) is not None

    @property
    def cluster_centers_(self) -> np.ndarray:
        """The k x d centres (read-only; a live view of the model on the CPU, or its centres
        plus its ``origin`` when it trains on rows moved near the origin)."""
        C = data_centres(self.model_)
        if not isinstance(C, np.ndarray):
            return np.asarray(backend.to_host(C))
        view = C.view()
        view.flags.writeable = False
        return view

    @property
    def _n_features_out(self) -> int:
        return int(self.model_.modelmats[0].shape[0])

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = (
            ["float64", "float32"] if self.dtype is None else [np.dtype(self.dtype).name])
        return tags

    # -- input ------------------------------------------------------------------------------
    def _xp(self) -> Any:
        return np if self.device == "cpu" else backend.cupy()

    def _rng(self) -> np.random.Generator:
        if isinstance(self.random_state, np.random.Generator):
            return self.random_state
        rs = check_random_state(self.random_state)
        return np.random.default_rng(rs.randint(0, 2**31 - 1, size=2).tolist())

    def _block_rows(self, X: Any) -> int:
        """Rows per Lloyd block: about CHUNK_ENTRIES distances and row entries (a sparse
        row's entries are its nonzeros, not its ``d`` columns: 20 Newsgroups' TF-IDF rows,
        56,123 columns and 105 nonzeros, went 256 rows at a time)."""
        width = X.shape[1]
        if backend.is_sparse(X):
            width = -(-int(X.nnz) // max(int(X.shape[0]), 1))
        return max(256, min(CHUNK_ENTRIES // max(self.n_clusters, 1),
                            CHUNK_ENTRIES // max(width, 1)))

    def _model(self, X: Any, w: Any, rng: np.random.Generator, algorithm: str,
               init: Any = None) -> KMeansModel:
        seed = int(rng.integers(2**31 - 1))
        init = self.init if init is None else init
        start = init_seeding(X, self.n_clusters, init, np.random.default_rng(seed), w)
        engine = ENGINES[algorithm]
        own = {s.name for s in engine.option_table()}
        options = {name: getattr(self, name) for name in _ENGINE_PARAMS if name in own}
        model = engine(start.centers, random_state=seed, **options)
        if isinstance(model, LloydKMeansModel):
            model.start_from(start)
        return model

    def _source(self, X: Any, w: Any, algorithm: str, batch_size: int | None,
                seed: int) -> Any:
        mats = (X,) if w is None else (X, w)
        names = ("X",) if w is None else ("X", "w")
        if algorithm == "lloyd":
            return BlockSource(*mats, batch_size=batch_size or self._block_rows(X),
                               names=names)
        return MemorySource(*mats, batch_size=min(batch_size or self.batch_size, X.shape[0]),
                            shuffle=True, seed=seed, names=names)

    def _check_fitted_k(self, what: str, fresh: str) -> None:
        """Refuse to continue from fitted centres whose number is not ``n_clusters``."""
        k = int(self.model_.start_centers.shape[0])
        if k != self.n_clusters:
            raise ValueError(f"KMeans: {what} continues from the {k} fitted centres, but "
                             f"n_clusters={self.n_clusters}: set n_clusters={k}, or start "
                             f"again with {fresh}")

    def _forget_results(self) -> None:
        for name in ("labels_", "inertia_", "n_iter_", "n_steps_", "distance_evaluations_"):
            self.__dict__.pop(name, None)

    # -- training ---------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> KMeans:
        """Cluster the rows of ``X`` (n x d, dense or sparse); ``y`` is ignored.

        ``sample_weight``: one non-negative weight per row (a row of weight 2 counts as two
        copies of it). With ``warm_start`` a fitted estimator starts from its centres.
        Dense rows farther from the origin than they spread are trained on less their mean
        (a copy of ``X``, as scikit-learn's ``KMeans`` does), so their GEMM distances keep
        their digits.
        """
        with self._threads():
            self._fit(X, sample_weight)
        distinct = distances.distinct_rows(np.asarray(backend.to_host(self.cluster_centers_)))
        if distinct < self.n_clusters:
            warnings.warn(f"KMeans found {distinct} distinct clusters, fewer than "
                          f"n_clusters={self.n_clusters} (X has fewer distinct rows, or "
                          "duplicates): some centres coincide; use a smaller n_clusters",
                          ConvergenceWarning, stacklevel=3)
        return self

    def _fit(self, X: Any, sample_weight: Any) -> KMeans:
        self._validate_params()
        warm = bool(self.warm_start) and getattr(self, "model_", None) is not None
        if warm:
            self._check_fitted_k("fit with warm_start=True", "warm_start=False")
        start = np.array(self.cluster_centers_) if warm else None
        before = (getattr(self, "n_iter_", 0), getattr(self, "n_steps_", 0)) if warm else (0, 0)
        X = self._data(X, reset=not warm)
        n, d = X.shape
        w = self._weights(sample_weight, n)
        self._check_k(n, d, X.dtype)
        rng = self._rng()
        shift = data_shift(X)  # rows far from the origin: train on them less their mean
        Xf = rows_less(X, shift)
        runs = self.n_init if not warm and (isinstance(self.init, str) or callable(
            self.init)) else 1
        best: tuple | None = None
        for _ in range(runs):
            init = moved(start if warm else self._start(X, rng), shift)
            model = self._model(Xf, w, rng, self.algorithm, init)
            src = self._source(Xf, w, self.algorithm, None, model.random_state)
            lrn = self._build_learner(model, src, n_passes=self.max_iter, val_every=0)
            lrn.fit(progress=self._progress())
            labels, inertia, n_iter = final_labels(model, lrn, Xf, w)
            if best is None or inertia < best[1]:
                best = (model, inertia, labels, n_iter, lrn.step)
        assert best is not None
        model, inertia, labels, n_iter, steps = best
        if shift is not None:  # back to the rows as given: labels as predict gives them
            unshift(model, shift)
            labels, inertia = model.labels_of(X, w)
        self.model_ = model
        self.labels_ = np.asarray(backend.to_host(labels))
        self.inertia_ = float(inertia)
        self.n_iter_ = int(n_iter) + before[0]
        self.n_steps_ = int(steps) + before[1]
        self.distance_evaluations_ = int(model.distance_evaluations)
        return self

    # the estimator's guard wraps the methods a class defines: these are KMeansFitLearner's
    partial_fit = KMeansFitLearner.partial_fit
    learner = KMeansFitLearner.learner

    # -- using the model --------------------------------------------------------------------
    def predict(self, X: Any, sample_weight: Any = None) -> np.ndarray:
        """The nearest centre of each row of ``X`` (``sample_weight`` does not change it)."""
        check_is_fitted(self)
        X = self._data(X, reset=False)
        self._weights(sample_weight, X.shape[0])
        with self._threads():
            labels, _ = labels_inertia(X, data_centres(self.model_))
        return np.asarray(backend.to_host(labels))

    def fit_predict(self, X: Any, y: Any = None, sample_weight: Any = None) -> np.ndarray:
        """``fit(X)`` and the labels of its rows."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def transform(self, X: Any) -> np.ndarray:
        """Euclidean distance from each row of ``X`` to each centre (n x k). Its argmin is
        ``predict``'s label but for rows within rounding of two centres (another product
        computes these distances, as in scikit-learn)."""
        check_is_fitted(self)
        X = self._data(X, reset=False)
        with self._threads():
            D = sq_distances(X, data_centres(self.model_))
        backend.namespace(D).sqrt(D, out=D)
        return np.asarray(backend.to_host(D))

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Minus the (weighted) sum of squared distances of ``X``'s rows to their nearest
        centre."""
        check_is_fitted(self)
        X = self._data(X, reset=False)
        w = self._weights(sample_weight, X.shape[0])
        with self._threads():
            _, inertia = labels_inertia(X, data_centres(self.model_), w)
        return -inertia


register_model("kmeans", KMeans)
