"""What each structural topic edit does to the set of topics: the
:class:`~bidlab.models.lda.reshape.TopicPlan` of a merge, a deletion, a split and an added
topic, made from the model's topic-word counts as they are when the edit lands.

An added topic is seeded with an average topic's share of the counts, ``1 / (k + 1)`` of
their total, most of it on its seed words; the other topics give up the same share of
theirs (the plan's ``kept``), so an edit never changes the total the training keeps
estimating (an online model would otherwise take many steps to shed the extra mass, and
topics added again and again grew it without bound).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bidlab.models.lda.edit_requests import topic_id
from bidlab.models.lda.reshape import TopicPlan
from bidlab.models.lda.word_groups import two_groups

__all__ = ["topic_plan"]


def topic_plan(kind: str, a: dict[str, Any], k: int, C: np.ndarray,
               documents: Callable[[], Any]) -> tuple[TopicPlan, dict[str, Any]]:
    """The plan of one edit and what its log entry adds (the topics it made).

    Parameters
    ----------
    kind : str
        ``"merge"``, ``"delete"``, ``"split"`` or ``"add"``.
    a : dict
        The edit's arguments (as queued; topic ids are checked again against ``k``).
    k : int
        The number of topics before the edit.
    C : ndarray
        The topic-word counts, vocabulary x k host float64.
    documents : callable
        Returns the documents a split finds its word groups in when ``a`` has none.
    """
    if kind == "merge":
        topics = [topic_id(t, k, "merge_topics") for t in a["topics"]]
        keep = [t for t in range(k) if t not in topics[1:]]
        return TopicPlan([("sum", topics) if t == topics[0] else ("sum", [t])
                          for t in keep]), {"topic": topics[0]}
    if kind == "delete":
        t = topic_id(a["topic"], k, "delete_topic")
        if k <= 1:
            raise ValueError("delete_topic: this is the last topic")
        return TopicPlan([("sum", [j]) for j in range(k) if j != t]), {}
    if kind == "split":
        t = topic_id(a["topic"], k, "split_topic")
        X = a.get("X")
        weights, _ = two_groups(documents() if X is None else X, C[:, t])
        srcs: list[tuple[Any, ...]] = [("sum", [j]) for j in range(k)]
        srcs[t] = ("part", t, weights, 0.5)
        srcs.append(("part", t, 1.0 - weights, 0.5))
        return TopicPlan(srcs), {"topics": [t, k]}
    if kind == "add":
        V = C.shape[0]
        mass = float(C.sum()) / (k + 1)  # an average topic's share once it is in
        seed = np.full(V, 0.1 * mass / V)
        seed[a["words"]] += 0.9 * mass / len(a["words"])
        return TopicPlan([*[("sum", [j]) for j in range(k)], ("new", seed)],
                         kept=k / (k + 1)), {"topic": k}
    raise ValueError(f"unknown topic edit {kind!r}")
