"""What ``bidlab train --data`` holds: read, a shard folder read whole, rows held out.

The data file is sniffed by its content (:mod:`bidlab.datasets.sniff`); an estimator
trains on data in memory, so a shard folder is read whole for it; ``--holdout`` keeps a
fixed, seeded share of the rows out of training to score the fitted estimator on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["MAX_HELD_OUT", "PREFERRED_FORMAT", "check_inputs", "describe_data", "hold_out",
           "is_ratings", "is_scored", "load_data", "ratings_mask", "read_shards",
           "sniff_data"]

MAX_HELD_OUT = 10_000  # rows held out for the final score at most (keeps it quick)

#: the format a model reads a file as when its content fits several (``1<TAB>10<TAB>4``
#: lines are a weighted SNAP edge list and headerless ratings alike)
PREFERRED_FORMAT = {"sfa": "ratings", "nmf": "ratings", "pagerank": "edge-list"}


def sniff_data(path: str, model: str | None = None, min_df: int | float | None = None,
               max_df: int | float | None = None) -> Any:
    """What :func:`bidlab.datasets.sniff.sniff` says ``path`` holds, as ``model`` reads
    it: a file that fits several formats is read as ``model``'s :data:`PREFERRED_FORMAT`
    when it is one of them. ValueError when ``--min_df`` / ``--max_df`` are given (not
    None) for data that is not a text folder or archive."""
    from dataclasses import replace

    from bidlab.datasets.formats import DataFormatError
    from bidlab.datasets.sniff import FORMATS, sniff

    bounds = _word_bounds(min_df, max_df)
    try:
        s = sniff(path)
    except DataFormatError:
        _refuse_network_file(Path(path), model)
        raise
    pick = PREFERRED_FORMAT.get(model or "")
    if pick in s.also:
        s = replace(s, format=pick, detail="", also=(s.format, *(k for k in s.also
                                                                 if k != pick)))
    if model == "pagerank" and s.format == "ratings":  # two id sets, not one graph's
        raise ValueError(
            f"{path} reads as ratings (user, item, rating lines): its rows and columns would "
            "be two sets of ids, users and items, not one graph's vertices, so PageRank does "
            "not rank it. For a graph, write its edges as a SNAP edge list, 'source target "
            "[weight]' per line separated by tabs or spaces (e.g. tr ',' '\\t' < edges.csv > "
            "edges.txt)")
    if bounds and s.format not in ("text-folder", "text-archive"):
        flags = " ".join(f"--{k} {v}" for k, v in bounds.items())
        raise ValueError(f"--min_df and --max_df bound the words kept from text folders and "
                         f"archives, and {path} holds {FORMATS[s.format]}: leave out {flags}")
    return s


def load_data(path: str, model: str | None = None, min_df: int | float | None = None,
              max_df: int | float | None = None) -> Any:
    """What ``--data`` holds: LoadedData in memory, or the Sniffed shard folder, read as
    :func:`sniff_data` says; ``min_df`` and ``max_df`` (None: the loader's defaults) bound
    the words kept from a text folder or archive."""
    from bidlab.datasets.sniff import load

    s = sniff_data(path, model, min_df, max_df)
    return s if s.format == "shards" else load(s, min_df=min_df, max_df=max_df)


def _refuse_network_file(path: Path, model: str | None) -> None:
    """ValueError when ``path``, a file no data format fits, is a BIF network: the
    network is ``bidlab train bayesnet``'s ``--network``, not its ``--data``."""
    from bidlab.datasets.formats import read_head

    try:
        head = read_head(path)[0].lstrip()
    except (OSError, ValueError):
        return
    while head.startswith(b"//"):  # BIF comment lines before the network block
        head = head.partition(b"\n")[2].lstrip()
    if not re.match(rb"network\s+[^\s{]*\s*\{", head):
        return
    run = (f"give it as --network {path}" if model == "bayesnet" else
           f"train it with bidlab train bayesnet --network {path}")
    raise ValueError(f"{path} is a Bayesian network (BIF), not rows of data: {run}, and "
                     "--data the rows to learn its tables from (an .npz whose X holds each "
                     "row's state indices, -1 or NaN where not observed)")


def is_scored(est: Any) -> bool:
    """Whether the estimator has a ``score`` method, so held-out rows can score it."""
    return callable(getattr(est, "score", None))


def check_inputs(name: str, cls: type, params: dict[str, Any], holdout: float | None
                 ) -> None:
    """ValueError when model ``name`` (estimator class ``cls``, given ``params``) lacks the
    network it trains (``--network``, BayesNet), or when ``--holdout`` asks to hold rows
    out for an estimator that cannot score them: they would only be left out of training.
    """
    names = {spec.name for spec in getattr(cls, "PARAMS", ())}
    if "network" in names and params.get("network") is None:
        raise ValueError(f"{name} needs --network PATH: the network's BIF file (plain or "
                         "gzip; --data holds the rows that train its tables)")
    if holdout and not is_scored(cls):
        raise ValueError(f"--holdout {holdout:g}: {cls.__name__} has no score method, so "
                         "held-out rows would only be left out of training: leave --holdout "
                         "out (it trains on every row)")


def _word_bounds(min_df: int | float | None, max_df: int | float | None
                 ) -> dict[str, int | float]:
    return {k: v for k, v in (("min_df", min_df), ("max_df", max_df)) if v is not None}


def read_shards(folder: Path) -> Any:
    """A shard folder read whole (for estimators, which train on data in memory)."""
    from bidlab.datasets.sniff import LoadedData
    from bidlab.learn.shards import ShardError, _load_shard, read_manifest

    manifest = read_manifest(folder)
    if not manifest["shards"]:
        raise ShardError(f"shard folder {folder} holds no rows (its manifest lists no "
                         "shards): write the data with bidlab.learn.write_shards(folder, X, y)")
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


def describe_data(data: Any, model: str | None = None) -> str:
    """One line on what was read: the file and its matrices (shapes, format), and the
    other formats the file fits, if any (see :func:`load_data`)."""
    if not hasattr(data, "describe"):
        return str(data)
    text = f"{data.sniffed.path if data.sniffed else ''}: {data.describe()}"
    also = data.sniffed.also if data.sniffed else ()
    if also:
        by = {f: ", ".join(m for m, g in PREFERRED_FORMAT.items() if g == f)
              for f in PREFERRED_FORMAT.values()}
        text += (f"; the file fits {' and '.join(also)} too, and is read as "
                 f"{data.sniffed.format} for {model or 'this model'} ("
                 + "; ".join(f"{f} for {ms}" for f, ms in by.items()) + ")")
    return text


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
    same rows. (X, y, None, None) when ``frac`` is 0. ValueError when a positive ``frac``
    rounds to no row, or to every row (nothing left to train on).

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
    if frac <= 0:
        return X, y, None, None
    if n_out < 1 or n_out >= n:
        what = "no row" if n_out < 1 else f"all {n} rows, leaving none to train on"
        raise ValueError(f"{frac:g} of {n} rows rounds to {what}")
    out = np.zeros(n, dtype=bool)
    out[np.random.default_rng(0).choice(n, size=n_out, replace=False)] = True
    keep = np.flatnonzero(~out)
    held = np.flatnonzero(out)
    return X[keep], _rows(y, keep), X[held], _rows(y, held)


def _rows(a: Any, rows: np.ndarray) -> Any:
    return None if a is None else a[rows]
