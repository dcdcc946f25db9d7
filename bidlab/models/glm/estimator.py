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

import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils._available_if import available_if
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

import bidlab as bl
from bidlab import backend
from bidlab.learn import UPDATERS, L1Regularizer, L2Regularizer, Learner, MemorySource
from bidlab.learn.model import register_model
from bidlab.learn.options import Option
from bidlab.models.base import BidlabEstimator
from bidlab.models.glm.links import CLASSIFIER_LINKS, LINKS, Layout, LinkStep
from bidlab.models.glm.model import GLMModel
from bidlab.models.glm.params import (
    dtype_ok,
    first_bad,
    link_ok,
    non_negative,
    per_target,
    positive,
    targmap_ok,
    unwrap,
)
from bidlab.models.glm.sweep import SweepResult, best_config, sweep_params
from bidlab.models.glm.targets import Targets, as_targets_2d, class_index, encode, resolve
from bidlab.models.validation import SEED_TEXT, seed_from, seed_ok

__all__ = ["GLM", "SweepResult", "best_config", "glm_sweep"]

_PREDICT_CHUNK = 1 << 22  # margins are computed this many entries (rows x columns) at a time
_UPDATER_CHOICES = ("adagrad", "grad")  # names in bidlab.learn.updaters.UPDATERS


def _n_steps(n_rows: int, batch: int, n_passes: int) -> int:
    """Minibatch steps in ``n_passes`` over ``n_rows`` (the last minibatch may be short)."""
    return n_passes * -(-n_rows // batch)


# ------------------------------------------------------------------------------ estimator
def _shared_binary_labels(links: Any, classes: list[Any]) -> np.ndarray | None:
    """The two labels all targets share when every target is a binary classifier (a
    logistic, svm or 2-class softmax link): the GLM is then a multilabel classifier."""
    if any(lk == "linear" for lk in links) or any(c is None or len(c) != 2 for c in classes):
        return None
    first = classes[0]
    same = all(c.dtype == first.dtype and np.array_equal(c, first) for c in classes[1:])
    return first if same else None


class GLM(BidlabEstimator):
    """A generalized linear model over one or many targets, trained by minibatch SGD.

    Args:
        link: ``"linear"``, ``"logistic"``, ``"softmax"`` or ``"svm"``, or a list with one
            link per model target (targets may mix links).
        lrate: learning rate: a number, or one per model target (a sweep). The default
            0.3 is large on purpose: ``average`` takes out the noise it leaves.
        l1, l2: L1 / L2 penalty weights (on the mean loss: ``l2 / 2 * |w|^2``), a number
            or one per target. The default ``l2=1e-4`` is scikit-learn's ``SGDClassifier``
            ``alpha``: without it, many passes over sparse data with rare features grow
            their weights until held-out log loss suffers.
        targmap: which column of ``Y`` each model target learns; ``[0] * 32`` trains 32
            copies of target 0 (e.g. with 32 different ``lrate`` / ``l2``). None: one model
            target per column of ``Y``.
        updater: ``"adagrad"`` (per-weight step sizes; the default) or ``"grad"`` (plain).
        batch_size: rows per minibatch (at most the number of samples).
        n_passes: passes over the data in ``fit``.
        average: the last fraction of ``fit``'s updates whose iterates are averaged into
            the final model (Polyak-Ruppert averaging; 0: keep the last iterate). One
            iterate in ``average_every_`` is added, so that averaging costs about a tenth
            of the run on wide sparse data. ``partial_fit`` does not average.
        shuffle: visit the rows in a random order (drawn once, seeded by
            ``random_state``); ``partial_fit`` keeps the given order.
        random_state: seed for the shuffle (None, an int or a numpy random generator).
        dtype: None / ``"auto"`` (float64 data trains a float64 model, anything else
            float32), ``float32`` or ``float64``.
        device: ``"cpu"`` (numpy/numba) or ``"gpu"`` (CuPy; needs ``bidlab[gpu]``).

    Learned attributes: ``coef_`` (targets' columns x features, like scikit-learn's),
    ``intercept_``, ``classes_`` (one target: its labels; several binary targets with the
    same two labels, a multilabel GLM (``multilabel_`` True): those labels; otherwise a list
    with one array per target),
    ``n_features_in_``, ``feature_names_in_`` (DataFrame input), ``n_targets_``,
    ``n_steps_``, ``average_every_``; the engine ``model_``, ``updater_`` and ``mixins_``.
    """

    PARAMS = (
        Option("link", str, "logistic", "the link of every target, or one per target",
               test=link_ok,
               text=f"one of {list(LINKS)} (or a list of them, one per target)"),
        Option("lrate", float, 0.3, "learning rate, one or one per model target",
               test=positive, text=per_target("a float > 0")),
        Option("l1", float, 0.0, "L1 penalty weight, one or one per model target",
               test=non_negative, text=per_target("a float >= 0")),
        Option("l2", float, 1e-4, "L2 penalty weight, one or one per model target",
               test=non_negative, text=per_target("a float >= 0")),
        Option("targmap", int, None, "the data target column each model target learns",
               none_ok=True, test=targmap_ok,
               text="None or a 1-D sequence of data target columns (ints >= 0)"),
        Option("updater", str, "adagrad", "how the weights move",
               choices=_UPDATER_CHOICES),
        Option("batch_size", int, 500, "rows per minibatch", low=1),
        Option("n_passes", int, 10, "passes over the data in fit", low=1, high=10**9),
        Option("average", float, 0.5, "the last fraction of fit's updates averaged into "
               "the final model (0: the last iterate)", low=0.0, high=1.0),
        Option("shuffle", bool, True, "train on the rows in a random order"),
        Option("random_state", int, None, "seed of the shuffle", none_ok=True,
               test=seed_ok, text=SEED_TEXT),
        Option("dtype", str, None, "model dtype (None/'auto': float64 data stays float64, "
               "else float32)", none_ok=True, test=dtype_ok,
               text="None, 'auto', float32 or float64"),
        Option("device", str, "cpu", "where the model trains", choices=("cpu", "gpu")),
    )

    def __init__(
        self,
        link: str | list[str] = "logistic",
        *,
        lrate: Any = 0.3,
        l1: Any = 0.0,
        l2: Any = 1e-4,
        targmap: Any = None,
        updater: str = "adagrad",
        batch_size: int = 500,
        n_passes: int = 10,
        average: float = 0.5,
        shuffle: bool = True,
        random_state: Any = None,
        dtype: Any = None,
        device: str = "cpu",
    ) -> None:
        self.link = link
        self.lrate = lrate
        self.l1 = l1
        self.l2 = l2
        self.targmap = targmap
        self.updater = updater
        self.batch_size = batch_size
        self.n_passes = n_passes
        self.average = average
        self.shuffle = shuffle
        self.random_state = random_state
        self.dtype = dtype
        self.device = device

    # -- scikit-learn plumbing ------------------------------------------------------------
    def _links(self) -> list[str]:
        return [self.link] if isinstance(self.link, str) else list(self.link)

    def _is_classifier(self) -> bool:
        links = self._links()
        return bool(links) and all(lk in CLASSIFIER_LINKS for lk in links)

    def _is_regressor(self) -> bool:
        links = self._links()
        return bool(links) and all(lk == "linear" for lk in links)

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

    def _xp(self) -> Any:
        return np if self.device == "cpu" else backend.cupy()

    def _model_dtype(self, X: Any) -> np.dtype:
        if self.dtype is None or (isinstance(self.dtype, str) and self.dtype == "auto"):
            return np.dtype(np.float64 if X.dtype == np.float64 else np.float32)
        return np.dtype(self.dtype)

    def _features(self, X: Any, reset: bool) -> Any:
        """X validated (``n_features_in_``, ``feature_names_in_``) as a canonical CSR
        matrix of the model dtype on the model's device."""
        X = unwrap(X)
        self._check_structure(X)
        X = validate_data(self, X, accept_sparse="csr", dtype="numeric",
                          ensure_all_finite=False, reset=reset)
        dtype = self._model_dtype(X) if reset else self.dtype_
        if reset:
            self.dtype_ = dtype
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=dtype)
            if not X.has_canonical_format:
                X = X.copy()
                X.sum_duplicates()
        else:
            X = sp.csr_matrix(np.asarray(X, dtype=dtype))
        bad = ~np.isfinite(X.data)
        if bad.any():
            r, c = first_bad(X, bad)
            raise ValueError(f"GLM: X contains NaN or infinity (first at row {r}, column "
                             f"{c}): remove or impute those values first")
        xp = self._xp()
        return X if xp is np else backend.to_device(X)

    def _targets_2d(self, y: Any, n: int) -> tuple[np.ndarray, bool]:
        if y is None:
            raise ValueError("GLM requires y to be passed, but the target y is None: give "
                             "one label or value per sample (or one column per target)")
        return as_targets_2d(y, n, "GLM")

    def _weights(self, sample_weight: Any, X: Any) -> np.ndarray | None:
        if sample_weight is None:
            return None
        return _check_sample_weight(sample_weight, X, dtype=self.dtype_,
                                    ensure_non_negative=True)

    # -- building the engine ---------------------------------------------------------------
    def _per_target_values(self, name: str, K: int) -> Any:
        """A parameter as one number, or one value per model target (a list)."""
        v = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1)
        if v.size == 1:
            return float(v[0])
        if v.size != K:
            raise ValueError(f"{name} has {v.size} values but the model has {K} targets: give "
                             f"one number or one value per target ({K})")
        return float(v[0]) if np.all(v == v[0]) else v.tolist()

    def _init_engine(self, X: Any, Y2: np.ndarray, y_1d: bool, classes: Any = None) -> None:
        """A fresh model, updater and mixins for data like (X, Y2)."""
        t = resolve(self.link, self.targmap, Y2, y_1d, "GLM", classes)
        layout = Layout(t.links, t.widths())
        rates = {n: self._per_target_values(n, t.K) for n in ("lrate", "l1", "l2")}
        self.targets_ = t
        self.layout_ = layout
        self.model_ = GLMModel(layout, t.enc_col)
        self.updater_ = UPDATERS[self.updater](lrate=rates["lrate"])
        self.mixins_ = [L1Regularizer(mats=[0], l1=rates["l1"]),
                        L2Regularizer(mats=[0], l2=rates["l2"])]
        self.n_targets_ = t.K
        self.n_steps_ = 0
        self.multilabel_ = False
        if t.K == 1:
            if t.classes[t.data_col[0]] is not None:
                self.classes_ = t.classes[t.data_col[0]]
            elif hasattr(self, "classes_"):
                del self.classes_
        else:
            per_target = [t.classes[c] for c in t.data_col]
            shared = _shared_binary_labels(t.links, per_target)
            self.multilabel_ = shared is not None
            self.classes_ = shared if shared is not None else per_target

    def _seed(self) -> int:
        seed = seed_from(self.random_state)
        return int(check_random_state(None).randint(2**31 - 1)) if seed is None else seed

    def _make_learner(self, X: Any, Y2: np.ndarray, w: np.ndarray | None, *, shuffle: bool,
                      batch_size: int, **options: Any) -> Learner:
        """A Learner training ``model_`` on (X, Y2[, w]) with ``updater_`` and ``mixins_``."""
        xp = self._xp()
        Ye = encode(self.targets_, Y2, self.dtype_)
        if shuffle:  # one seeded order for all passes; minibatches are then row ranges
            perm = np.random.default_rng(self._seed()).permutation(X.shape[0])
            X = X[perm] if xp is np else X[xp.asarray(perm)]
            Ye = Ye[perm]
            w = None if w is None else w[perm]
        mats = [X, xp.asarray(Ye)]
        if w is not None:
            mats.append(xp.asarray(np.asarray(w, dtype=self.dtype_).reshape(-1, 1)))
        source = MemorySource(*mats, batch_size=min(int(batch_size), X.shape[0]))
        return Learner(self.model_, source, self.updater_, self.mixins_, name="glm",
                       **options)

    def _averaging(self, X: Any, batch_size: int, n_passes: int) -> dict[str, int]:
        """The updater's averaging options for a run of ``n_passes`` over ``X``: average
        the last ``average`` fraction of its updates, one in ``average_every_``.

        Adding an iterate is a pass over the model (features x weight columns, after the
        deferred L1 / L2 terms land); a step costs about its minibatch's nonzeros x weight
        columns, and measured per element the two cost about the same (d = 300,000, 100
        targets: 87 ms to add an iterate, 6.5 ms a step of 20,000 nonzeros). One iterate in
        ``ceil(5 * features / nonzeros per minibatch)`` keeps averaging the last half of a
        run near a tenth of its time; narrow or dense data averages every step.
        """
        batch = min(int(batch_size), X.shape[0])
        steps = _n_steps(X.shape[0], batch, n_passes)
        n_avg = math.ceil(float(self.average) * steps)
        nnz_row = X.nnz / max(X.shape[0], 1) if hasattr(X, "nnz") else X.shape[1]
        every = max(1, math.ceil(5.0 * X.shape[1] / max(batch * nnz_row, 1.0)))
        self.average_every_ = every
        return {"average_from": steps - n_avg if n_avg > 0 else -1, "average_every": every}

    def _run(self, X: Any, Y2: np.ndarray, w: np.ndarray | None, *, shuffle: bool,
             n_passes: int, average: bool) -> None:
        """Train in this thread: ``n_passes`` over the rows, every minibatch trains; with
        ``average``, the final model is the mean of the last iterates (see ``average``)."""
        steps = _n_steps(X.shape[0], min(self.batch_size, X.shape[0]), n_passes)
        avg = (self._averaging(X, self.batch_size, n_passes) if average
               else {"average_from": -1})
        lrn = self._make_learner(X, Y2, w, shuffle=shuffle, batch_size=self.batch_size,
                                 n_passes=n_passes, val_every=0, max_steps=None,
                                 checkpoint=None, train_loss=False, mixin_kpis=False,
                                 record_size=max(1, min(steps, 100_000)), **avg)
        lrn.fit(progress=None)
        self.n_steps_ += lrn.step

    # -- training -------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> GLM:
        """Train from scratch for ``n_passes`` passes over ``X`` (n x d) and ``y``.

        ``y``: length-n labels / values, or n x q with one column per data target.
        ``sample_weight``: one weight >= 0 per row; a minibatch's gradient is the weighted
        mean of its rows' gradients.
        """
        self._validate_params()
        X = self._features(X, reset=True)
        Y2, y_1d = self._targets_2d(y, X.shape[0])
        w = self._weights(sample_weight, X)
        self._init_engine(X, Y2, y_1d)
        self._run(X, Y2, w, shuffle=self.shuffle, n_passes=self.n_passes, average=True)
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
        X = self._features(X, reset=first)
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
        w = self._weights(options.pop("sample_weight", None), X)
        self._init_engine(X, Y2, y_1d)
        batch_size = options.pop("batch_size", self.batch_size)
        options.setdefault("n_passes", self.n_passes)
        if "average_from" not in options:
            options.update(self._averaging(X, batch_size, int(options["n_passes"])))
        return self._make_learner(X, Y2, w, shuffle=self.shuffle, batch_size=batch_size,
                                  **options).init()

    # -- predicting -----------------------------------------------------------------------
    def _margins(self, X: Any, transform: bool = False) -> np.ndarray:
        """X @ coef_.T + intercept_ on the host (n x T), in row chunks; link-transformed
        (probabilities) when asked."""
        check_is_fitted(self, "model_")
        X = self._features(X, reset=False)
        T = self.layout_.T
        out = np.empty((X.shape[0], T), dtype=self.dtype_)
        step = max(1, _PREDICT_CHUNK // max(T, 1))
        model = self.model_
        for a in range(0, X.shape[0], step):
            chunk = bl.SMat(X[a : a + step])
            res = model.predictions(chunk) if transform else model.margins(chunk).data
            out[a : a + step] = backend.to_host(res)
        return out

    def _has_margins(self) -> bool:
        if self._is_regressor():
            raise AttributeError("decision_function is for classifier links; a linear GLM's "
                                 "predictions are its margins (use predict)")
        return True

    @available_if(_has_margins)
    def decision_function(self, X: Any) -> np.ndarray:
        """Margins ``X @ coef_.T + intercept_``: (n,) for one binary target (for a 2-class
        softmax, class 1's margin minus class 0's); n x K, one binary margin per target, for
        a multilabel GLM (see ``multilabel_``); else n x T (every weight column)."""
        E = self._margins(X)
        if E.shape[1] == 1:
            return E[:, 0]
        if self.layout_.K == 1 and E.shape[1] == 2:
            return E[:, 1] - E[:, 0]
        if self.multilabel_:
            return np.column_stack([self._binary_margin(E, k) for k in range(self.layout_.K)])
        return E

    def _binary_margin(self, E: np.ndarray, k: int) -> np.ndarray:
        e = E[:, self.layout_.columns(k)]
        return e[:, 0] if e.shape[1] == 1 else e[:, 1] - e[:, 0]

    def _predict_columns(self, E: np.ndarray) -> list[np.ndarray]:
        t, lay = self.targets_, self.layout_
        cols = []
        for k, (lk, c) in enumerate(zip(t.links, t.data_col, strict=True)):
            e = E[:, lay.columns(k)]
            if lk == "linear":
                cols.append(e[:, 0])
            elif lk == "softmax":
                cols.append(t.classes[c][np.argmax(e, axis=1)])
            else:  # logistic and svm: the sign of the margin
                cols.append(t.classes[c][(e[:, 0] > 0).astype(np.int64)])
        return cols

    def predict(self, X: Any) -> np.ndarray:
        """Labels (classifier links) or values (linear): (n,) for one target, else n x K."""
        cols = self._predict_columns(self._margins(X))
        return cols[0] if len(cols) == 1 else np.column_stack(cols)

    def _has_proba(self) -> bool:
        other = [lk for lk in self._links() if lk not in ("logistic", "softmax")]
        if other:
            raise AttributeError(f"predict_proba needs logistic or softmax links; this GLM has "
                                 f"{other[0]!r} (use decision_function for its margins)")
        return True

    @available_if(_has_proba)
    def predict_proba(self, X: Any) -> np.ndarray | list[np.ndarray]:
        """Class probabilities: n x 2 (logistic) or n x C (softmax) for one target. For
        several: a multilabel GLM (every target binary with the same two labels, see
        ``multilabel_``) gives n x K, each target's probability of ``classes_[1]``
        (scikit-learn's multilabel form); otherwise a list with one array per target
        (scikit-learn's multi-output form)."""
        Pm = self._margins(X, transform=True)
        t, lay = self.targets_, self.layout_
        if self.multilabel_:
            return np.column_stack([Pm[:, lay.columns(k)][:, -1] for k in range(t.K)])
        out = []
        for k, lk in enumerate(t.links):
            p = Pm[:, lay.columns(k)]
            out.append(np.column_stack([1.0 - p[:, 0], p[:, 0]]) if lk == "logistic" else p)
        return out[0] if len(out) == 1 else out

    def score_targets(self, X: Any, y: Any) -> np.ndarray:
        """Per model target: accuracy (classifier links) or R^2 (linear), shape (K,)."""
        from sklearn.metrics import r2_score

        E = self._margins(X)
        Y2, _ = as_targets_2d(y, E.shape[0], "GLM")
        self._check_target_columns(Y2)
        preds = self._predict_columns(E)
        t = self.targets_
        scores = np.empty(t.K)
        for k, (lk, c) in enumerate(zip(t.links, t.data_col, strict=True)):
            if lk == "linear":
                scores[k] = r2_score(Y2[:, c].astype(np.float64), preds[k])
            else:
                what = f"Y column {c}" if t.q > 1 else "y"
                class_index(Y2[:, c], t.classes[c], what)  # unseen labels raise here
                scores[k] = float(np.mean(preds[k] == Y2[:, c]))
        return scores

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean over targets of accuracy (classifier links) or R^2 (linear); with
        ``sample_weight``, the weighted accuracy / R^2."""
        if sample_weight is None:
            return float(np.mean(self.score_targets(X, y)))
        from sklearn.metrics import accuracy_score, r2_score

        E = self._margins(X)
        Y2, _ = as_targets_2d(y, E.shape[0], "GLM")
        self._check_target_columns(Y2)
        t = self.targets_
        out = []
        for k, (lk, pred) in enumerate(zip(t.links, self._predict_columns(E), strict=True)):
            col = Y2[:, t.data_col[k]]
            if lk == "linear":
                out.append(r2_score(col.astype(np.float64), pred, sample_weight=sample_weight))
            else:
                out.append(accuracy_score(col, pred, sample_weight=sample_weight))
        return float(np.mean(out))

    def loss_targets(self, X: Any, y: Any) -> np.ndarray:
        """Per model target, the mean loss on (X, y): log loss for logistic / softmax,
        hinge for svm, half the squared error for linear. Shape (K,)."""
        E = self._margins(X)
        Y2, _ = as_targets_2d(y, E.shape[0], "GLM")
        self._check_target_columns(Y2)
        Ye = encode(self.targets_, Y2, E.dtype)[:, self.targets_.enc_col]
        loss = np.zeros((1, self.targets_.K), dtype=np.float64)
        step = max(1, _PREDICT_CHUNK // max(E.shape[1], 1))
        for a in range(0, E.shape[0], step):
            e, yy = E[a : a + step], np.ascontiguousarray(Ye[a : a + step])
            part = np.zeros((1, self.targets_.K), dtype=E.dtype)
            LinkStep(self.layout_, e.shape[0], E.dtype, np)(e, yy, part)
            loss += part
        return loss[0] / E.shape[0]

    def _check_target_columns(self, Y2: np.ndarray) -> None:
        if Y2.shape[1] != self.targets_.q:
            raise ValueError(
                f"Y has {Y2.shape[1]} target columns but GLM was fitted with {self.targets_.q}"
            )

    # -- learned weights ------------------------------------------------------------------
    @property
    def coef_(self) -> np.ndarray:
        """Weights as (weight columns x features): one row per linear / logistic / svm
        target, C rows per softmax target (scikit-learn's layout)."""
        check_is_fitted(self, "model_")
        return np.ascontiguousarray(self.model_.modelmats[0].numpy())

    @property
    def intercept_(self) -> np.ndarray:
        """Biases, one per weight column."""
        check_is_fitted(self, "model_")
        return self.model_.modelmats[1].numpy()[:, 0].copy()

    def select(self, k: int) -> GLM:
        """A fitted single-target GLM holding model target ``k``'s configuration and weights."""
        check_is_fitted(self, "model_")
        t = self.targets_
        if not 0 <= k < t.K:
            raise IndexError(f"target {k} out of range: this GLM has {t.K} model targets")

        def pick(v: Any) -> float:
            arr = np.asarray(v, dtype=np.float64)
            return float(arr) if arr.ndim == 0 else float(arr.reshape(-1)[k])

        lk, c = t.links[k], int(t.data_col[k])
        one = GLM(**{**self.get_params(deep=False), "link": lk, "targmap": None,
                         "lrate": pick(self.lrate), "l1": pick(self.l1), "l2": pick(self.l2)})
        fam = {"linear": "value", "logistic": "bin01", "svm": "pm1", "softmax": "class"}[lk]
        one.targets_ = Targets((lk,), np.zeros(1, np.int64), np.zeros(1, np.int64),
                               [(0, fam)], [t.classes[c]], 1, True)
        one.layout_ = Layout((lk,), (self.layout_.widths[k],))
        cols = self.layout_.columns(k)
        W, b = self.model_.modelmats
        one.model_ = GLMModel.from_weights(one.layout_, [0], W.data[cols], b.data[cols])
        one.updater_ = UPDATERS[self.updater](lrate=one.lrate)
        one.mixins_ = [L1Regularizer(mats=[0], l1=one.l1), L2Regularizer(mats=[0], l2=one.l2)]
        one.dtype_ = self.dtype_
        one.n_features_in_ = self.n_features_in_
        if hasattr(self, "feature_names_in_"):
            one.feature_names_in_ = self.feature_names_in_
        one.n_targets_ = 1
        one.multilabel_ = False
        one.n_steps_ = getattr(self, "n_steps_", 0)
        if t.classes[c] is not None:
            one.classes_ = t.classes[c]
        return one


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
    Pick the winner with :func:`best_config`. An axis left out keeps ``GLM``'s default.
    """
    return GLM(link, **sweep_params(lrate, l1, l2, n_targets), **params)
