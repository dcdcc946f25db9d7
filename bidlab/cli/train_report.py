"""What ``bidlab train`` prints once an estimator has trained: its score on the held-out
rows (and a topic model's document-completion perplexity), and a topic model's topics."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["TOPIC_WORDS", "score_note", "topics_text"]

TOPIC_WORDS = 10  # words printed per topic for a model with top_words


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
