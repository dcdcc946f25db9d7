"""The checks :class:`~bidlab.models.glm.GLM` makes of what it is given: the links it was
built with (classifier or regressor), the features (a canonical, finite CSR matrix of the
model dtype on the model's device), the targets, the sample weights and the class weights.
A mixin of the estimator: it reads the estimator's ``link``, ``dtype``, ``device`` and
``class_weight`` and, once fitted, ``dtype_`` and ``targets_``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import _check_sample_weight, validate_data

from bidlab import backend
from bidlab.models.glm.links import CLASSIFIER_LINKS
from bidlab.models.glm.params import class_weights, first_bad, unwrap
from bidlab.models.glm.targets import as_targets_2d, same_classes
from bidlab.models.in_memory import refuse_source_input
from bidlab.models.validation import dense_to_csr

__all__ = ["GLMInputs"]


class GLMInputs:
    """Input checks of the GLM estimator (see the module doc)."""

    def _links(self) -> list[str]:
        return [self.link] if isinstance(self.link, str) else list(self.link)

    def _is_classifier(self) -> bool:
        links = self._links()
        return bool(links) and all(lk in CLASSIFIER_LINKS for lk in links)

    def _is_regressor(self) -> bool:
        links = self._links()
        return bool(links) and all(lk == "linear" for lk in links)

    def _xp(self) -> Any:
        return np if self.device == "cpu" else backend.cupy()

    def _model_dtype(self, X: Any) -> np.dtype:
        if self.dtype is None or (isinstance(self.dtype, str) and self.dtype == "auto"):
            return np.dtype(np.float64 if X.dtype == np.float64 else np.float32)
        return np.dtype(self.dtype)

    def _features(self, X: Any, reset: bool) -> Any:
        """X validated (``n_features_in_``, ``feature_names_in_``) as a canonical CSR
        matrix of the model dtype on the model's device."""
        return self._on_device(self._host_features(X, reset))

    def _on_device(self, X: sp.csr_matrix) -> Any:
        """The host CSR ``X`` on the model's device."""
        return X if self._xp() is np else backend.to_device(X)

    def _host_features(self, X: Any, reset: bool) -> sp.csr_matrix:
        """:meth:`_features` before the move to the model's device: a host CSR."""
        refuse_source_input(self, X)
        X = unwrap(X)
        self._check_structure(X)
        X = validate_data(self, X, accept_sparse="csr", dtype="numeric",
                          ensure_all_finite=False, reset=reset)
        dtype = self._model_dtype(X) if reset else self.dtype_
        if reset:
            self.dtype_ = dtype
        given = X
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=dtype)
            if not X.has_canonical_format:
                X = X.copy()
                X.sum_duplicates()
        else:
            X = dense_to_csr(X, dtype)
        bad = ~np.isfinite(X.data)
        if bad.any():
            r, c = first_bad(X, bad)
            value = given[r, c]
            if np.isfinite(value):  # finite as given: past the model dtype's range
                raise ValueError(
                    f"GLM: X holds {value:g} (row {r}, column {c}), beyond the range of the "
                    f"model's {dtype} (largest {np.finfo(dtype).max:g}): scale the "
                    "features down, or train with dtype='float64'")
            raise ValueError(f"GLM: X contains NaN or infinity (first at row {r}, column "
                             f"{c}): remove or impute those values first")
        return X

    def _targets_2d(self, y: Any, n: int) -> tuple[np.ndarray, bool]:
        if y is None:
            raise ValueError("GLM requires y to be passed, but the target y is None: give "
                             "one label or value per sample (or one column per target)")
        return as_targets_2d(y, n, "GLM")

    def _weights(self, sample_weight: Any, X: Any, comm: Any = None) -> np.ndarray | None:
        """Validated row weights. With a communicator of several ranks the rows are one
        rank's, whose weights may all be 0 (the ranks' total is checked as a run starts)."""
        if sample_weight is None:
            return None
        shard = int(getattr(comm, "size", 1)) > 1
        return _check_sample_weight(sample_weight, X, dtype=self.dtype_,
                                    ensure_non_negative=True, allow_all_zero_weights=shard)

    def _class_weighted(self, w: np.ndarray | None, Y2: np.ndarray,
                        partial: bool = False) -> np.ndarray | None:
        """``w`` times each row's class weight (``class_weight``), or ``w`` when None."""
        if self.class_weight is None:
            return w
        t = self.targets_
        if t.classes[0] is None or "linear" in t.links:
            raise ValueError("class_weight is for classifier links (logistic, softmax, svm); "
                             "a linear GLM has no classes: pass sample_weight instead")
        if t.q != 1:
            raise ValueError(f"class_weight needs one column of labels y; this GLM has {t.q} "
                             "target columns: pass sample_weight instead")
        cw = class_weights(self.class_weight, Y2[:, 0], np.asarray(t.classes[0]), partial)
        cw = cw.astype(self.dtype_)
        return cw if w is None else w * cw

    def _check_same_classes(self, classes: Any) -> None:
        """A later partial_fit's ``classes`` must be the first call's (as scikit-learn's
        SGD estimators require): the targets were encoded with those."""
        if classes is None or not hasattr(self, "targets_"):
            return
        if not same_classes(self.targets_, classes):
            known = [c.tolist() for c in self.targets_.classes if c is not None]
            given = _as_list(classes)
            raise ValueError(f"classes={given} differs from the first partial_fit call's "
                             f"{known[0] if self.targets_.q == 1 else known}: "
                             "pass the same classes every call (or leave classes out after "
                             "the first), or fit a new GLM")


def _as_list(classes: Any) -> Any:
    """``classes`` as given to ``partial_fit``, as (nested) lists for a message."""
    if isinstance(classes, (list, tuple, np.ndarray)):
        return [_as_list(c) for c in classes]
    return classes.item() if isinstance(classes, np.generic) else classes
