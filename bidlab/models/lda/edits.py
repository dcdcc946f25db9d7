"""Structural edits of the topics while an LDA model trains: merge, split, delete and add
topics, per-topic word priors, and must-link / cannot-link word constraints.

:class:`TopicEdits` is mixed into :class:`~bidlab.models.lda.LDAModel` and
:class:`~bidlab.models.lda.LDAGibbsModel`. An edit asked for from any thread is checked
at once (a bad one raises and changes nothing), queued, and applied by the training
thread at the start of its next training minibatch -- or at once when no learner runs the
model. Applying one remaps every matrix with a topic axis (:mod:`bidlab.models.lda.reshape`):
the model's topic-word counts, the documents' kept topic weights, the learner's updater
state and the ``n_components`` option, so the number of topics k changes everywhere. Each
applied edit is appended to :attr:`TopicEdits.topic_edit_log` (with the pass and
minibatch it took effect at, k before and after, and its latency), which checkpoints and
saved files carry.

Numbering after an edit: a merge keeps the merged topic at the lowest of its ids and the
later topics move down; a deletion moves the later topics down; a split keeps the first
half at the topic's id and appends the second as topic k; an added topic is topic k. An
edit queued behind others names topics as they leave them; when one of those fails, the
later edits that name topics fail too.

Word priors and constraints act on the topic-word counts at every training minibatch:
a prior of ``weight`` pseudo-counts for (word, topic) is added to the counts when set and
kept there as the step-size schedule decays them (the moving average's share of it is put
back before each step); a must-link group makes its words share one distribution over
topics (their counts are reassigned, each word keeping its total); a cannot-link pair
keeps the two words out of the same topics (in each topic both use, the word for which
it matters less has its count there moved to its other topics). This is Interactive
Topic Modeling's unassign-and-resample, on the moving-average counts.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections import deque
from typing import Any

import numpy as np

import bidlab as bl
from bidlab.models.lda import edit_requests, reshape
from bidlab.models.lda.edit_plans import topic_plan
from bidlab.models.lda.edit_requests import EditTicket, topic_id, word_id
from bidlab.models.lda.reshape import TopicPlan, topic_counts
from bidlab.models.lda.word_constraints import WordConstraints, contradicting_pair
from bidlab.models.lda.word_groups import topic_words

__all__ = ["TopicEdits", "EditTicket"]

_LOG_KEPT = 10_000


class TopicEdits(WordConstraints):
    """Topic edits of an LDA model (see the module doc). Mixed into the model classes.

    Attributes
    ----------
    topic_edit_log
        the applied edits, oldest first (the last 10,000).
    word_priors
        (word, topic) -> pseudo-counts, kept in the counts while training.
    must_links
        groups of words that share one distribution over topics.
    cannot_links
        pairs of words kept out of the same topics.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._edit_queue: deque = deque()
        self._edit_lock = threading.RLock()  # views hold it too (steering)
        self._learner_ref: Any = None
        self.topic_edit_log: list[dict[str, Any]] = []
        self.word_priors: dict[tuple[int, int], float] = {}
        self.must_links: list[list[int]] = []
        self.cannot_links: list[list[int]] = []

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in ("_edit_queue", "_edit_lock", "word_priors", "_owner_ref",
                     "_edit_log_mat"):
            state.pop(name, None)
        state["word_prior_list"] = [[int(w), int(t), float(v)]
                                    for (w, t), v in self.__dict__.get("word_priors",
                                                                       {}).items()]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        priors = state.pop("word_prior_list", None) or []
        super().__setstate__(state)
        self._edit_queue = deque()
        self._edit_lock = threading.RLock()  # views hold it too (steering)
        self.word_priors = {(int(w), int(t)): float(v) for w, t, v in priors}
        for name, empty in (("topic_edit_log", []), ("must_links", []), ("cannot_links", [])):
            self.__dict__.setdefault(name, empty)

    def set_owner(self, estimator: Any) -> None:
        """The estimator whose model this is (its ``n_components`` and updater follow the
        edits)."""
        self._owner_ref = weakref.ref(estimator)

    def bind(self, learner: Any) -> None:
        """The learner training this model: while it runs, edits wait for its next
        minibatch."""
        self._learner_ref = weakref.ref(learner)
        super().bind(learner)

    # -- checkpoints: the log, priors and constraints as one JSON document -----------------
    def extra_state(self) -> dict[str, Any]:
        """Besides the model's: the edit log, word priors and links (UTF-8 JSON bytes, under
        a name holding their length), empty ones too (a checkpoint from before any edit
        takes the later ones back when loaded)."""
        state = super().extra_state()
        doc = {"log": self.topic_edit_log, "must": self.must_links, "cannot": self.cannot_links,
               "priors": [[w, t, v] for (w, t), v in self.word_priors.items()]}
        raw = np.frombuffer(json.dumps(doc).encode(), np.uint8)[None, :].copy()
        self._edit_log_mat = bl.Mat(raw)
        return {**state, f"topic_edits_{raw.shape[1]}": self._edit_log_mat}

    def components(self) -> np.ndarray:
        """The topics (k x vocabulary), read while no edit lands (an edit swaps several
        matrices: a read between two of them mixed two values of k)."""
        with self._edit_lock:
            return super().components()

    def restored(self, earlier: dict[str, Any]) -> None:
        """After a checkpoint: its edits, and the estimator's ``n_components`` its k."""
        raw = next((a for name, a in earlier.items() if name.startswith("topic_edits_")), None)
        if raw is None and self.__dict__.get("_edit_log_mat") is not None:
            raw = self._edit_log_mat.numpy()  # the file's, written in place (or ours)
        super().restored({k: v for k, v in earlier.items()
                          if not k.startswith("topic_edits_")})
        est = self._estimator()
        if est is not None:
            est.n_components = int(self.opts.n_components)
        if raw is None:
            return
        doc = json.loads(np.asarray(raw, np.uint8).tobytes().decode())
        self.topic_edit_log = list(doc.get("log", []))
        self.must_links = [[int(w) for w in g] for g in doc.get("must", [])]
        self.cannot_links = [[int(w) for w in g] for g in doc.get("cannot", [])]
        self.word_priors = {(int(w), int(t)): float(v) for w, t, v in doc.get("priors", [])}

    # -- asking for edits (any thread) --------------------------------------------------------
    def _k_planned(self) -> int:
        k = int(self.opts.n_components)
        for ticket in list(self._edit_queue):
            k += {"merge": 1 - len(ticket.args.get("topics", ())), "split": 1, "delete": -1,
                  "add": 1}.get(ticket.kind, 0)
        return k

    def _ready(self, what: str) -> None:
        if not self.initialised:
            raise RuntimeError(f"{what}: the model has not trained yet: call fit(X) or "
                               "partial_fit(X) first (or init() its learner)")
        edit_requests.check_ranks_idle(self._learner(), what)

    def merge_topics(self, topics: Any) -> EditTicket:
        """Merge ``topics`` (two or more different ids) into one, at the lowest id."""
        self._ready("merge_topics")
        if isinstance(topics, (str, bytes)) or not hasattr(topics, "__iter__"):
            raise TypeError(f"merge_topics takes a list of two or more topic ids; got "
                            f"{topics!r}: pass e.g. merge_topics([2, 5])")
        with self._edit_lock:  # no edit lands between the check and the queuing
            ids = [topic_id(t, self._k_planned(), "merge_topics") for t in list(topics)]
            if len(set(ids)) < 2 or len(set(ids)) != len(ids):
                raise ValueError(f"merge_topics needs two or more different topics; got "
                                 f"{ids}: list each topic once, e.g. merge_topics([2, 5])")
            ticket = self._queue("merge", topics=sorted(ids))
        return self._submit(ticket)

    def split_topic(self, topic: int, X: Any = None) -> EditTicket:
        """Split ``topic`` in two, seeded by its two most distinct word groups.

        Each word's counts go to the half of its group (a word outside the topic's
        leading ones is shared by its co-occurrence with each group), and a word prior on
        the topic follows them: the half that took the word takes its prior, each half
        the share of it it took of a shared word.

        Parameters
        ----------
        topic : int
            The topic to split.
        X : documents x vocabulary counts, optional
            The documents whose word co-occurrence finds the groups: scipy / CuPy sparse,
            numpy, or a :class:`bidlab.datasets.Corpus`, over the model's vocabulary.
            Default: the training documents of the learner training this model; a model
            no learner trains (a fitted estimator's) keeps none, so it needs ``X``.
        """
        self._ready("split_topic")
        t = topic_id(topic, self._k_planned(), "split_topic")
        X = (self._documents() if X is None
             else edit_requests.split_documents(X, int(self.vocab_size)))
        with self._edit_lock:  # no edit lands between the check and the counts' read
            t = topic_id(topic, self._k_planned(), "split_topic")
            n = 2 if self._edit_queue else topic_words(topic_counts(self)[:, t]).size
            if n < 2:
                raise ValueError(f"split_topic: topic {t} has {n} word(s) above the uniform "
                                 "probability, so there is nothing to split it into: split "
                                 "a topic with at least two words of its own")
            ticket = self._queue("split", topic=t, X=X)
        return self._submit(ticket)

    def delete_topic(self, topic: int) -> EditTicket:
        """Delete ``topic``; its documents' weight goes to the other topics."""
        self._ready("delete_topic")
        with self._edit_lock:  # no edit lands between the check and the queuing
            k = self._k_planned()
            t = topic_id(topic, k, "delete_topic")
            if k <= 1:
                raise ValueError("delete_topic: this is the last topic; a model needs at "
                                 "least one: add_topic(seed_words=[...]) first, or train a "
                                 "new model")
            ticket = self._queue("delete", topic=t)
        return self._submit(ticket)

    def add_topic(self, seed_words: Any, weight: float | None = None) -> EditTicket:
        """Add a topic seeded with ``seed_words`` (vocabulary indices); with ``weight``
        each seed word also gets a lasting prior of that many pseudo-counts in it. The
        seed is an average topic's share of the counts, taken from the other topics in
        proportion (the total stays; see :mod:`bidlab.models.lda.edit_plans`)."""
        self._ready("add_topic")
        words = sorted({word_id(w, int(self.vocab_size), "add_topic")
                        for w in list(seed_words)})
        if not words:
            raise ValueError("add_topic needs at least one seed word")
        if weight is not None and (isinstance(weight, (bool, np.bool_, str)) or not (
                np.isfinite(float(weight)) and float(weight) > 0)):
            raise ValueError(f"add_topic: weight must be finite and > 0 pseudo-counts; got "
                             f"{weight}: pass a positive number such as weight=50.0, or "
                             "weight=None for no lasting prior")
        return self._submit(self._queue("add", words=words, weight=None if weight is None
                                        else float(weight)))

    def set_word_prior(self, word: int, topic: int, weight: float) -> EditTicket:
        """Keep ``weight`` pseudo-counts of ``word`` in ``topic`` (0 removes the prior)."""
        self._ready("set_word_prior")
        w = word_id(word, int(self.vocab_size), "set_word_prior")
        with self._edit_lock:  # no edit lands between the check and the queuing
            t = topic_id(topic, self._k_planned(), "set_word_prior")
            if isinstance(weight, (bool, np.bool_)) or not isinstance(
                    weight, (int, float, np.integer, np.floating)):
                raise TypeError(f"set_word_prior: weight must be a number of pseudo-counts; "
                                f"got {weight!r} ({type(weight).__name__}): pass e.g. 5.0")
            if not np.isfinite(weight) or float(weight) < 0:
                raise ValueError(f"set_word_prior: weight must be finite and >= 0 "
                                 f"pseudo-counts; got {weight}")
            ticket = self._queue("prior", word=w, topic=t, weight=float(weight))
        return self._submit(ticket)

    def must_link(self, words: Any) -> EditTicket:
        """Make ``words`` (two or more vocabulary indices) share their topics."""
        return self._link("must_link", words)

    def cannot_link(self, word_a: int, word_b: int) -> EditTicket:
        """Keep two words out of the same topics."""
        return self._link("cannot_link", [word_a, word_b])

    def _link(self, kind: str, words: Any) -> EditTicket:
        self._ready(kind)
        ids = [word_id(w, int(self.vocab_size), kind) for w in list(words)]
        if len(set(ids)) < 2 or len(set(ids)) != len(ids):
            raise ValueError(f"{kind} needs two or more different words; got {ids}")
        with self._edit_lock:
            queued = {name: [tk.args["words"] for tk in self._edit_queue if tk.kind == name]
                      for name in ("must_link", "cannot_link")}
            must = self.must_links + queued["must_link"] + ([ids] if kind == "must_link"
                                                            else [])
            cannot = self.cannot_links + queued["cannot_link"] + (
                [ids] if kind == "cannot_link" else [])
            clash = contradicting_pair(must, cannot)
            if clash is not None:
                raise ValueError(f"{kind}({ids}): words {clash[0]} and {clash[1]} would be "
                                 "both must-linked and cannot-linked; keep one of the two "
                                 "links")
            ticket = self._queue(kind, words=ids)
        return self._submit(ticket)

    def _queue(self, kind: str, **args: Any) -> EditTicket:
        """Queue a checked edit; the asker holds the edit lock from its checks of the planned
        topics to here (an edit landing between would change them)."""
        with self._edit_lock:
            ticket = EditTicket(kind, args)
            self._edit_queue.append(ticket)
        return ticket

    def _submit(self, ticket: EditTicket) -> EditTicket:
        """Apply the queued edits at once when no learner trains the model (one that fails
        raises here); called with the edit lock let go (a learner ending takes it)."""
        self._apply_if_idle()
        if ticket.error is not None:
            raise ticket.error
        return ticket

    def _learner(self) -> Any:
        return self._learner_ref() if self._learner_ref is not None else None

    def _apply_if_idle(self) -> None:
        lr = self._learner()
        if lr is None:
            self.apply_topic_edits(training=False)
            return
        with lr._cond:  # a start() waits until the edit is in
            if lr.state not in ("running", "paused"):
                self.apply_topic_edits(training=False)

    def run_ended(self, state: str, error: BaseException | None) -> None:
        """Called by the learner when its run ends: the edits still queued (asked for while
        it was paused, or after its last minibatch) are applied now when it ended cleanly
        (``error`` None: done or stopped at a minibatch boundary), else their tickets fail
        with an error saying so and the model keeps none of them. No edit waits for a
        later run or for the next edit asked for.

        Parameters
        ----------
        state : str
            How the run ended: ``"done"``, ``"stopped"`` or ``"failed"``.
        error : BaseException or None
            What ended it, None for a clean end.
        """
        if not self._edit_queue:
            return
        if error is None:
            try:
                self.apply_topic_edits(training=False)
                return
            except Exception as exc:  # noqa: BLE001 - the tickets left get it below
                error = exc
        with self._edit_lock:
            while self._edit_queue:
                ticket = self._edit_queue.popleft()
                ticket.error = RuntimeError(
                    f"the {ticket.kind} edit was not applied: the learner {state} "
                    f"({type(error).__name__}: {error}) before it could be, so the model "
                    "does not have it: ask for the edit again once the model is trained "
                    "(fit, or start() the learner)")
                ticket.error.__cause__ = error
                ticket._done.set()

    # -- applying (the training thread, at a minibatch's start) ---------------------------
    def apply_topic_edits(self, training: bool = True) -> None:
        """Apply the queued edits; at the start of a training minibatch (``training``)
        also keep the priors and constraints. Called by the training thread, and with
        ``training=False`` at once while no learner runs."""
        if self._edit_queue:
            with self._edit_lock:
                self._before_edits()
                failed = None  # a reshape that failed: the later edits' topic ids are off
                while self._edit_queue:
                    ticket = self._edit_queue.popleft()
                    if failed is not None and edit_requests.refused_after(ticket, failed):
                        continue
                    self._apply_one(ticket)
                    if ticket.error is not None and ticket.kind in ("split", "merge",
                                                                    "delete", "add"):
                        failed = ticket
        if not training:
            return
        if self.word_priors:
            self._keep_priors()
        if self.must_links or self.cannot_links:
            self._keep_links()

    def _before_edits(self) -> None:
        """Apply what was checked against the topics as they are before the queued edits
        (the Gibbs model's queued temperature changes); called under the edit lock."""

    def _apply_one(self, ticket: EditTicket) -> None:
        k0 = int(self.opts.n_components)
        start = time.perf_counter()
        try:
            result = self._do(ticket.kind, ticket.args, k0)
        except Exception as exc:  # noqa: BLE001 - handed to the caller's wait()
            ticket.error = exc
            ticket._done.set()
            return
        lr = self._learner()
        entry = {"kind": ticket.kind, **{k: v for k, v in ticket.args.items() if k != "X"},
                 "pass": int(self.n_passes_done), "batch": int(self.n_batches),
                 "step": int(lr.step) if lr is not None else None, "k_before": k0,
                 "k_after": int(self.opts.n_components),
                 "latency_s": time.perf_counter() - ticket.requested,
                 "apply_s": time.perf_counter() - start, **result}
        log = self.topic_edit_log
        log.append(entry)
        del log[:-_LOG_KEPT]
        ticket.entry = entry
        ticket._done.set()

    def _estimator(self) -> Any:
        lr = self._learner()
        est = getattr(lr, "estimator", None) if lr is not None else None
        if est is None:
            ref = self.__dict__.get("_owner_ref")
            est = ref() if ref is not None else None
        return est

    def _reshape(self, plan: TopicPlan) -> None:
        lr = self._learner()
        est = self._estimator()
        ups = (lr.updater if lr is not None else None,
               est.__dict__.get("updater_") if est is not None else None)
        reshape.reshape_model(self, plan, lr, ups)
        if est is not None:
            est.n_components = plan.k
        self._remap_priors(plan)

    def _do(self, kind: str, a: dict[str, Any], k: int) -> dict[str, Any]:
        if kind in ("merge", "delete", "split", "add"):
            plan, result = topic_plan(kind, a, k, topic_counts(self), self._documents)
            self._reshape(plan)
            if plan.kept != 1.0 and self.word_priors:  # the priors' pseudo-counts stay whole
                words, topics, values = self._prior_arrays()
                self._add_counts(words, topics, values * (1.0 - plan.kept))
            if kind == "add" and a.get("weight"):
                for w in a["words"]:
                    self._set_prior(w, k, a["weight"])
            return result
        if kind == "prior":
            self._set_prior(a["word"], topic_id(a["topic"], k, "set_word_prior"),
                            a["weight"])
            return {}
        if kind in ("must_link", "cannot_link"):
            (self.must_links if kind == "must_link" else self.cannot_links).append(
                list(a["words"]))
            self._keep_links()
            return {}
        raise ValueError(f"unknown topic edit {kind!r}")

    def _documents(self) -> Any:
        """The training documents of the learner training this model; else ValueError
        asking for them (the model itself keeps only its last minibatch, too few)."""
        lr = self._learner()
        edit_requests.check_split_rows(lr)
        mats = getattr(getattr(lr, "source", None), "_mats", None) if lr is not None else None
        if mats:
            return mats[0]
        raise ValueError("split_topic needs documents to find the topic's word groups, and "
                         "this model keeps none once its learner is gone (a fitted "
                         "estimator's): pass X=... (the training documents, or others over "
                         "the model's vocabulary)")

    def topic_edit_counts(self) -> np.ndarray:
        """The topic-word counts the edits act on, k x vocabulary host float64."""
        return np.ascontiguousarray(topic_counts(self).T)

