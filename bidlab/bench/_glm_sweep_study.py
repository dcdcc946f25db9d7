"""The sweep part of ``bench glm``'s news20 workload.

32 (lrate, L2) configurations trained in one pass (:func:`bidlab.models.glm.glm_sweep`)
against the same grid as 32 separate scikit-learn fits, against one configuration of its
own, against the sparse products that bound it, and through the learner path.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np

from bidlab.models.glm import GLM, glm_sweep

__all__ = ["sweep_study"]


def _separate_fits(Xtr, ytr, Xte, yte, configs: list[tuple[float, float]], epochs: int,
                   quick: bool) -> dict:
    """The same (lrate, L2) grid as N separate scikit-learn fits: ``SGDClassifier`` with log
    loss (one-vs-rest), ``eta0`` = lrate, ``alpha`` = L2, a 1/sqrt(t) step decay and the same
    number of epochs. ``quick`` times every eighth configuration and scales up."""
    from sklearn.linear_model import SGDClassifier

    timed = configs[::8] if quick else configs
    best, wall = 0.0, 0.0
    for lrate, l2 in timed:
        m = SGDClassifier(loss="log_loss", alpha=l2, eta0=lrate, learning_rate="invscaling",
                          max_iter=epochs, tol=None, random_state=0)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.fit(Xtr, ytr)
        wall += time.perf_counter() - t0
        best = max(best, float(m.score(Xte, yte)))
    return {"system": "sklearn SGDClassifier(log_loss) per configuration",
            "configs_timed": len(timed), "wall_s": round(wall * len(configs) / len(timed), 3),
            "best_accuracy": round(best, 5)}


def sweep_study(Xtr, ytr, Xte, yte, quick: bool, epochs: int = 5) -> dict:
    """32 (lrate, L2) configurations in one pass against 32 separate scikit-learn fits of
    the same grid, and against one configuration of its own."""
    from bidlab.models.glm import best_config

    lrates = [0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0]
    l2s = [0.0, 1e-6, 1e-5, 1e-4]
    configs = [(lr, l2) for lr in lrates for l2 in l2s]
    common = dict(n_passes=epochs, batch_size=500, average=0.0, random_state=0)
    one = GLM("softmax", lrate=0.1, l2=0.0, **common)
    t0 = time.perf_counter()
    one.fit(Xtr, ytr)
    t_one = time.perf_counter() - t0
    sweep = glm_sweep("softmax", lrate=lrates, l2=l2s, **common)
    t0 = time.perf_counter()
    sweep.fit(Xtr, ytr)
    t_sweep = time.perf_counter() - t0
    best = best_config(sweep, Xte, yte)
    separate = _separate_fits(Xtr, ytr, Xte, yte, configs, epochs, quick)
    floor = _products_floor(sweep, Xtr, common["batch_size"], epochs)
    learner = {}
    for name, make in (("one_config_s", lambda: GLM("softmax", lrate=0.1, l2=0.0, **common)),
                       ("sweep_s", lambda: glm_sweep("softmax", lrate=lrates, l2=l2s,
                                                     **common))):
        lrn = make().learner(Xtr, ytr, val_every=0)  # every minibatch trains, as in fit
        t0 = time.perf_counter()
        lrn.fit(progress=None)
        learner[name] = round(time.perf_counter() - t0, 3)
    learner["sweep_over_fit"] = round(learner["sweep_s"] / t_sweep, 3)
    learner["one_config_over_fit"] = round(learner["one_config_s"] / t_one, 3)
    return {
        "configs": len(configs),
        "epochs": epochs,
        "sweep_s": round(t_sweep, 3),
        "separate_sklearn": separate,
        "speedup_over_separate_sklearn": round(separate["wall_s"] / t_sweep, 3),
        "best": {"lrate": best.lrate, "l2": best.l2, "accuracy": round(best.score, 5)},
        "one_config_s": round(t_one, 3),
        "ratio_sweep_over_one": round(t_sweep / t_one, 3),
        "one_config_accuracy": round(float(one.score(Xte, yte)), 5),
        "products_floor_s": round(floor, 3),
        "ratio_products_floor_over_one": round(floor / t_one, 3),
        "learner": learner,
    }


def _products_floor(sweep: Any, Xtr: Any, batch_size: int, epochs: int) -> float:
    """Seconds the sweep's unavoidable sparse products alone take over its whole fit.

    Any implementation multiplies each minibatch by the T = 640 weight columns twice (the
    margins X @ W and the gradient X.T @ E: nnz x T multiply-adds each); this times the
    forward product at its best over the run's minibatches and counts it twice. Against
    one configuration's whole fit it bounds what the sweep ratio can be at this kernel
    speed on this machine.
    """
    from bidlab import kern

    W = sweep.model_.modelmats[0].data.T  # d x T, C-ordered
    E = np.empty((batch_size, W.shape[1]), W.dtype)
    total = 0.0
    for start in range(0, Xtr.shape[0] - batch_size + 1, batch_size):
        Xb = Xtr[start : start + batch_size]
        kern.sparse_dense(Xb, W, out=E)  # warm
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            kern.sparse_dense(Xb, W, out=E)
            best = min(best, time.perf_counter() - t0)
        total += best
    full = Xtr.shape[0] // batch_size
    steps = -(-Xtr.shape[0] // batch_size)
    return 2.0 * total * epochs * steps / max(full, 1)
