"""Prediction and scoring of :class:`~bidlab.models.glm.GLM`: margins, labels, class
probabilities (and their logs), accuracy / R^2 and losses per target.

:class:`GLMPredictions` is a mixin of the estimator: it reads the fitted ``model_``,
``layout_`` and ``targets_`` and the estimator's input checks (``_features``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils._available_if import available_if
from sklearn.utils.validation import check_is_fitted

import bidlab as bl
from bidlab import backend
from bidlab.models.glm.links import LinkStep
from bidlab.models.glm.targets import as_targets_2d, class_index, encode, own_labels

__all__ = ["GLMPredictions"]

_PREDICT_CHUNK = 1 << 22  # margins are computed this many entries (rows x columns) at a time


class GLMPredictions:
    """``predict``, ``predict_proba``, ``predict_log_proba``, ``decision_function``,
    ``score`` and the per-target scores and losses of a fitted GLM."""

    layout_: Any
    targets_: Any
    model_: Any
    multilabel_: bool
    dtype_: Any
    # and from the estimator: _features, _links, _is_regressor, _threads

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
        with self._threads():
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

    @available_if(_has_proba)
    def predict_log_proba(self, X: Any) -> np.ndarray | list[np.ndarray]:
        """The logarithm of :meth:`predict_proba` (same shapes; a probability of 0 gives
        -inf)."""
        P = self.predict_proba(X)
        with np.errstate(divide="ignore"):
            return [np.log(p) for p in P] if isinstance(P, list) else np.log(P)

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
            else:  # an object column (of a mixed DataFrame) as its labels' own type
                col = own_labels(col)
                what = f"Y column {t.data_col[k]}" if t.q > 1 else "y"
                class_index(col, t.classes[t.data_col[k]], what)  # unseen labels raise
                out.append(accuracy_score(col, pred, sample_weight=sample_weight))
        return float(np.mean(out))

    def loss_targets(self, X: Any, y: Any, sample_weight: Any = None) -> np.ndarray:
        """Per model target, the mean loss on (X, y): log loss for logistic / softmax,
        hinge for svm, half the squared error for linear; with ``sample_weight`` (one
        weight >= 0 per row), the weighted mean, as training weighs the rows. Shape (K,)."""
        E = self._margins(X)
        Y2, _ = as_targets_2d(y, E.shape[0], "GLM")
        self._check_target_columns(Y2)
        w = None if sample_weight is None else self._weights(sample_weight, E)
        Ye = encode(self.targets_, Y2, E.dtype)[:, self.targets_.enc_col]
        loss = np.zeros((1, self.targets_.K), dtype=np.float64)
        step = max(1, _PREDICT_CHUNK // max(E.shape[1], 1))
        for a in range(0, E.shape[0], step):
            e, yy = E[a : a + step], np.ascontiguousarray(Ye[a : a + step])
            wc = None if w is None else np.ascontiguousarray(w[a : a + step, None], E.dtype)
            part = np.zeros((1, self.targets_.K), dtype=E.dtype)
            LinkStep(self.layout_, e.shape[0], E.dtype, np)(e, yy, part, wc)
            loss += part
        total = E.shape[0] if w is None else max(float(np.sum(w, dtype=np.float64)), 1e-300)
        return loss[0] / total

    def _check_target_columns(self, Y2: np.ndarray) -> None:
        if Y2.shape[1] != self.targets_.q:
            raise ValueError(
                f"Y has {Y2.shape[1]} target columns but GLM was fitted with {self.targets_.q}"
            )
