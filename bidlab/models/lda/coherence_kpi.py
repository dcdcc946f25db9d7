"""Coherence as a live learner metric: :class:`CoherenceKPI`, a mixin with no gradient.

Give it to an LDA learner (``LDAGibbs(...).learner(X, mixins=[CoherenceKPI("c_npmi")])``)
and the learner's metrics (``learner.metrics``, the dashboard, observers) carry the
topics' mean coherence under ``kpi_coherence_<measure>``. It is recomputed from the current
topics at most every ``every`` seconds, on at most ``max_docs`` reference documents (the
learner's training documents unless ``X`` is given), so its cost stays a small share of
training; between recomputations the last value is reported.

Settings that could never give a score are refused when the KPI is made (a ``top_n`` whose
working arrays exceed :data:`bidlab.models.lda.coherence.MEMORY_BUDGET` even for one topic)
and when it is attached to the model (reference documents over another vocabulary, fewer
than two words, a ``top_n`` too large for the model's k topics): the learner reports a
failing KPI as NaN, so a refusal at every score would only show as a NaN. A score that fails
all the same (e.g. reference documents without a word) keeps its message in ``error`` and
is warned about (once while it keeps failing).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np

from bidlab.learn.mixins import Mixin
from bidlab.models.lda import coherence as coh
from bidlab.models.validation import whole_at_least_one

__all__ = ["CoherenceKPI"]


class CoherenceKPI(Mixin):
    """The topics' coherence in the learner's metrics (see the module doc).

    Parameters
    ----------
    measure
        ``"u_mass"``, ``"c_uci"``, ``"c_npmi"`` or ``"c_v"``.
    X
        reference documents x vocabulary counts: scipy / CuPy sparse, numpy, nested
        lists or a :class:`bidlab.datasets.Corpus` (default: the learner's documents).
    top_n
        top words per topic (2 or more).
    every
        seconds between recomputations (0 or more).
    max_docs
        reference documents used (the first ones; 1 or more).

    Examples
    --------
    >>> lr = LDAGibbs(20).learner(X, mixins=[CoherenceKPI("c_npmi")])  # doctest: +SKIP
    >>> lr.start(); ...; lr.metrics["kpi_coherence_c_npmi"]              # doctest: +SKIP
    """

    #: why the last score failed (None: it did not; a class default for saved learners)
    error: str | None = None

    def __init__(self, measure: str = "c_npmi", X: Any = None, top_n: int = 10,
                 every: float = 5.0, max_docs: int = 5000) -> None:
        super().__init__()
        if measure not in coh.MEASURES:
            raise ValueError(f"CoherenceKPI: unknown measure {measure!r}; choose one of "
                             f"{coh.MEASURES}")
        if isinstance(top_n, (bool, np.bool_)) or not isinstance(
                top_n, (int, np.integer)) or top_n < 2:
            raise ValueError(f"CoherenceKPI: top_n must be an int >= 2 (coherence compares "
                             f"pairs of a topic's top words); got {top_n!r}: pass e.g. "
                             "top_n=10")
        if X is not None:  # checked here: a refusal at every score would only show as NaN
            if isinstance(X, (list, tuple)):
                X = np.asarray(X, dtype=np.float64)
            X = coh._reference_counts(X)  # a Corpus's counts too, as host CSR
        if isinstance(every, (bool, np.bool_)) or not isinstance(
                every, (int, float, np.integer, np.floating)) or not every >= 0:
            raise ValueError(f"CoherenceKPI: every must be a number of seconds >= 0 between "
                             f"recomputations; got {every!r}: pass e.g. every=5.0")
        self.measure, self.X, self.top_n = measure, X, int(top_n)
        # one topic at least: a top_n too large for any model is refused now
        self._check_budget(1, self.top_n if X is None else int(X.shape[1]))
        self.every = float(every)
        self.max_docs = whole_at_least_one("CoherenceKPI", "max_docs", max_docs)
        self.kpi = f"coherence_{measure}"
        self._value = float("nan")
        self._when = -float("inf")
        self.error = None

    def init(self, model: Any) -> None:
        """Attach to the model; ValueError for settings no score could be computed with
        (see the module doc)."""
        super().init(model)
        k, V = (int(n) for n in model.modelmats[0].shape)
        if V < 2:
            raise ValueError(f"CoherenceKPI: the model has {V} word(s); coherence compares "
                             "pairs of words, so it needs a vocabulary of two or more: "
                             "leave the KPI out")
        if self.X is not None and int(self.X.shape[1]) != V:
            raise ValueError(f"CoherenceKPI: the reference documents X have "
                             f"{int(self.X.shape[1])} words (columns) but the model has {V}: "
                             "pass documents counted over the model's vocabulary")
        self._check_budget(k, V)

    def _check_budget(self, k: int, V: int) -> None:
        """ValueError when ``top_n`` top words of ``k`` topics over ``V`` words (all of
        their top words distinct, the most there can be) would exceed the coherence's
        memory budget."""
        n = min(self.top_n, V)
        try:
            coh._check_budget(self.top_n, k, n, min(k * n, V), V, self.measure, "gensim")
        except ValueError as exc:
            raise ValueError("CoherenceKPI: " + str(exc).removeprefix("coherence: ")
                             ) from None

    def gradient(self) -> None:
        """No loss term: the coherence is only reported."""

    def _documents(self) -> Any:
        if self.X is not None:
            return self.X
        finder = getattr(self.model, "_learner", None)
        lr = finder() if finder is not None else None
        mats = getattr(getattr(lr, "source", None), "_mats", None)
        return mats[0] if mats else None

    def score(self) -> float:
        now = time.monotonic()
        if now - self._when < self.every:
            return self._value
        self._when = now
        docs = self._documents()
        if docs is None or not self.model.initialised:
            return self._value
        docs = docs[: min(int(docs.shape[0]), self.max_docs)]
        try:
            self._value = float(coh.coherence(self.model.components(), docs, self.measure,
                                              top_n=self.top_n))
        except ValueError as exc:  # reported as NaN; said once, kept in ``error``
            if self.error is None:
                warnings.warn(f"CoherenceKPI: the {self.kpi} KPI is NaN: {exc}",
                              RuntimeWarning, stacklevel=2)
            self.error, self._value = str(exc), math.nan
            return self._value
        self.error = None
        return self._value
