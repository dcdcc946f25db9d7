"""The two most distinct word groups of a topic: how :meth:`split_topic` seeds its halves.

The topic's leading words (those above the uniform probability, at most ``n_words``) are
described by the documents they occur in; their document co-occurrence profiles
(``B.T @ B`` of the documents' 0/1 word incidence, one sparse product) are cosine-normalised
and clustered by a 2-means started from the two least alike leading words. A word of the
topic outside the leading ones is shared between the halves in proportion to its
co-occurrence with each group.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend

__all__ = ["topic_words", "two_groups"]


def topic_words(counts: np.ndarray, n_words: int = 200) -> np.ndarray:
    """Indices of the words of a topic (counts over the vocabulary) whose probability is
    above the uniform 1 / V, most probable first, at most ``n_words``."""
    total = float(counts.sum())
    if total <= 0:
        return np.zeros(0, np.int64)
    p = counts / total
    words = np.flatnonzero(p > 1.0 / counts.shape[0])
    order = np.argsort(-p[words], kind="stable")
    return words[order[:n_words]]


def two_groups(X: Any, counts: np.ndarray, n_words: int = 200,
               iters: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Split a topic's words in two: returns (weights of the first half per word (V,) in
    [0, 1], the leading words' group labels 0 / 1 in the order of :func:`topic_words`).

    ``X`` is documents x vocabulary counts (scipy or CuPy sparse); ``counts`` the topic's
    counts over the vocabulary. Raises ValueError when the topic has fewer than two words
    that co-occur with anything.
    """
    words = topic_words(counts, n_words)
    if words.size < 2:
        raise ValueError(
            f"this topic has {words.size} word(s) above the uniform probability, so there "
            "is nothing to split it into: split a topic with at least two words of its own "
            "(or add_topic(seed_words=[...]) for another topic)")
    Xh = sp.csr_matrix(backend.to_host(X))
    B = Xh[:, words]
    B = sp.csr_matrix((np.ones_like(B.data, dtype=np.float64), B.indices, B.indptr),
                      shape=B.shape)
    keep = np.flatnonzero(np.diff(B.indptr) > 0)
    B = B[keep]
    co = (B.T @ B).toarray()  # leading words x leading words
    norms = np.sqrt((co * co).sum(axis=1))
    if (norms > 0).sum() < 2:
        raise ValueError("the documents given hold fewer than two of this topic's words: "
                         "pass documents that use the topic (X=...) to split it")
    prof = co / np.maximum(norms, 1e-300)[:, None]
    sim = prof @ prof.T
    a = int(np.argmax(norms > 0))  # the most probable word that occurs
    far = np.where(norms > 0, sim[a], np.inf)
    b = int(np.argmin(far))
    centres = prof[[a, b]]
    labels = np.zeros(words.size, np.int64)
    for _ in range(iters):
        score = prof @ centres.T
        new = np.argmax(score, axis=1)
        new[norms == 0] = 0
        if (new == labels).all() and _ > 0:
            break
        labels = new
        for g in (0, 1):
            members = prof[labels == g]
            centres[g] = members.mean(axis=0) if members.size else prof[[a, b][g]]
    if labels.min() == labels.max():
        labels[b] = 1 - labels[a]
    weights = np.full(counts.shape[0], 0.5)
    weights[words] = (labels == 0).astype(np.float64)
    # the other words of the topic: shared by their co-occurrence with each group (one
    # sparse product over all the documents: each word's documents' group contents)
    rest = np.setdiff1d(np.flatnonzero(counts > 0), words)
    if rest.size and B.shape[0]:
        groups = np.stack([labels == 0, labels == 1], axis=1).astype(np.float64)
        per_doc = np.zeros((Xh.shape[0], 2))
        per_doc[keep] = B @ groups  # how much of each group a document holds
        inc = sp.csr_matrix((np.ones(Xh.nnz), Xh.indices, Xh.indptr), shape=Xh.shape)
        with_group = np.asarray(inc.T @ per_doc)[rest]  # rest x 2
        tot = with_group.sum(axis=1)
        share = np.where(tot > 0, with_group[:, 0] / np.maximum(tot, 1e-300), 0.5)
        weights[rest] = share
    return weights, labels
