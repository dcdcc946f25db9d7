"""Topic quality: coherence (``u_mass``, ``c_uci``, ``c_npmi``, ``c_v``) from document
co-occurrence, and topic diversity.

Every measure reads the counts of documents holding a word and a pair of words, over the
reference documents (any documents x vocabulary counts; the training documents by
default). They come from one sparse product ``B.T @ B`` of the documents' 0/1 incidence
restricted to the union of the topics' top words, so the cost is one pass over the
nonzeros of those columns, whatever k is; the per-topic measures are then array
arithmetic on the top words' co-occurrence blocks (no Python loop over word pairs).

With ``D`` documents, ``D(w)`` documents holding w, ``D(w, v)`` both, ``p(w) = D(w) / D``,
``p(w, v) = D(w, v) / D`` and ``eps = 1e-12`` (gensim's ``CoherenceModel`` definitions,
its direct confirmation measures)::

    u_mass  mean over i > j of  log((p(w_i, w_j) + eps) / p(w_j))
    c_uci   mean over i != j of  pmi = log((p(w_i, w_j) + eps) / (p(w_i) p(w_j)))
    c_npmi  mean over i != j of  pmi / -log(p(w_i, w_j) + eps)
    c_v     mean over i of  cos(n_i, sum_j n_j)   with n_i = (npmi(w_i, w_j))_j

(top words w_1, w_2, ... most probable first; ``c_v``'s indirect cosine measure over the
one-set segmentation). Here the co-occurrence window is the whole document; gensim's
``c_uci``, ``c_npmi`` and ``c_v`` default to sliding windows of 10 and 110 tokens (on
bags of words without positions a document is the only window there is).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend

__all__ = ["coherence", "cooccurrence", "top_words", "topic_diversity", "exclusivity",
           "MEASURES"]

MEASURES = ("u_mass", "c_uci", "c_npmi", "c_v")
EPS = 1e-12


def top_words(topics: np.ndarray, top_n: int) -> np.ndarray:
    """k x top_n indices of each topic's most probable words, best first (ties by index)."""
    topics = np.asarray(topics)
    n = max(1, min(int(top_n), topics.shape[1]))
    return np.argsort(-topics, axis=1, kind="stable")[:, :n]


def cooccurrence(X: Any, words: np.ndarray) -> tuple[np.ndarray, int]:
    """(documents holding each pair of ``words`` (len x len; the diagonal: each word),
    number of documents) over the documents x vocabulary counts ``X``."""
    if hasattr(X, "X") and hasattr(X, "vocab"):
        X = X.X
    Xh = sp.csr_matrix(backend.to_host(X))
    sub = Xh[:, words]
    sub.sum_duplicates()
    B = sp.csr_matrix((np.ones(sub.nnz, np.float64), sub.indices, sub.indptr),
                      shape=sub.shape)
    B.data[sub.data == 0] = 0.0
    co = (B.T @ B).toarray()
    return co, int(Xh.shape[0])


def _check(topics: Any, X: Any, measure: str) -> np.ndarray:
    if measure not in MEASURES:
        raise ValueError(f"coherence: unknown measure {measure!r}; choose one of {MEASURES}")
    T = np.asarray(backend.to_host(topics), np.float64)
    if T.ndim != 2 or T.shape[0] < 1:
        raise ValueError(f"coherence: topics must be k x vocabulary; got shape {T.shape}")
    n_cols = X.X.shape[1] if hasattr(X, "X") and hasattr(X, "vocab") else X.shape[1]
    if n_cols != T.shape[1]:
        raise ValueError(f"coherence: the reference documents have {n_cols} words "
                         f"(columns) but the topics have {T.shape[1]}: use documents over "
                         "the model's vocabulary")
    return T


def coherence(topics: Any, X: Any, measure: str = "c_npmi", top_n: int = 10,
              per_topic: bool = False) -> float | np.ndarray:
    """Coherence of the topics (k x vocabulary weights) on reference documents ``X``.

    Parameters
    ----------
    topics: k x vocabulary topic-word weights (rows need not be normalised).
    X: documents x vocabulary counts (scipy / CuPy sparse, numpy, or a Corpus).
    measure: ``"u_mass"``, ``"c_uci"``, ``"c_npmi"`` or ``"c_v"`` (module doc).
    top_n: top words per topic.
    per_topic: return the k values instead of their mean.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]]))
    >>> round(coherence(np.array([[0.5, 0.4, 0.1]]), X, "u_mass", top_n=2), 6)
    0.0
    """
    T = _check(topics, X, measure)
    top = top_words(T, top_n)
    union, local = np.unique(top, return_inverse=True)
    local = local.reshape(top.shape)
    co, D = cooccurrence(X, union)
    n = top.shape[1]
    pair = co[local[:, :, None], local[:, None, :]] / max(D, 1)  # k x n x n
    single = np.maximum(np.diagonal(co)[local] / max(D, 1), EPS)  # k x n
    if measure == "u_mass":
        lower = np.tril(np.ones((n, n), bool), -1)
        vals = np.log((pair + EPS) / single[:, None, :])
        per = (vals * lower).sum(axis=(1, 2)) / max(lower.sum(), 1)
    else:
        joint = pair + EPS
        pmi = np.log(joint / (single[:, :, None] * single[:, None, :]))
        npmi = pmi / -np.log(joint)
        off = ~np.eye(n, dtype=bool)
        if measure == "c_uci":
            per = (pmi * off).sum(axis=(1, 2)) / max(off.sum(), 1)
        elif measure == "c_npmi":
            per = (npmi * off).sum(axis=(1, 2)) / max(off.sum(), 1)
        else:
            whole = npmi.sum(axis=1)  # k x n: the set's vector
            dot = (npmi * whole[:, None, :]).sum(axis=2)
            norms = np.linalg.norm(npmi, axis=2) * np.linalg.norm(whole, axis=1)[:, None]
            per = (dot / np.maximum(norms, 1e-300)).mean(axis=1)
    return per if per_topic else float(per.mean())


def topic_diversity(topics: Any, top_n: int = 25) -> float:
    """The share of distinct words among all topics' top ``top_n`` words (1: no topic
    shares a top word; Dieng et al. 2020).

    Examples
    --------
    >>> topic_diversity(np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]]), top_n=1)
    1.0
    """
    top = top_words(np.asarray(backend.to_host(topics)), top_n)
    return float(np.unique(top).size / top.size)


def exclusivity(topics: Any, top_n: int = 10, per_topic: bool = False) -> float | np.ndarray:
    """How much a topic's top words belong to it alone: the mean over its top ``top_n``
    words of ``p(w | t) / sum over topics of p(w | t')`` (1: no other topic uses them;
    1 / k: every topic uses them alike).

    Examples
    --------
    >>> exclusivity(np.array([[0.6, 0.4, 0.0], [0.0, 0.4, 0.6]]), top_n=1)
    1.0
    """
    T = np.asarray(backend.to_host(topics), np.float64)
    P = T / np.maximum(T.sum(axis=1, keepdims=True), 1e-300)
    top = top_words(P, top_n)
    share = P / np.maximum(P.sum(axis=0, keepdims=True), 1e-300)
    per = np.take_along_axis(share, top, axis=1).mean(axis=1)
    return per if per_topic else float(per.mean())
