"""A topic edit asked for (:class:`EditTicket`, which the asker can wait on) and the checks
of its arguments (topic ids, vocabulary indices), made where the edit is asked for, so a
bad one is refused before anything is queued."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from bidlab.models.lda import common

__all__ = ["EditTicket", "check_ranks_idle", "check_split_rows", "refused_after",
           "split_documents", "topic_id", "word_id"]


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


def check_ranks_idle(learner: Any, what: str) -> None:
    """Refuse a topic edit while ``learner``, one rank of several, runs or is paused.

    Each rank applies a queued edit at its own next minibatch, so the ranks would meet at
    a sync point with different numbers of topics (or, with an edit asked on one rank,
    never agree again). Stopped, the ranks hold one model (the end sync point) and an
    edit asked on each rank's learner lands at once on each.
    """
    comm = getattr(learner, "comm", None)
    if learner is None or getattr(comm, "size", 1) <= 1:
        return
    if learner.state in ("running", "paused"):
        raise RuntimeError(
            f"{what}: this learner is rank {comm.rank} of {comm.size} and is "
            f"{learner.state}: a topic edit cannot land on every rank at the same "
            "minibatch while they train: stop() the learners of all the ranks, make the "
            "same edit on each one's learner (it lands at once), then start() them again")


def check_split_rows(learner: Any) -> None:
    """Refuse to split a topic of one rank of several by its own rows: each rank's
    documents would find other word groups, and the ranks' models would differ."""
    comm = getattr(learner, "comm", None)
    if learner is not None and getattr(comm, "size", 1) > 1:
        raise ValueError(f"split_topic: this learner is rank {comm.rank} of {comm.size}, "
                         "whose own rows would split the topic otherwise than the other "
                         "ranks' do: pass X=... (the same documents on every rank)")


def split_documents(X: Any, V: int) -> Any:
    """``X`` as canonical CSR counts (what fit accepts: sparse, numpy, a Corpus) over a
    vocabulary of ``V`` words; else ValueError / TypeError naming the problem."""
    C = common.as_counts(X, owner="split_topic", dtype=np.float64)
    if C.shape[1] != V:
        raise ValueError(f"split_topic: X has {C.shape[1]} words (columns) but the model's "
                         f"vocabulary has {V}: pass documents counted over the vocabulary "
                         "the model was trained with")
    return C


def refused_after(ticket: EditTicket, failed: EditTicket) -> bool:
    """Fail ``ticket`` when it names topics (queued after ``failed``, a change of the
    topics that failed when applied, it named them as that change would have left them:
    applied now, it would edit other topics than asked); returns whether it did."""
    if ticket.kind not in ("merge", "delete", "split", "prior"):
        return False
    ticket.error = RuntimeError(
        f"the {ticket.kind} edit was not applied: the {failed.kind} edit queued before it "
        f"failed ({type(failed.error).__name__}: {failed.error}), so the topic ids it names, "
        "counted after that edit, no longer mean the topics asked for: ask for it again "
        "with the topics as they are now")
    ticket.error.__cause__ = failed.error
    ticket._done.set()
    return True
