"""The GLM as a :class:`bidlab.learn.Model`, for live training with a ``Learner``.

``GLM.learner(X, Y)`` builds one of these. It keeps BIDMach's layout -- one row per weight
column, ``W`` is T x d and ``b`` T x 1 -- so the learner's per-row hyperparameters
(``lrate``, ``l1``, ``l2`` of its updater and mixins) are per weight column; its rows are
grouped by target (``row_groups``), so a vector with one value per target (per
configuration of a sweep) is read per target. Per minibatch:

    E^T = W @ X.T + b          # dense_sparse_t (matmul for dense X): T x n
    E <- dL/dE                 # the links, in place, on the n x T view (see _glm_links)
    dW = -(E^T / n) @ X        # dense_sparse: the ascent direction the updater adds
    db = -sum over rows of E / n

The score is minus the mean loss per sample, summed over targets (higher is better).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.learn.datasource import DataInfo
from bidlab.learn.model import Model
from bidlab.learn.staging import Minibatch
from bidlab.models._glm_links import Layout, LinkStep

__all__ = ["GLMModel"]


class GLMModel(Model):
    """Multi-target GLM for the Learner: links and target map fixed at construction."""

    score_name = "-loss/sample"

    def __init__(self, layout: Layout, targmap: Any, **options: Any) -> None:
        super().__init__(**options)
        self.layout = layout
        # a vector hyperparameter with one value per target is read per target
        self.row_groups = np.asarray(layout.col_target, dtype=np.int64)
        self._tm_host = np.asarray(targmap, dtype=np.int64)
        self._links: dict[int, LinkStep] = {}
        self._targets: dict[int, Any] = {}
        self._loss: Any = None

    def init(self, info: DataInfo) -> None:
        if len(info.specs) < 2:
            raise ValueError("GLMModel needs targets: give the data as (X, Y), samples as rows")
        T, d = self.layout.T, info.n_features
        dtype = np.promote_types(info.dtype, np.float32)
        xp = info.xp
        # T x d stored column-major (BIDMach's layout): a feature's T weights are contiguous,
        # so W.T is the C-ordered d x T matrix the row gather / scatter kernels stream
        # through (row-major T x d made every product stride by d: 214 vs 25 ms a step at
        # T = 640 on 20 Newsgroups).
        self.modelmats = [bl.Mat(backend.zeros((T, d), dtype, xp, "F")),
                          bl.Mat(backend.zeros((T, 1), dtype, xp))]
        self.updatemats = [bl.Mat(backend.zeros((T, d), dtype, xp, "F")),
                           bl.Mat(backend.zeros((T, 1), dtype, xp))]
        self.xp, self.dtype = xp, np.dtype(dtype)
        self.targmap = xp.asarray(self._tm_host)
        self.identity = bool(np.array_equal(self._tm_host, np.arange(info.n_targets)))
        self._loss = backend.empty((1, self.layout.K), self.dtype, xp)

    def _margins(self, X: Any) -> tuple[bl.Mat, Any]:
        """(E^T as a T x n Mat, E as the n x T C-ordered array view)."""
        W, b = self.modelmats
        if isinstance(X, bl.SMat):
            Et = bl.dense_sparse_t(W, X)  # T x n, F-ordered: its transpose is C-ordered
            bl.add(Et, b, out=Et)
            return Et, Et.data.T
        E = bl.matmul(X, W.T)  # n x T, C-ordered
        bl.add(E, b.T, out=E)
        return E.T, E.data

    def _step(self, batch: Minibatch) -> tuple[bl.Mat, float]:
        X, Y = batch.mats[0], batch.mats[1]
        n = batch.n
        Et, E = self._margins(X)
        step = self._links.get(n)
        if step is None:
            step = self._links[n] = LinkStep(self.layout, n, self.dtype, self.xp)
        Yd = Y.data
        if not self.identity:
            buf = self._targets.get(n)
            if buf is None:
                buf = self._targets[n] = backend.empty((n, self.layout.K), self.dtype, self.xp)
            self.xp.take(Yd, self.targmap, axis=1, out=buf)
            Yd = buf
        self._loss.fill(0)
        step(E, Yd, self._loss)
        return Et, -float(self._loss.sum()) / n

    def update(self, batch: Minibatch) -> float:
        Et, score = self._step(batch)
        X = batch.mats[0]
        self.xp.multiply(Et.data, -1.0 / batch.n, out=Et.data)
        if isinstance(X, bl.SMat):
            bl.dense_sparse(Et, X, out=self.updatemats[0])
        else:
            bl.matmul(Et, X, out=self.updatemats[0])
        Et.sum(axis=1, out=self.updatemats[1])
        return score

    def evaluate(self, batch: Minibatch) -> float:
        return self._step(batch)[1]

    def flops(self, batch: Minibatch) -> float:
        X = batch.mats[0]
        work = X.nnz if isinstance(X, bl.SMat) else X.shape[0] * X.shape[1]
        return 4.0 * work * self.layout.T
