"""``GLM``: generalized linear models with many targets trained in one pass.

Linear, logistic, softmax (multi-class) and svm (hinge) links; several targets at once,
each with its own link, learning rate and L1 / L2 weight; and a target map that
replicates one target many times, so one pass over the data trains a whole sweep of
configurations (BIDMach's ``targmap`` with column-vector ``lrate``). Every minibatch step
does *one* shared sparse product ``X @ W`` for all targets and one ``X.T @ R`` for all
gradients, so 100 targets cost far less than 100 models::

    from bidlab.models import GLM, glm_sweep, best_config

    clf = GLM("softmax", lrate=0.5, l2=1e-6, n_epochs=5).fit(X, y)       # scikit-learn style
    clf.predict(X_test); clf.predict_proba(X_test); clf.score(X_test, y_test)

    many = GLM("logistic").fit(X, Y)            # Y: n x 100 binary, 100 models, one pass

    sweep = glm_sweep("softmax", lrate=[0.1, 0.3, 1, 3], l2=[0, 1e-6, 1e-5, 1e-4]).fit(X, y)
    best = best_config(sweep, X_val, y_val)     # best.lrate, best.l2, best.score, best.model

    lrn = GLM("logistic").learner(X, Y)         # live: lrn.start(); lrn.opts.lrate = 0.05

Scikit-learn conventions: ``__init__`` only stores parameters (checked in ``fit`` against
one table), learned state ends in ``_``, ``fit`` returns self; ``clone``, ``Pipeline`` and
``GridSearchCV`` work. ``fit`` / ``partial_fit`` run the step of
:mod:`bidlab.models._glm_core` (fused ADAGrad); ``learner`` wraps the same link math as a
:class:`bidlab.learn.Model` (:mod:`bidlab.models._glm_model`) for the background Learner.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

import bidlab as bl
from bidlab import backend
from bidlab.models import _glm_params as P
from bidlab.models._glm_core import GLMCore, RowBatches, sgd_epochs
from bidlab.models._glm_data import as_features, check_n_features, device_xp
from bidlab.models._glm_links import CLASSIFIER_LINKS, LINKS, Layout, LinkStep
from bidlab.models._glm_targets import Targets, as_targets_2d, class_index, encode, resolve
from bidlab.models._glm_update import UPDATERS

__all__ = ["GLM", "SweepResult", "best_config", "glm_sweep"]


def _link_rule() -> P.Rule:
    def check(x: Any) -> bool:
        if isinstance(x, str):
            return x in LINKS
        return (
            isinstance(x, (list, tuple, np.ndarray))
            and len(x) >= 1
            and all(isinstance(v, str) and v in LINKS for v in x)
        )

    return (check, f"one of {list(LINKS)} (or a list of them, one per target)")


def _targmap_rule() -> P.Rule:
    def check(x: Any) -> bool:
        if x is None:
            return True
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError):
            return False
        return arr.ndim == 1 and arr.size >= 1 and arr.dtype.kind in "iu" and arr.min() >= 0

    return (check, "None or a 1-D sequence of data target columns (ints >= 0)")


_PARAMS: dict[str, P.Rule] = {
    "link": _link_rule(),
    "lrate": P.real_or_vector(0.0, strict=True),
    "l1": P.real_or_vector(0.0),
    "l2": P.real_or_vector(0.0),
    "targmap": _targmap_rule(),
    "updater": P.one_of(UPDATERS),
    "batch_size": P.int_at_least(1),
    "n_epochs": P.int_at_least(1),
    "shuffle": P.one_of([True, False]),
    "random_state": P.seed(),
    "dtype": (
        lambda x: _dtype_or_none(x) in (np.float32, np.float64),
        "float32 or float64",
    ),
    "device": P.one_of(["cpu", "gpu"]),
}

_PREDICT_CHUNK = 1 << 22  # margins are computed this many entries (rows x columns) at a time


def _dtype_or_none(x: Any) -> Any:
    try:
        return np.dtype(x).type
    except TypeError:
        return None


class GLM(BaseEstimator):
    """A generalized linear model over one or many targets, trained by minibatch SGD.

    Args:
        link: ``"linear"``, ``"logistic"``, ``"softmax"`` or ``"svm"``, or a list with one
            link per model target (targets may mix links).
        lrate: learning rate: a number, or one per model target (a sweep).
        l1, l2: L1 / L2 penalty weights (on the mean loss), a number or one per target.
        targmap: which column of ``Y`` each model target learns; ``[0] * 32`` trains 32
            copies of target 0 (e.g. with 32 different ``lrate`` / ``l2``). None: one model
            target per column of ``Y``.
        updater: ``"adagrad"`` (per-weight step sizes; the default) or ``"grad"`` (plain).
        batch_size: rows per minibatch.
        n_epochs: passes over the data in ``fit``.
        shuffle: permute the rows once (seeded by ``random_state``) before training.
        random_state: seed for the shuffle.
        dtype: float32 (default) or float64 weights and features.
        device: ``"cpu"`` (numpy/numba) or ``"gpu"`` (CuPy; needs ``bidlab[gpu]``).

    Learned attributes: ``coef_`` (targets' columns x features, like scikit-learn's),
    ``intercept_``, ``classes_`` (one target: its labels; several: a list),
    ``n_features_in_``, ``n_targets_``.
    """

    def __init__(
        self,
        link: str | list[str] = "logistic",
        *,
        lrate: Any = 0.1,
        l1: Any = 0.0,
        l2: Any = 0.0,
        targmap: Any = None,
        updater: str = "adagrad",
        batch_size: int = 500,
        n_epochs: int = 5,
        shuffle: bool = True,
        random_state: Any = None,
        dtype: Any = np.float32,
        device: str = "cpu",
    ) -> None:
        self.link = link
        self.lrate = lrate
        self.l1 = l1
        self.l2 = l2
        self.targmap = targmap
        self.updater = updater
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.dtype = dtype
        self.device = device

    # -- scikit-learn plumbing ------------------------------------------------------------
    def _links(self) -> list[str]:
        return [self.link] if isinstance(self.link, str) else list(self.link)

    def __sklearn_tags__(self):  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        from sklearn.utils import ClassifierTags, RegressorTags

        links = self._links()
        if links and all(lk in CLASSIFIER_LINKS for lk in links):
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        elif links and all(lk == "linear" for lk in links):
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        return tags

    @property
    def _estimator_type(self) -> str | None:  # scikit-learn < 1.6
        links = self._links()
        if links and all(lk in CLASSIFIER_LINKS for lk in links):
            return "classifier"
        if links and all(lk == "linear" for lk in links):
            return "regressor"
        return None

    def _check_params(self) -> None:
        P.validate("GLM", _PARAMS, self.get_params(deep=False))

    def _xp(self) -> Any:
        return device_xp(self.device)

    def _features(self, X: Any) -> Any:
        return as_features(
            X, owner="GLM", dtype=np.dtype(self.dtype), xp=self._xp(), sparse=True
        )

    def _check_fitted(self) -> None:
        if not hasattr(self, "core_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(
                "This GLM is not fitted yet: call fit(X, Y) or partial_fit(X, Y, classes=...) "
                "first"
            )

    # -- training -------------------------------------------------------------------------
    def _init_model(self, X: Any, Y2: np.ndarray, y_1d: bool, classes: Any = None) -> None:
        self._check_params()
        t = resolve(self.link, self.targmap, Y2, y_1d, "GLM", classes)
        layout = Layout(t.links, t.widths())
        self.targets_ = t
        self.layout_ = layout
        self.core_ = GLMCore(
            layout,
            X.shape[1],
            targmap=t.enc_col,
            lrate=self.lrate,
            l1=self.l1,
            l2=self.l2,
            updater=self.updater,
            dtype=np.dtype(self.dtype),
            xp=self._xp(),
        )
        self.n_features_in_ = int(X.shape[1])
        self.n_targets_ = t.K
        if t.K == 1:
            if t.classes[t.data_col[0]] is not None:
                self.classes_ = t.classes[t.data_col[0]]
            elif hasattr(self, "classes_"):
                del self.classes_
        else:
            self.classes_ = [t.classes[c] for c in t.data_col]

    def _batches(self, X: Any, Ye: np.ndarray, shuffle: bool) -> RowBatches:
        xp = self._xp()
        if shuffle:
            rng = check_random_state(self.random_state)
            perm = rng.permutation(X.shape[0])
            X = X[xp.asarray(perm)] if xp is not np else X[perm]
            Ye = Ye[perm]
        if not X.has_sorted_indices:
            X.sort_indices()
        return RowBatches(X, xp.asarray(Ye), self.batch_size)

    def fit(self, X: Any, Y: Any) -> GLM:
        """Train from scratch for ``n_epochs`` passes over ``X`` (n x d) and ``Y``.

        ``Y``: length-n labels / values, or n x q with one column per data target.
        """
        self._check_params()
        X = self._features(X)
        Y2, y_1d = as_targets_2d(Y, X.shape[0], "GLM")
        self._init_model(X, Y2, y_1d)
        Ye = encode(self.targets_, Y2, np.dtype(self.dtype))
        batches = self._batches(X, Ye, self.shuffle)
        self.n_steps_ = sgd_epochs(self.core_, batches, self.n_epochs)
        return self

    def partial_fit(self, X: Any, Y: Any, classes: Any = None) -> GLM:
        """One pass over (X, Y), continuing from the current weights (streams, live data).

        On the first call ``classes`` lists every label of a classifier target (one array
        for all, or one per data column), since one chunk may not show them all; labels
        outside it raise.
        """
        X = self._features(X)
        Y2, y_1d = as_targets_2d(Y, X.shape[0], "GLM")
        if not hasattr(self, "core_"):
            links = self._links()
            if classes is None and any(lk in CLASSIFIER_LINKS for lk in links):
                raise ValueError(
                    "GLM.partial_fit needs classes= on the first call for classifier links "
                    "(every label, since one chunk may miss some), e.g. classes=np.arange(20)"
                )
            self._init_model(X, Y2, y_1d, classes)
            self.n_steps_ = 0
        else:
            check_n_features("GLM", X, self.n_features_in_)
            if Y2.shape[1] != self.targets_.q:
                raise ValueError(
                    f"Y has {Y2.shape[1]} target columns but GLM was fitted with "
                    f"{self.targets_.q}"
                )
        Ye = encode(self.targets_, Y2, np.dtype(self.dtype))
        self.n_steps_ += sgd_epochs(self.core_, self._batches(X, Ye, False), 1)
        return self

    # -- live training --------------------------------------------------------------------
    def learner(self, X: Any, Y: Any, **options: Any) -> Any:
        """A :class:`bidlab.learn.Learner` training this GLM on (X, Y), for live control.

        ``start()`` trains in a background thread (``pause`` / ``resume`` / ``stop``, live
        ``lrn.opts.lrate = ...``, observers, checkpoints); ``fit()`` blocks. The learner
        updates this estimator's weights in place, so ``predict`` / ``score`` work during
        and after training. The model keeps one row per weight column (BIDMach's layout),
        grouped by target, so ``lrate`` / ``l1`` / ``l2`` vectors are per target (expanded
        over a softmax target's rows), here and live: ``lrn.set(lrate=[...])`` with one value
        per target (per configuration of a sweep), or one per weight column.
        ``updater`` is ``self.updater`` (``"adagrad"`` / ``"grad"``) and the
        passes ``n_epochs``; ``options`` are any further learner options (``val_every``,
        ``checkpoint``, ...).
        """
        from bidlab.learn import (
            ADAGrad,
            Grad,
            L1Regularizer,
            L2Regularizer,
            Learner,
            MemorySource,
        )
        from bidlab.models._glm_model import GLMModel

        self._check_params()
        X = self._features(X)
        Y2, y_1d = as_targets_2d(Y, X.shape[0], "GLM")
        self._init_model(X, Y2, y_1d)
        Ye = encode(self.targets_, Y2, np.dtype(self.dtype))
        lay = self.layout_

        def per_target(v: Any) -> Any:  # the model's row groups spread it over the rows
            arr = np.asarray(v, dtype=np.float64).reshape(-1)
            return float(arr[0]) if np.all(arr == arr[0]) else arr.tolist()

        step = (ADAGrad if self.updater == "adagrad" else Grad)(lrate=per_target(self.lrate))
        mixins = []
        if np.any(np.asarray(self.l1, dtype=np.float64) > 0):
            mixins.append(L1Regularizer(mats=[0], l1=per_target(self.l1)))
        if np.any(np.asarray(self.l2, dtype=np.float64) > 0):
            mixins.append(L2Regularizer(mats=[0], l2=per_target(self.l2)))
        seed = self.random_state if isinstance(self.random_state, int) else 0
        source = MemorySource(X, self._xp().asarray(Ye), batch_size=self.batch_size,
                              shuffle=self.shuffle, seed=seed)
        model = GLMModel(lay, self.targets_.enc_col)
        options.setdefault("n_passes", self.n_epochs)
        lrn = Learner(model, source, step, mixins, name="glm", **options).init()
        # the estimator reads the learner's live weights through transposed views
        self.core_.W = bl.Mat(model.modelmats[0].data.T)
        self.core_.b = bl.Mat(model.modelmats[1].data.T)
        self.n_steps_ = 0
        return lrn

    # -- predicting -----------------------------------------------------------------------
    def _margins(self, X: Any, transform: bool = False) -> np.ndarray:
        """X @ W + b on the host (n x T), in row chunks; link-transformed when asked."""
        self._check_fitted()
        X = self._features(X)
        check_n_features("GLM", X, self.n_features_in_)
        T = self.layout_.T
        out = np.empty((X.shape[0], T), dtype=np.dtype(self.dtype))
        step = max(1, _PREDICT_CHUNK // max(T, 1))
        for a in range(0, X.shape[0], step):
            chunk = X[a : a + step]
            res = self.core_.predictions(chunk) if transform else self.core_.margins(chunk)
            out[a : a + step] = backend.to_host(res)
        return out

    def decision_function(self, X: Any) -> np.ndarray:
        """Margins ``X @ coef_.T + intercept_``: (n,) for one single-column target, else n x T."""
        E = self._margins(X)
        return E[:, 0] if E.shape[1] == 1 else E

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

    def predict_proba(self, X: Any) -> np.ndarray | list[np.ndarray]:
        """Class probabilities: n x 2 (logistic) or n x C (softmax) for one target; for
        several, a list with one such array per target (scikit-learn's multi-output form)."""
        self._check_fitted()
        t, lay = self.targets_, self.layout_
        for k, lk in enumerate(t.links):
            if lk not in ("logistic", "softmax"):
                raise AttributeError(
                    f"predict_proba needs logistic or softmax links; target {k} is {lk!r} "
                    "(use decision_function for its margins)"
                )
        Pm = self._margins(X, transform=True)
        out = []
        for k, lk in enumerate(t.links):
            p = Pm[:, lay.columns(k)]
            out.append(np.column_stack([1.0 - p[:, 0], p[:, 0]]) if lk == "logistic" else p)
        return out[0] if len(out) == 1 else out

    def score_targets(self, X: Any, Y: Any) -> np.ndarray:
        """Per model target: accuracy (classifier links) or R^2 (linear), shape (K,)."""
        self._check_fitted()
        from sklearn.metrics import r2_score

        E = self._margins(X)
        Y2, _ = as_targets_2d(Y, E.shape[0], "GLM")
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

    def score(self, X: Any, Y: Any) -> float:
        """Mean over targets of accuracy (classifier links) or R^2 (linear)."""
        return float(np.mean(self.score_targets(X, Y)))

    def loss_targets(self, X: Any, Y: Any) -> np.ndarray:
        """Per model target, the mean loss on (X, Y): log loss for logistic / softmax,
        hinge for svm, half the squared error for linear. Shape (K,)."""
        E = self._margins(X)
        Y2, _ = as_targets_2d(Y, E.shape[0], "GLM")
        self._check_target_columns(Y2)
        Ye = encode(self.targets_, Y2, E.dtype)[:, self.targets_.enc_col]
        loss = np.zeros((1, self.targets_.K), dtype=np.float64)
        step = max(1, _PREDICT_CHUNK // max(E.shape[1], 1))
        for a in range(0, E.shape[0], step):
            e, y = E[a : a + step], np.ascontiguousarray(Ye[a : a + step])
            part = np.zeros((1, self.targets_.K), dtype=E.dtype)
            LinkStep(self.layout_, e.shape[0], E.dtype, np)(e, y, part)
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
        self._check_fitted()
        return np.ascontiguousarray(self.core_.W.numpy().T)

    @property
    def intercept_(self) -> np.ndarray:
        """Biases, one per weight column."""
        self._check_fitted()
        return self.core_.b.numpy()[0].copy()

    def select(self, k: int) -> GLM:
        """A fitted single-target GLM holding model target ``k``'s configuration and weights."""
        self._check_fitted()
        t = self.targets_
        if not 0 <= k < t.K:
            raise IndexError(f"target {k} out of range: this GLM has {t.K} model targets")

        def pick(v: Any) -> float:
            arr = np.asarray(v, dtype=np.float64)
            return float(arr) if arr.ndim == 0 else float(arr[k])

        lk, c = t.links[k], int(t.data_col[k])
        one = GLM(
            lk,
            lrate=pick(self.lrate),
            l1=pick(self.l1),
            l2=pick(self.l2),
            updater=self.updater,
            batch_size=self.batch_size,
            n_epochs=self.n_epochs,
            shuffle=self.shuffle,
            random_state=self.random_state,
            dtype=self.dtype,
            device=self.device,
        )
        fam = {"linear": "value", "logistic": "bin01", "svm": "pm1", "softmax": "class"}[lk]
        one.targets_ = Targets((lk,), np.zeros(1, np.int64), np.zeros(1, np.int64),
                               [(0, fam)], [t.classes[c]], 1, True)
        one.layout_ = Layout((lk,), (self.layout_.widths[k],))
        one.core_ = GLMCore(one.layout_, self.n_features_in_, targmap=None,
                            lrate=one.lrate, l1=one.l1, l2=one.l2, updater=self.updater,
                            dtype=np.dtype(self.dtype), xp=self._xp())
        cols = self.layout_.columns(k)
        one.core_.W.data[...] = self.core_.W.data[:, cols]
        one.core_.b.data[...] = self.core_.b.data[:, cols]
        one.n_features_in_ = self.n_features_in_
        one.n_targets_ = 1
        one.n_steps_ = getattr(self, "n_steps_", 0)
        if t.classes[c] is not None:
            one.classes_ = t.classes[c]
        return one


# ------------------------------------------------------------------------------ sweeps


def glm_sweep(
    link: str = "logistic",
    *,
    lrate: Any = (0.1,),
    l1: Any = (0.0,),
    l2: Any = (0.0,),
    n_targets: int = 1,
    **params: Any,
) -> GLM:
    """A GLM that trains every (lrate, l1, l2) combination for each data target in one pass.

    The grid is replicated through the target map, so ``fit`` shares each sparse product
    among all configurations. ``n_targets``: data target columns (1 for a label vector).
    Pick the winner with :func:`best_config`.
    """
    grid = list(itertools.product(np.atleast_1d(lrate), np.atleast_1d(l1), np.atleast_1d(l2)))
    cfg = np.array(grid, dtype=np.float64)
    reps = len(grid)
    return GLM(
        link,
        lrate=np.tile(cfg[:, 0], n_targets).tolist(),
        l1=np.tile(cfg[:, 1], n_targets).tolist(),
        l2=np.tile(cfg[:, 2], n_targets).tolist(),
        targmap=np.repeat(np.arange(n_targets), reps).tolist(),
        **params,
    )


@dataclass
class SweepResult:
    """The best configuration of a sweep on validation data (see :func:`best_config`)."""

    index: int  # the winning model target
    lrate: float
    l1: float
    l2: float
    score: float  # its validation score (accuracy / R^2) or mean loss
    metric: str  # "score" (higher wins) or "loss" (lower wins)
    scores: np.ndarray  # every model target's validation score or loss, (K,)
    configs: np.ndarray  # every model target's (lrate, l1, l2), (K, 3)
    candidates: np.ndarray  # the model targets that learn the chosen data target
    model: GLM  # the winner as a fitted single-target GLM

    def table(self) -> list[dict[str, float]]:
        """The candidate configurations with their scores, best first."""
        rows = [
            {
                "index": int(k),
                "lrate": float(self.configs[k, 0]),
                "l1": float(self.configs[k, 1]),
                "l2": float(self.configs[k, 2]),
                self.metric: float(self.scores[k]),
            }
            for k in self.candidates
        ]
        return sorted(rows, key=lambda r: r[self.metric], reverse=self.metric == "score")


def best_config(
    model: GLM, X: Any, Y: Any, *, metric: str = "score", target: int = 0
) -> SweepResult:
    """The best of a fitted sweep's configurations for data target ``target`` by validation
    score (``metric="score"``: accuracy / R^2, higher wins) or mean loss (``"loss"``: log
    loss / hinge / squared error, lower wins)."""
    if metric not in ("score", "loss"):
        raise ValueError(f"metric must be one of ['score', 'loss']; got {metric!r} instead")
    model._check_fitted()
    t = model.targets_
    candidates = np.flatnonzero(t.data_col == target)
    if candidates.size == 0:
        raise ValueError(f"no model target learns data target {target} (Y has {t.q} columns)")
    scores = model.score_targets(X, Y) if metric == "score" else model.loss_targets(X, Y)
    sub = scores[candidates]
    best = int(candidates[np.argmax(sub) if metric == "score" else np.argmin(sub)])

    def vec(v: Any) -> np.ndarray:
        arr = np.asarray(v, dtype=np.float64)
        return np.full(t.K, float(arr)) if arr.ndim == 0 else arr

    configs = np.column_stack([vec(model.lrate), vec(model.l1), vec(model.l2)])
    return SweepResult(
        best, *(float(v) for v in configs[best]), float(scores[best]), metric, scores,
        configs, candidates, model.select(best),
    )
