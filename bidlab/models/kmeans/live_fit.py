"""The live ways :class:`~bidlab.models.kmeans.estimator.KMeans` trains: ``learner(X)`` (a
live learner whose model is the estimator's), ``fit_learner`` (the learner that ``bidlab
train kmeans`` runs, ended as ``fit`` ends: every row labelled by the final centres,
``labels_``, ``inertia_``, ``n_iter_``, ``n_steps_``) and ``partial_fit`` (one pass of
minibatch steps).

Dense rows far from the origin are trained on less the shift ``fit`` takes
(:mod:`bidlab.models.kmeans.shift`: one copy of ``X``, made before training, never per
minibatch); the model keeps it as its ``origin``, and the estimator reports its centres,
labels and distances in the data's coordinates. Ranks of a distributed learner (a
communicator of several) agree on one origin before their first minibatch, the mean of all
their rows (:mod:`bidlab.models.kmeans.shared_origin`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn import Learner
from bidlab.models.kmeans.lloyd import LloydKMeansModel
from bidlab.models.kmeans.minibatch import MinibatchKMeansModel
from bidlab.models.kmeans.shared_origin import OriginVote, row_sums
from bidlab.models.kmeans.shift import (
    centre_shift,
    data_centres,
    data_shift,
    far_point,
    host_origin,
    moved,
    rows_less,
    set_origin,
)

__all__ = ["KMeansFitLearner", "final_labels"]


class KMeansFitLearner:
    """``learner``, ``fit_learner`` and ``partial_fit`` of
    :class:`~bidlab.models.kmeans.estimator.KMeans` (see the module doc)."""

    def learner(self, X: Any, y: Any = None, **options: Any) -> Learner:
        """A live :class:`bidlab.learn.Learner` clustering ``X`` with this estimator's
        settings; its model becomes this estimator's model (``predict``, ``transform``
        and ``cluster_centers_`` follow the training live).

        ``y`` is ignored (unsupervised). ``options``: learner options (``n_passes``,
        default ``max_iter``; ``batch_size``; ``checkpoint``; ``lrate`` to damp minibatch
        steps; ...) and ``sample_weight``. Lloyd needs every row in every pass (a full-batch
        model), so its ``val_every`` stays 0. Dense rows far from the origin are trained on
        less their mean, as ``fit`` does (a copy of ``X``; the model's ``origin``).
        """
        self._validate_params()
        X = self._data(X, reset=True)
        n, d = X.shape
        w = self._weights(options.pop("sample_weight", None), n)
        self._check_k(n, d, X.dtype)
        algorithm = self.algorithm
        rng = self._rng()
        comm = options.get("comm")
        alone = getattr(comm, "size", 1) <= 1
        sums = row_sums(X)
        shift = None if sums is None else far_point(sums[0], n, sums[1], X.dtype)
        Xf = rows_less(X, shift)
        init = moved(self._start(X, rng), shift)
        model = self._model(Xf, w, rng, algorithm, init)
        model.origin = host_origin(shift)
        if not alone:  # the ranks agree on one origin before the first minibatch
            if isinstance(model, LloydKMeansModel):
                model.start_from(None)  # its seeding's bounds: this rank's centres only
            set_origin(model, None)  # start centres as rank 0 broadcasts them
            model._vote = OriginVote(comm, n, sums, shift, None if shift is None else Xf,
                                     d, X.dtype)
        src = self._source(Xf, w, algorithm, options.pop("batch_size", None),
                           model.random_state)
        options.setdefault("n_passes", self.max_iter)
        options.setdefault("val_every", 0)
        upd = model.default_updater(lrate=options.pop("lrate", 1.0))
        lrn = self._build_learner(model, src, upd, live=True, **options)
        self._forget_results()
        self.model_ = model
        return lrn

    def fit_learner(self, X: Any, y: Any = None, **options: Any
                    ) -> tuple[Learner, Callable[[], None]]:
        """:meth:`learner` on ``X``, and the step to call once its training is over: it
        labels every row by the final centres and sets ``labels_``, ``inertia_``,
        ``n_iter_`` and ``n_steps_`` as ``fit`` does (``bidlab train`` runs this).

        Examples
        --------
        >>> import numpy as np
        >>> from bidlab.models import KMeans
        >>> X = np.random.default_rng(0).random((40, 2))
        >>> km = KMeans(3, random_state=0)
        >>> lrn, finish = km.fit_learner(X)
        >>> _ = lrn.fit(progress=None)
        >>> finish()
        >>> km.labels_.shape, km.inertia_ > 0
        ((40,), True)
        """
        sample_weight = options.get("sample_weight")
        lrn = self.learner(X, y, **options)

        def finish() -> None:
            Xv = self._data(X, reset=False)
            w = self._weights(sample_weight, Xv.shape[0])
            model = self.model_
            with self._threads():
                labels, inertia, n_iter = final_labels(model, lrn, Xv, w)
            self.labels_ = np.asarray(backend.to_host(labels))
            self.inertia_ = float(inertia)
            self.n_iter_ = int(n_iter)
            self.n_steps_ = int(lrn.step)
            self.distance_evaluations_ = int(model.distance_evaluations)

        return lrn, finish

    def partial_fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> Any:
        """One pass of minibatch steps (``batch_size`` rows each) over ``X``.

        The first call starts the centres from ``init`` on ``X``; later calls continue the
        per-centre weights (after ``fit`` too), as scikit-learn's
        ``MiniBatchKMeans.partial_fit`` does. ``labels_`` and ``inertia_`` describe ``X``.
        Dense rows far from the origin are trained on less the first call's shift (a copy
        of each ``X``; the model's ``origin``), as ``fit`` trains on them. CSR rows are
        taken as given; they are refused (ValueError) when the centres lie so far from the
        origin, for their spread, that their distances in the model's dtype would be lost
        to rounding.
        """
        with self._threads():
            return self._partial_fit(X, sample_weight)

    def _partial_fit(self, X: Any, sample_weight: Any) -> Any:
        self._validate_params()
        first = getattr(self, "model_", None) is None
        if not first:
            self._check_fitted_k("partial_fit", "a new estimator (sklearn.base.clone)")
        X = self._data(X, reset=first)
        n, d = X.shape
        w = self._weights(sample_weight, n)
        if first:
            self._check_k(n, d, X.dtype)
            rng = self._rng()
            shift = data_shift(X)
            init = moved(self._start(X, rng), shift)
            self.model_ = self._model(rows_less(X, shift), w, rng, "minibatch", init)
            self.model_.origin = host_origin(shift)
            self.n_steps_ = 0
        elif backend.is_sparse(X):  # CSR rows are taken as given (a shift would fill them)
            _check_sparse_frame(data_centres(self.model_))
            if self.model_.origin is not None:
                set_origin(self.model_, None)
        elif self.model_.origin is None:  # fitted centres far from the origin: measured
            C = data_centres(self.model_)  # from near them (k x d, no pass over X)
            shift = centre_shift(C, C)
            if shift is not None:
                set_origin(self.model_, np.asarray(backend.to_host(shift), np.float64))
        model = self.model_
        Xf = rows_less(X, model.origin)
        src = self._source(Xf, w, "minibatch", None, int(self._rng().integers(2**31 - 1)))
        if not isinstance(model, MinibatchKMeansModel):  # after a Lloyd fit: go on from it
            model = MinibatchKMeansModel.following(
                model, src.info, max_no_improvement=self.max_no_improvement)
            self.model_ = model
        elif model.initialised:
            model.rebind(src.info)
        model.stop_early = False
        lrn = self._build_learner(model, src, n_passes=1, val_every=0)
        lrn.fit(progress=self._progress())
        model.forget_rows()
        labels, inertia = model.labels_of(X, w)
        self.labels_ = np.asarray(backend.to_host(labels))
        self.inertia_ = float(inertia)
        self.n_steps_ = int(getattr(self, "n_steps_", 0)) + lrn.step
        self.n_iter_ = int(getattr(self, "n_iter_", 0)) + 1
        self.distance_evaluations_ = int(model.distance_evaluations)
        return self


def _check_sparse_frame(C: Any) -> None:
    """Refuse CSR rows for centres ``C`` (k x d, in the data's coordinates) that lie so far
    from the origin, for how far apart they are, that GEMM distances in ``C``'s dtype are
    off by more than 1/1024 of the centres' spread: sparse rows are trained on as given
    (a shift would fill them), and their labels would be noise."""
    A = np.asarray(backend.to_host(C), np.float64)
    mean = A.mean(axis=0)
    mm = float(mean @ mean)
    spread = float(((A - mean) ** 2).sum(axis=1).mean())
    if spread > 0 and np.finfo(C.dtype).eps * mm > spread / 1024:
        wider = ", train in float64 (dtype='float64')" if C.dtype.itemsize < 8 else ""
        raise ValueError(
            f"partial_fit got CSR rows, but the centres lie {math.sqrt(mm):.4g} from the "
            f"origin and {math.sqrt(spread):.3g} apart: sparse rows are taken as given (a "
            f"shift would fill them), and their {C.dtype} distances to these centres "
            "would lose the centres' differences to rounding. Give these rows dense "
            f"(X.toarray(), a batch at a time when large){wider}, or cluster the data "
            "less its mean")


def final_labels(model: Any, lrn: Learner, X: Any, w: Any) -> tuple[Any, float, int]:
    """Every row of ``X`` (in the data's coordinates, or less the model's shift when it
    has no ``origin``) labelled by ``model``'s final centres as ``predict`` labels them
    (:meth:`~bidlab.models.kmeans.model.KMeansModel.labels_of`; its per-row training state
    freed first), the inertia, and the iterations ``lrn`` trained (Lloyd iterations, or
    passes of minibatch steps): what ``fit`` reports."""
    model.forget_rows()
    labels, inertia = model.labels_of(X, w)
    n_iter = (model.n_iter if isinstance(model, LloydKMeansModel)
              else math.ceil(lrn.samples / X.shape[0]))
    return labels, float(inertia), int(n_iter)
