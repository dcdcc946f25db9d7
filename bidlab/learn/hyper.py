"""Hyperparameters held in matrices, so changing one live never grows the result cache.

A hyperparameter option (declared with ``vector=True``) takes a number, a vector with one
value per row of a model matrix (e.g. one learning rate per GLM target), or a vector
with one value per model matrix. :class:`Hyper` expands whichever form into one
``rows x 1`` column ``Mat`` per model matrix, allocated once; a live change rewrites
those columns in place, so their GUIDs -- and every cache key built on them -- stay.
Updaters and mixins broadcast the column against their ``rows x cols`` matrices with
``xp`` ufuncs and ``out=``, which allocates nothing.

A vector is read per row when every model matrix has that many rows (e.g. a GLM's
weight columns x features weights and its intercepts), else per row *group* when the model
declares ``row_groups`` (one group number per row; a GLM's targets, so a sweep's rates are
given one per configuration) and the length is the number of groups, else per model matrix
when its length is the number of matrices. Per row wins over per group, and per group over
per matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.options import Configurable, OptionError
from bidlab.mat import Mat

__all__ = ["Hyper", "Component", "expand_hyper", "n_groups"]


def n_groups(groups: Any) -> int:
    """How many row groups ``groups`` (one group number per row, or None) names."""
    return 0 if groups is None or len(groups) == 0 else int(np.max(groups)) + 1


def expand_hyper(name: str, value: Any, rows: list[int],
                 groups: Any = None) -> list[np.ndarray]:
    """One float64 column (rows_i,) per model matrix from a number or a vector.

    A vector is read per row when every model matrix has that many rows, else per row
    group when ``groups`` (one group number per row, every matrix having that many rows)
    names that many groups, else per model matrix when its length is the number of
    matrices; anything else is an error.
    """
    if not isinstance(value, (tuple, list, np.ndarray)):
        return [np.full(r, float(value)) for r in rows]
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if v.shape[0] == 1:
        return [np.full(r, v[0]) for r in rows]
    if all(r == v.shape[0] for r in rows):
        return [v.copy() for _ in rows]
    grouped = groups is not None and all(r == len(groups) for r in rows)
    if grouped and v.shape[0] == n_groups(groups):
        return [v[np.asarray(groups)] for _ in rows]
    if v.shape[0] == len(rows):
        return [np.full(r, v[i]) for i, r in enumerate(rows)]
    per_group = f", one per row group ({n_groups(groups)})" if grouped else ""
    raise OptionError(
        f"The {name!r} option has {v.shape[0]} values, but the model matrices have "
        f"{', '.join(str(r) for r in rows)} rows and there are {len(rows)} of them: give one "
        f"number, one value per row (when all matrices have the same rows){per_group}, or "
        "one value per model matrix.")


class Hyper:
    """The column matrices of one hyperparameter option, one per model matrix.

    Attributes
    ----------
    name
        the option's name.
    cols
        ``rows_i x 1`` Mats (on the model's device, in its dtype).
    scalar
        the value as a Python float when it is one number, else None.
    """

    def __init__(self, name: str, value: Any, shapes: list[tuple[int, int]], xp: Any,
                 dtype: Any, groups: Any = None) -> None:
        self.name = name
        self.groups = groups
        self.cols = [Mat(backend.empty((m, 1), dtype, xp)) for m, _ in shapes]
        self.scalar: float | None = None
        self.fill(value)

    def fill(self, value: Any) -> None:
        """Write a new value into the columns (in place)."""
        rows = [c.shape[0] for c in self.cols]
        expanded = expand_hyper(self.name, value, rows, self.groups)
        for col, v in zip(self.cols, expanded, strict=True):
            xp = col.xp
            col.data[:, 0] = v if xp is np else xp.asarray(v, dtype=col.dtype)
        flat = np.concatenate(expanded) if expanded else np.zeros(0)
        self.scalar = float(flat[0]) if flat.size and np.all(flat == flat[0]) else None

    def __getitem__(self, i: int) -> Any:
        """The raw column array for model matrix ``i`` (broadcasts against it)."""
        return self.cols[i].data

    def is_zero(self) -> bool:
        return self.scalar == 0.0


class Component(Configurable):
    """A learner part with options and hyperparameter columns (Model, Updater, Mixin).

    :meth:`hyper` makes a :class:`Hyper` for one of its vector options; the learner calls
    :meth:`apply_changes` at a minibatch boundary with the options that changed, which
    refills the matching columns in the training thread.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._hypers: dict[str, Hyper] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Picklable anywhere: array modules become markers, device arrays host copies."""
        return backend.portable_state(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(backend.restore_state(state))

    def hyper(self, name: str, shapes: list[tuple[int, int]], xp: Any, dtype: Any,
              groups: Any = None) -> Hyper:
        """The (new) :class:`Hyper` of option ``name`` for matrices of ``shapes``
        (``groups``: the model's ``row_groups``, if any)."""
        h = Hyper(name, self.opts.get(name), shapes, xp, dtype, groups)
        self._hypers[name] = h
        return h

    def inert_options(self) -> dict[str, str]:
        """Options this part takes but, as it is set up, ignores: name -> why (a control
        for one would confirm changes that change nothing). None by default."""
        return {}

    def apply_changes(self, changes: dict[str, Any]) -> None:
        """Refill hyperparameter columns whose options changed (training thread)."""
        for name, value in changes.items():
            h = self._hypers.get(name)
            if h is not None:
                h.fill(value)
