"""``fit`` stops when the held-out loss stops improving (``tol``, ``validation_fraction``).

A seeded ``validation_fraction`` of the rows is held out of training. At the end of every
pass (but a first-pass rate race, :mod:`~bidlab.models.glm.race`) the model that ``fit``
would return if it stopped there -- the mean of the iterates of about the last ``average``
fraction of the passes made so far (Polyak-Ruppert averaging, as a run of that many passes
would average) -- is scored on those rows, its loss summed over the targets as in
training. ``fit`` stops at the first pass whose held-out loss is not below the best so far
by more than ``tol`` per target (scikit-learn's ``SGDClassifier`` compares its training
loss with an absolute ``tol`` too), and at ``n_passes`` at the latest; the model is the
candidate with the least held-out loss. So a default ``fit`` makes the passes the data
needs, with ``n_passes`` a bound.

The averaged candidate of a stop at any pass comes from two snapshots of the updater's
running sum of iterates (:class:`bidlab.learn.averaging.IterateSum`, summed from the run's
start): the candidate of pass ``p`` is the mean since snapshot A, and snapshot B, taken at
a later pass, replaces A once B's pass is at most ``(1 - average) * p``. So a candidate
averages between ``average`` and about twice ``average`` of the passes made, and the check
costs four model-sized buffers and, per pass, two passes over the model and a forward pass
over the held-out rows (a tenth of a pass's data at the default fraction).

Examples
--------
>>> from bidlab.datasets import synthetic_glm
>>> from bidlab.models.glm import GLM
>>> X, y, _ = synthetic_glm(4000, 60, 12, seed=2)
>>> clf = GLM(random_state=0, n_passes=50, tol=1e-3).fit(X, y)
>>> clf.n_iter_ < 50, len(clf.validation_loss_curve_) == clf.n_iter_ - 1  # not the race
(True, True)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend, kern
from bidlab.models.glm.links import LinkStep
from bidlab.models.glm.targets import encode

__all__ = ["HeldOut", "MIN_ROWS", "split_rows"]

#: the fewest held-out rows for which ``fit`` checks the held-out loss (fewer: it trains
#: ``n_passes`` on every row)
MIN_ROWS = 50
_CHUNK = 1 << 22  # held-out margins are computed this many entries at a time


def split_rows(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(training rows, held-out rows), sorted, from a seeded sample of ``fraction`` of ``n``
    rows; None when that leaves fewer than :data:`MIN_ROWS` held out.

    >>> tr, ho = split_rows(1000, 0.1, 0)
    >>> len(tr), len(ho), len(np.intersect1d(tr, ho))
    (900, 100, 0)
    >>> split_rows(400, 0.1, 0) is None
    True
    """
    m = int(round(n * float(fraction)))
    if m < MIN_ROWS or n - m < MIN_ROWS:
        return None
    perm = np.random.default_rng([int(seed), 1]).permutation(n)  # not the shuffle's draw
    return np.sort(perm[m:]), np.sort(perm[:m])


class _Sums:
    """A snapshot of the running iterate sum: the pass it was taken at, copies, count."""

    def __init__(self, pass_: int, mats: list[Any] | None, n: int) -> None:
        self.pass_, self.mats, self.n = pass_, mats, n


class HeldOut:
    """The held-out rows of one ``fit`` and its stopping rule (see the module doc).

    Parameters
    ----------
    est
        the fitted-to-be GLM (its engine built: ``targets_``, ``layout_``).
    X
        the held-out rows (CSR on the model's device), ``Y2`` their targets (n x q),
        ``w`` their weights or None.
    tol
        the improvement of the held-out loss per target a pass must make.
    average
        ``fit``'s averaged fraction (0: the candidate is the last iterate).
    last_pass
        the passes ``fit`` makes at most (counting any made before this run).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bidlab.models.glm import GLM
    >>> X = sp.random(600, 20, density=0.3, format="csr", random_state=1, dtype=np.float32)
    >>> y = (X.sum(axis=1).A1 > 3).astype(int)
    >>> m = GLM(lrate=1.0, n_passes=3, random_state=0).fit(X, y)
    >>> held = HeldOut(m, X[:100], y[:100, None], None, tol=1e-4, average=0.5, last_pass=3)
    >>> W, b = (a.data for a in m.model_.modelmats)
    >>> bool(0 < held.loss(W, b) < np.log(2))  # mean log loss per row, below a coin's
    True
    """

    def __init__(self, est: Any, X: Any, Y2: np.ndarray, w: np.ndarray | None, *,
                 tol: float, average: float, last_pass: int) -> None:
        t, xp = est.targets_, est._xp()
        self.layout, self.xp, self.dtype = est.layout_, xp, np.dtype(est.dtype_)
        self.tol, self.average, self.last_pass = float(tol), float(average), int(last_pass)
        Ye = xp.asarray(np.ascontiguousarray(encode(t, Y2, self.dtype)[:, t.enc_col]))
        wc = None if w is None else xp.asarray(np.asarray(w, self.dtype).reshape(-1, 1))
        self.total = float(X.shape[0] if w is None else np.asarray(w, np.float64).sum())
        step = max(1, _CHUNK // max(self.layout.T, 1))
        self.chunks = [(X[a : a + step], Ye[a : a + step],
                        None if wc is None else wc[a : a + step])
                       for a in range(0, X.shape[0], step)]
        self.curve: list[float] = []
        self.best = math.inf
        self.best_pass = 0
        self._links: dict[int, LinkStep] = {}
        self._E: dict[int, Any] = {}
        self._loss = backend.empty((1, self.layout.K), self.dtype, xp)
        self.first = 0
        self._a: _Sums | None = None
        self._b: _Sums | None = None
        self._trial: list[Any] | None = None
        self._kept: list[Any] | None = None

    def start(self, first: int) -> None:
        """A run begins after ``first`` passes (the race's); its iterates sum from here."""
        self.first = int(first)
        self._a, self._b = _Sums(self.first, None, 0), None

    # -- the candidate ---------------------------------------------------------------------
    def _copies(self, mats: list[Any]) -> list[Any]:
        return [backend.zeros_as(m) for m in mats]

    def _candidate(self, model: Any, iterates: Any, p: int) -> list[Any]:
        """Write the model a stop after pass ``p`` would return into the trial buffers."""
        mats = [m.data for m in model.modelmats]
        if self._trial is None:
            self._trial, self._kept = self._copies(mats), self._copies(mats)
        xp, trial = self.xp, self._trial
        if self.average <= 0 or iterates.n == 0 or iterates.sums is None:
            for dst, src in zip(trial, mats, strict=True):
                dst[...] = src
            return trial
        spare = None
        if self._b is not None and self._b.pass_ <= math.floor(p * (1.0 - self.average)):
            spare, self._a, self._b = self._a.mats, self._b, None
        if self._b is None:  # the next start (in the dropped snapshot's buffers)
            keep = spare if spare is not None else self._copies(mats)
            for dst, src in zip(keep, iterates.sums, strict=True):
                dst[...] = src
            self._b = _Sums(p, keep, iterates.n)
        a = self._a
        n = iterates.n - a.n
        if n <= 0:  # nothing averaged since A: the last iterate
            for dst, src in zip(trial, mats, strict=True):
                dst[...] = src
            return trial
        for dst, total, base in zip(trial, iterates.sums, a.mats or [None] * len(trial),
                                    strict=True):
            if base is None:
                xp.multiply(total, 1.0 / n, out=dst)
            else:
                xp.subtract(total, base, out=dst)
                xp.multiply(dst, 1.0 / n, out=dst)
        self._mean = True
        return trial

    # -- the score -------------------------------------------------------------------------
    def loss(self, W: Any, b: Any) -> float:
        """Mean held-out loss per row of weights W (T x d) and biases b (T x 1), summed
        over the targets."""
        xp, loss = self.xp, self._loss
        loss.fill(0)
        for X, Y, w in self.chunks:
            n = X.shape[0]
            E = self._E.get(n)
            if E is None:
                E = self._E[n] = backend.empty((n, self.layout.T), self.dtype, xp)
                self._links[n] = LinkStep(self.layout, n, self.dtype, xp)
            kern.sparse_dense(X, W.T, out=E)
            xp.add(E, b.T, out=E)
            self._links[n](E, Y, loss, w)
        return float(backend.to_host(loss).astype(np.float64).sum()) / max(self.total, 1e-300)

    # -- the rule --------------------------------------------------------------------------
    def end_pass(self, model: Any, updater: Any, pass_: int) -> bool:
        """After the run's pass ``pass_`` (from 0): score the candidate and keep the best;
        True when ``fit`` stops here (the iterate sum is then emptied: :meth:`finish`
        puts the best candidate in the model once the learner's own end-of-pass checks,
        divergence among them, have seen the last iterate)."""
        p = self.first + pass_ + 1
        self._mean = False
        trial = self._candidate(model, updater.iterates, p)
        if self._mean:  # a mean of iterates: L1's proximal step, as at the end of fit
            for i, a in enumerate(trial):
                updater.l1_shrink(i, a)
        W, b = trial
        value = self.loss(W, b)
        self.curve.append(value)
        improved = value < self.best - self.tol * self.layout.K if self.curve[:-1] else True
        if value < self.best:
            self.best, self.best_pass = value, p
            self._trial, self._kept = self._kept, self._trial
        if improved and p < self.last_pass:
            return False
        if self.best_pass:  # else no finite loss yet: the run's own end stands
            it = updater.iterates
            if it.sums is not None:
                for acc in it.sums:
                    acc.fill(0)
            it.n = 0
        return True

    def finish(self, model: Any) -> None:
        """Put the best candidate in the model (after a run that completed)."""
        if self.best_pass and self._kept is not None:
            for dst, src in zip(model.modelmats, self._kept, strict=True):
                dst.data[...] = src
