"""The per-parameter temperatures of SAME Gibbs LDA: queued changes and their log.

:class:`Temperatures` is the part of :class:`~bidlab.models.lda.gibbs_model.LDAGibbsModel` that
sets the k x vocabulary temperature matrix (``temp``, stored vocabulary x k): a change is
queued, written by the training thread at the start of its next minibatch (or at once
when no learner runs) and logged in :attr:`Temperatures.temperature_log` with the pass and
minibatch it took effect at. The log keeps the last ``TEMPERATURE_LOG_KEPT`` (10,000)
changes; ``temperature_log_dropped`` counts the older ones it let go.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern import lda_sampler
from bidlab.learn import Option
from bidlab.models.lda.gibbs_params import TEMPERATURE

__all__ = ["TEMPERATURE", "TEMPERATURE_LOG_KEPT", "Temperatures"]

TEMPERATURE_LOG_KEPT = 10_000  #: temperature changes the log keeps (the oldest go first)


class QueuedWhileTraining:
    """Changes queued in ``_pending`` wait for the training thread while a learner runs
    (or pauses) on the model (``_learner_ref``, a weak reference), and apply at once
    otherwise, logged at :meth:`_position`. Subclasses give ``apply_pending(where)``.
    """

    _learner_ref: Any = None

    def training_active(self) -> bool:
        """True while a learner runs (or pauses) on this model."""
        lr = self._learner_ref() if self._learner_ref is not None else None
        return lr is not None and lr.state in ("running", "paused")

    def apply_pending_if_idle(self) -> None:
        """Apply the queued changes now unless a learner is training this model."""
        if not self.training_active():
            self.apply_pending(self._position())

    def _position(self) -> dict[str, Any]:
        raise NotImplementedError

    def apply_pending(self, where: dict[str, Any]) -> None:
        raise NotImplementedError


class Temperatures(QueuedWhileTraining):
    """Temperature changes of a Gibbs LDA model (mixed into ``LDAGibbsModel``, which
    provides ``temp``, ``_pending``, ``_temp_lock``, ``_learner_ref`` and the counters).

    Attributes
    ----------
    temperature_log
        the last ``TEMPERATURE_LOG_KEPT`` changes, oldest first, each a
        dict with the pass and minibatch it took effect at, topic, word and value.
    temperature_log_dropped
        how many older changes the log let go.
    """

    temperature_log_dropped: int = 0

    def bind(self, learner: Any) -> None:
        """The learner training this model: while it runs, temperature changes wait for
        the next minibatch."""
        self._learner_ref = weakref.ref(learner)
        super().bind(learner)  # type: ignore[misc]

    def temperature(self) -> np.ndarray:
        """The k x vocabulary temperature matrix (a host copy)."""
        self.apply_pending_if_idle()
        return np.ascontiguousarray(np.asarray(backend.to_host(self.temp.data)).T)

    def set_temperature(self, value: float, topic: int | None = None,
                        word: int | None = None, owner: str = "LDAGibbs") -> None:
        """Set the temperature of one (topic, word) entry, a topic row, a word column or all.

        ``topic`` and ``word`` given: one entry; only ``topic``: that topic's row; only
        ``word``: that word's column; neither: every entry. ``value`` must be > 0 (1 is
        the default; > 1 heats). Safe while a learner trains: the change takes effect at
        the next minibatch and is logged in :attr:`temperature_log`.
        """
        spec = Option(**{**TEMPERATURE.__dict__, "owner": owner})
        value = spec.check(value)
        if not self.initialised:
            raise RuntimeError(f"this {owner} is not fitted yet: call fit(X) or "
                               "partial_fit(X) first (or init() its learner)")
        V, k = self.vocab_size, int(self.opts.n_components)
        for name, idx, size in (("topic", topic, k), ("word", word, V)):
            if idx is None:
                continue
            if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
                raise TypeError(f"temperature {name} index must be an int; got {idx!r}")
            if not 0 <= int(idx) < size:
                raise IndexError(
                    f"temperature index (topic={topic}, word={word}) is outside the k x "
                    f"vocabulary = {k} x {V} temperature matrix: {name} must be in "
                    f"0..{size - 1}")
        self._pending.append((None if topic is None else int(topic),
                              None if word is None else int(word), float(value)))
        self.apply_pending_if_idle()

    def _position(self) -> dict[str, Any]:
        return {"pass": self.n_passes_done, "batch": self.n_batches}

    def apply_pending(self, where: dict[str, Any]) -> None:
        """Write queued temperature changes into the matrix (training thread, or when
        idle), logging each with ``where``: the pass and minibatch it takes effect at."""
        if not self._pending:
            return
        with self._temp_lock:
            log = self.temperature_log
            while self._pending:
                topic, word, value = self._pending.popleft()
                t = self.temp.data  # V x k
                rows = slice(None) if word is None else word
                cols = slice(None) if topic is None else topic
                t[rows, cols] = value
                if topic is None and word is None:
                    self._temp_active = value != 1.0
                elif value != 1.0:
                    self._temp_active = True
                log.append({**where, "topic": topic, "word": word, "value": value})
            extra = len(log) - TEMPERATURE_LOG_KEPT
            if extra > 0:  # the oldest go first
                del log[:extra]
                self.temperature_log_dropped += extra
            if self._scratch is not None and self._scratch.get("hot") is not None:
                lda_sampler.heated_words(self.temp.data, self._scratch["hot"])
