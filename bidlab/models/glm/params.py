"""The checks behind :class:`~bidlab.models.glm.GLM`'s ``PARAMS`` table, and its input helpers.

Each check is an :class:`~bidlab.learn.options.Option` ``test`` for a parameter no
component declares (``link``: one link name or one per target; ``targmap``, ``dtype``,
``class_weight``); ``lrate``, ``l1``, ``l2``, ``n_passes`` and ``random_state`` take the
rows of the updater, the mixins, the learner and the shared seed row
(:func:`bidlab.models.base.param_row`). The input
helpers take what ``fit`` / ``predict`` are given apart: the raw matrix of a bidlab
``Mat`` / ``SMat`` or corpus, and where a CSR matrix holds its first bad value.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.models.glm.links import LINKS
from bidlab.models.glm.targets import class_index, own_labels
from bidlab.models.validation import unwrap

__all__ = ["unwrap", "first_bad", "link_ok", "rate_ok", "targmap_ok", "dtype_ok",
           "per_target", "class_weight_ok", "class_weights"]


# ------------------------------------------------------------------------------ inputs
def first_bad(X: sp.csr_matrix, bad: np.ndarray) -> tuple[int, int]:
    """(row, column) of the first flagged stored value of a CSR matrix."""
    p = int(np.flatnonzero(bad)[0])
    return int(np.searchsorted(X.indptr, p, side="right") - 1), int(X.indices[p])


# ------------------------------------------------------------------------ parameter checks
def link_ok(x: Any) -> bool:
    """One link name, or a non-empty list / tuple / array of them."""
    if isinstance(x, str):
        return x in LINKS
    return (isinstance(x, (list, tuple, np.ndarray)) and len(x) >= 1
            and all(isinstance(v, str) and v in LINKS for v in x))


def _real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)) and bool(
        np.isfinite(x))


def batch_ok(x: Any) -> bool:
    """``"auto"``, or a whole number >= 1 (a numpy integer too; not a bool)."""
    if isinstance(x, str):
        return x == "auto"
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_)) and x >= 1


def rate_ok(x: Any) -> bool:
    """``"auto"``, or a finite number > 0, or a non-empty sequence of them."""
    if isinstance(x, str):
        return x == "auto"
    vals = [x] if _real(x) else (list(np.asarray(x, dtype=object).reshape(-1))
                                 if isinstance(x, (list, tuple, np.ndarray)) else [])
    return bool(vals) and all(_real(v) and v > 0 for v in vals)


def targmap_ok(x: Any) -> bool:
    """A non-empty 1-D sequence of data target columns (ints >= 0)."""
    arr = np.asarray(x)
    return arr.ndim == 1 and arr.size >= 1 and arr.dtype.kind in "iu" and int(arr.min()) >= 0


def dtype_ok(x: Any) -> bool:
    """``"auto"``, float32 or float64 (as a type, dtype or name)."""
    return (isinstance(x, str) and x == "auto") or _as_dtype(x) in (np.float32, np.float64)


def _as_dtype(x: Any) -> Any:
    try:
        return np.dtype(x).type
    except TypeError:
        return None


def per_target(what: str) -> str:
    """The allowed values in words for a parameter given once or once per model target."""
    return f"{what}, or a list of them (one per model target)"


def class_weight_ok(x: Any) -> bool:
    """None, ``"balanced"`` or a dict {label: weight >= 0}."""
    if x is None or (isinstance(x, str) and x == "balanced"):
        return True
    return isinstance(x, dict) and all(_real(v) and v >= 0 for v in x.values())


def class_weights(class_weight: Any, labels: np.ndarray, classes: np.ndarray,
                  partial: bool = False) -> np.ndarray:
    """One weight per sample from its label's class weight (scikit-learn's rules:
    ``"balanced"`` weighs class c by n / (n_classes * count of c); a dict's missing
    classes weigh 1). ``partial``: a ``partial_fit`` chunk, which cannot be balanced."""
    from sklearn.utils.class_weight import compute_class_weight

    if isinstance(class_weight, str) and partial:
        raise ValueError("class_weight='balanced' needs every sample at once, so partial_fit "
                         "cannot use it: pass a dict of class weights, e.g. computed with "
                         "sklearn.utils.class_weight.compute_class_weight on all labels")
    if isinstance(class_weight, dict):
        unknown = [c for c in class_weight if not np.isin(np.asarray([c], dtype=object),
                                                          classes.astype(object)).any()]
        if unknown:
            raise ValueError(f"class_weight names labels {unknown[:5]} that are not classes "
                             f"of y (classes: {classes.tolist()[:10]}): use the labels of y")
        # every class's weight, also of classes a partial_fit chunk lacks (weighing only
        # the chunk's classes refused a dict naming one it lacks)
        per = compute_class_weight(class_weight, classes=classes, y=classes)
        return per[class_index(own_labels(labels), classes, "y")]
    present = np.unique(labels)
    per = compute_class_weight(class_weight, classes=present, y=labels)
    return per[np.searchsorted(present, labels)]
