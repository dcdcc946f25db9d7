"""A topic edit asked for (:class:`EditTicket`, which the asker can wait on) and the checks
of its arguments (topic ids, vocabulary indices), made where the edit is asked for, so a
bad one is refused before anything is queued."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

__all__ = ["EditTicket", "topic_id", "word_id"]


class EditTicket:
    """A queued edit: :meth:`wait` blocks until the training thread applied it and returns
    its log entry (or raises what stopped it).

    Examples
    --------
    >>> ticket = learner.merge_topics([0, 3])    # doctest: +SKIP
    >>> ticket.wait()["k_after"]                 # doctest: +SKIP
    9
    """

    def __init__(self, kind: str, args: dict[str, Any]) -> None:
        self.kind, self.args = kind, args
        self.requested = time.perf_counter()
        self.entry: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = 30.0) -> dict[str, Any]:
        """The edit's log entry once applied; raises TimeoutError or the edit's error."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the {self.kind} edit was not applied within {timeout} s: is "
                               "the learner paused? resume() it")
        if self.error is not None:
            raise self.error
        assert self.entry is not None
        return self.entry


def _index(x: Any, n: int, not_int: str, out_of_range: str) -> int:
    """``x`` as an index in ``0..n - 1``; else TypeError ``not_int`` or IndexError
    ``out_of_range`` (both formatted with ``x`` and ``n``)."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(not_int.format(x=x, n=n))
    if not 0 <= int(x) < n:
        raise IndexError(out_of_range.format(x=int(x), n=n, last=n - 1))
    return int(x)


def topic_id(t: Any, k: int, what: str) -> int:
    return _index(t, k, what + ": a topic id must be an int; got {x!r}",
                  what + ": topic {x} is out of range: this model has {n} topics, numbered "
                  "0..{last}")


def word_id(w: Any, V: int, what: str) -> int:
    return _index(w, V, what + ": a word must be a vocabulary index (int) here; got {x!r}",
                  what + ": word {x} is not in the vocabulary of {n} words (0..{last}): use "
                  "a word the model was trained with")
