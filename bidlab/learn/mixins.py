"""Mixins: extra loss terms, their gradients, and the KPIs they report.

After ``model.update`` writes the score's ascent direction into ``model.updatemats``, each
mixin adds the ascent direction of its own term (a penalty is *subtracted*: the learner
maximises ``score - penalty``). Each mixin also reports the current value of its term
as a KPI (``l2``, ``l1``) in the learner's metrics, computed when metrics are published,
not every step (``mixin_kpis=False`` turns that off: ``GLM.fit`` needs no metrics).

Strengths are hyperparameters (a number, one per model-matrix row, or one per model
matrix), changeable live. ``mats`` limits a mixin to some model matrices (default all).
On the CPU each term's gradient is one fused pass (:mod:`bidlab.kern.steps`). For a model
matrix whose update the model handed over unformed (a
:class:`~bidlab.learn.updaters.SparseUpdate`), a term is recorded on it instead: the
updater applies it inside its sparse step, or adds it once it forms the update.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from bidlab.kern import steps
from bidlab.learn.hyper import Component, Hyper
from bidlab.learn.options import Option
from bidlab.learn.updaters.base import _Scratch
from bidlab.learn.updaters.sparse import sparse_updates

__all__ = ["Mixin", "L1Regularizer", "L2Regularizer", "MIXINS"]


class Mixin(Component):
    """Base class: implement :meth:`gradient` and :meth:`score`.

    Parameters
    ----------
    mats
        the model matrices the term applies to, by index or name (``[0]``,
        ``["W"]``, or one of them alone; default: all).
    """

    kpi: str = "mixin"
    term: str = ""  # the kind a SparseUpdate knows this term by ("l1", "l2"), if any
    OPTIONS = (Option("mixin_kpis", bool, True, "report each mixin's value in the metrics "
                      "(a pass over its model matrices whenever metrics are published)"),)

    def __init__(self, mats: Iterable[int | str] | int | str | None = None,
                 **options: Any) -> None:
        super().__init__(**options)
        self.mats = None if mats is None else _matrix_keys(mats, type(self).__name__)
        self.model: Any = None

    def init(self, model: Any) -> None:
        """Attach to an initialised model; allocate scratch space."""
        self.model = model
        mm = model.modelmats
        n = len(mm)
        keys = list(range(n)) if self.mats is None else self.mats
        bad = [i for i in keys if isinstance(i, int) and not 0 <= i < n]
        if bad:
            raise ValueError(f"{type(self).__name__}: mats={self.mats} names matrices "
                             f"{bad}, but the model has {n} (0..{n - 1})")
        idx = [model.mat_index(k) for k in keys]  # a name it lacks: ValueError naming them
        named = [i for i in idx if isinstance(model.updatemats[i], dict)]
        if named:
            raise ValueError(f"{type(self).__name__} adds a gradient term to an update "
                             f"matrix, but {type(model).__name__}.updatemats{named} hold "
                             "named statistics; give the mixin only matrices with one update "
                             "matrix (mats=[...])")
        self.idx = idx
        self.xp = mm[0].xp
        self.shapes = [m.shape for m in mm]
        self._tmp = _Scratch(model)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_tmp", None)  # scratch space, rebuilt on demand
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._tmp = _Scratch(self.model)

    def _hyper(self, name: str) -> Hyper:
        mm = self.model.modelmats
        return self.hyper(name, self.shapes, mm[0].xp, mm[0].dtype, self.model.row_groups)

    def hand_over(self) -> Any:
        """Called as a finished run's updater lands its model: hand over what the landing
        step needs from this term (:class:`L1Regularizer`: its strength, for the proximal
        step of a run resumed with no step left). Nothing by default."""
        return None

    def gradient(self) -> None:
        """Add this term's ascent direction into ``model.updatemats``.

        The base implementation calls :meth:`_dense_term` per matrix, or records the term
        on the matrix's unformed sparse update when the model handed one over.
        """
        strength = getattr(self, "strength", None)
        if strength is not None and strength.is_zero():
            return
        sparse = sparse_updates(self.model)
        for i in self.idx:
            rec = sparse.get(i) if sparse else None
            if rec is not None:
                rec.add_term(self.term, strength[i] if strength is not None else None, self, i)
            else:
                self._dense_term(i)

    def _dense_term(self, i: int) -> None:
        """Add this term's ascent direction into ``model.updatemats[i]``."""
        raise NotImplementedError

    def score(self) -> float:
        """The current value of the term (a KPI; a penalty is reported as a positive number);
        NaN while ``mixin_kpis`` is off, 0 for a zero strength (no pass over the matrices)."""
        if not self.opts.mixin_kpis:
            return math.nan
        strength = getattr(self, "strength", None)
        if strength is not None and strength.is_zero():
            return 0.0
        return self._value()

    def _value(self) -> float:
        """The term's value, computed from the model matrices."""
        raise NotImplementedError


class _Penalty(Mixin):
    """A penalty ``scale * sum(strength * f(w))`` whose ascent adds ``-strength * f'(w)``
    to the update; the strength is the hyperparameter named like :attr:`term`. Subclasses
    give the fused CPU step and the elementwise parts (into a scratch matrix)."""

    scale = 1.0

    def init(self, model: Any) -> None:
        super().init(model)
        self.strength = self._hyper(self.term)

    def _fused(self, u: Any, w: Any, strength: Any) -> bool:
        """``u -= strength * f'(w)`` in one CPU pass; False where no kernel applies."""
        raise NotImplementedError

    def _slope(self, w: Any, strength: Any, out: Any) -> None:
        """``out = strength * f'(w)``."""
        raise NotImplementedError

    def _f(self, w: Any, out: Any) -> None:
        """``out = f(w)``."""
        raise NotImplementedError

    def _dense_term(self, i: int) -> None:
        u = self.model.updatemats[i].data
        w = self.model.modelmats[i].data
        if self.xp is np and self._fused(u, w, self.strength[i]):
            return
        tmp = self._tmp[i]
        self._slope(w, self.strength[i], tmp)
        self.xp.subtract(u, tmp, out=u)

    def _value(self) -> float:
        total = 0.0
        for i in self.idx:
            tmp = self._tmp[i]
            self._f(self.model.modelmats[i].data, tmp)
            self.xp.multiply(tmp, self.strength[i], out=tmp)
            total += self.scale * float(tmp.sum())
        return total


class L2Regularizer(_Penalty):
    """Penalty ``l2 / 2 * sum(w ** 2)``; adds ``-l2 * w`` to the update."""

    kpi = "l2"
    term = "l2"
    scale = 0.5
    OPTIONS = (Option("l2", float, 0.0, "L2 penalty strength (per-row/per-model vector ok)",
                      low=0.0, vector=True),)

    def _fused(self, u: Any, w: Any, strength: Any) -> bool:
        return steps.subtract_scaled(u, w, strength)

    def _slope(self, w: Any, strength: Any, out: Any) -> None:
        self.xp.multiply(w, strength, out=out)

    def _f(self, w: Any, out: Any) -> None:
        self.xp.multiply(w, w, out=out)


class L1Regularizer(_Penalty):
    """Penalty ``l1 * sum(|w|)``. A matrix whose updater takes L1 as a proximal step (Grad,
    ADAGrad: soft-thresholding by each weight's step size, so weights reach exact zeros)
    gets the strength handed over (``model.l1_prox``); any other gets ``-l1 * sign(w)``
    added to its update."""

    kpi = "l1"
    term = "l1"
    OPTIONS = (Option("l1", float, 0.0, "L1 penalty strength (per-row/per-model vector ok)",
                      low=0.0, vector=True),)

    def hand_over(self) -> list[int] | None:
        """Put the L1 column of each matrix whose updater takes L1 as a proximal step in
        ``model.l1_prox``; returns the other matrices, None when there is no such step."""
        prox = self.model.l1_prox
        if not prox or self.strength.is_zero():
            return None
        for i in self.idx:
            if i in prox:
                prox[i] = self.strength[i]
        return [i for i in self.idx if i not in prox]

    def gradient(self) -> None:
        rest = self.hand_over()
        if rest is None:
            super().gradient()
            return
        if rest:
            idx, self.idx = self.idx, rest
            try:
                super().gradient()
            finally:
                self.idx = idx

    def _fused(self, u: Any, w: Any, strength: Any) -> bool:
        return steps.subtract_scaled_sign(u, w, strength)

    def _slope(self, w: Any, strength: Any, out: Any) -> None:
        self.xp.sign(w, out=out)
        self.xp.multiply(out, strength, out=out)

    def _f(self, w: Any, out: Any) -> None:
        self.xp.abs(w, out=out)


def _matrix_keys(mats: Any, owner: str) -> list[int | str]:
    """``mats`` as a list of model matrix indices and names (one alone is a list of it);
    TypeError naming the forms otherwise."""
    one = isinstance(mats, (numbers.Integral, str)) and not isinstance(mats, bool)
    try:
        keys = [mats] if one else list(mats)
    except TypeError:
        keys = [None]
    if not all(isinstance(k, str) or (isinstance(k, numbers.Integral)
                                      and not isinstance(k, bool)) for k in keys):
        raise TypeError(f"{owner}: mats must name model matrices by index or name, e.g. "
                        f"mats=[0] or mats=['W']; got {mats!r}")
    return [k if isinstance(k, str) else int(k) for k in keys]


MIXINS: dict[str, type[Mixin]] = {"l1": L1Regularizer, "l2": L2Regularizer}
