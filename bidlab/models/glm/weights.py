"""The learned weights of a fitted :class:`~bidlab.models.glm.GLM` in scikit-learn's
layout (``coef_``, ``intercept_``), and :meth:`~GLMWeights.select`: one model target's
configuration and weights as a single-target GLM of its own (a sweep's winner).

:class:`GLMWeights` is a mixin of the estimator: it reads the fitted ``model_``,
``layout_``, ``targets_`` and the parameters.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
from sklearn.utils.validation import check_is_fitted

from bidlab.learn import UPDATERS, L1Regularizer, L2Regularizer
from bidlab.models.glm.links import Layout
from bidlab.models.glm.model import GLMModel
from bidlab.models.glm.targets import Targets

__all__ = ["GLMWeights"]

_G = TypeVar("_G", bound="GLMWeights")


class GLMWeights:
    """``coef_``, ``intercept_`` and ``select`` of a fitted GLM."""

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

    def select(self: _G, k: int) -> _G:
        """A fitted single-target GLM holding model target ``k``'s configuration and weights."""
        check_is_fitted(self, "model_")
        t = self.targets_
        if not 0 <= k < t.K:
            raise IndexError(f"target {k} out of range: this GLM has {t.K} model targets")

        def pick(v: Any) -> float:
            arr = np.asarray(v, dtype=np.float64)
            return float(arr) if arr.ndim == 0 else float(arr.reshape(-1)[k])

        lk, c = t.links[k], int(t.data_col[k])
        one = type(self)(**{**self.get_params(deep=False), "link": lk, "targmap": None,
                            "lrate": pick(getattr(self, "lrate_", self.lrate)),
                            "l1": pick(self.l1), "l2": pick(self.l2)})
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
        one.scaling_ = self.__dict__.get("scaling_")  # the map the weights were trained through
        kept = self.__dict__.get("target_scale_")
        one.target_scale_ = None if kept is None or kept[c] == 1.0 else np.array([kept[c]])
        one.n_features_in_ = self.n_features_in_
        if hasattr(self, "feature_names_in_"):
            one.feature_names_in_ = self.feature_names_in_
        one.n_targets_ = 1
        one.multilabel_ = False
        one.model_.steps_done = self.model_.steps_done
        one.model_.passes_done = self.model_.passes_done  # n_iter_: the passes it trained
        if t.classes[c] is not None:
            one.classes_ = t.classes[c]
        return one
