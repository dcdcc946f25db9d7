"""What ``bidlab train --data`` holds: read, a shard folder read whole, rows held out.

The data file is sniffed by its content (:mod:`bidlab.datasets.sniff`); an estimator
trains on data in memory, so a shard folder is read whole for it; ``--holdout`` keeps a
fixed, seeded share of the rows out of training to score the fitted estimator on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["MAX_HELD_OUT", "describe_data", "hold_out", "is_ratings", "load_data",
           "ratings_mask", "read_shards"]

MAX_HELD_OUT = 10_000  # rows held out for the final score at most (keeps it quick)


def load_data(path: str) -> Any:
    """What ``--data`` holds: LoadedData in memory, or the Sniffed shard folder."""
    from bidlab.datasets.sniff import load, sniff

    s = sniff(path)
    return s if s.format == "shards" else load(s)


def read_shards(folder: Path) -> Any:
    """A shard folder read whole (for estimators, which train on data in memory)."""
    from bidlab.datasets.sniff import LoadedData
    from bidlab.learn.shards import _load_shard, read_manifest

    manifest = read_manifest(folder)
    parts = [_load_shard(folder, entry, manifest["matrices"]) for entry in manifest["shards"]]
    mats = []
    for j in range(len(manifest["matrices"])):
        pieces = [p[j] for p in parts]
        mats.append(sp.vstack(pieces, format="csr") if sp.issparse(pieces[0])
                    else np.concatenate(pieces))
    mats += [None] * (3 - len(mats))
    y = mats[1]
    if y is not None and y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    return LoadedData(mats[0], y, mats[2])


def describe_data(data: Any) -> str:
    """One line on what was read: the file and its matrices (shapes, format)."""
    return str(data) if not hasattr(data, "describe") else (
        f"{data.sniffed.path if data.sniffed else ''}: {data.describe()}")


def is_ratings(data: Any) -> bool:
    """Whether ``data`` was read from a ratings file (user, item, rating)."""
    sniffed = getattr(data, "sniffed", None)
    return sniffed is not None and sniffed.format == "ratings"


def ratings_mask(data: Any, est: Any) -> bool:
    """Whether ``data`` is a ratings file and ``est.learner`` takes a ``mask`` (NMF)."""
    import inspect

    return is_ratings(data) and "mask" in inspect.signature(est.learner).parameters


def hold_out(X: Any, y: Any, frac: float) -> tuple[Any, Any, Any, Any]:
    """(X, y) to train on and the held-out (X, y) scored at the end: ``frac`` of the rows
    (at most 10,000), chosen at random with a fixed seed, so a resumed run holds out the
    same rows. (X, y, None, None) when nothing is held out.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.cli.train_data import hold_out
    >>> X, y = np.arange(20.0).reshape(10, 2), np.arange(10)
    >>> X_in, y_in, X_out, y_out = hold_out(X, y, 0.2)
    >>> X_in.shape, X_out.shape, sorted(np.concatenate([y_in, y_out])) == list(range(10))
    ((8, 2), (2, 2), True)
    """
    n = int(X.shape[0])
    n_out = min(int(round(frac * n)), MAX_HELD_OUT)
    if n_out < 1 or n_out >= n:
        return X, y, None, None
    out = np.zeros(n, dtype=bool)
    out[np.random.default_rng(0).choice(n, size=n_out, replace=False)] = True
    keep = np.flatnonzero(~out)
    held = np.flatnonzero(out)
    return X[keep], _rows(y, keep), X[held], _rows(y, held)


def _rows(a: Any, rows: np.ndarray) -> Any:
    return None if a is None else a[rows]
