"""Coherence as a live learner metric: :class:`CoherenceKPI`, a mixin with no gradient.

Give it to an LDA learner (``LDAGibbs(...).learner(X, mixins=[CoherenceKPI("c_npmi")])``)
and the learner's metrics (``learner.metrics``, the dashboard, observers) carry the
topics' mean coherence under ``kpi_coherence_<measure>``. It is recomputed from the current
topics at most every ``every`` seconds, on at most ``max_docs`` reference documents (the
learner's training documents unless ``X`` is given), so its cost stays a small share of
training; between recomputations the last value is reported.
"""

from __future__ import annotations

import time
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
        seconds between recomputations.
    max_docs
        reference documents used (the first ones; 1 or more).

    Examples
    --------
    >>> lr = LDAGibbs(20).learner(X, mixins=[CoherenceKPI("c_npmi")])  # doctest: +SKIP
    >>> lr.start(); ...; lr.metrics["kpi_coherence_c_npmi"]              # doctest: +SKIP
    """

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
        self.measure, self.X, self.top_n = measure, X, int(top_n)
        self.every = float(every)
        self.max_docs = whole_at_least_one("CoherenceKPI", "max_docs", max_docs)
        self.kpi = f"coherence_{measure}"
        self._value = float("nan")
        self._when = -float("inf")

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
        self._value = float(coh.coherence(self.model.components(), docs, self.measure,
                                          top_n=self.top_n))
        return self._value
