"""The numbers a learner's checkpoint may hold, checked before any of it is written.

:func:`bidlab.learn.learner_state.restore` calls :func:`check_values` once per load, after
the shapes fit and before the model is touched, so a damaged or edited file is refused
with the model as it was -- never resumed into a run that fails inside a kernel or
trains on from NaN. The rules:

* the model matrices and the updater's state are finite (a run whose model turned NaN
  stops with ``DivergedError``; no healthy run writes such a file);
* a model class may declare, for its :meth:`~bidlab.learn.Model.extra_state` keys and its
  model matrices (``"model/0"``, ...):

  - ``CHECKPOINT_FINITE`` -- keys whose numbers are finite (row factors, a pass's sums);
  - ``CHECKPOINT_NONNEGATIVE`` -- keys whose numbers are finite and >= 0 (NMF's
    components, PageRank's scores);
  - ``CHECKPOINT_COUNTS`` -- ``{counter: key or None}``: model counters that are whole
    numbers >= 0, at most the length of the extra state ``key`` when one is named
    (PageRank's iterations run, at most the changes it records);
* a model counter ``{name}_n`` is the length of a per-pass history
  (:func:`bidlab.models.pass_history.history_counters`): a whole number >= 0 whose
  ``{name}_{i}_hi`` / ``_lo`` counters are all there (set after the matrices are written,
  a missing one would leave the model half restored).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab.learn.checkpoint import CheckpointError

__all__ = ["check_values"]


def _finite(a: np.ndarray) -> bool:
    return a.dtype.kind not in "fc" or bool(np.isfinite(a).all())


def check_values(path: str, model: Any, mats: list[np.ndarray], extra: dict[str, Any],
                 updater: dict[str, Any], counters: dict[str, int]) -> None:
    """Refuse (:class:`~bidlab.learn.checkpoint.CheckpointError`) a checkpoint whose
    numbers no run of ``model`` writes: see the module doc."""
    arrays = {f"model/{i}": np.asarray(a) for i, a in enumerate(mats)}
    for key, a in arrays.items():
        if not _finite(a):
            raise CheckpointError(f"checkpoint {path}: model matrix {key} holds NaN or "
                                  "infinity: the file is damaged (or was written by a run "
                                  "that diverged); resume from another checkpoint")
    for key, a in updater.items():
        if not _finite(np.asarray(a)):
            raise CheckpointError(f"checkpoint {path}: updater state {key!r} holds NaN or "
                                  "infinity: the file is damaged; resume from another "
                                  "checkpoint")
    arrays.update({k: np.asarray(a) for k, a in extra.items()})
    cls = type(model)
    for decl, nonneg in (("CHECKPOINT_FINITE", False), ("CHECKPOINT_NONNEGATIVE", True)):
        for key in getattr(cls, decl):  # declared on Model, () by default
            a = arrays.get(key)
            if a is None:
                continue
            if not _finite(a):
                raise CheckpointError(f"checkpoint {path}: {cls.__name__} state {key!r} "
                                      "holds NaN or infinity: the file is damaged; resume "
                                      "from another checkpoint")
            if nonneg and a.size and a.min() < 0:
                raise CheckpointError(f"checkpoint {path}: {cls.__name__} state {key!r} "
                                      f"holds negative values (the least is {a.min():.4g}),"
                                      " where the model's are >= 0: the file is damaged; "
                                      "resume from another checkpoint")
    for key, n in counters.items():
        name = key[:-2]
        if key.endswith("_n") and (n < 0 or any(
                f"{name}_{i}_{half}" not in counters for i in range(n) for half in ("hi",
                                                                                 "lo"))):
            raise CheckpointError(f"checkpoint {path}: the model's {name!r} history counts "
                                  f"{n} values but lacks some of them: the file is damaged; "
                                  "resume from another checkpoint")
    for name, key in cls.CHECKPOINT_COUNTS.items():
        n = counters.get(name)
        if n is None:
            continue
        most = arrays[key].size if key in arrays else None
        if n < 0 or (most is not None and n > most):
            limit = "" if most is None else f" to {most} (the length of its {key!r})"
            raise CheckpointError(f"checkpoint {path}: {cls.__name__} counter {name!r} is "
                                  f"{n}, where it counts from 0{limit}: the file is "
                                  "damaged; resume from another checkpoint")
