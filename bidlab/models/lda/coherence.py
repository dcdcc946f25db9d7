"""Topic coherence from document co-occurrence (UMass; Mimno et al., EMNLP 2011).

For a topic's top words ``w1 .. wN`` (most probable first), UMass coherence is
``sum over i > j of log((D(wi, wj) + 1) / D(wj))``, where ``D(w)`` counts the documents
holding ``w`` and ``D(wi, wj)`` those holding both. It needs only the corpus, is 0 at best
(the words always occur together) and more negative for words that seldom share a
document; unlike perplexity it tracks whether people find a topic's words related. This
is Mimno et al.'s sum over the pairs with +1 smoothing; gensim's
``CoherenceModel(coherence="u_mass")`` averages over the ``N (N - 1) / 2`` pairs and
smooths with 1e-12 instead, so its figures differ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["umass_coherence"]


def umass_coherence(components: Any, X: Any, top: int = 10) -> np.ndarray:
    """UMass coherence of each topic's ``top`` words over the documents ``X``.

    Parameters
    ----------
    components : array, topics x vocabulary
        Topic-word weights (e.g. ``LDA.components_``); only their order within a row counts.
    X : sparse or dense matrix, documents x vocabulary
        The counts the co-occurrences are taken from (usually the training documents).
    top : int
        How many of each topic's most probable words are scored.

    Returns
    -------
    numpy.ndarray
        One figure per topic (float64, <= 0 up to the +1 smoothing; higher is more coherent).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1, 1, 0, 0], [2, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]))
    >>> comp = np.array([[0.5, 0.4, 0.05, 0.05], [0.4, 0.05, 0.5, 0.05]])
    >>> c = umass_coherence(comp, X, top=2)
    >>> bool(c[0] > c[1])   # words 0 and 1 share documents; 2 and 0 never do
    True
    """
    comp = np.asarray(components)
    if comp.ndim != 2:
        raise ValueError(f"components must be topics x vocabulary (2-D); got shape {comp.shape}")
    if X.shape[1] != comp.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns but components {comp.shape[1]} words: "
                         "score the topics on documents counted with the same vocabulary")
    top = int(top)
    if top < 2:
        raise ValueError(f"top must be >= 2 (coherence scores pairs of words); got {top}")
    best = np.argsort(-comp, axis=1, kind="stable")[:, :top]
    words = np.unique(best)
    B = sp.csr_matrix(X)[:, words]
    B = (B > 0).astype(np.float64)             # documents x chosen words, presence
    docs = np.asarray(B.sum(axis=0)).ravel()   # D(w)
    both = (B.T @ B).toarray()                 # D(wi, wj)
    pos = np.searchsorted(words, best)
    out = np.zeros(comp.shape[0])
    for t, row in enumerate(pos):
        total = 0.0
        for i in range(1, len(row)):
            for j in range(i):
                total += np.log((both[row[i], row[j]] + 1.0) / max(docs[row[j]], 1.0))
        out[t] = total
    return out
