"""Synthetic topic-model corpora with planted topics: the project's default demo data.

:func:`synthetic_lda_corpus` samples from the LDA generative model. Its planted topics
have Zipf-like word frequencies (so the counts look like text) and each topic owns a
distinct block of words that it ranks highest (so its top words are legible and a trained
model can be checked against it). :func:`block_diagonal_corpus` is the tiny exact toy:
every document draws from one block of words.

Sampling is vectorised: per-document topic counts come from one multinomial draw, then the
words of all tokens of a topic from one inverse-CDF lookup (``searchsorted``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bidlab.datasets.corpus import Corpus, counts_csr
from bidlab.datasets.words import block_owner, topic_vocab


def _doc_lengths(doc_len, n_docs: int, rng: np.random.Generator) -> np.ndarray:
    if isinstance(doc_len, tuple | list):
        if len(doc_len) != 2 or not 1 <= doc_len[0] <= doc_len[1]:
            raise ValueError(f"doc_len=(lo, hi) needs 1 <= lo <= hi, got {tuple(doc_len)}")
        return rng.integers(int(doc_len[0]), int(doc_len[1]) + 1, size=n_docs)
    if not doc_len >= 1:
        raise ValueError(f"doc_len (a mean length) must be >= 1, got {doc_len}")
    return np.maximum(rng.poisson(float(doc_len), size=n_docs), 1)


def planted_topics(
    n_words: int,
    k: int,
    zipf: float = 1.0,
    beta: float | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """k x n_words topic-word probabilities (rows sum to 1) with Zipf-like frequencies.

    Topic t ranks the words of its own block (``block_owner``) first, in block order, then
    every other word in a random order; the word of rank r gets weight ``(r + 1) ** -zipf``.
    With ``beta`` (the mean Dirichlet parameter per word) each row is instead drawn from a
    Dirichlet centred on that Zipf row: smaller beta, noisier topics.
    """
    if zipf < 0:
        raise ValueError(f"zipf must be >= 0, got {zipf}")
    rng = np.random.default_rng(0) if rng is None else rng
    owner = block_owner(n_words, k)
    weights = (np.arange(n_words) + 1.0) ** -zipf
    topics = np.empty((k, n_words))
    words = np.arange(n_words)
    for t in range(k):
        own = words[owner == t]
        rest = rng.permutation(words[owner != t])
        topics[t, np.concatenate([own, rest])] = weights
    topics /= topics.sum(axis=1, keepdims=True)
    if beta is not None:
        if beta <= 0:
            raise ValueError(f"beta must be > 0 (or None for exact Zipf topics), got {beta}")
        gamma = rng.standard_gamma(beta * n_words * topics)
        topics = gamma / gamma.sum(axis=1, keepdims=True)
    return topics


def sample_counts(
    topics: np.ndarray,
    theta: np.ndarray,
    lengths: np.ndarray,
    rng: np.random.Generator,
    dtype: np.dtype | type = np.float32,
) -> sp.csr_matrix:
    """Draw a documents x words count matrix from the LDA model.

    Document d has ``lengths[d]`` tokens; each picks a topic from ``theta[d]`` and a word
    from that topic's row of ``topics``. Row d of the result sums to ``lengths[d]``.
    """
    n_docs, k = theta.shape
    n_words = topics.shape[1]
    per_topic = rng.multinomial(lengths, theta)  # n_docs x k
    doc_index = np.arange(n_docs, dtype=np.int64)
    docs, words = [], []
    for t in range(k):
        n_t = int(per_topic[:, t].sum())
        if n_t == 0:
            continue
        cdf = np.cumsum(topics[t])
        w = np.searchsorted(cdf, rng.random(n_t) * cdf[-1], side="right")
        np.minimum(w, n_words - 1, out=w)
        docs.append(np.repeat(doc_index, per_topic[:, t]))
        words.append(w)
    if not docs:
        return sp.csr_matrix((n_docs, n_words), dtype=dtype)
    return counts_csr(np.concatenate(docs), np.concatenate(words), None, (n_docs, n_words), dtype)


def synthetic_lda_corpus(
    n_docs: int = 2000,
    n_words: int = 5000,
    k: int = 20,
    doc_len: tuple[int, int] | float = (50, 200),
    alpha: float | np.ndarray = 0.1,
    beta: float | None = None,
    zipf: float = 1.0,
    *,
    vocab_style: str = "words",
    seed: int = 0,
    dtype: np.dtype | type = np.float32,
) -> Corpus:
    """A corpus drawn from LDA with planted, legible topics (deterministic for a seed).

    Parameters
    ----------
    n_docs, n_words, k
        documents, vocabulary size, topics.
    doc_len
        ``(lo, hi)`` for lengths uniform in lo..hi, or a mean for Poisson lengths.
    alpha
        Dirichlet prior on each document's topic proportions (scalar or length k).
    beta
        None for exact Zipf topics, else the mean Dirichlet parameter per word of the
        noise around them (see :func:`planted_topics`).
    zipf
        exponent of the word-frequency law within a topic (0 = uniform).
    vocab_style
        ``"words"`` (syllable words; a topic's words share a stem) or
        ``"tagged"`` (``t03_w0012``).

    Notes
    -----

    Returns a :class:`Corpus` with ``topics`` (k x n_words, rows sum to 1) and ``theta``
    (n_docs x k) set.

    Examples
    --------
    >>> from bidlab.datasets import synthetic_lda_corpus
    >>> corpus = synthetic_lda_corpus(n_docs=100, n_words=50, k=4, seed=0)
    >>> corpus.X.shape, corpus.topics.shape
    ((100, 50), (4, 50))
    """
    if n_docs < 1 or k < 1 or n_words < k:
        raise ValueError(
            f"need n_docs >= 1 and 1 <= k <= n_words, got n_docs={n_docs}, k={k}, n_words={n_words}"
        )
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (k,))
    if np.any(alpha <= 0):
        raise ValueError(f"alpha must be > 0, got {alpha}")
    rng = np.random.default_rng(seed)
    topics = planted_topics(n_words, k, zipf, beta, rng)
    theta = rng.dirichlet(alpha, size=n_docs)
    lengths = _doc_lengths(doc_len, n_docs, rng)
    X = sample_counts(topics, theta, lengths, rng, dtype)
    return Corpus(
        X=X,
        vocab=topic_vocab(n_words, k, vocab_style),
        doc_ids=np.arange(n_docs),
        name=f"synthetic-lda(k={k}, seed={seed})",
        topics=topics,
        theta=theta,
    )


def block_diagonal_corpus(
    k: int = 4,
    words_per_topic: int = 5,
    n_docs: int = 200,
    doc_len: tuple[int, int] | int = 40,
    *,
    seed: int = 0,
    dtype: np.dtype | type = np.float32,
) -> Corpus:
    """A toy whose topics are blocks: each document uses the words of exactly one block.

    Topic b is uniform over words ``b*words_per_topic .. (b+1)*words_per_topic - 1``
    (named ``t{b}_w{j}``); documents cycle evenly through the blocks in a shuffled order.
    ``labels`` give each document's block, ``topics``/``theta`` the exact planted model.
    An integer ``doc_len`` is every document's exact length.
    """
    if k < 1 or words_per_topic < 1 or n_docs < 1:
        raise ValueError(
            f"need k, words_per_topic, n_docs >= 1, got {k}, {words_per_topic}, {n_docs}"
        )
    rng = np.random.default_rng(seed)
    topics = np.kron(np.eye(k), np.full((1, words_per_topic), 1.0 / words_per_topic))
    blocks = rng.permutation(np.arange(n_docs) % k)
    theta = np.eye(k)[blocks]
    if isinstance(doc_len, tuple | list):
        lengths = _doc_lengths(doc_len, n_docs, rng)
    else:
        if doc_len < 1:
            raise ValueError(f"doc_len must be >= 1, got {doc_len}")
        lengths = np.full(n_docs, int(doc_len))
    return Corpus(
        X=sample_counts(topics, theta, lengths, rng, dtype),
        vocab=[f"t{b}_w{j}" for b in range(k) for j in range(words_per_topic)],
        labels=blocks.astype(np.int64),
        label_names=[f"topic{b}" for b in range(k)],
        doc_ids=np.arange(n_docs),
        name=f"block-diagonal(k={k})",
        topics=topics,
        theta=theta,
    )
