"""``bench glm --workloads l2cost``: what L1 / L2 costs when minibatches touch few rows.

An untouched row owes its regulariser terms every step. :mod:`bidlab.kern.touched` either
sweeps them over every row (the dense update) or defers them to a closed-form catch-up when
the row is next touched, by the share of rows a minibatch touches
(:data:`~bidlab.kern.touched.DEFER_BELOW`). This times one pass with L2 = 1e-6 under the
rule against the sweep forced on every step, alternated round by round in one run, with
L2 = 0 as the floor, at model sizes where the rule defers and where it sweeps.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bidlab.kern import touched
from bidlab.models.glm import GLM

__all__ = ["bench_l2cost"]

_SWEEP_ALWAYS = 10**9  # DEFER_BELOW that never defers


def _fit_once(X: Any, Y: Any, batch: int, l2: float, defer_below: int) -> tuple[float, Any]:
    rule = touched.DEFER_BELOW
    touched.DEFER_BELOW = defer_below
    try:
        m = GLM("logistic", lrate=0.1, l2=l2, n_passes=1, batch_size=batch, average=0.0,
                random_state=0)
        t0 = time.perf_counter()
        m.fit(X, Y)
        return time.perf_counter() - t0, m
    finally:
        touched.DEFER_BELOW = rule


def _case(d: int, batch: int, n: int, rounds: int) -> dict:
    from bidlab.datasets import synthetic_glm

    X, Y, _ = synthetic_glm(n, d, 40, n_targets=100, seed=5)
    rule = touched.DEFER_BELOW
    shares = [np.unique(X[i : i + batch].indices).size / d for i in range(0, n, batch)]
    _fit_once(X[:4 * batch], Y[:4 * batch], batch, 1e-6, rule)  # load the kernels
    times: dict[str, list[float]] = {"swept": [], "rule": [], "l2_0": []}
    for r in range(rounds):
        order = ("swept", "rule") if r % 2 == 0 else ("rule", "swept")
        for k in order:
            times[k].append(_fit_once(X, Y, batch, 1e-6,
                                      _SWEEP_ALWAYS if k == "swept" else rule)[0])
        times["l2_0"].append(_fit_once(X, Y, batch, 0.0, rule)[0])
    a = _fit_once(X, Y, batch, 1e-6, _SWEEP_ALWAYS)[1]
    b = _fit_once(X, Y, batch, 1e-6, rule)[1]
    med = {k: float(np.median(v)) for k, v in times.items()}
    share = float(np.median(shares))
    return {"d": d, "batch": batch, "rows_touched_share": round(share, 4),
            "rule_defers": bool(share * rule < 1), "swept_s": round(med["swept"], 3),
            "rule_s": round(med["rule"], 3), "l2_0_s": round(med["l2_0"], 3),
            "swept_over_rule": round(med["swept"] / med["rule"], 3),
            "max_abs_coef_diff": float(np.abs(a.coef_ - b.coef_).max())}


def bench_l2cost(quick: bool, peers: set[str]) -> dict:
    """One pass, 100 logistic targets, power-law rows with 40 nonzeros, L2 = 1e-6."""
    del peers  # bidlab against itself
    if quick:
        cases = [(200_000, 500), (8_000, 500)]
        n, rounds = 8_000, 1
    else:
        cases = [(600_000, 500), (300_000, 500), (300_000, 2000), (40_000, 500)]
        n, rounds = 66_000, 5
    return {"workload": "l2cost", "n_train": n, "defer_below": touched.DEFER_BELOW,
            "results": [], "cases": [_case(d, b, n, rounds) for d, b in cases]}
