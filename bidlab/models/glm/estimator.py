"""``GLM``: generalized linear models with many targets trained in one pass.

Linear, logistic, softmax (multi-class) and svm (hinge) links; several targets at once,
each with its own link, learning rate and L1 / L2 weight; and a target map that
replicates one target many times, so one pass over the data trains a whole sweep of
configurations (BIDMach's ``targmap`` with column-vector ``lrate``). Every minibatch step
does *one* shared sparse product ``X @ W.T`` for all targets and one gradient product for
all of them, so 100 targets cost far less than 100 models::

    from bidlab.models.glm import GLM, glm_sweep, best_config

    clf = GLM("softmax", lrate=0.5, l2=1e-6, n_passes=5).fit(X, y)       # scikit-learn style
    clf.predict(X_test); clf.predict_proba(X_test); clf.score(X_test, y_test)
    clf.n_iter_, clf.loss_curve_                # passes made, mean training loss per pass

    many = GLM("logistic").fit(X, Y)            # Y: n x 100 binary, 100 models, one pass

    sweep = glm_sweep("softmax", lrate=[0.1, 0.3, 1, 3], l2=[0, 1e-6, 1e-5, 1e-4]).fit(X, y)
    best = best_config(sweep, X_val, y_val)     # best.lrate, best.l2, best.score, best.model

    lrn = GLM("logistic").learner(X, Y)         # live: lrn.start(); lrn.opts.lrate = 0.05

One engine: ``fit``, ``partial_fit`` and ``learner`` all train the same
:class:`~bidlab.models.glm.model.GLMModel` (``model_``) with the same updater
(:class:`bidlab.learn.ADAGrad` or ``Grad``, ``updater_``) and L1 / L2 mixins (``mixins_``)
through a :class:`bidlab.learn.Learner`: ``fit`` runs it to completion in the calling
thread, ``learner`` hands it to you. Scikit-learn conventions: ``__init__`` only stores
parameters (checked in ``fit`` against ``PARAMS``), learned state ends in ``_``, ``fit``
returns self; ``clone``, ``Pipeline`` and ``GridSearchCV`` work; pandas DataFrames give
``feature_names_in_``; float64 data trains a float64 model unless ``dtype`` says otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from bidlab.learn import Grad, L1Regularizer, L2Regularizer, Learner
from bidlab.learn.model import register_model
from bidlab.learn.options import Option
from bidlab.models.base import BidlabEstimator, param_row
from bidlab.models.glm.engine import UPDATER_CHOICES, GLMEngine
from bidlab.models.glm.inputs import GLMInputs
from bidlab.models.glm.links import CLASSIFIER_LINKS, LINKS
from bidlab.models.glm.live_fit import fit_learner, through_fit_maps
from bidlab.models.glm.params import (
    batch_ok,
    class_weight_ok,
    dtype_ok,
    link_ok,
    per_target,
    rate_ok,
    targmap_ok,
)
from bidlab.models.glm.predict import GLMPredictions
from bidlab.models.glm.standardize import (
    Scaling,
    choose_scaling,
    dense_input,
    standardize_ok,
)
from bidlab.models.glm.sweep import SweepResult, best_config, sweep_params
from bidlab.models.glm.target_scale import target_scale
from bidlab.models.glm.weights import GLMWeights
from bidlab.models.sk_params import COMMON
from bidlab.models.validation import RANDOM_STATE

__all__ = ["GLM", "SweepResult", "best_config", "glm_sweep"]

class GLM(GLMInputs, GLMEngine, GLMPredictions, GLMWeights, BidlabEstimator):
    """A generalized linear model over one or many targets, trained by minibatch SGD.

    Parameters
    ----------
    link
        ``"linear"``, ``"logistic"``, ``"softmax"`` or ``"svm"``, or a list with one
        link per model target (targets may mix links).
    lrate
        learning rate: ``"auto"`` (the default) picks one per model target from
        :data:`~bidlab.models.glm.auto_rate.RATE_GRID` by a one-pass pilot on an
        eighth of the rows, all candidates trained side by side, then (``fit``) races
        the pick and larger rates through the first pass and continues the winner
        (reported as ``lrate_``); or a number, or one per model target (a sweep). Rates are large
        on purpose: ``average`` takes out the noise they leave.
    l1, l2
        L1 / L2 penalty weights (on the mean loss: ``l2 / 2 * |w|^2``), a number
        or one per target. The default ``l2=1e-4`` is scikit-learn's ``SGDClassifier``
        ``alpha``: without it, many passes over sparse data with rare features grow
        their weights until held-out log loss suffers.
    targmap
        which column of ``Y`` each model target learns; ``[0] * 32`` trains 32
        copies of target 0 (e.g. with 32 different ``lrate`` / ``l2``). None: one model
        target per column of ``Y``.
    updater
        ``"adagrad"`` (per-weight step sizes; the default) or ``"grad"`` (plain).
    batch_size
        rows per minibatch (at most the number of samples), or ``"auto"`` (the
        default): 500, or on fewer than 8,000 training rows a 16th of them, so that a
        pass makes at least 16 steps (few steps a pass leave a small data set
        under-trained after ``n_passes``).
    n_passes
        passes over the data in ``fit``, at most (see ``tol``).
    tol
        ``fit`` stops at the first pass that lowers the held-out loss (the mean over
        the targets of each one's mean loss per row) by less than ``tol`` below the
        best so far, and keeps the model with the least held-out loss
        (:mod:`~bidlab.models.glm.stopping`); None: every ``n_passes`` pass trains, on
        every row. Checked when ``n_passes`` >= 3 and at least 50 rows are held out.
    validation_fraction
        the share of the rows ``fit`` holds out of training to check ``tol`` on (a
        seeded sample; ``random_state``).
    standardize
        ``"auto"`` (the default): ``fit`` trains on dense features scaled to unit
        variance (and centred unless mostly zero), then folds the scaling into the
        weights, so everything after ``fit`` takes the features as given; sparse input is
        used as given. True: sparse input scaled too; False: never
        (:mod:`~bidlab.models.glm.standardize`). ``l1`` / ``l2`` then apply to the
        standardised features' weights. Unless False, a linear target of large spread trains
        on its values over their deviation (:mod:`~bidlab.models.glm.target_scale`; an L2
        fit's solution is unchanged). ``learner()`` and a first ``partial_fit`` do not
        scale (a later one continues through ``fit``'s map); ``fit_learner()`` does.
    average
        the last fraction of ``fit``'s updates whose iterates are averaged into
        the final model (Polyak-Ruppert averaging; 0: keep the last iterate). One
        iterate in ``average_every_`` is added, so that averaging costs about a tenth
        of the run on wide sparse data. ``partial_fit`` does not average.
    shuffle
        visit the rows in a random order (drawn once, seeded by
        ``random_state``); ``partial_fit`` keeps the given order.
    random_state
        seed for the shuffle (None, an int or a numpy random generator).
    dtype
        None / ``"auto"`` (float64 data trains a float64 model, anything else
        float32), ``float32`` or ``float64``.
    device
        ``"cpu"`` (numpy/numba) or ``"gpu"`` (CuPy; needs ``bidlab[gpu]``).
    class_weight
        for a classifier with one data target: None, ``"balanced"`` (class
        c weighs n / (n_classes * count of c)) or a dict {label: weight}; multiplies
        ``sample_weight``. ``partial_fit`` takes a dict only.
    warm_start
        a fitted GLM's ``fit`` continues from its weights (and the updater's
        state) instead of starting again.
    n_jobs
        CPU threads of the kernels in fit and predict, through threadpoolctl
        (None: as the process is set; -1: every core).
    verbose
        0 silent, 1 a progress bar with the pass summaries, 2 a line per pass (on
        stderr).

    Notes
    -----

    Learned attributes: ``coef_`` (targets' columns x features, like scikit-learn's),
    ``intercept_``, ``classes_`` (one target: its labels; several binary targets with the
    same two labels, a multilabel GLM (``multilabel_`` True): those labels; otherwise a list
    with one array per target),
    ``n_features_in_``, ``feature_names_in_`` (DataFrame input), ``scaling_`` (the
    features' ``mean`` and ``scale`` ``fit`` trained through, see ``standardize``; None:
    as given), ``target_scale_`` (each target column's divisor in ``fit``, or None),
    ``n_targets_``, ``lrate_``
    (the learning rates trained with: one, or one per model target),
    ``n_steps_``, ``average_every_``, ``n_iter_`` (passes over the data, adding up over
    warm-started fits and partial fits), ``validation_loss_curve_`` (``fit``'s held-out
    loss after each pass but a first-pass rate race, summed over targets; empty when
    ``tol`` was not checked),
    ``loss_curve_`` (the mean training loss of each of
    those passes, summed over targets; CPU only: on a GPU no training loss is computed,
    as that would wait for the device every minibatch); the engine ``model_``,
    ``updater_`` and ``mixins_``.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import GLM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 4))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = GLM("logistic", n_passes=5, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    FIT_ONLY = ("tol", "validation_fraction")  # fit only
    PARAMS = (
        Option("link", str, "logistic", "the link of every target, or one per target",
               test=link_ok,
               text=f"one of {list(LINKS)} (or a list of them, one per target)"),
        param_row(Grad, "lrate", default="auto", doc="learning rate, one or one per model "
                  "target, or 'auto': chosen by a short pilot (``lrate_``)", test=rate_ok,
                  text=per_target("'auto' or a float > 0")),
        param_row(L1Regularizer, "l1", doc="L1 penalty weight, one or one per model target",
                  text=per_target("a float >= 0")),
        param_row(L2Regularizer, "l2", default=1e-4, doc="L2 penalty weight, one or one per "
                  "model target", text=per_target("a float >= 0")),
        Option("targmap", int, None, "the data target column each model target learns",
               none_ok=True, test=targmap_ok,
               text="None or a 1-D sequence of data target columns (ints >= 0)"),
        Option("updater", str, "adagrad", "how the weights move",
               choices=UPDATER_CHOICES),
        Option("batch_size", int, "auto", "rows per minibatch ('auto': 500, or a 16th of "
               "fewer than 8,000 rows)", test=batch_ok, text="'auto' or an int >= 1"),
        param_row(Learner, "n_passes", doc="passes over the data in fit (at most: tol)"),
        Option("tol", float, 1e-4, "fit stops when a pass lowers the held-out loss per "
               "target by less than tol (None: every pass)", low=0.0, none_ok=True),
        Option("validation_fraction", float, 0.1, "the rows fit holds out to check tol on",
               low=0.0, high=1.0, low_open=True, high_open=True),
        Option("standardize", str, "auto", "fit trains on standardised features ('auto': "
               "dense input)", test=standardize_ok, text="'auto', True or False"),
        Option("average", float, 0.5, "the last fraction of fit's updates averaged into "
               "the final model (0: the last iterate)", low=0.0, high=1.0),
        Option("shuffle", bool, True, "train on the rows in a random order"),
        dataclasses.replace(RANDOM_STATE, default=None, doc="seed of the shuffle"),
        Option("dtype", str, None, "model dtype (None/'auto': float64 data stays float64, "
               "else float32)", none_ok=True, test=dtype_ok,
               text="None, 'auto', float32 or float64"),
        Option("device", str, "cpu", "where the model trains", choices=("cpu", "gpu")),
        Option("class_weight", str, None, "weights of the classes", none_ok=True,
               test=class_weight_ok, text="None, 'balanced' or a dict {label: weight >= 0}"),
        *COMMON,
    )

    def __init__(
        self,
        link: str | list[str] = "logistic",
        *,
        lrate: Any = "auto",
        l1: Any = 0.0,
        l2: Any = 1e-4,
        targmap: Any = None,
        updater: str = "adagrad",
        batch_size: int | str = "auto",
        n_passes: int = 10,
        tol: float | None = 1e-4,
        validation_fraction: float = 0.1,
        standardize: bool | str = "auto",
        average: float = 0.5,
        shuffle: bool = True,
        random_state: Any = None,
        dtype: Any = None,
        device: str = "cpu",
        class_weight: Any = None,
        warm_start: bool = False,
        n_jobs: int | None = None,
        verbose: int = 0,
    ) -> None:
        self._keep_params(locals())

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import ClassifierTags, RegressorTags

        tags = super().__sklearn_tags__()
        if self._is_classifier():
            tags.estimator_type = "classifier"
            # logistic and svm targets take two classes; softmax any number
            tags.classifier_tags = ClassifierTags(
                multi_class=all(lk == "softmax" for lk in self._links()))
        elif self._is_regressor():
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        tags.target_tags.multi_output = True  # Y with several columns: one target each
        return tags

    # -- training -------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> GLM:
        """Train for ``n_passes`` passes over ``X`` (n x d) and ``y``, fewer when the
        held-out loss stops improving (``tol``): from scratch, or with ``warm_start`` on a
        fitted GLM, from its weights (then every pass trains, on every row).

        ``y``: length-n labels / values, or n x q with one column per data target.
        ``sample_weight``: one weight >= 0 per row; the loss is the weighted mean over
        all rows (a minibatch's gradient: its rows' weighted sum / (rows x mean weight)).
        """
        self._validate_params()
        rates = self._warm_rates()  # None: start over
        warm = rates is not None
        dense = dense_input(X)
        Xh = self._host_features(X, reset=not warm)
        Y2, y_1d = self._targets_2d(y, Xh.shape[0])
        w = self._weights(sample_weight, Xh)
        if warm:
            self._check_target_columns(Y2)
        else:
            self._init_engine(Xh, Y2, y_1d)
        w = self._class_weighted(w, Y2)
        scaling = (Scaling.from_dict(self.__dict__.get("scaling_")) if warm
                   else choose_scaling(Xh, self.standardize, dense, w))
        X = self._on_device(Xh if scaling is None else scaling.apply(Xh))
        self.scaling_ = None if scaling is None else scaling.as_dict()
        tscale = target_scale(self, Y2, w, warm)  # linear targets' values on the unit scale
        Y2 = Y2 if tscale is None else tscale.apply(Y2)
        if scaling is not None and warm:
            scaling.to_standardized(self.model_, self.updater_)
        if tscale is not None and warm:
            tscale.turn(self, forward=False)
        try:
            if not warm:
                X, Y2, w, held = self._hold_out(X, Y2, w)
                self._choose_rates(X, Y2, w)
                self._fit_passes(X, Y2, w, held)
            else:
                self._set_rates(rates)
                self.validation_loss_curve_ = []
                self._run(X, Y2, w, shuffle=self.shuffle, n_passes=self.n_passes,
                          average=True)
        finally:
            if scaling is not None:
                scaling.to_original(self.model_, self.updater_)
            if tscale is not None:
                tscale.turn(self, forward=True)
        return self

    def partial_fit(self, X: Any, y: Any, classes: Any = None,
                    sample_weight: Any = None) -> GLM:
        """One pass over (X, y) in the given order, continuing from the current weights.

        On the first call ``classes`` lists every label of a classifier target (one array
        for all, or one per data column), since one chunk may not show them all; labels
        outside it raise.
        """
        first = not hasattr(self, "model_")
        if first:
            self._validate_params()
        X = self._host_features(X, reset=first)
        Y2, y_1d = self._targets_2d(y, X.shape[0])
        w = self._weights(sample_weight, X)
        if first:
            if classes is None and any(lk in CLASSIFIER_LINKS for lk in self._links()):
                raise ValueError(
                    "GLM.partial_fit needs classes= on the first call for classifier links "
                    "(every label, since one chunk may miss some), e.g. classes=np.arange(20)"
                )
            self._init_engine(X, Y2, y_1d, classes)
        else:
            self._check_target_columns(Y2)
            self._check_same_classes(classes)
        w = self._class_weighted(w, Y2, partial=True)
        with through_fit_maps(self, X, Y2) as (X, Y2):  # fit's scaling, if any
            if first:
                self._choose_rates(X, Y2, w)
            self._run(X, Y2, w, shuffle=False, n_passes=1, average=False)
        return self

    # -- live training --------------------------------------------------------------------
    def learner(self, X: Any, y: Any = None, **options: Any) -> Learner:
        """A :class:`bidlab.learn.Learner` training this GLM on (X, y), for live control.

        It trains the estimator's own engine (``model_``, ``updater_``, ``mixins_``), made
        fresh here as ``fit`` makes it, so ``predict`` / ``score`` work during and after
        training and what you steer is what ``fit`` runs. ``start()`` trains in a background
        thread (``pause`` / ``resume`` / ``stop``, live ``lrn.opts.lrate = ...``, observers,
        checkpoints); ``fit()`` blocks. The model keeps one row per weight column, grouped
        by target, so ``lrate`` / ``l1`` / ``l2`` vectors are per target (expanded over a
        softmax target's rows), here and live: ``lrn.set(lrate=[...])`` with one value per
        target (per configuration of a sweep), or one per weight column.

        ``options``: any learner option (``n_passes``, default this GLM's; ``val_every``,
        ``checkpoint``, ...), ``batch_size`` (default this GLM's) and ``sample_weight``. A
        run of ``n_passes`` averages its last iterates as ``fit`` does (``average``): the
        mean lands when the run completes its passes, while a stopped run keeps its last
        iterate and the running sum, which resuming goes on adding to (checkpoints hold
        it); ``average_from=-1`` turns averaging off, e.g. for open-ended live training.
        """
        self._validate_params()
        X = self._features(X, reset=True)
        Y2, y_1d = self._targets_2d(y, X.shape[0])
        w = self._weights(options.pop("sample_weight", None), X, options.get("comm"))
        self._init_engine(X, Y2, y_1d)
        w = self._class_weighted(w, Y2)
        self._choose_rates(X, Y2, w, options.get("comm"))
        batch_size = self._batch_rows(X.shape[0], options.pop("batch_size", self.batch_size))
        options.setdefault("n_passes", self.n_passes)
        if "average_from" not in options:
            options.update(self._averaging(X, batch_size, int(options["n_passes"])))
        return self._make_learner(X, Y2, w, shuffle=self.shuffle, batch_size=batch_size,
                                  live=True, **options)

    def fit_learner(self, X: Any, y: Any = None, **options: Any
                    ) -> tuple[Learner, Callable[[], None]]:
        """:meth:`learner` on the features ``fit`` trains on (``standardize``), and the
        step to call once its training is over: it folds the scaling into the weights
        (:func:`~bidlab.models.glm.live_fit.fit_learner`). ``bidlab train`` runs this."""
        return fit_learner(self, X, y, options)

    @classmethod
    def _upgrade_state(cls, state: dict[str, Any]) -> None:
        super()._upgrade_state(state)
        # files written before the counts followed the model kept them on the estimator
        passes, steps = state.pop("n_iter_", None), state.pop("n_steps_", None)
        curve = state.pop("loss_curve_", None)
        model = state.get("model_")
        if model is not None and passes is not None:
            model.passes_done = int(passes or 0)
            model.steps_done = int(steps or 0)
            model.pass_losses = [float(v) for v in curve or ()]

    def _facts(self) -> list[tuple[str, Any]]:
        facts: list[tuple[str, Any]] = [
            ("coef_", "{} x {}".format(*self.model_.modelmats[0].shape)),
            ("n_targets_", self.n_targets_), ("n_iter_", self.n_iter_),
            ("n_steps_", self.n_steps_)]
        curve = self.loss_curve_
        if curve:
            facts.append(("final training loss", curve[-1]))
        return facts


register_model("glm", GLM)


# ------------------------------------------------------------------------------ sweeps
def glm_sweep(
    link: str = "logistic",
    *,
    lrate: Any = (0.3,),
    l1: Any = (0.0,),
    l2: Any = (1e-4,),
    n_targets: int = 1,
    **params: Any,
) -> GLM:
    """A GLM that trains every (lrate, l1, l2) combination for each data target in one pass.

    The grid is replicated through the target map, so ``fit`` shares each sparse product
    among all configurations. ``n_targets``: data target columns (1 for a label vector).
    Pick the winner with :func:`best_config`. A left-out ``l1`` / ``l2`` is ``GLM``'s
    default (0.0 / 1e-4); a left-out ``lrate`` is the single rate 0.3, not ``GLM``'s
    ``"auto"``. ``lrate="auto"`` sweeps ``l1`` x ``l2`` only and lets ``fit`` pick the rate
    as ``GLM(lrate="auto")`` does (the pilot and the first-pass race; targets of one link
    share a rate, so every configuration trains with the one picked, ``lrate_``, which
    :func:`best_config` reports).

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import best_config, glm_sweep
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 4))
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> sweep = glm_sweep("logistic", lrate=[0.1, 1.0], l2=[0.0, 1e-3], n_passes=3,
    ...                   random_state=0).fit(X, y)
    >>> best = best_config(sweep, X, y)
    >>> len(best.table())
    4
    """
    return GLM(link, **sweep_params(lrate, l1, l2, n_targets), **params)
