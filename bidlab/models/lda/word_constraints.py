"""Word priors and word links of an LDA model, kept in its topic-word counts.

:class:`WordConstraints` (a part of :class:`~bidlab.models.lda.edits.TopicEdits`) holds
the priors ((word, topic) -> pseudo-counts) and the must-link / cannot-link groups, and
writes them into the counts: a prior when it is set, and before every training step the
share of it the step-size schedule is about to decay (``rho / (1 - rho)`` of it for an
online step; all of it after a batch pass replaced the counts); the links at every
training minibatch, and after a batch pass replaced the counts with its sums (see
:mod:`bidlab.models.lda.edits` for what each does).
"""

from __future__ import annotations

import numpy as np

from bidlab import backend
from bidlab.learn import IncNorm
from bidlab.models.lda.reshape import TopicPlan, is_gibbs

__all__ = ["WordConstraints", "contradicting_pair"]


class WordConstraints:
    """Word priors and links (mixed into the LDA models through ``TopicEdits``)."""

    # -- priors and constraints --------------------------------------------------------------
    def _add_counts(self, words: np.ndarray, topics: np.ndarray, values: np.ndarray) -> None:
        """Add ``values`` pseudo-counts at (words, topics) of the model's counts."""
        xp = self.xp
        if is_gibbs(self):
            scaled = values / float(self._a)
            self.NT.data[words, topics] += xp.asarray(scaled.astype(self.dtype))
            if xp is np:
                np.add.at(self._colsum, topics, scaled)
                self._update_params()
            else:
                self._count_columns()
        else:
            self.lamT.data[words, topics] += xp.asarray(values.astype(self.dtype))
            self._stale = True
            self.sync()

    def _set_prior(self, w: int, t: int, weight: float) -> None:
        old = self.word_priors.pop((w, t), 0.0)
        if weight > 0:
            self.word_priors[(w, t)] = float(weight)
        delta = np.array([weight - old])
        if is_gibbs(self):  # never below zero counts
            have = float(self.NT.data[w, t]) * float(self._a)
            delta = np.maximum(delta, -have)
        elif delta[0] < 0:
            have = float(self.lamT.data[w, t]) - float(self.opts.beta)
            delta = np.maximum(delta, -max(have, 0.0))
        self._add_counts(np.array([w]), np.array([t]), delta)

    def _remap_priors(self, plan: TopicPlan) -> None:
        """The priors on the topics of ``plan``: merged topics' add up, a deleted topic's
        go, and a split topic's follow the word's counts (each half takes the share of
        the word it took, all of it for the words that went wholly to one half)."""
        old, self.word_priors = self.word_priors, {}
        for j in range(plan.k):
            src = plan.sources[j]
            olds = src[1] if src[0] == "sum" else [src[1]] if src[0] == "part" else []
            for (w, t), v in old.items():
                share = v * float(src[2][w]) if src[0] == "part" else v
                if t in olds and share > 0:
                    self.word_priors[(w, j)] = self.word_priors.get((w, j), 0.0) + share

    def _prior_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The priors as (words, topics, pseudo-counts) arrays."""
        keys = list(self.word_priors)
        return (np.array([w for w, _ in keys], np.int64), np.array([t for _, t in keys],
                np.int64), np.array([self.word_priors[key] for key in keys], np.float64))

    def _keep_priors(self) -> None:
        """Put back the share of the priors the next online step will decay. (A batch pass
        gets them at its end, in the sums it replaced the counts with: :meth:`end_pass`.)"""
        lr = self._learner()
        up = lr.updater if lr is not None else None
        if isinstance(up, IncNorm):
            words, topics, values = self._prior_arrays()
            rho = min(up.next_step(), 0.999)
            self._add_counts(words, topics, values * (rho / (1.0 - rho)))

    def _keep_links(self, after_batch_pass: bool = False) -> None:
        """Rewrite the linked words' counts so that the must-link and cannot-link groups
        hold; ``after_batch_pass``: on the sums a batch pass just replaced the topic-word
        counts with (no prior ``beta`` in them yet, the model adds it next)."""
        xp = self.xp
        gibbs = is_gibbs(self)
        M = self.NT.data if gibbs else self.lamT.data
        floor = 0.0 if gibbs or after_batch_pass else float(self.opts.beta)
        for kind, groups in (("must", self.must_links), ("cannot", self.cannot_links)):
            for words in groups:
                idx = np.asarray(words)
                old = np.asarray(backend.to_host(M[idx]), np.float64)
                R = np.maximum(old - floor, 0.0)
                R = _must(R) if kind == "must" else _cannot(R)
                M[idx] = xp.asarray((R + floor).astype(self.dtype))
                if gibbs:
                    delta = (R + floor - old).sum(axis=0)
                    self._colsum += xp.asarray(delta)
        if gibbs:
            self._update_params()
        elif after_batch_pass:
            self._stale = True  # the model refreshes exp E[log phi] once it adds beta
        else:
            self._stale = True
            self.sync()

    def _batch_replaced(self) -> bool:
        """Whether the pass that just ended replaced the topic-word counts with its sums
        (batch variational Bayes), undoing the links the minibatches kept."""
        if is_gibbs(self) or getattr(self.opts, "method", None) != "batch":
            return False
        lr = self._learner()
        up = lr.updater if lr is not None else None
        return (up is not None and getattr(up, "sums", None) is not None
                and getattr(getattr(up, "opts", None), "batch_mode", None) == "replace"
                and self._sums_applied())

    def _sums_applied(self) -> bool:
        """Whether the updater's pass end just put the pass's sums in the topic-word counts:
        not after a pass that trained no minibatch (every one held out for validation),
        which leaves the counts, priors included, as they were."""
        lr = self._learner()
        return bool(getattr(lr.updater if lr is not None else None, "applied", True))

    def end_pass(self, pass_: int) -> None:
        """After a batch pass replaced the counts with its sums, add the priors to them
        (those set now: once, whenever in the pass they were set, and whatever
        checkpoint the pass resumed from) and make the links hold in them again, as the
        minibatches did in the counts they trained on."""
        super().end_pass(pass_)  # type: ignore[misc]
        if not (self.word_priors or self.must_links or self.cannot_links):
            return
        if not self._batch_replaced():
            return
        if self.word_priors:
            words, topics, values = self._prior_arrays()
            self.lamT.data[words, topics] += self.xp.asarray(values.astype(self.dtype))
            self._stale = True  # the model refreshes exp E[log phi] once it adds beta
        if self.must_links or self.cannot_links:
            self._keep_links(after_batch_pass=True)


def _must(R: np.ndarray) -> np.ndarray:
    """The words' rows sharing one distribution over topics, each keeping its total."""
    tot = R.sum(axis=1, keepdims=True)
    share = R.sum(axis=0)
    s = share.sum()
    if s <= 0:
        return R
    return tot * (share / s)[None, :]


def _cannot(R: np.ndarray) -> np.ndarray:
    """In each topic both words use, the one with the smaller share of its own counts
    there moves that count to its other topics (in proportion; evenly when it has no
    count elsewhere).

    >>> _cannot(np.array([[0.0, 5.0, 0.0], [0.0, 3.0, 0.0]])).tolist()
    [[0.0, 5.0, 0.0], [1.5, 0.0, 1.5]]
    """
    R = R.copy()
    tot = R.sum(axis=1, keepdims=True)
    p = R / np.maximum(tot, 1e-300)
    both = (R[0] > 0) & (R[1] > 0)
    for t in np.flatnonzero(both):
        loser = 0 if p[0, t] < p[1, t] else 1
        moved = R[loser, t]
        others = R[loser].copy()
        others[t] = 0.0
        s = others.sum()
        if s <= 0:  # no count elsewhere (nor has the other word): evenly to the others
            others, s = (np.arange(R.shape[1]) != t).astype(np.float64), R.shape[1] - 1.0
            if s <= 0:  # a single topic: nowhere to go
                continue
        R[loser] += moved * others / s
        R[loser, t] = 0.0
    return R


def contradicting_pair(must: list[list[int]], cannot: list[list[int]]) -> tuple[int, int] | None:
    """A cannot-link pair whose two words must-link groups join (directly, or through
    groups sharing a word), or None when the links agree.

    >>> contradicting_pair([[1, 2], [2, 3]], [[3, 1]]), contradicting_pair([[1, 2]], [[1, 4]])
    ((3, 1), None)
    """
    parent: dict[int, int] = {}

    def root(w: int) -> int:
        while parent.get(w, w) != w:
            w = parent[w]
        return w

    for group in must:
        for w in group[1:]:
            parent[root(int(w))] = root(int(group[0]))
    for a, b in cannot:
        if root(int(a)) == root(int(b)):
            return int(a), int(b)
    return None
