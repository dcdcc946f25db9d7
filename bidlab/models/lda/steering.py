"""Topic steering on the faces users hold: the LDA estimators and their live learner.

:class:`TopicSteering` gives :class:`~bidlab.models.LDA`, :class:`~bidlab.models.LDAGibbs`
and :class:`~bidlab.models.lda.learner.LDALearner` the structural edits of
:mod:`bidlab.models.lda.edits` with words named by vocabulary strings or indices, and the
quality measures and views that come with them: coherence
(:mod:`bidlab.models.lda.coherence`), the intertopic map and the pyLDAvis export
(:mod:`bidlab.models.lda.export`), and :meth:`TopicSteering.topic_diff`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.models.lda import coherence as _coherence
from bidlab.models.lda import common
from bidlab.models.lda import export as _export
from bidlab.models.lda.edit_requests import check_split_rows
from bidlab.models.lda.edits import EditTicket
from bidlab.models.lda.fit_guard import check_corpus_vocab

__all__ = ["TopicSteering", "resolve_words"]


def resolve_words(words: Any, vocab: Sequence[str] | None, what: str) -> list[int]:
    """Vocabulary indices of ``words`` (strings looked up in ``vocab``, or indices)."""
    if isinstance(words, (str, int, np.integer)):
        words = [words]
    out = []
    index = None
    for w in words:
        if isinstance(w, str):
            if vocab is None:
                raise ValueError(f"{what}: the word {w!r} is a string but this model has no "
                                 "vocabulary: fit it on a Corpus or a DataFrame, or pass "
                                 "vocabulary indices")
            if index is None:
                index = {str(v): i for i, v in enumerate(vocab)}
            if w not in index:
                raise ValueError(f"{what}: the word {w!r} is not in the model's vocabulary "
                                 f"of {len(index)} words: use a word the model was trained "
                                 "with")
            out.append(index[w])
        else:
            out.append(w)
    return out


def _topics_of(other: Any) -> Any:
    """The k x vocabulary topic weights of ``other``: a bidlab topic model, a model with
    ``get_topics()`` (gensim) or ``components_`` (scikit-learn), or a matrix."""
    if isinstance(other, TopicSteering):
        return other._topics()
    if callable(getattr(other, "get_topics", None)):
        return other.get_topics()
    if hasattr(other, "components_"):
        return other.components_
    if backend.is_cupy_array(other) or backend.is_sparse(other):
        return backend.to_host(other.toarray() if backend.is_sparse(other) else other)
    theirs = np.asarray(other)
    if theirs.dtype.kind not in "biuf":
        raise TypeError(f"topic_diff: other is a {type(other).__name__}, not topics: pass a "
                        "fitted topic model (bidlab, scikit-learn or gensim) or a k x "
                        "vocabulary matrix of topic-word weights")
    return theirs


class TopicSteering:
    """Topic edits, coherence, the intertopic map and exports (see the module doc).

    Examples
    --------
    >>> est = bidlab.models.LDAGibbs(n_components=20).fit(corpus)     # doctest: +SKIP
    >>> est.merge_topics([3, 7]).wait()                                # doctest: +SKIP
    >>> est.add_topic(seed_words=["space", "nasa", "orbit"])          # doctest: +SKIP
    >>> est.coherence(corpus, measure="c_npmi")                       # doctest: +SKIP
    """

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Loaded or copied: a fitted model (``model_``) again tells this face of the topic
        edits made through it (its link here is not saved), so ``n_components`` follows k."""
        parent = getattr(super(), "__setstate__", None)
        if parent is None:
            self.__dict__.update(state)
        else:
            parent(state)
        model = self.__dict__.get("model_")
        if model is not None and hasattr(model, "set_owner"):
            model.set_owner(self)

    # -- the parts each face supplies -----------------------------------------------------
    def _steer_model(self) -> Any:
        raise NotImplementedError

    def _steer_vocab(self) -> Sequence[str] | None:
        return None

    def _steer_docs(self) -> Any:
        """The training documents, when the face keeps them (else None)."""
        return None

    def _reference(self, X: Any, owner: str) -> Any:
        """``X`` (default: the training documents, or None); a Corpus counted over another
        vocabulary than the model's is refused, not read column by column."""
        X = X if X is not None else self._steer_docs()
        if X is not None:
            check_corpus_vocab(owner, self._steer_vocab(), X)
        return X

    # -- edits ----------------------------------------------------------------------------
    def merge_topics(self, topics: Sequence[int]) -> EditTicket:
        """Merge two or more topics into one (at the lowest id): at the next minibatch of a
        running learner, else at once (the ticket is then done)."""
        return self._steer_model().merge_topics(topics)

    def split_topic(self, topic: int, X: Any = None) -> EditTicket:
        """Split a topic in two, seeded by its two most distinct word groups (their
        document co-occurrence in ``X``: documents x vocabulary counts or a Corpus;
        default the training documents of a live learner -- a fitted estimator keeps
        none, so pass ``X`` there; so does a rank of several, the same on every rank)."""
        model = self._steer_model()
        if X is None:  # a rank's own rows would split the topic otherwise than the others'
            check_split_rows(model._learner())
        return model.split_topic(topic, X=self._reference(X, "split_topic"))

    def delete_topic(self, topic: int) -> EditTicket:
        """Delete a topic (its documents' weight goes to the others)."""
        return self._steer_model().delete_topic(topic)

    def add_topic(self, seed_words: Any, weight: float | None = None) -> EditTicket:
        """Add a topic seeded with ``seed_words`` (strings or indices); ``weight``: a lasting
        prior of that many pseudo-counts per seed word."""
        words = resolve_words(seed_words, self._steer_vocab(), "add_topic")
        return self._steer_model().add_topic(words, weight=weight)

    def set_word_prior(self, word: Any, topic: int, weight: float) -> EditTicket:
        """Keep ``weight`` pseudo-counts of ``word`` in ``topic`` while training (0
        removes it)."""
        (w,) = resolve_words([word], self._steer_vocab(), "set_word_prior")
        return self._steer_model().set_word_prior(w, topic, weight)

    def must_link(self, words: Any) -> EditTicket:
        """Make two or more words share their topics (Interactive Topic Modeling)."""
        return self._steer_model().must_link(resolve_words(words, self._steer_vocab(),
                                                           "must_link"))

    def cannot_link(self, word_a: Any, word_b: Any) -> EditTicket:
        """Keep two words out of the same topics (Interactive Topic Modeling)."""
        a, b = resolve_words([word_a, word_b], self._steer_vocab(), "cannot_link")
        return self._steer_model().cannot_link(a, b)

    @property
    def topic_edit_log(self) -> list[dict[str, Any]]:
        """The applied topic edits, oldest first (pass, minibatch, k before and after)."""
        return list(self._steer_model().topic_edit_log)

    # -- quality and views ----------------------------------------------------------------
    def _topics(self) -> np.ndarray:
        return self._steer_model().components()

    def coherence(self, X: Any = None, measure: str = "c_npmi", top_n: int = 10,
                  per_topic: bool = False) -> Any:
        """Topic coherence on the reference documents ``X`` (default: the training
        documents); see :func:`bidlab.models.lda.coherence.coherence`."""
        X = self._reference(X, "coherence")
        if X is None:
            raise ValueError("coherence needs reference documents: pass X=...")
        return _coherence.coherence(self._topics(), X, measure=measure, top_n=top_n,
                                    per_topic=per_topic)

    def _unedited(self) -> Any:
        """A context in which no topic edit lands (the model's edit lock): a view that
        reads the topics and the documents' topic weights reads them for one k."""
        lock = getattr(self._steer_model(), "_edit_lock", None)
        return lock if lock is not None else contextlib.nullcontext()

    def intertopic_map(self, X: Any = None) -> dict[str, np.ndarray]:
        """The topics placed in 2-D by Jensen-Shannon distance and classical MDS; see
        :func:`bidlab.models.lda.export.intertopic_map`."""
        X = self._reference(X, "intertopic_map")
        with self._unedited():
            weight = None if X is None else self._topic_weights(X)
            topics = self._topics()
        return _export.intertopic_map(topics, weight)

    def to_pyldavis(self, X: Any = None, vocab: Sequence[str] | None = None,
                    lambda_step: float = 0.01, R: int = 30) -> dict[str, Any]:
        """pyLDAvis's prepared data (a JSON-ready dict); see
        :func:`bidlab.models.lda.export.prepared_data`."""
        _export.check_lambda_step(lambda_step, "to_pyldavis")  # before the documents' theta
        X = self._reference(X, "to_pyldavis")
        if X is None:
            raise ValueError("to_pyldavis needs the documents: pass X=...")
        with self._unedited():
            theta = self._theta(X)
            topics = self._topics()
        vocab = vocab if vocab is not None else self._steer_vocab()
        return _export.prepared_data(topics, theta, X, vocab, lambda_step=lambda_step, R=R)

    def transform_texts(self, texts: Sequence[str], lowercase: bool = True,
                        token_pattern: str = r"(?u)\b\w\w+\b") -> np.ndarray:
        """Topic proportions of raw documents, counted over the fitted vocabulary (words
        outside it are dropped) with the tokenizer of :func:`bidlab.datasets.load_text_folder`
        (``lowercase`` and ``token_pattern`` as it was given); documents x k."""
        from sklearn.feature_extraction.text import CountVectorizer  # noqa: PLC0415 - slow

        vocab = self._steer_vocab()
        if vocab is None:
            raise ValueError("transform_texts needs the model's vocabulary: fit it on a Corpus "
                             "(bidlab.datasets.load_text_folder) or on a DataFrame")
        if isinstance(texts, str | bytes):
            raise TypeError("transform_texts takes a list of documents, not one string: "
                            "wrap it in a list")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str | bytes):
                raise TypeError(f"transform_texts: document {i} is a "
                                f"{type(text).__name__} ({text!r:.40}), not a string: pass "
                                "each document's raw text (str), e.g. '' for an empty one")
        model = self._steer_model()
        if not texts:  # no documents: no rows (CountVectorizer would give a 0-row matrix)
            return np.empty((0, int(model.opts.n_components)), np.float64)
        counts = CountVectorizer(vocabulary=list(vocab), lowercase=lowercase,
                                 token_pattern=token_pattern).transform(texts)
        C = common.as_counts(counts, owner="transform_texts", dtype=model.dtype)
        if model.xp is not np:
            C = backend.to_device(C)
        return np.asarray(backend.to_host(model.transform(C)), np.float64)

    def topic_diff(self, other: Any, distance: str = "jensen_shannon") -> np.ndarray:
        """k x k' differences between this model's topics and ``other``'s (an estimator, a
        learner, a model with scikit-learn's ``components_`` or gensim's ``get_topics()``,
        or a k' x vocabulary matrix), as gensim's ``LdaModel.diff`` with ``normed=False``:
        ``"jensen_shannon"`` gives the divergence, not its square root; see
        :func:`bidlab.models.lda.export.topic_diff`."""
        return _export.topic_diff(self._topics(), _topics_of(other), distance)

    def _theta(self, X: Any, owner: str = "to_pyldavis") -> np.ndarray:
        model = self._steer_model()
        C = common.as_counts(X, owner=owner, dtype=model.dtype)
        V = int(model.vocab_size)
        if C.shape[1] != V:
            raise ValueError(f"{owner}: X has {C.shape[1]} words (columns) but the model's "
                             f"vocabulary has {V}: pass documents counted over the vocabulary "
                             "the model was trained with")
        if model.xp is not np:
            C = backend.to_device(backend.to_host(C))
        return np.asarray(backend.to_host(model.transform(C)), np.float64)

    def _topic_weights(self, X: Any) -> np.ndarray:
        theta = self._theta(X, owner="intertopic_map")
        lengths = np.asarray(common.as_counts(X, owner="intertopic_map",
                                              dtype=np.float64).sum(axis=1)).ravel()
        return (theta * lengths[:, None]).sum(axis=0)
