"""Sculley's minibatch k-means, with scikit-learn's early stop and re-seeding:
:class:`MinibatchKMeansModel`.

Trained with :class:`~bidlab.learn.updaters.RunningMean` (Sculley 2010): per minibatch each
row goes to its nearest centre, and the model writes each centre's sum of new rows and
their weight into ``updatemats``; the updater adds the weight to the centre's count
(``counts``, the second model matrix) and moves the centre towards the mean of its new rows
by ``n_c / counts[c]`` (``lrate`` < 1 damps it). Every ``reassign_every`` steps, centres
that starve (below ``reassign_ratio`` of the busiest one's weight) move to minibatch rows
drawn with probability proportional to their squared distance, as scikit-learn's
MiniBatchKMeans does: the model writes the statistics of that jump (the updater's module
doc), so it too is the updater's step and the model never writes its model matrices.
**Early stop** (scikit-learn's MiniBatchKMeans rules, while ``stop_early``): the minibatch
inertia per unit weight (measured before each step; the first step's, of the initial
centres, is ignored) is smoothed as ``ewa = (1 - a) ewa + a inertia`` with
``a = min(1, 2 m / (n + 1))`` (m rows per minibatch, n in the data); the model sets
``converged`` when ``ewa`` has not reached a new low for ``max_no_improvement`` steps in a
row. There is no ``tol``: a minibatch step's centre shift follows its step size (which
shrinks as 1 / steps) more than convergence (scikit-learn's MiniBatchKMeans has that test
off by default too).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.datasource import DataInfo
from bidlab.learn.options import Option
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters import RunningMean, Updater
from bidlab.mat import Mat
from bidlab.models.kmeans.distances import dense_rows
from bidlab.models.kmeans.model import KMeansModel

__all__ = ["MinibatchKMeansModel"]


class MinibatchKMeansModel(KMeansModel):
    """Minibatch k-means on the Learner, started from the given k x d centres (see the
    module doc).

    Besides :class:`~bidlab.models.kmeans.model.KMeansModel`'s, it has the attributes below.

    Attributes
    ----------
    stop_early
        minibatch steps may set ``converged`` (True by default;
        ``partial_fit`` turns it off, as scikit-learn's does not stop early).
    steps
        minibatch steps taken.

    Examples
    --------
    ::

        from bidlab.learn import Learner, MemorySource

        model = MinibatchKMeansModel(X[:8].copy(), random_state=0)
        src = MemorySource(X, batch_size=1024, shuffle=True, seed=0)
        Learner(model, src, n_passes=5, val_every=0).fit(progress=None)
        model.centers.data, model.counts
    """

    OPTIONS = (
        Option("reassign_every", int, 10, "steps between re-seedings of starved centres "
               "(0: never)", low=0),
        Option("reassign_ratio", float, 0.01, "a centre starves below this fraction of the "
               "busiest centre's weight", low=0.0, high=1.0),
        Option("max_no_improvement", int, 10, "stop after this many steps in a row without "
               "a new low of the smoothed minibatch inertia (None: never)", low=1,
               none_ok=True),
    )

    algorithm = "minibatch"
    _SCRATCH = ("_buf", "_work", "_origin_mat", "_vote", "_steps_state", "_comm")
    _steps_state: dict[str, Mat] | None = None  # the checkpoint's copy of the step state

    def __init__(self, centers: Any, *, random_state: int = 0, **options: Any) -> None:
        super().__init__(centers, random_state=random_state, **options)
        self.steps = 0
        self.stop_early = True
        self._reset_early_stop()

    @classmethod
    def following(cls, model: KMeansModel, info: DataInfo, **options: Any) -> MinibatchKMeansModel:
        """Minibatch steps that continue ``model`` (trained by either algorithm) on the data
        ``info`` describes: its centres, its cluster weights as the counts."""
        new = cls(model.modelmats[0].numpy(), random_state=model.random_state, **options)
        new.origin = model.origin  # the same frame as the centres copied
        new.init_from(info)
        for dst, src in zip(new.modelmats, model.modelmats, strict=True):
            dst.data[...] = dst.xp.asarray(src.data)
        new.distance_evaluations = model.distance_evaluations
        return new

    def default_updater(self, **options: Any) -> Updater:
        """RunningMean (``options``: its own, e.g. a smaller ``lrate`` to damp the steps)."""
        return RunningMean(**options)

    def rebind(self, info: DataInfo) -> None:
        super().rebind(info)
        self._reset_early_stop()

    # -- checkpoints ----------------------------------------------------------------------
    def extra_state(self) -> dict[str, Mat]:
        """The step count, the early stop's state and the re-seeding generator's state, so a
        resumed run re-seeds and stops early where an uninterrupted one would."""
        if not self.modelmats:
            return {}
        st = self._steps_state
        if st is None:
            st = self._steps_state = {"steps": Mat(np.zeros((1, 5))),
                                      "rng": Mat(np.zeros((1, 6), np.uint64))}
        es = self._es
        st["steps"].data[0] = [self.steps, es["step"], _num(es["ewa"]), _num(es["low"]),
                               es["since"]]
        state = self.rng.bit_generator.state
        if state.get("bit_generator") == "PCG64":
            words = [w for v in state["state"].values() for w in divmod(v, 1 << 64)]
            st["rng"].data[0] = [*words, state["has_uint32"], state["uinteger"]]
        return super().extra_state() | st

    def restored(self, earlier: dict[str, Any]) -> None:
        super().restored(earlier)  # measured from this model's origin
        st = self._steps_state
        if st is None:
            return
        steps, es_step, ewa, low, since = (float(v) for v in st["steps"].data[0])
        self.steps = int(steps)
        self._es = {"step": int(es_step), "ewa": None if math.isnan(ewa) else ewa,
                    "low": None if math.isnan(low) else low, "since": int(since)}
        limit = self.opts.max_no_improvement
        self.converged = self.stop_early and limit is not None and self._es["since"] >= limit
        w = [int(v) for v in st["rng"].data[0]]
        state = self.rng.bit_generator.state
        if state.get("bit_generator") == "PCG64" and any(w[:4]):
            state["state"] = {"state": (w[0] << 64) | w[1], "inc": (w[2] << 64) | w[3]}
            state["has_uint32"], state["uinteger"] = w[4], w[5]
            self.rng.bit_generator.state = state

    def _reset_early_stop(self) -> None:
        # minibatch early stop: steps seen, smoothed inertia, its lowest, steps since then
        self._es: dict[str, Any] = {"step": 0, "ewa": None, "low": None, "since": 0}

    def update(self, batch: Minibatch) -> float:
        if self._vote is not None:
            self._agree_origin()
        X, w = self._batch_data(batch)
        m = batch.n
        buf = self._buffers(m)
        self._set_centers(buf)
        lab, d1 = buf["lab"][:m], buf["d1"][:m]
        if not self._nearest_rows(X, lab, buf, m, w=w, add=True):
            self._stats(X, lab, w, buf, m)
        S, n = self.updatemats[0].data, self.updatemats[1].data
        S[...] = buf["S"]
        n[:, 0] = buf["N"]
        self.steps += 1
        every = self.opts.reassign_every
        if every and self.steps % every == 0:
            self._reassign(X, d1, w)
        score = self._score(d1, w)
        if self.stop_early:
            self._early_stop(-score, m)
        return score

    def _early_stop(self, inertia: float, m: int) -> None:
        """Set ``converged`` when minibatch steps stop improving (the module doc's rule)."""
        es = self._es
        es["step"] += 1
        if es["step"] == 1 or not math.isfinite(inertia):
            return  # the first step measures the initial centres
        a = min(1.0, 2.0 * m / (self.info.n_samples + 1))
        es["ewa"] = inertia if es["ewa"] is None else (1 - a) * es["ewa"] + a * inertia
        if es["low"] is None or es["ewa"] < es["low"]:
            es["low"], es["since"] = es["ewa"], 0
        else:
            es["since"] += 1
        limit = self.opts.max_no_improvement
        if limit is not None and es["since"] >= limit:
            self.converged = True

    def _reassign(self, X: Any, d1: Any, w: Any) -> None:
        """Move starved centres to minibatch rows drawn by squared distance: their
        statistics become those of the jump to the row, with the smallest weight a healthy
        centre has after this step (the updater's module doc)."""
        xp = self.xp
        C, c = self.modelmats[0].data, self.modelmats[1].data[:, 0]
        S, n = self.updatemats[0].data, self.updatemats[1].data[:, 0]
        after = c + n
        low = after < self.opts.reassign_ratio * after.max()
        starved = xp.flatnonzero(low)
        n_st = int(starved.shape[0])
        if n_st == 0 or n_st > X.shape[0] // 2:
            return
        p = np.asarray(backend.to_host(d1), np.float64).copy()
        if w is not None:
            p *= np.asarray(backend.to_host(w), np.float64) > 0
        if np.count_nonzero(p) < n_st:
            return
        pick = self.rng.choice(X.shape[0], n_st, replace=False, p=p / p.sum())
        x = dense_rows(X, xp.asarray(pick)).astype(C.dtype)
        rest = after[~low]
        target = rest.min() if rest.shape[0] else 1
        m0 = C[starved]
        jump = target - c[starved]
        n[starved] = jump
        S[starved] = jump[:, None] * m0 + target * (x - m0)


def _num(value: float | None) -> float:
    """``value``, NaN for None (the early stop's figures before their first step)."""
    return math.nan if value is None else float(value)
