"""Ratings and ranking metrics: RMSE, and p@k, MAP@k and NDCG@k of top-k lists against
held-out items (binary relevance).

For one user with recommended list ``r_1 .. r_k`` and held-out set ``T`` (``rel_i`` = 1
when ``r_i`` is in ``T``):

* ``p@k = sum_i rel_i / k``;
* ``AP@k = sum_i rel_i p@i / min(|T|, k)``, and MAP@k its mean over users;
* ``NDCG@k = sum_i rel_i / log2(i + 1)`` divided by the same sum for ``min(|T|, k)``
  relevant items at the top.

The lists are given per user, in one user order (a list of lists, or of arrays; a held-out
set may be a Python set, a recommended list may not, having no order; a dict of either is
refused: pass ``[d[u] for u in users]``). Each ranking metric is the mean over the users
with at least one held-out item (users with none are left out, as the ``implicit`` and
``recommenders`` libraries leave them out), and 0.0 when no user has one (an empty test
set), as ``recommenders`` gives. A recommended list names each item at most once: a list
that repeats one is refused (the repeats would count one held-out item as several hits,
p@k and MAP@k above 1). A list shorter than ``k`` counts its missing places as misses.
:func:`ranking_metrics` scores a fitted model's top-k lists (training items left out).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab.models.validation import whole_at_least_one

__all__ = ["rmse", "precision_at_k", "map_at_k", "ndcg_at_k", "ranking_metrics",
           "top_k"]


def rmse(y_true: Any, y_pred: Any) -> float:
    """The root mean squared error of two equal-length arrays.

    Examples
    --------
    >>> rmse([1.0, 2.0], [1.0, 4.0])
    1.4142135623730951
    """
    a, b = np.asarray(y_true, np.float64), np.asarray(y_pred, np.float64)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"rmse needs two non-empty arrays of one shape; got {a.shape} and "
                         f"{b.shape}")
    return float(np.sqrt(np.mean((a - b) ** 2)))


def _list_length(k: Any) -> int:
    """``k`` as an int >= 1 (an integral float too); else a ValueError."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Real) \
            or not float(k).is_integer() or int(k) < 1:
        raise ValueError(f"k must be >= 1 and a whole number (the length of the top-k "
                         f"lists); got {k!r}")
    return int(k)


def _hits(recommended: Sequence[Any], relevant: Sequence[Any], k: int
          ) -> list[tuple[np.ndarray, int]]:
    for what, given in (("recommended", recommended), ("relevant", relevant)):
        if isinstance(given, Mapping):  # zip would pair up the keys, not the lists
            raise ValueError(f"{what} is a mapping; give one list per user, in one user "
                             f"order for both, e.g. [{what}[u] for u in users]")
    if len(recommended) != len(relevant):
        raise ValueError(f"one recommended list per user: {len(recommended)} lists for "
                         f"{len(relevant)} users")
    out = []
    for j, (rec, rel) in enumerate(zip(recommended, relevant, strict=True)):
        if isinstance(rec, (set, frozenset)):
            raise ValueError(f"recommended list {j} is a set, which has no order: give "
                             "each user's items best first (a list or an array)")
        rec = np.asarray(rec).ravel()
        _refuse_repeats(j, rec)
        rel = set(rel) if isinstance(rel, (set, frozenset)) else set(
            np.asarray(rel).ravel().tolist())
        if rel:
            top = rec[:k]
            out.append((np.array([x in rel for x in top.tolist()], np.float64), len(rel)))
    return out


def _refuse_repeats(j: int, rec: np.ndarray) -> None:
    """A ValueError naming list ``j``'s first repeated item, if it repeats one."""
    if rec.size < 2 or len(set(rec.tolist())) == rec.size:
        return
    seen: dict[Any, int] = {}
    for pos, x in enumerate(rec.tolist()):
        if x in seen:
            raise ValueError(f"recommended list {j} repeats item {x!r} (at places "
                             f"{seen[x]} and {pos}): a top-k list names each item once; "
                             "drop the repeats (keep the first)")
        seen[x] = pos


def precision_at_k(recommended: Sequence[Any], relevant: Sequence[Any], k: int = 10) -> float:
    """Mean p@k over the users with held-out items (see the module doc).

    Examples
    --------
    >>> precision_at_k([[1, 2, 3]], [[2, 9]], k=3)
    0.3333333333333333
    """
    k = _list_length(k)
    hits = _hits(recommended, relevant, k)
    return float(np.mean([h.sum() / k for h, _ in hits])) if hits else 0.0


def map_at_k(recommended: Sequence[Any], relevant: Sequence[Any], k: int = 10) -> float:
    """Mean average precision at k (see the module doc).

    Examples
    --------
    >>> map_at_k([[1, 2, 3]], [[2, 3]], k=3)  # (1/2 + 2/3) / 2
    0.5833333333333333
    """
    k = _list_length(k)
    hits = _hits(recommended, relevant, k)
    if not hits:
        return 0.0
    aps = []
    for h, n in hits:
        prec = np.cumsum(h) / np.arange(1, h.size + 1)
        aps.append(float((prec * h).sum() / min(n, k)))
    return float(np.mean(aps))


def ndcg_at_k(recommended: Sequence[Any], relevant: Sequence[Any], k: int = 10) -> float:
    """Mean NDCG at k, binary relevance (see the module doc).

    Examples
    --------
    >>> round(ndcg_at_k([[1, 2]], [[2]], k=2), 6)  # (1 / log2 3) / 1
    0.63093
    """
    k = _list_length(k)
    hits = _hits(recommended, relevant, k)
    if not hits:
        return 0.0
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    vals = [float((h * disc[: h.size]).sum() / disc[: min(n, k)].sum()) for h, n in hits]
    return float(np.mean(vals))


def top_k(scores: np.ndarray, k: int, exclude: sp.csr_matrix | None = None) -> np.ndarray:
    """Each row's ``k`` highest-scoring columns, best first.

    Parameters
    ----------
    scores : numpy.ndarray
        Users x items.
    k : int
        The list length, from 1 to the number of items.
    exclude : scipy.sparse.csr_matrix, optional
        Of ``scores``' shape: its stored entries score ``-inf``, so they come last (a row
        with fewer than ``k`` other items fills its list with them).

    Returns
    -------
    numpy.ndarray
        Users x k item ids, each row without repeats.

    Raises
    ------
    ValueError
        When ``k`` is not an integer from 1 to the number of items.
    """
    s = np.array(scores, dtype=np.float64, copy=True)
    if s.ndim != 2:
        raise ValueError(f"top_k needs a users x items score array; got shape {s.shape}")
    k = _check_k("top_k", k, s.shape[1])
    if exclude is not None:
        exclude = sp.csr_matrix(exclude)
        if exclude.shape != s.shape:
            raise ValueError(f"top_k: exclude has shape {exclude.shape} but the scores have "
                             f"shape {s.shape}: give one users x items matrix of the scores' "
                             "shape")
        rows = np.repeat(np.arange(s.shape[0]), np.diff(exclude.indptr))
        s[rows, exclude.indices] = -np.inf
    part = np.argpartition(-s, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(s, part, 1), axis=1, kind="stable")
    return np.take_along_axis(part, order, 1)


def ranking_metrics(score_users: Callable[[np.ndarray], np.ndarray], train: sp.csr_matrix,
                    test: sp.csr_matrix, k: int = 10, users: Any = None,
                    chunk: int = 1024) -> dict[str, float]:
    """p@k, MAP@k and NDCG@k of the top-k lists ``score_users(user_ids)`` (a users x
    items score array) gives, training items left out, against ``test``'s items.

    ``k`` must be at most the number of items (``test``'s columns): a larger ``k`` is
    refused, not clipped, since the keys and the p@k denominator name ``k``. A user with
    fewer than ``k`` items outside training gets training items at the end of the list
    (see :func:`top_k`).

    Examples
    --------
    >>> m = ranking_metrics(lambda u: U[u] @ V.T, train, test, k=10)  # doctest: +SKIP
    >>> sorted(m)  # doctest: +SKIP
    ['map@10', 'ndcg@10', 'p@10']
    """
    test, train = sp.csr_matrix(test), sp.csr_matrix(train)
    if train.shape != test.shape:
        raise ValueError(f"ranking_metrics: train and test must have one shape (users x "
                         f"items); got {train.shape} and {test.shape}")
    k = _check_k("ranking_metrics", k, test.shape[1])
    whole_at_least_one("ranking_metrics", "chunk", chunk, " (users scored at a time)")
    ids = np.flatnonzero(np.diff(test.indptr)) if users is None else _user_ids(users,
                                                                              test.shape[0])
    recs, rels = [], []
    for start in range(0, ids.size, chunk):
        part = ids[start: start + chunk]
        recs.extend(top_k(score_users(part), k, train[part]))
        rels.extend(test.indices[test.indptr[u]: test.indptr[u + 1]] for u in part)
    return {f"p@{k}": precision_at_k(recs, rels, k), f"map@{k}": map_at_k(recs, rels, k),
            f"ndcg@{k}": ndcg_at_k(recs, rels, k)}


def _user_ids(users: Any, n_users: int) -> np.ndarray:
    """``users`` as int row ids of train and test; else a ValueError naming the first bad
    one."""
    a = np.asarray(users).reshape(-1)
    if a.size and a.dtype.kind not in "iu":
        raise ValueError(f"ranking_metrics: users must be integer row ids of train and "
                         f"test; got {a.dtype} values")
    out = (a < 0) | (a >= n_users)
    if out.any():
        raise ValueError(f"ranking_metrics: user {int(a[out][0])} is out of range: train and "
                         f"test have {n_users} users (rows 0..{n_users - 1})")
    return a.astype(np.int64)


def _check_k(where: str, k: int, n_items: int) -> int:
    """``k`` as an int in ``[1, n_items]``; else a ValueError saying what to use."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer, float, np.floating)) \
            or not np.isfinite(k) or int(k) != k or int(k) < 1:
        raise ValueError(f"{where}: k must be an integer >= 1; got {k!r}")
    if int(k) > n_items:
        raise ValueError(f"{where}: k={k} is more than the {n_items} items: a top-k list "
                         f"holds each item once; use k <= {n_items}")
    return int(k)
