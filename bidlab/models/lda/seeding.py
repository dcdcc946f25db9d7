"""Initial LDA topics from a light spherical k-means of the leading documents
(:func:`seed_topics`), the ``init="kmeans"`` start of :class:`~bidlab.models.lda.core.LDACore`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.models.kmeans.seeding import greedy_seeds

__all__ = ["seed_topics"]


def seed_topics(X: Any, k: int, rng: np.random.Generator, tokens: float,
                lloyd: int = 5, restarts: int = 3) -> np.ndarray:
    """Initial topics, vocabulary x k (columns sum to 1), from spherical k-means of ``X``.

    ``X`` (host CSR, the leading documents) is L2-normalised and clustered by a few Lloyd
    iterations of spherical k-means started by greedy k-means++ (cosine distance); the
    best of ``restarts`` runs wins. Topic t starts as one pseudo-count per word times
    +-10% noise plus ``tokens`` pseudo-tokens spread like the words of cluster t: enough
    to start the topics apart (a near-uniform start ends with merged or dead topics far
    more often on planted-topic corpora), little enough not to pull a real corpus into
    the clusters' optimum.
    """
    n = int(X.shape[0])
    full = sp.csr_matrix(X, dtype=np.float64)
    used = np.unique(full.indices)  # cluster on the words these documents use
    S = sp.csr_matrix(full[:, used])
    lengths = np.sqrt(np.asarray(S.multiply(S).sum(axis=1)).ravel())
    lengths[lengths == 0] = 1.0
    Sn = sp.csr_matrix(sp.diags(1.0 / lengths) @ S)
    dist = 1.0 - (Sn @ Sn.T).toarray()  # n x n cosine distances

    def sq(rows: Any) -> np.ndarray:  # squared cosine distances to the rows
        return np.maximum(dist[:, rows], 0.0) ** 2

    def candidates(mass: np.ndarray, size: int) -> np.ndarray:
        total = mass.sum()
        if total <= 0:
            return np.array([rng.integers(n)])
        return rng.choice(n, size=size, p=mass / total)

    def kmeans() -> tuple[float, np.ndarray]:
        first = int(rng.integers(n))
        chosen = greedy_seeds(k, first, sq([first])[:, 0], candidates, sq)
        assign = np.argmin(dist[chosen], axis=0)  # each document's nearest seed
        for _ in range(lloyd + 1):
            onehot = sp.csr_matrix((np.ones(n), (assign, np.arange(n))), shape=(k, n))
            summed = (onehot @ Sn).toarray()
            norms = np.sqrt((summed * summed).sum(axis=1, keepdims=True))
            centresT = np.ascontiguousarray((summed / np.maximum(norms, 1e-300)).T)
            sim = Sn @ centresT  # n x k
            assign = sim.argmax(axis=1)
        return float(sim.max(axis=1).sum()), assign

    assign = max((kmeans() for _ in range(restarts)), key=lambda r: r[0])[1]
    onehot = sp.csr_matrix((np.ones(n), (assign, np.arange(n))), shape=(k, n))
    docs = np.full((k, full.shape[1]), 1e-12)
    docs[:, used] += (onehot @ S).toarray()
    docs /= docs.sum(axis=1, keepdims=True)
    noise = rng.random(size=docs.shape)  # +-10%, like Gamma(100, 0.01) but cheaper
    noise *= 0.2
    noise += 0.9
    topics = (1.0 + tokens * docs) * noise
    topics /= topics.sum(axis=1, keepdims=True)
    return np.ascontiguousarray(topics.T)
