"""Document co-occurrence counts of a set of words, straight from a CSR matrix (numba).

Coherence measures (:mod:`bidlab.models.lda.coherence`) need, for the union of the topics'
top words, how many documents hold each word and each pair of them. As a sparse product
``B.T @ B`` of the 0/1 incidence of those columns that took a column slice, a transpose,
scipy's two-pass product into a sparse result and a densify; this kernel walks the rows
once, keeps each row's words of the set (a lookup by vocabulary index), and adds 1 to
the dense count of every pair. The work is the sum over documents of (words of the set
they hold)^2; the numpy oracle is ``(B.T @ B).toarray()``.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

__all__ = ["document_cooccurrence"]


@numba.njit(cache=True, nogil=True)
def _count(indptr, indices, data, pos, co):  # pragma: no cover (compiled)
    n = indptr.shape[0] - 1
    U = co.shape[0]
    seen = np.full(U, -1, np.int64)  # the last row that held each word (duplicates)
    held = np.empty(U, np.int64)
    for d in range(n):
        m = 0
        for p in range(indptr[d], indptr[d + 1]):
            u = pos[indices[p]]
            if u >= 0 and data[p] != 0 and seen[u] != d:
                seen[u] = d
                held[m] = u
                m += 1
        for a in range(m):  # the upper triangle only
            ua = held[a]
            for b in range(a, m):
                ub = held[b]
                if ua <= ub:
                    co[ua, ub] += 1.0
                else:
                    co[ub, ua] += 1.0
    for a in range(U):  # mirrored
        for b in range(a + 1, U):
            co[b, a] = co[a, b]


def document_cooccurrence(indptr: Any, indices: Any, data: Any, n_cols: int,
                          words: np.ndarray) -> np.ndarray:
    """Documents holding each pair of ``words`` (len x len float64; the diagonal: each
    word) in the host CSR matrix given by ``indptr``, ``indices``, ``data`` (rows are
    documents, ``n_cols`` columns). A nonzero that is an explicit 0 does not count, nor
    does a word listed twice in one row.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1, 2, 0], [0, 1, 1], [3, 0, 1]]))
    >>> document_cooccurrence(X.indptr, X.indices, X.data, 3, np.array([0, 2])).tolist()
    [[2.0, 1.0], [1.0, 2.0]]
    """
    words = np.asarray(words, np.int64)
    pos = np.full(int(n_cols), -1, np.int64)
    if words.size > 1 and not (np.diff(words) > 0).all():
        raise ValueError("document_cooccurrence: words must be increasing and distinct "
                         "(np.unique gives them so)")
    pos[words] = np.arange(words.size)
    co = np.zeros((words.size, words.size), np.float64)
    _count(np.asarray(indptr), np.asarray(indices), np.asarray(data), pos, co)
    return co
