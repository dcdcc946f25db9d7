"""``fit``'s first pass under ``lrate="auto"``: a few candidate rates per target trained side
by side, and the winner continued.

The pilot (:mod:`bidlab.models.glm.auto_rate`) sees a few minibatches, a horizon that
favours small rates; ``fit`` runs many passes and averages its last iterates, which favours
larger ones. So ``fit`` trains each target's pilot pick and the next larger rates of the
grid (:func:`~bidlab.models.glm.auto_rate.race_rates`) side by side through its whole first
pass, as one GLM whose target map replicates every target once per candidate (all of them
share each sparse product). Each candidate's loss on a minibatch is taken before it trains
on that minibatch, so the losses summed over the pass's second half score it on rows it had
not seen (progressive validation). The winner's weights and updater state (ADAGrad's sums
of squares, the step count) become the model, which trains the remaining passes; the
first pass's ``loss_curve_`` entry is the winners' loss over that second half.

Examples
--------
>>> from bidlab.datasets import synthetic_glm
>>> from bidlab.models.glm import GLM
>>> X, y, _ = synthetic_glm(3000, 60, 12, seed=1)
>>> clf = GLM(random_state=0, n_passes=3).fit(X, y)     # the race runs in the first pass
>>> clf.n_iter_
3
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.divergence import DivergedError
from bidlab.models.glm.auto_rate import (
    RACE_SIZE,
    RATE_GRID,
    no_rate_trains,
    race_rates,
    race_winners,
)

__all__ = ["adopt", "run_race", "winning_rates"]


def _replicated(values: Any, K: int, G: int) -> Any:
    """A per-model-target parameter (one value or K values) repeated for G candidates each."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    return float(v[0]) if v.size == 1 else np.repeat(v, G).tolist()


def run_race(est: Any, X: Any, Y2: np.ndarray,
             w: np.ndarray | None) -> tuple[Any, np.ndarray, float]:
    """Train the candidates of GLM ``est`` (its engine built, ``lrate_`` the pilot's pick)
    one pass over validated (X, Y2, w) in ``fit``'s order. Returns the race (a fitted GLM
    with RACE_SIZE model targets per target of ``est``), each target's winning model target
    in it, and the winners' mean loss on the pass's second half (summed over targets).
    Candidates that diverge are dropped: the race runs again below the largest rate it
    had; :class:`~bidlab.learn.divergence.DivergedError` saying so when even the smallest
    rate of the grid diverges."""
    top = RATE_GRID[-1]
    while True:  # a race whose largest rates diverge is run again below them
        rates = race_rates(est.lrate_, est.targets_.K, top)
        try:
            return _race(est, X, Y2, w, rates)
        except DivergedError:
            below = [r for r in RATE_GRID if r < float(rates.max())]
            if not below:
                raise no_rate_trains(est) from None
            top = below[-1]


def _race(est: Any, X: Any, Y2: np.ndarray, w: np.ndarray | None,
          rates: np.ndarray) -> tuple[Any, np.ndarray, float]:
    """:func:`run_race` with the candidate rates ``rates`` (K x RACE_SIZE)."""
    t = est.targets_
    K, G = t.K, RACE_SIZE
    params = {**est.get_params(deep=False),
              "link": [lk for lk in t.links for _ in range(G)],
              "targmap": np.repeat(np.asarray(t.data_col, dtype=np.int64), G).tolist(),
              "lrate": rates.reshape(-1).tolist(),
              "l1": _replicated(est.l1, K, G), "l2": _replicated(est.l2, K, G),
              "n_passes": 1, "average": 0.0, "warm_start": False, "class_weight": None}
    race = type(est)(**params)
    race.dtype_ = est.dtype_
    race.n_features_in_ = X.shape[1]
    race._init_engine(X, Y2, y_1d=False, classes=est._known_classes())
    race.lrate_ = race._per_target_values("lrate", K * G)
    batches = -(-X.shape[0] // est._batch_rows(X.shape[0]))
    tally = [batches // 2, est._xp().zeros(K * G, dtype=np.float64), 0.0]
    race.model_.loss_tally = tally
    race._run(X, Y2, w, shuffle=est.shuffle, n_passes=1, average=False, train_loss=True)
    race.model_.loss_tally = None
    loss = np.asarray(backend.to_host(tally[1])) / max(tally[2], 1e-300)
    chosen = np.arange(K) * G + race_winners(loss.reshape(K, G), t.links)
    return race, chosen, float(loss[chosen].sum())


def winning_rates(race: Any, chosen: np.ndarray) -> float | list[float]:
    """The winners' learning rates: one float when they agree, else one per target."""
    rates = np.broadcast_to(np.asarray(race.lrate_, dtype=np.float64).reshape(-1),
                            (race.targets_.K,))[chosen]
    return float(rates[0]) if np.all(rates == rates[0]) else rates.tolist()


def adopt(est: Any, race: Any, chosen: np.ndarray) -> None:
    """Start ``est``'s engine (its learner initialised, so the updater holds its state)
    from the race's winners: their weights, the updater's per-weight state (ADAGrad's sums
    of squares) and its step count."""
    cols = np.concatenate([np.arange(race.layout_.T)[race.layout_.columns(int(k))]
                           for k in chosen])
    idx = est.model_.xp.asarray(cols)
    for dst, src in zip(est.model_.modelmats, race.model_.modelmats, strict=True):
        dst.data[...] = src.data[idx]
    theirs = race.updater_.state()
    for name, dst in est.updater_.state().items():
        src = theirs.get(name)
        if src is not None and src.shape[0] == race.layout_.T:
            dst.data[...] = src.data[idx]
    est.updater_.t = race.updater_.t
