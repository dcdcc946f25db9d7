"""Sweeps: many (lrate, l1, l2) configurations of one GLM trained in one pass, and the pick.

A sweep is a multi-target :class:`~bidlab.models.glm.GLM` whose target map replicates each
data target once per configuration, so ``fit`` shares every sparse product among them.
:func:`sweep_params` lays the grid out as the per-target ``lrate`` / ``l1`` / ``l2`` and
``targmap`` parameters that :func:`bidlab.models.glm.glm_sweep` hands to ``GLM``;
:func:`best_config` scores a fitted sweep's configurations on validation data and returns
the winner as a :class:`SweepResult`. Both are used as ``bidlab.models.glm.estimator`` names. This
module reads the fitted GLM only through its public methods (:class:`SweptModel`), so it
does not import :mod:`bidlab.models.glm.estimator`, which imports it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from sklearn.utils.validation import check_is_fitted

from bidlab.models.glm.auto_rate import is_auto
from bidlab.models.glm.targets import Targets

__all__ = ["SweepResult", "SweptModel", "best_config", "sweep_params"]


class SweptModel(Protocol):
    """What :func:`best_config` reads from a fitted sweep: a fitted
    :class:`~bidlab.models.glm.GLM`."""

    lrate: Any
    lrate_: Any
    l1: Any
    l2: Any
    targets_: Targets

    def score_targets(self, X: Any, y: Any) -> np.ndarray: ...

    def loss_targets(self, X: Any, y: Any) -> np.ndarray: ...

    def select(self, k: int) -> SweptModel: ...


def sweep_params(lrate: Any, l1: Any, l2: Any, n_targets: int) -> dict[str, list[Any]]:
    """GLM parameters that train every (lrate, l1, l2) combination for each of
    ``n_targets`` data targets: per-target ``lrate``, ``l1``, ``l2`` and the ``targmap``.
    ``lrate="auto"`` (or ``["auto"]``) sweeps ``l1`` x ``l2`` only and leaves the rate to
    GLM's pilot (``lrate="auto"``)."""
    if isinstance(n_targets, bool) or not isinstance(n_targets, (int, np.integer)) or (
            n_targets < 1):
        raise ValueError(f"glm_sweep: n_targets must be an int >= 1 (the data's target "
                         f"columns; 1 for a label vector); got {n_targets!r} instead")
    for name, values in (("lrate", lrate), ("l1", l1), ("l2", l2)):
        if np.size(values) == 0:
            raise ValueError(f"glm_sweep: {name}={values!r} holds no value: give at least "
                             "one to sweep")
    auto = isinstance(lrate, str) or any(isinstance(v, str) for v in np.atleast_1d(lrate))
    if auto and not is_auto(lrate) and list(np.atleast_1d(lrate)) != ["auto"]:
        raise ValueError(f"glm_sweep: lrate={lrate!r} mixes 'auto' with rates: give lrate="
                         "'auto' (the pilot picks the rate) or a list of numbers to sweep")
    rates = [np.nan] if auto else np.atleast_1d(lrate)
    grid = list(itertools.product(rates, np.atleast_1d(l1), np.atleast_1d(l2)))
    cfg = np.array(grid, dtype=np.float64)
    reps = len(grid)
    return {
        "lrate": "auto" if auto else np.tile(cfg[:, 0], n_targets).tolist(),
        "l1": np.tile(cfg[:, 1], n_targets).tolist(),
        "l2": np.tile(cfg[:, 2], n_targets).tolist(),
        "targmap": np.repeat(np.arange(n_targets), reps).tolist(),
    }


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
    model: SweptModel  # the winner as a fitted single-target GLM

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
    model: SweptModel, X: Any, Y: Any, *, metric: str = "score", target: int = 0
) -> SweepResult:
    """The best of a fitted sweep's configurations for data target ``target`` by validation
    score (``metric="score"``: accuracy / R^2, higher wins) or mean loss (``"loss"``: log
    loss / hinge / squared error, lower wins)."""
    if metric not in ("score", "loss"):
        raise ValueError(f"metric must be one of ['score', 'loss']; got {metric!r} instead")
    check_is_fitted(model, "model_")
    t = model.targets_
    candidates = np.flatnonzero(t.data_col == target)
    if candidates.size == 0:
        raise ValueError(f"no model target learns data target {target} (Y has {t.q} columns)")
    scores = model.score_targets(X, Y) if metric == "score" else model.loss_targets(X, Y)
    sub = scores[candidates]
    best = int(candidates[np.argmax(sub) if metric == "score" else np.argmin(sub)])

    def vec(v: Any) -> np.ndarray:
        arr = np.asarray(v, dtype=np.float64).reshape(-1)
        return np.full(t.K, float(arr[0])) if arr.size == 1 else arr

    rates = model.lrate_ if is_auto(model.lrate) else model.lrate  # "auto": the picks
    configs = np.column_stack([vec(rates), vec(model.l1), vec(model.l2)])
    return SweepResult(
        best, *(float(v) for v in configs[best]), float(scores[best]), metric, scores,
        configs, candidates, model.select(best),
    )
