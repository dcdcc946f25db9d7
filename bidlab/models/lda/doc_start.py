"""Each document's random start for the LDA E-step, drawn from the document itself.

The E-step starts each document's topic weights from a random point near 1 (mean 1,
standard deviation 0.1, like scikit-learn's Gamma(100, 0.01) start) so that documents
break the topics' symmetry. The point is a pure function of the model's seed and the
document's words and counts (a hash of its nonzeros), never of where the document sits:
a document starts from the same weights in any minibatch, at any row of it, in any order
and on any rank. Batch variational Bayes therefore sums the same per-document statistics
in a pass whatever the batch size or the number of ranks sharing the rows. Two documents
with the same words and counts start alike (and would end alike anyway).

The draws are :func:`bidlab.kern.row_random.row_uniforms` (a numba kernel on the CPU,
the same bits as array operations on a GPU).

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> X = sp.csr_matrix(np.array([[0.0, 2.0, 1.0], [1.0, 0.0, 0.0], [0.0, 2.0, 1.0]]))
>>> start = doc_start(X, seed=0, k=4, dtype=np.float64)
>>> start.shape, bool(np.array_equal(start[0], start[2]))
((3, 4), True)
>>> bool(np.array_equal(doc_start(X[1:], seed=0, k=4, dtype=np.float64)[0], start[1]))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.random import stream_key
from bidlab.kern.row_random import row_uniforms

__all__ = ["doc_start", "START_SD"]

#: standard deviation of each start weight around 1 (Gamma(100, 0.01)'s)
START_SD = 0.1
#: the step of :func:`bidlab.kern.random.stream_key` that keys the documents' starts
_START_STEP = 0x5D0C


def doc_start(X: Any, seed: int, k: int, dtype: Any = np.float32, out: Any = None) -> Any:
    """Each row's ``k`` start weights (uniform with mean 1 and standard deviation
    :data:`START_SD`), a function of the row's nonzeros and ``seed`` only (see the module
    doc). ``X`` is CSR (scipy or CuPy); returns rows x ``k`` of ``dtype`` on ``X``'s
    device, written into ``out`` (C-ordered) when given.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0]]))
    >>> w = doc_start(X, seed=0, k=3)
    >>> w.shape, bool((abs(w - 1.0) < 0.2).all())
    ((1, 3), True)
    """
    if out is None:
        out = backend.empty((X.shape[0], k), dtype, backend.namespace(X.data))
    half = START_SD * np.sqrt(3.0)  # a uniform of this half-width has sd START_SD
    return row_uniforms(X, stream_key(seed, _START_STEP), 1.0 - half, 1.0 + half, out)
