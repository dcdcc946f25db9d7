"""Sculley's minibatch k-means steps, with scikit-learn's early stop and re-seeding.

``algorithm="minibatch"`` (Sculley 2010), with :class:`~bidlab.learn.Grad` at ``lrate=1``:
per minibatch each row goes to its nearest centre; centre c, which has now seen
``counts[c]`` weight in all, moves towards the mean of its new rows by ``n_c / counts[c]``.
:meth:`~bidlab.models.kmeans.model.KMeansModel.update` writes that move into the update
matrix (``lrate`` < 1 damps it). Every ``reassign_every`` steps, centres that starve (below
``reassign_ratio`` of the busiest one's weight) move to minibatch rows drawn with
probability proportional to their squared distance, as scikit-learn's MiniBatchKMeans does.
**Early stop** (scikit-learn's MiniBatchKMeans rules, while ``stop_early``): the minibatch
inertia per unit weight (measured before each step; the first step's, of the initial
centres, is ignored) is smoothed as ``ewa = (1 - a) ewa + a inertia`` with
``a = min(1, 2 m / (n + 1))`` (m rows per minibatch, n in the data); the model sets
``converged`` when ``ewa`` has not reached a new low for ``max_no_improvement`` steps in a
row. ``tol`` is Lloyd's only: a minibatch step's centre shift follows its step size (which
shrinks as 1 / steps) more than convergence (scikit-learn's MiniBatchKMeans has that test
off by default too).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn.staging import Minibatch
from bidlab.models.kmeans.distances import dense_rows

__all__ = ["MinibatchSteps"]


class MinibatchSteps:
    """The minibatch algorithm of :class:`~bidlab.models.kmeans.model.KMeansModel`.

    A base of that class, not a model on its own: its methods work on the model's
    matrices, options and buffers (``modelmats``, ``updatemats``, ``opts``, ``xp``,
    ``rng``, ``info``, ``_buffers``, ``_nearest_rows``, ...). Its state is ``steps`` and
    the early-stop record ``_es``.
    """

    def _reset_early_stop(self) -> None:
        # minibatch early stop: steps seen, smoothed inertia, its lowest, steps since then
        self._es: dict[str, Any] = {"step": 0, "ewa": None, "low": None, "since": 0}

    def _minibatch_step(self, batch: Minibatch) -> float:
        X, w = self._batch_data(batch)
        m = batch.n
        buf = self._buffers(m)
        xp = self.xp
        C = self.modelmats[0].data
        seen = self.modelmats[1].data
        self._set_centers(buf)
        lab, d1 = buf["lab"][:m], buf["d1"][:m]
        if not self._nearest_rows(X, lab, buf, m, w=w, add=True):
            self._stats(X, lab, w, buf, m)
        N, kcol = buf["N"], buf["kcol"]
        kcol[:, 0] = N
        xp.add(seen, kcol, out=seen)
        # (sums - n_c C) / seen_c == (n_c / seen_c) (mean_c - C): Sculley's per-centre step
        U = self.updatemats[0].data
        xp.multiply(C, kcol, out=U)
        xp.subtract(buf["S"], U, out=U, casting="same_kind")
        xp.maximum(seen, 1e-300 if seen.dtype == np.float64 else 1e-30, out=kcol)
        xp.divide(U, kcol, out=U)
        self.updatemats[1].data.fill(0)
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
        """Move starved centres to minibatch rows drawn by squared distance."""
        xp = self.xp
        C, U = self.modelmats[0].data, self.updatemats[0].data
        seen = self.modelmats[1].data[:, 0]
        low = seen < self.opts.reassign_ratio * seen.max()
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
        C[starved] = dense_rows(X, xp.asarray(pick)).astype(C.dtype)
        U[starved] = 0
        rest = seen[~low]
        seen[starved] = rest.min() if rest.shape[0] else 1
