"""Topic quality: coherence (``u_mass``, ``c_uci``, ``c_npmi``, ``c_v``) from document
co-occurrence, and topic diversity.

Every measure reads the counts of documents holding a word and a pair of words, over the
reference documents (any documents x vocabulary counts; the training documents by
default). They come from one pass of a kernel over the documents
(:func:`bidlab.kern.cooccur.document_cooccurrence`: the pairs of the union of the topics'
top words that each document holds), whatever k is; the per-topic measures are then array
arithmetic on the top words' co-occurrence blocks (no Python loop over word pairs).

With ``D`` documents, ``D(w)`` documents holding w, ``D(w, v)`` both, ``p(w) = D(w) / D``,
``p(w, v) = D(w, v) / D`` and ``eps = 1e-12`` (gensim's ``CoherenceModel`` definitions,
its direct confirmation measures)::

    u_mass  mean over i > j of  log((p(w_i, w_j) + eps) / p(w_j))
    c_uci   mean over i != j of  pmi = log((p(w_i, w_j) + eps) / (p(w_i) p(w_j)))
    c_npmi  mean over i != j of  pmi / -log(p(w_i, w_j) + eps)
    c_v     mean over i of  cos(n_i, sum_j n_j)   with n_i = (npmi(w_i, w_j))_j

(top words w_1, w_2, ... most probable first; ``c_v``'s indirect cosine measure over the
one-set segmentation). A pair with a word that no reference document holds has PMI and
NPMI 0, no evidence either way (gensim's ``u_mass`` takes 0 for its ``p(w_j) = 0``;
its PMI is infinite there, which makes its ``c_uci``, ``c_npmi`` and ``c_v`` inf or
NaN). Here the co-occurrence window is the whole document; gensim's
``c_uci``, ``c_npmi`` and ``c_v`` default to sliding windows of 10 and 110 tokens (on
bags of words without positions a document is the only window there is).

``convention="tomotopy"`` gives tomotopy's ``Coherence`` values instead (its document
estimator, ``ProbEstimation.DOCUMENT``; its targets: every topic's top words). Its
definitions differ from gensim's: ``eps`` is added to every denominator as well,
``u_mass`` is ``log(p(w_i, w_j) / (p(w_j) + eps) + eps)`` and PMI
``log((p(w_i, w_j) + eps) / (p(w_i) p(w_j) + eps))`` (which differs from gensim's by
about ``eps / (p(w_i) p(w_j))``: a relative 1e-6 for words in a few documents of ten
thousand); ``c_v``'s context vectors run over the top words of all topics,
``n_i = (npmi(w_i, u))_u`` for every u among them, not over the topic's own top words,
with a word's NPMI with itself 1; and ``D`` counts only the documents that hold a word
(tomotopy's corpus keeps no empty document). tomotopy holds ``c_v``'s context vectors in
float32, so its ``c_v`` differs from this float64 one by up to ~1e-7 (relative).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.kern.cooccur import document_cooccurrence
from bidlab.models.lda.common import holds_text
from bidlab.models.validation import whole_at_least_one

__all__ = ["coherence", "cooccurrence", "top_words", "topic_diversity", "exclusivity",
           "MEASURES", "CONVENTIONS", "MEMORY_BUDGET"]

MEASURES = ("u_mass", "c_uci", "c_npmi", "c_v")
CONVENTIONS = ("gensim", "tomotopy")
EPS = 1e-12
#: Bytes of working arrays one :func:`coherence` call may build (its pairs of top words grow
#: as k x top_n x top_n, and as the square of all topics' distinct top words); a call that
#: would need more is refused before it allocates. Raise it to score more top words.
MEMORY_BUDGET = 2 * 2**30


def _working_bytes(k: int, n: int, U: int, measure: str, convention: str) -> int:
    """Bytes of the float64 working arrays of a coherence call: k topics, ``n`` top words
    each, ``U`` distinct among them (the co-occurrence counts are U x U; gensim's measures
    hold about six k x n x n arrays at once, tomotopy's about six U x U and, for ``c_v``,
    three k x n x U)."""
    if convention == "tomotopy":
        cells = 6 * U * U + (3 * k * n * U if measure == "c_v" else 2 * k * n * n)
    else:
        cells = U * U + 6 * k * n * n
    return 8 * cells


def _check_budget(top_n: int, k: int, n: int, U: int, V: int, measure: str,
                  convention: str) -> None:
    """ValueError when the working arrays for ``n`` top words (``top_n`` capped at the
    vocabulary of ``V`` words) exceed :data:`MEMORY_BUDGET`, naming the size and the largest
    ``top_n`` that fits."""
    need = _working_bytes(k, n, U, measure, convention)
    if need <= MEMORY_BUDGET:
        return
    lo, hi = 1, n  # the largest top_n whose arrays fit, at most k * top_n distinct words
    while lo < hi:
        mid = (lo + hi + 1) // 2
        fits = _working_bytes(k, mid, min(k * mid, V), measure, convention) <= MEMORY_BUDGET
        lo, hi = (mid, hi) if fits else (lo, mid - 1)
    fix = (f"pass a smaller top_n (top_n={lo} fits), or raise" if lo >= 2 else
           f"no top_n fits for {k} topics: raise")
    raise ValueError(f"coherence: top_n={top_n} ({n} top words in each of {k} topics, {U} "
                     f"distinct) needs about {_size(need)} of working arrays, more than "
                     f"MEMORY_BUDGET ({_size(MEMORY_BUDGET)}): {fix} "
                     "bidlab.models.lda.coherence.MEMORY_BUDGET")


def _size(nbytes: float) -> str:
    """``nbytes`` in GiB, or MiB below one GiB."""
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.2g} MiB"


def top_words(topics: np.ndarray, top_n: int) -> np.ndarray:
    """k x top_n indices of each topic's most probable words, best first (ties by index).

    Sorts only each row's candidates (the words at least as probable as its ``top_n``-th),
    not the whole vocabulary: a full sort of every row was most of a coherence call's
    time at k = 100 (BENCHMARKS.md, "topics").

    Examples
    --------
    >>> top_words(np.array([[0.1, 0.5, 0.5, 0.2]]), 3).tolist()
    [[1, 2, 3]]
    """
    topics = np.asarray(topics)
    k, V = topics.shape
    n = max(1, min(int(top_n), V))
    neg = -topics
    if 4 * n >= V or not np.isfinite(neg).all():  # (NaN would drop out of the candidates)
        return np.argsort(neg, axis=1, kind="stable")[:, :n]
    kth = np.partition(neg, n - 1, axis=1)[:, n - 1 : n]  # each row's n-th best value
    rows, cols = np.nonzero(neg <= kth)  # >= n candidates per row, ties included
    order = np.lexsort((cols, neg[rows, cols], rows))  # by row, value, then word index
    rows, cols = rows[order], cols[order]
    starts = np.searchsorted(rows, np.arange(k))
    return cols[starts[:, None] + np.arange(n)]


def cooccurrence(X: Any, words: np.ndarray) -> tuple[np.ndarray, int]:
    """(documents holding each pair of ``words`` (len x len; the diagonal: each word),
    number of documents) over the documents x vocabulary counts ``X``."""
    if hasattr(X, "X") and hasattr(X, "vocab"):
        X = X.X
    Xh = sp.csr_matrix(backend.to_host(X))
    co = document_cooccurrence(Xh.indptr, Xh.indices, Xh.data, Xh.shape[1], words)
    return co, int(Xh.shape[0])


def _topic_matrix(where: str, topics: Any) -> np.ndarray:
    """``topics`` as a host float64 k x vocabulary matrix (k >= 1) of finite weights; else
    ValueError (a NaN weight would rank its word arbitrarily among the top words)."""
    T = np.asarray(backend.to_host(topics), np.float64)
    if T.ndim != 2 or T.shape[0] < 1:
        raise ValueError(f"{where}: topics must be k x vocabulary; got shape {T.shape}")
    if not np.isfinite(T).all():
        raise ValueError(f"{where}: the topics hold NaN or infinite weights (first in topic "
                         f"{int(np.argwhere(~np.isfinite(T))[0, 0])}): pass finite weights")
    return T


def _reference_counts(X: Any) -> sp.csr_matrix:
    """The reference documents ``X`` as a host CSR matrix (documents x vocabulary): a
    Corpus's counts, a 2-D array or sparse matrix; ValueError for another shape and for
    negative, NaN or infinite counts (a negative count would count as the word held) and
    for documents without a word."""
    if hasattr(X, "X") and hasattr(X, "vocab"):
        X = X.X
    if not backend.is_sparse(X):
        X = np.asarray(backend.to_host(X))
        if X.ndim != 2 or X.dtype.kind not in "biuf":
            raise ValueError(f"coherence: the reference documents must be a documents x "
                             f"vocabulary matrix of counts; got shape {X.shape}, dtype "
                             f"{X.dtype}: for one document use X.reshape(1, -1)")
    Xh = sp.csr_matrix(backend.to_host(X))
    bad = ~np.isfinite(Xh.data) | (Xh.data < 0)
    if bad.any():
        p = int(np.flatnonzero(bad)[0])
        d = int(np.searchsorted(Xh.indptr, p, side="right") - 1)
        raise ValueError(f"coherence: the reference documents hold a negative, NaN or "
                         f"infinite count ({Xh.data[p]:g} at document {d}, word "
                         f"{int(Xh.indices[p])}); counts must be finite and >= 0")
    if not Xh.data.any():  # every co-occurrence would be 0 / 0: no score to give
        raise ValueError(f"coherence: the reference documents hold no word ({Xh.shape[0]} "
                         "documents, 0 tokens): score the topics on documents with words, "
                         "e.g. the training corpus")
    return Xh


def _check(topics: Any, X: Any, measure: str, convention: str = "gensim",
           top_n: int = 10) -> np.ndarray:
    if measure not in MEASURES:
        raise ValueError(f"coherence: unknown measure {measure!r}; choose one of {MEASURES}")
    if convention not in CONVENTIONS:
        raise ValueError(f"coherence: unknown convention {convention!r}; choose one of "
                         f"{CONVENTIONS}")
    T = _topic_matrix("coherence", topics)
    n_cols = X.shape[1]
    if n_cols != T.shape[1]:
        raise ValueError(f"coherence: the reference documents have {n_cols} words "
                         f"(columns) but the topics have {T.shape[1]}: use documents over "
                         "the model's vocabulary")
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or top_n < 2:
        raise ValueError(f"coherence: top_n must be an int >= 2 (every measure compares "
                         f"pairs of a topic's top words); got {top_n!r}: pass e.g. "
                         "top_n=10")
    if T.shape[1] < 2:
        raise ValueError(f"coherence: the topics have {T.shape[1]} word(s); coherence "
                         "compares pairs of words, so it needs a vocabulary of two or more")
    return T


def coherence(topics: Any, X: Any, measure: str = "c_npmi", top_n: int = 10,
              per_topic: bool = False, convention: str = "gensim") -> float | np.ndarray:
    """Coherence of the topics (k x vocabulary weights) on reference documents ``X``.

    Parameters
    ----------
    topics: k x vocabulary topic-word weights (rows need not be normalised).
    X: documents x vocabulary counts (scipy / CuPy sparse, numpy, or a Corpus).
    measure: ``"u_mass"``, ``"c_uci"``, ``"c_npmi"`` or ``"c_v"`` (module doc).
    top_n: top words per topic, 2 or more (every measure compares pairs of them; a
        vocabulary smaller than ``top_n`` gives all of it). The working arrays grow as its
        square: a call that would need more than :data:`MEMORY_BUDGET` bytes is refused
        (ValueError naming the ``top_n`` that fits).
    per_topic: return the k values instead of their mean.
    convention: ``"gensim"`` (its ``CoherenceModel``) or ``"tomotopy"`` (its
        ``Coherence``; module doc).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]]))
    >>> round(coherence(np.array([[0.5, 0.4, 0.1]]), X, "u_mass", top_n=2), 6)
    0.0
    """
    if holds_text(X):
        raise TypeError("coherence: X holds text, not documents x vocabulary counts: count "
                        "the words over the model's vocabulary first (e.g. scikit-learn's "
                        "CountVectorizer(vocabulary=vocab).transform(texts)) or pass the "
                        "training Corpus")
    if isinstance(X, (list, tuple)):  # rows of counts given as nested lists
        X = np.asarray(X, dtype=np.float64)
    X = _reference_counts(X)
    T = _check(topics, X, measure, convention, top_n)
    top = top_words(T, top_n)  # (top_n capped at the vocabulary)
    union, local = np.unique(top, return_inverse=True)
    local = local.reshape(top.shape)
    _check_budget(int(top_n), *top.shape, union.size, T.shape[1], measure, convention)
    co, D = cooccurrence(X, union)
    if convention == "tomotopy":
        per = _tomotopy(measure, co, D - _empty_documents(X), local)
        return per if per_topic else float(per.mean())
    n = top.shape[1]
    pair = co[local[:, :, None], local[:, None, :]] / max(D, 1)  # k x n x n
    held = np.diagonal(co)[local] > 0  # k x n: the word is in a reference document
    single = np.maximum(np.diagonal(co)[local] / max(D, 1), EPS)  # k x n
    if measure == "u_mass":
        lower = np.tril(np.ones((n, n), bool), -1)
        vals = np.log((pair + EPS) / single[:, None, :])
        per = (vals * lower).sum(axis=(1, 2)) / max(lower.sum(), 1)
    else:
        joint = pair + EPS
        pmi = np.log(joint / (single[:, :, None] * single[:, None, :]))
        pmi = np.where(held[:, :, None] & held[:, None, :], pmi, 0.0)  # module doc
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


def _empty_documents(X: Any) -> int:
    """Documents (rows of ``X``) without a nonzero count."""
    if hasattr(X, "X") and hasattr(X, "vocab"):
        X = X.X
    Xh = sp.csr_matrix(backend.to_host(X))
    return int(Xh.shape[0] - np.count_nonzero(Xh.getnnz(axis=1)
                                              if not (Xh.data == 0).any()
                                              else (Xh != 0).getnnz(axis=1)))


def _tomotopy(measure: str, co: np.ndarray, D: int, local: np.ndarray) -> np.ndarray:
    """Per-topic coherence as tomotopy's ``Coherence`` computes it (module doc): ``eps``
    added to every denominator, ``p(w_i, w_j) / (p(w_j) + eps)`` and ``(p(w_i, w_j) +
    eps) / (p(w_i) p(w_j) + eps)``; ``c_v``'s context vectors over all topics' top words
    (the ``union`` whose co-occurrences ``co`` holds), a word's NPMI with itself 1."""
    p = co / max(D, 1)  # U x U over the union of the top words
    single = np.diagonal(p)
    if measure == "u_mass":
        vals = np.log(p / (single[None, :] + EPS) + EPS)  # [i, j]: log(p_ij / p_j + eps)
        n = local.shape[1]
        lower = np.tril(np.ones((n, n), bool), -1)
        block = vals[local[:, :, None], local[:, None, :]]
        return (block * lower).sum(axis=(1, 2)) / max(lower.sum(), 1)
    pmi = np.log((p + EPS) / (np.outer(single, single) + EPS))
    npmi = pmi / -np.log(p + EPS)
    if measure in ("c_uci", "c_npmi"):
        n = local.shape[1]
        block = (pmi if measure == "c_uci" else npmi)[local[:, :, None], local[:, None, :]]
        off = ~np.eye(n, dtype=bool)
        return (block * off).sum(axis=(1, 2)) / max(off.sum(), 1)
    np.fill_diagonal(npmi, 1.0)
    vecs = npmi[local]  # k x n x U
    whole = vecs.sum(axis=1)  # k x U
    dot = (vecs * whole[:, None, :]).sum(axis=2)
    norms = np.linalg.norm(vecs, axis=2) * np.linalg.norm(whole, axis=1)[:, None]
    return (dot / np.maximum(norms, 1e-300)).mean(axis=1)


def topic_diversity(topics: Any, top_n: int = 25) -> float:
    """The share of distinct words among all topics' top ``top_n`` words (1: no topic
    shares a top word; Dieng et al. 2020).

    Examples
    --------
    >>> topic_diversity(np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]]), top_n=1)
    1.0
    """
    whole_at_least_one("topic_diversity", "top_n", top_n)
    top = top_words(_topic_matrix("topic_diversity", topics), top_n)
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
    whole_at_least_one("exclusivity", "top_n", top_n)
    T = _topic_matrix("exclusivity", topics)
    P = T / np.maximum(T.sum(axis=1, keepdims=True), 1e-300)
    top = top_words(P, top_n)
    share = P / np.maximum(P.sum(axis=0, keepdims=True), 1e-300)
    per = np.take_along_axis(share, top, axis=1).mean(axis=1)
    return per if per_topic else float(per.mean())
