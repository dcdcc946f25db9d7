"""A source's aligned input matrices, checked and converted once; its batch size clamped.

Shared by the sources that hold their data in memory (:class:`bidlab.learn.datasource.
MemorySource`) and on disk (:class:`bidlab.learn.shards.ShardSource`): each input becomes a
2-D array or a CSR with sorted indices (a 1-D target one column) and a
:class:`~bidlab.learn.staging.MatSpec`; matrices that disagree in row count, non-2-D arrays
and empty data sets raise ``ValueError`` naming the problem, and a batch size larger than
the data is clamped to it with a ``UserWarning`` (so a small demo still trains).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.learn.staging import MatSpec
from bidlab.mat import Mat, SMat, validate_csr

__all__ = ["DEFAULT_NAMES", "default_names", "check_aligned", "check_seed"]

DEFAULT_NAMES = ("X", "y", "w")


def default_names(k: int) -> tuple[str, ...]:
    """The names of ``k`` aligned matrices when none are given: ``X``, ``y``, ``w``, then
    ``m3``, ``m4``, ...

    Examples
    --------
    >>> from bidlab.learn.source_inputs import default_names
    >>> default_names(4)
    ('X', 'y', 'w', 'm3')
    """
    return tuple(DEFAULT_NAMES[i] if i < len(DEFAULT_NAMES) else f"m{i}" for i in range(k))


def check_seed(seed: Any) -> int:
    """A data source's ``seed`` (of its shuffled orders) as an int, or a ValueError when it
    is not an int >= 0 (refused when the source is made, not at its first pass).

    Examples
    --------
    >>> check_seed(3)
    3
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an int >= 0 (it seeds the shuffled order of each "
                         f"pass); got {seed!r}")
    return int(seed)


def _clamp_batch(batch_size: int, n: int) -> int:
    if n == 0:
        raise ValueError("the data set is empty (0 samples): nothing to train on")
    if batch_size > n:
        warnings.warn(
            f"batch_size {batch_size} is larger than the {n} samples of the data: using "
            f"batch_size={n} (one minibatch per pass)", UserWarning, stacklevel=3)
        return n
    return batch_size


def _as_matrix(x: Any, i: int, name: str) -> tuple[Any, MatSpec, bool]:
    """(raw 2-D array or CSR, spec, lives on host) for one aligned input."""
    checked = isinstance(x, SMat)  # an SMat's structure was checked when it was made
    if isinstance(x, SMat):
        x = x.csr
    elif isinstance(x, Mat):
        x = x.data
    if backend.is_sparse(x):
        if x.format != "csr":
            x = x.tocsr()
        if not checked:
            validate_csr(x, f"data matrix {name!r}")
        if not x.has_sorted_indices:
            x = x.sorted_indices() if backend.is_cupy_array(x) else _sorted(x)
        spec = MatSpec(int(x.shape[1]), np.dtype(x.dtype), True, np.dtype(x.indices.dtype))
        return x, spec, not backend.is_cupy_array(x)
    if not hasattr(x, "shape") or not hasattr(x, "dtype") or not hasattr(x, "reshape"):
        x = np.asarray(x)  # lists, pandas DataFrames and Series
    if x.ndim == 1:
        x = x.reshape(-1, 1)  # a 1-D target is one column
    if x.ndim != 2:
        raise ValueError(f"data matrix {name!r} (argument {i}) must be 2-D (samples x "
                         f"columns); got shape {tuple(x.shape)}")
    if x.dtype.kind not in "biuf":
        raise TypeError(f"data matrix {name!r} holds {x.dtype}; convert it to numbers, e.g. "
                        "x.astype(np.float32)")
    return x, MatSpec(int(x.shape[1]), np.dtype(x.dtype), False), not backend.is_cupy_array(x)


def _sorted(x: sp.csr_matrix) -> sp.csr_matrix:
    x = x.copy()
    x.sort_indices()
    return x


def check_aligned(names: tuple[str, ...], mats: list[Any]) -> int:
    """The common row count, or a ValueError naming both disagreeing counts.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.learn.source_inputs import check_aligned
    >>> check_aligned(("X", "y"), [np.zeros((5, 3)), np.zeros((5, 1))])
    5
    """
    n0 = int(mats[0].shape[0])
    for name, m in zip(names[1:], mats[1:], strict=False):
        if int(m.shape[0]) != n0:
            raise ValueError(
                f"data matrices disagree in row count: {names[0]!r} has {n0} rows (samples) "
                f"but {name!r} has {int(m.shape[0])}; samples are rows, so every matrix "
                "needs one row per sample")
    return n0
