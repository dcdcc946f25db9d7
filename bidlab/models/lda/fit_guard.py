"""What the LDA estimators check and keep around a training call.

* :func:`kept_on_error` -- a ``fit``, ``partial_fit`` or ``learner`` call that refuses
  its input (bad counts, no document with a token, a parameter the fitted model cannot
  follow) leaves the estimator as it was: a fitted model stays fitted, and a refused
  first call leaves no ``n_features_in_``, vocabulary or empty-document count behind.
* :func:`corpus_counts` -- the counts of a Corpus; training on one keeps its vocabulary
  (``vocab_``), training on counts without words forgets an earlier one.
* :func:`check_corpus_vocab` -- a :class:`bidlab.datasets.Corpus` given to a fitted
  estimator must be counted over the vocabulary it was trained with: a different
  vocabulary of the same size would otherwise be read column by column as the training
  one, silently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["kept_on_error", "check_corpus_vocab", "corpus_counts"]


@contextlib.contextmanager
def kept_on_error(est: Any) -> Iterator[None]:
    """Restore the attributes of ``est`` as they were when the block raises.

    Parameters
    ----------
    est : object
        The estimator; its ``__dict__`` is copied (shallowly) on entry and put back when
        the block raises, so attributes the block set, replaced or deleted come back.
        Objects the block changed in place are not restored.
    """
    saved = dict(est.__dict__)
    try:
        yield
    except BaseException:
        est.__dict__.clear()
        est.__dict__.update(saved)
        raise


def check_corpus_vocab(owner: str, vocab: Sequence[str] | None, X: Any) -> None:
    """Refuse a Corpus ``X`` whose vocabulary is not ``vocab`` (the training one).

    Parameters
    ----------
    owner : str
        The estimator's class name, for the message.
    vocab : sequence of str or None
        The vocabulary the estimator was trained with (None: unknown, nothing to check).
    X : object
        The input; only a Corpus (``.X`` and ``.vocab``) with a vocabulary is checked.

    Raises
    ------
    ValueError
        Naming the first column whose word differs.
    """
    theirs = getattr(X, "vocab", None) if hasattr(X, "X") else None
    if vocab is None or theirs is None or len(theirs) != len(vocab):
        return  # (a different size is refused by the feature count check)
    for j, (a, b) in enumerate(zip(vocab, theirs, strict=True)):
        if str(a) != str(b):
            raise ValueError(
                f"{owner}: this Corpus is counted over another vocabulary than the one the "
                f"model was trained with (column {j} is {b!r} here, {a!r} in training): "
                "count it over the training vocabulary (e.g. vocabulary=train.vocab)")


def corpus_counts(est: Any, X: Any, reset: bool) -> Any:
    """``X``'s counts when it is a :class:`bidlab.datasets.Corpus`, else ``X``.

    Parameters
    ----------
    est : object
        The estimator: with ``reset`` (training from scratch) its ``vocab_`` becomes the
        Corpus's vocabulary, or is removed for counts without one (a vocabulary of an
        earlier fit would name the new columns wrongly); else a Corpus must hold
        ``vocab_`` (:func:`check_corpus_vocab`).
    X : object
        The input.
    reset : bool
        Whether the estimator trains from scratch on ``X``.
    """
    corpus = hasattr(X, "X") and hasattr(X, "vocab")
    if reset:
        est.__dict__.pop("vocab_", None)
        if corpus:
            est.vocab_ = list(X.vocab)
    elif corpus:
        check_corpus_vocab(type(est).__name__, getattr(est, "vocab_", None), X)
    return X.X if corpus else X
