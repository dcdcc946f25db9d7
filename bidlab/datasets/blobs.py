"""Clustered points for k-means: dense Gaussian blobs and a sparse variant."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp


class Blobs(NamedTuple):
    """Clustered data; unpacks as ``X, labels, centers``.

    ``X``: n x d points (dense float array or CSR). ``labels``: (n,) int64 cluster of each
    point. ``centers``: k x d dense cluster means (what k-means should recover).
    """

    X: np.ndarray | sp.csr_matrix
    labels: np.ndarray
    centers: np.ndarray


def _check(n: int, d: int, k: int) -> None:
    if n < 1 or d < 1 or k < 1:
        raise ValueError(f"need n, d, k >= 1, got n={n}, d={d}, k={k}")


def blobs(
    n: int = 10_000,
    d: int = 2,
    k: int = 5,
    spread: float = 1.0,
    seed: int = 0,
    *,
    center_scale: float = 10.0,
    dtype: np.dtype | type = np.float32,
) -> Blobs:
    """``n`` dense points around ``k`` centres in ``d`` dimensions (deterministic for a seed).

    Centres are N(0, center_scale^2) per coordinate; each point is its centre plus
    N(0, spread^2) noise, so ``center_scale / spread`` sets how well separated the clusters
    are. Clusters get (nearly) equal sizes, in shuffled order.

    Examples
    --------
    >>> from bidlab.datasets import blobs
    >>> data = blobs(300, 2, 3, seed=0)
    >>> data.X.shape, data.centers.shape
    ((300, 2), (3, 2))
    """
    _check(n, d, k)
    rng = np.random.default_rng(seed)
    centers = (center_scale * rng.standard_normal((k, d))).astype(dtype)
    labels = rng.permutation(np.arange(n) % k).astype(np.int64)
    X = rng.standard_normal((n, d), dtype=np.float32 if dtype == np.float32 else np.float64)
    X *= spread
    X += centers[labels]
    return Blobs(X.astype(dtype, copy=False), labels, centers)


def sparse_blobs(
    n: int = 10_000,
    d: int = 10_000,
    k: int = 10,
    nnz_per_row: int = 20,
    spread: float = 0.1,
    seed: int = 0,
    *,
    support: int | None = None,
    dtype: np.dtype | type = np.float32,
) -> Blobs:
    """Sparse clustered rows, like documents of k kinds (deterministic for a seed).

    Cluster c has a random set of ``support`` (default ``4 * nnz_per_row``) features with
    values in [1, 2). A point of cluster c takes ``nnz_per_row`` of those features at
    random, each with its cluster value plus N(0, spread^2). ``centers`` are the exact
    cluster means (cluster value x the chance ``nnz_per_row / support`` of being present).
    """
    _check(n, d, k)
    support = 4 * nnz_per_row if support is None else support
    if not 1 <= nnz_per_row <= support <= d:
        raise ValueError(
            f"need 1 <= nnz_per_row <= support <= d, got nnz_per_row={nnz_per_row}, "
            f"support={support}, d={d}"
        )
    rng = np.random.default_rng(seed)
    feats = np.stack([np.sort(rng.choice(d, size=support, replace=False)) for _ in range(k)])
    vals = 1.0 + rng.random((k, support))
    labels = rng.permutation(np.arange(n) % k).astype(np.int64)
    # nnz_per_row distinct positions (sorted) out of the support, per row
    pos = np.sort(np.argsort(rng.random((n, support)), axis=1)[:, :nnz_per_row], axis=1)
    cols = feats[labels[:, None], pos]
    data = vals[labels[:, None], pos] + spread * rng.standard_normal(pos.shape)
    indptr = np.arange(0, n * nnz_per_row + 1, nnz_per_row, dtype=np.int64)
    X = sp.csr_matrix((data.astype(dtype).ravel(), cols.ravel(), indptr), shape=(n, d))
    X.has_sorted_indices = True
    centers = np.zeros((k, d), dtype=dtype)
    centers[np.arange(k)[:, None], feats] = vals * (nnz_per_row / support)
    return Blobs(X, labels, centers)
