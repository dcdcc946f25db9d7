"""The whole ``fit`` of k-means with default settings against scikit-learn's ``KMeans``.

Both estimators run with their defaults (k-means++ start, default ``tol`` and
``max_iter``, one initialisation), float32 rows, on:

* Gaussian blobs of n rows in d dimensions around k centres (``center_scale=3``, so the
  clusters overlap at small d and separate at large d), for every d in
  :data:`DIMS` and k in :data:`KS`;
* data sets the settings were not chosen on, for every k in :data:`KS` (skipped with a
  note when the shared data is absent): the a9a training rows (32,561 x 123 binary
  features, many repeated rows) as dense float32, and the 20 Newsgroups training split as
  sparse L2-normalised TF-IDF rows (11,314 x 56,123, 105 nonzeros a row, CSR float32;
  :func:`~bidlab.datasets.newsgroups.newsgroups_tfidf`), which both systems cluster as
  given.

Every cell runs :data:`SEEDS` seeds; seed s draws the blobs with seed ``1000 + s`` and
gives both estimators ``random_state=s``; the two systems take turns, the first one
alternating from seed to seed. Reported per cell: the median of each system's times, the
time ratio (bidlab / scikit-learn, of the summed times) and the ratio of the mean inertias.
Target per cell: time ratio <= 1 / 1.3, mean inertia at most 2 % above scikit-learn's.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from bidlab.bench._common import log, target

__all__ = ["DIMS", "KS", "SEEDS", "fit_grid", "report_rows"]

DIMS = (2, 16, 32, 96, 256)
KS = (8, 64, 256)
SEEDS = 5
#: rows of the blobs by dimension (fewer at large d: the grid stays a few minutes long)
ROWS = {2: 200_000, 16: 100_000, 32: 100_000, 96: 50_000, 256: 25_000}
TIME_TARGET = 1 / 1.3
INERTIA_SLACK = 1.02


def _blobs(n: int, d: int, k: int, seed: int) -> np.ndarray:
    from bidlab.datasets import blobs

    return blobs(n, d, k, spread=1.0, seed=seed, center_scale=3.0).X


def _a9a() -> np.ndarray | None:
    from bidlab.datasets import load_a9a
    from bidlab.datasets.paths import find_shared_data_dir

    if find_shared_data_dir() is None:
        return None
    try:
        return np.ascontiguousarray(load_a9a().X_train.toarray(), dtype=np.float32)
    except (OSError, ValueError):
        return None


def _news20() -> Any:
    from bidlab.datasets import load_20newsgroups
    from bidlab.datasets.newsgroups import newsgroups_tfidf
    from bidlab.datasets.paths import find_shared_data_dir

    if find_shared_data_dir() is None:
        return None
    try:
        return newsgroups_tfidf(load_20newsgroups(subset="train"))[0]
    except (OSError, ValueError):
        return None


def _fit_once(system: str, X: np.ndarray, k: int, seed: int) -> tuple[float, float, int]:
    if system == "bidlab":
        from bidlab.models import KMeans

        est: Any = KMeans(k, random_state=seed)
    else:
        from sklearn.cluster import KMeans as SKKMeans

        est = SKKMeans(k, random_state=seed, n_init=1)
    t0 = time.perf_counter()
    est.fit(X)
    return time.perf_counter() - t0, float(est.inertia_), int(est.n_iter_)


def _cell(name: str, data: Any, k: int, seeds: int) -> dict[str, Any]:
    """One (data, k) cell: ``data(seed)`` gives the rows of a seed."""
    times: dict[str, list[float]] = {"bidlab": [], "sklearn": []}
    inertia: dict[str, list[float]] = {"bidlab": [], "sklearn": []}
    iters: dict[str, list[int]] = {"bidlab": [], "sklearn": []}
    shape = None
    for s in range(seeds):
        X = data(s)
        shape = X.shape
        order = ("bidlab", "sklearn") if s % 2 == 0 else ("sklearn", "bidlab")
        for system in order:
            t, e, it = _fit_once(system, X, k, s)
            times[system].append(t)
            inertia[system].append(e)
            iters[system].append(it)
    ratio = sum(times["bidlab"]) / sum(times["sklearn"])
    inertia_ratio = float(np.mean(inertia["bidlab"]) / np.mean(inertia["sklearn"]))
    log(f"  {name} k={k}: time ratio {ratio:.3f}, inertia ratio {inertia_ratio:.4f}")
    return {"data": name, "n": int(shape[0]), "d": int(shape[1]), "k": int(k),
            "bidlab_s": round(float(np.median(times["bidlab"])), 4),
            "sklearn_s": round(float(np.median(times["sklearn"])), 4),
            "time_ratio": round(ratio, 3), "inertia_ratio": round(inertia_ratio, 5),
            "bidlab_iters": iters["bidlab"], "sklearn_iters": iters["sklearn"],
            "met": bool(ratio <= TIME_TARGET and inertia_ratio <= INERTIA_SLACK)}


def fit_grid(dims: tuple[int, ...] = DIMS, ks: tuple[int, ...] = KS, seeds: int = SEEDS,
             rows: dict[int, int] | None = None, real: bool = True) -> dict[str, Any]:
    """Time both systems' whole ``fit`` on every (d, k) of the blobs, on a9a and on 20
    Newsgroups' TF-IDF rows (``real``).

    Examples
    --------
    >>> res = fit_grid(dims=(2,), ks=(4,), seeds=1, rows={2: 2000}, real=False)
    >>> sorted(res["cells"][0])[:3]
    ['bidlab_iters', 'bidlab_s', 'd']
    """
    rows = ROWS if rows is None else rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warm = _blobs(4000, 4, 8, 0)
        for system in ("bidlab", "sklearn"):  # compile the kernels, start the thread pools
            _fit_once(system, warm, 8, 0)
        cells = []
        for d in dims:
            for k in ks:
                n = rows[d]
                cells.append(_cell(f"blobs {n:,} x {d}", lambda s, n=n, d=d, k=k:
                                   _blobs(n, d, k, 1000 + s), k, seeds))
        missing = []
        for name, load in (("a9a train", _a9a), ("20news tfidf (CSR)", _news20)) if real else ():
            A = load()
            if A is None:
                missing.append(name.split()[0])
                continue
            for k in ks:
                cells.append(_cell(name, lambda s, A=A: A, k, seeds))
        note = (f"{' and '.join(missing)} skipped: the shared data folder was not found"
                if missing else None)
    targets = [target(f"{c['data']} k={c['k']}: time ratio (inertia ratio "
                      f"{c['inertia_ratio']:.4f} <= {INERTIA_SLACK})",
                      c["time_ratio"] if c["inertia_ratio"] <= INERTIA_SLACK else None,
                      round(TIME_TARGET, 4), at_most=True) for c in cells]
    return {"seeds": seeds, "cells": cells, "targets": targets, "note": note}


def report_rows(res: dict[str, Any]) -> list[str]:
    """The grid as text lines."""
    lines = [f"whole fit, defaults, median of {res['seeds']} seeds (s); ratios bidlab / "
             "sklearn", f"  {'data':<22} {'k':>4} {'bidlab':>8} {'sklearn':>8} "
             f"{'time':>6} {'inertia':>8}"]
    for c in res["cells"]:
        lines.append(f"  {c['data']:<22} {c['k']:>4} {c['bidlab_s']:>8.3f} "
                      f"{c['sklearn_s']:>8.3f} {c['time_ratio']:>6.3f} "
                      f"{c['inertia_ratio']:>8.4f}{'' if c['met'] else '  MISSED'}")
    if res.get("note"):
        lines.append("  " + res["note"])
    return lines
