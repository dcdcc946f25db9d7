"""``bench glm --workloads dense``: dense features as they come (not centred, scales from
0.01 to 10,000), ``GLM`` with its defaults against scikit-learn's defaults.

Data: scikit-learn's bundled breast cancer, wine, iris and digits (classification) and
diabetes (shifted and scaled, regression), 3 seeded 70 / 30 splits each, and a generated
200,000 x 30 problem whose columns are stretched and shifted (one split). Each case runs,
alternated in one run: ``GLM()`` (``standardize="auto"``: fit standardises dense
features), ``GLM(standardize=False)`` (the features as given: the A/B of the
standardisation), ``LogisticRegression()`` / ``LinearRegression()``,
``SGDClassifier(log_loss)`` / ``SGDRegressor()`` and a ``StandardScaler`` +
``LogisticRegression`` pipeline. Scores: held-out log loss (lower is better) or R^2;
times: the whole ``fit``, summed over the splits.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from bidlab.models.glm import GLM

__all__ = ["bench_dense"]


def _stretched(n: int = 200_000, d: int = 30) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification

    X, y = make_classification(n, d, n_informative=15, random_state=0)
    rng = np.random.default_rng(0)
    return X * 10 ** rng.uniform(-2, 3, d) + rng.uniform(-50, 50, d), y


def _data(quick: bool) -> list[tuple[str, Any, Any, bool, int]]:
    from sklearn import datasets as ds

    out: list[tuple[str, Any, Any, bool, int]] = []
    for name in ("breast_cancer", "wine", "iris", "digits"):
        X, y = getattr(ds, f"load_{name}")(return_X_y=True)
        out.append((name, X, y, True, 3))
    X, y = ds.load_diabetes(return_X_y=True)
    out.append(("diabetes x 100 + 5", X * 100 + 5, y, False, 3))
    if not quick:
        X, y = _stretched()
        out.append(("generated 200,000 x 30, stretched", X, y, True, 1))
    return out


def _systems(classify: bool, n_classes: int) -> dict[str, Callable[[], Any]]:
    from sklearn.linear_model import (
        LinearRegression,
        LogisticRegression,
        SGDClassifier,
        SGDRegressor,
    )
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    link = ("logistic" if n_classes == 2 else "softmax") if classify else "linear"
    systems: dict[str, Callable[[], Any]] = {
        "bidlab GLM() defaults": lambda: GLM(link, random_state=0),
        "bidlab GLM(standardize=False)": lambda: GLM(link, standardize=False,
                                                     random_state=0)}
    if classify:
        systems.update({
            "sklearn LogisticRegression()": LogisticRegression,
            "sklearn SGDClassifier(log_loss)": lambda: SGDClassifier(loss="log_loss",
                                                                     random_state=0),
            "sklearn StandardScaler + LogisticRegression": lambda: make_pipeline(
                StandardScaler(), LogisticRegression())})
    else:
        systems.update({"sklearn LinearRegression()": LinearRegression,
                        "sklearn SGDRegressor()": lambda: SGDRegressor(random_state=0)})
    return systems


def _score(model: Any, X: Any, y: Any, classify: bool) -> float:
    from sklearn.metrics import log_loss, r2_score

    if classify:
        P = np.clip(model.predict_proba(X), 1e-7, 1.0)
        return float(log_loss(y, P / P.sum(axis=1, keepdims=True), labels=model.classes_))
    return float(r2_score(y, model.predict(X)))


def bench_dense(quick: bool, peers: set[str]) -> dict:
    """The cases above; ``peers`` is not used (every system runs)."""
    from sklearn.model_selection import train_test_split

    cases = []
    rng = np.random.default_rng(0)  # load the compiled kernels before any timing
    for link, y in (("logistic", rng.integers(0, 2, 200)), ("softmax", rng.integers(0, 3, 200)),
                    ("linear", rng.random(200))):
        GLM(link, random_state=0).fit(rng.random((200, 5)), y)
    for name, X, y, classify, splits in _data(quick):
        systems = _systems(classify, len(np.unique(y)) if classify else 0)
        scores: dict[str, list[float]] = {s: [] for s in systems}
        times: dict[str, float] = dict.fromkeys(systems, 0.0)
        for seed in range(splits):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed,
                                                  stratify=y if classify else None)
            for system, make in systems.items():  # alternated, split by split
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the peers' ConvergenceWarning
                    t0 = time.perf_counter()
                    model = make().fit(Xtr, ytr)
                    times[system] += time.perf_counter() - t0
                    scores[system].append(_score(model, Xte, yte, classify))
        for system in systems:
            cases.append({"data": name, "system": system,
                          "log_loss" if classify else "r2": round(float(np.mean(
                              scores[system])), 4), "fit_s": round(times[system], 3)})
    return {"workload": "dense", "results": [], "cases": cases}
