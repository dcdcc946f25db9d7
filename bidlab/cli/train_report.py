"""What ``bidlab train`` prints once an estimator has trained: its score on the held-out
rows (and a topic model's document-completion perplexity), a topic model's topics, and a
graph ranking's top vertices; and the names of the data's columns or vertices it keeps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["TOPIC_WORDS", "TOP_VERTICES", "name_features", "ranking_text", "score_note",
           "topics_text"]

TOPIC_WORDS = 10  # words printed per topic for a model with top_words
TOP_VERTICES = 10  # vertices printed for a graph ranking (a model with top)


def score_note(est: Any, X: Any, y: Any, no_score: str) -> str:
    """``score S (ClassName.score on N held-out rows)``, or why there is none (``no_score``
    when no rows were held out)."""
    score = getattr(est, "score", None)
    if score is None:
        return ""
    if X is None:
        return no_score
    try:
        value = float(score(X) if y is None else score(X, y))
    except Exception as exc:  # the run succeeded; say why there is no score
        return f"no score ({type(exc).__name__}: {exc})"
    note = f"score {value:.6g} ({type(est).__name__}.score on {X.shape[0]} held-out rows"
    if callable(getattr(est, "perplexity", None)):
        note += f"; perplexity {math.exp(-value):.6g}, document completion"
    return note + ")"


def topics_text(est: Any) -> str:
    """Each topic's top words, one line per topic ("" for a model without topics)."""
    if not callable(getattr(est, "top_words", None)):
        return ""
    try:
        topics = est.top_words(TOPIC_WORDS)
    except Exception as exc:  # the run succeeded; say why there are no topics
        return f"no topics ({type(exc).__name__}: {exc})\n"
    return "".join(f"topic {t:3d}: {' '.join(map(str, words))}\n"
                   for t, words in enumerate(topics))


def name_features(est: Any, data: Any) -> None:
    """Give the fitted ``est`` the names ``data`` holds, kept when it is saved: a topic
    model the vocabulary (``vocab_``: ``top_words()`` shows words), a graph ranking the
    edge list's vertex ids (``ids_``: ``scores_[i]`` is vertex ``ids_[i]``'s score)."""
    vocab = getattr(data, "vocab", None)
    if vocab is not None and callable(getattr(est, "top_words", None)):
        est.vocab_ = list(vocab)
    ids = (getattr(data, "extra", None) or {}).get("ids")
    if ids is not None and hasattr(type(est), "ids_"):
        est.ids_ = np.asarray(ids)


def ranking_text(est: Any) -> str:
    """A graph ranking's (PageRank's) end: how its iterations ended, then its
    :data:`TOP_VERTICES` best vertices with their scores, named by the graph's own ids
    when it has them, one line each ("" for a model that ranks nothing)."""
    if not callable(getattr(est, "top", None)) or getattr(est, "model_", None) is None:
        return ""
    try:
        top = est.top(TOP_VERTICES)
    except Exception as exc:  # the run succeeded; say why there is no ranking
        return f"no ranking ({type(exc).__name__}: {exc})\n"
    lines = []
    stop = getattr(est.model_, "stop_text", None)
    if callable(stop):
        lines.append(f"{type(est).__name__} {stop()}")
    named = "id in the data file" if getattr(est, "ids_", None) is not None else "index"
    lines.append(f"top {len(top)} vertices (vertex {named}, score):")
    width = max((len(str(v)) for v, _ in top), default=0)
    lines += [f"{rank:4d}. {v!s:>{width}}  {score:.6g}" for rank, (v, score) in
              enumerate(top, 1)]
    return "".join(f"{line}\n" for line in lines)


def result_line(learner: Any, checkpoint: str | None, extra: str = "") -> str:
    """The run's last line: minibatches and samples, the pass's train and validation
    scores, ``extra`` (held-out score, saved file) and the checkpoint's path."""
    m = learner.metrics
    parts = [f"done: {learner.step} minibatches, {learner.samples} samples"]
    scores = [f"{what} {m[key]:.6g}" for what, key in
              (("train", "pass_train_score"), ("val", "pass_val_score"))
              if m[key] == m[key]]
    if scores:
        parts.append(", ".join(scores) + f" ({learner.model.score_name})")
    if extra:
        parts.append(extra)
    if checkpoint:
        parts.append(f"checkpoint {checkpoint}")
    return "; ".join(parts) if len(parts) > 1 else parts[0]
