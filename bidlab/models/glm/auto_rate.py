"""``lrate="auto"``: the GLM picks its learning rate per target from a short pilot.

The pilot is a sweep (:mod:`bidlab.models.glm.sweep`'s mechanism: every model target
replicated once per candidate rate through the target map, so all candidates share each
sparse product) trained for one pass over a seeded sample of the rows, and scored by each
candidate's mean loss on rows of the sample it did not train on, weighted as the fit
weighs its rows (``sample_weight`` times ``class_weight``). Each model target keeps the
candidate with the lowest loss (summed over the targets of one link, which share a rate).
``partial_fit`` and ``learner`` train with that pick; ``fit`` races it against the next
larger rates through its first pass (:mod:`bidlab.models.glm.race`, :func:`race_rates`).

The sample is an eighth of the rows (at least four minibatches, at most all of them):
three quarters train, one quarter scores. With ``len(RATE_GRID)`` candidates the pilot
costs about ``len(RATE_GRID) / 8`` passes' worth of per-target work (less, since the
sparse products are shared), against the ``n_passes`` passes of ``fit``.

Examples
--------
>>> from bidlab.datasets import synthetic_glm
>>> from bidlab.models.glm import GLM
>>> X, y, _ = synthetic_glm(2000, 50, 10, seed=0)
>>> clf = GLM(random_state=0, n_passes=2).fit(X, y)      # lrate="auto" is the default
>>> float(clf.lrate_) in RATE_GRID
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.divergence import DivergedError
from bidlab.models.validation import take_rows

__all__ = ["PILOT_SAMPLE_STEPS", "PILOT_STEPS", "RACE_SIZE", "RATE_GRID", "is_auto",
           "no_rate_trains", "pick_rates", "pilot_batch", "pilot_rows", "race_rates",
           "race_winners"]

#: the candidate learning rates (ADAGrad's and gradient steps' ``lrate``)
RATE_GRID = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: candidates per target raced side by side through ``fit``'s first pass
RACE_SIZE = 3
#: the fewest minibatch steps the pilot takes (:func:`pilot_batch`)
PILOT_STEPS = 3
#: ``batch_size="auto"``: the pilot's sample is four minibatches of a pass of
#: ``PILOT_SAMPLE_STEPS`` steps (half of a small data set's rows), not of ``fit``'s
#: smaller ones, which would leave the pilot a dozen rows to pick from on iris
PILOT_SAMPLE_STEPS = 8


def is_auto(lrate: Any) -> bool:
    """Whether an ``lrate`` parameter asks for the pilot."""
    return isinstance(lrate, str) and lrate == "auto"


def pilot_rows(n: int, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """Row indices the pilot trains on and scores on (a seeded sample of ``n`` rows).

    An eighth of the rows, at least four minibatches: three quarters train, the rest score.
    Under 8 rows, every row does both (the score is then a training loss).

    >>> tr, ev = pilot_rows(80_000, 500, np.random.default_rng(0))
    >>> len(tr), len(ev)
    (7500, 2500)
    """
    size = min(n, max(4 * int(batch_size), n // 8))
    rows = rng.choice(n, size=size, replace=False) if size < n else rng.permutation(n)
    if size < 8:
        return rows, rows
    cut = (3 * size) // 4
    return np.sort(rows[:cut]), np.sort(rows[cut:])


def pilot_batch(n_train: int, batch_size: int) -> int:
    """The pilot's minibatch: ``batch_size``, or smaller so that its training rows make
    at least :data:`PILOT_STEPS` steps (one step cannot tell a rate that starts well from
    one that keeps training well). ``fit``'s pilot, on at least four minibatches, keeps
    ``batch_size``; ``partial_fit``'s on one 500-row chunk took one step and picked 0.1
    where 1.0 trains the stream (3-class softmax, 500-row chunks: held-out accuracy 0.745
    with one step, 0.914 with three; a9a: 0.842, 0.845).

    >>> pilot_batch(7500, 500), pilot_batch(375, 500)
    (500, 125)
    """
    return max(1, min(int(batch_size), -(-int(n_train) // PILOT_STEPS)))


def _replicated(values: Any, K: int, G: int) -> Any:
    """A per-model-target parameter (one value or K values) repeated for G candidates each."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 1:
        return float(v[0])
    return np.repeat(v, G).tolist()


def pick_rates(est: Any, X: Any, Y2: np.ndarray, w: np.ndarray | None, targmap: Any,
               links: tuple[str, ...], seed: int) -> float | list[float]:
    """The learning rate of each model target of GLM ``est`` on (X, Y2), from the pilot.

    ``X``: the validated CSR matrix ``fit`` trains on (on the model's device); ``w``: its
    row weights or None; ``targmap`` / ``links``: the data column and link of each model
    target as ``est`` resolved them. Returns one float when every target picked the same
    rate, else one per model target.
    """
    K = len(links)
    batch = est._batch_rows(X.shape[0], steps=PILOT_SAMPLE_STEPS)
    tr, ev = pilot_rows(X.shape[0], batch, np.random.default_rng(seed))
    Xt, Yt, wt, Xe, Ye = _take(X, tr), Y2[tr], None if w is None else w[tr], _take(X, ev), Y2[ev]
    grid = RATE_GRID
    while True:  # a grid whose largest rates diverge is tried again without them
        G = len(grid)
        params = {**est.get_params(deep=False),
                  "link": [lk for lk in links for _ in range(G)],
                  "targmap": np.repeat(np.asarray(targmap, dtype=np.int64), G).tolist(),
                  "lrate": np.tile(np.asarray(grid), K).tolist(),
                  "l1": _replicated(est.l1, K, G), "l2": _replicated(est.l2, K, G),
                  "n_passes": 1, "average": 0.0, "warm_start": False, "verbose": 0,
                  "shuffle": False, "class_weight": None,
                  "batch_size": pilot_batch(len(tr), batch)}
        pilot = type(est)(**params)
        try:
            pilot._train_pilot(Xt, Yt, wt, est)
        except DivergedError:
            if G == 1:
                raise no_rate_trains(est) from None
            grid = grid[:-1]
            continue
        # scored as the estimator scores any X: host rows, validated, then moved
        loss = pilot.loss_targets(backend.to_host(Xe), Ye,
                                  None if w is None else w[ev]).reshape(K, G)
        loss = np.where(np.isfinite(loss), loss, np.inf)
        if np.isinf(loss).all(axis=1).any():  # a target that no candidate trains
            raise no_rate_trains(est)
        best = np.asarray(grid)[_choose(loss, links)]
        return float(best[0]) if np.all(best == best[0]) else best.tolist()


def no_rate_trains(est: Any) -> DivergedError:
    """The error of ``lrate="auto"`` when every rate of the grid diverges."""
    return DivergedError(
        f"lrate='auto': no learning rate in the grid {list(RATE_GRID)} trains this data with "
        f"updater={est.updater!r}: every one diverged. Scale the features (fit with "
        "standardize=True, or sklearn.preprocessing.StandardScaler)"
        + ("" if est.updater == "adagrad" else ", use updater='adagrad' (per-weight steps)")
        + f", or give an explicit smaller lrate (e.g. lrate={RATE_GRID[0] / 100:g})")


def _choose(loss: np.ndarray, links: tuple[str, ...]) -> np.ndarray:
    """The candidate index of each model target from its pilot losses (K x G).

    Targets of one link share a rate: the candidate with the least summed loss over them,
    since one target's loss on a quarter of a pilot sample is too noisy to rank rates
    that differ by a few percent (a per-target pick on 100 TF-IDF targets lost 0.013 of
    held-out log loss against the shared one).
    """
    pick = np.empty(loss.shape[0], dtype=np.int64)
    names = np.asarray(links)
    for lk in set(links):
        rows = np.flatnonzero(names == lk)
        pick[rows] = int(np.argmin(loss[rows].sum(axis=0)))
    return pick


def _take(X: Any, rows: np.ndarray) -> Any:
    """Rows of a CSR matrix on its own device."""
    if isinstance(X, np.ndarray) or type(X).__module__.startswith("scipy"):
        return take_rows(X, rows)
    from bidlab import backend

    return X[backend.cupy().asarray(rows)]


def race_rates(pilot: float | list[float], K: int, top: float = RATE_GRID[-1]) -> np.ndarray:
    """The candidates each model target races in ``fit``'s first pass (K x RACE_SIZE).

    The pilot's horizon (a few minibatches) favours small rates, which move least at
    first, while ``fit`` runs many passes and averages the last iterates, which favours
    larger ones: so a target races its pilot pick and the next larger rates of the grid
    (the last ``RACE_SIZE`` rates when its pick is near the top). ``top``: the largest rate
    raced (a race that diverged is run again below its largest rate; with fewer than
    ``RACE_SIZE`` rates left, the smallest races more than once).

    >>> race_rates(0.3, 2)
    array([[0.3, 1. , 3. ],
           [0.3, 1. , 3. ]])
    >>> race_rates([10.0, 0.03], 2)
    array([[ 1.  ,  3.  , 10.  ],
           [ 0.03,  0.1 ,  0.3 ]])
    """
    grid = np.asarray([r for r in RATE_GRID if r <= top])
    picks = np.broadcast_to(np.asarray(pilot, dtype=np.float64).reshape(-1), (K,))
    first = np.maximum(np.minimum(np.searchsorted(grid, picks), len(grid) - RACE_SIZE), 0)
    cols = np.minimum(first[:, None] + np.arange(RACE_SIZE)[None, :], len(grid) - 1)
    return grid[cols]


def race_winners(loss: np.ndarray, links: tuple[str, ...]) -> np.ndarray:
    """Each model target's winning candidate (an index < RACE_SIZE) from the race's
    progressive losses (K x RACE_SIZE: each candidate's loss on the minibatches of the
    first pass's second half, each scored before that candidate trained on it); targets of
    one link share the winner with the least summed loss, as the pilot's picks do."""
    return _choose(np.where(np.isfinite(loss), loss, np.inf), links)
