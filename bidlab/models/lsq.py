"""Least squares (linear regression): the small model that proves the learner spine.

Data: ``X`` (samples x features, dense or CSR), ``Y`` (samples x targets), optionally
sample weights ``w`` (samples x 1). Model matrices, BIDMach's layout (one row per target,
so a per-row hyperparameter is a per-target one): ``W`` (targets x features) and, with
``fit_intercept``, ``b`` (targets x 1). Prediction ``P = X W^T + b^T``.

Score (maximised): minus the mean over samples of the squared error summed over targets,
``-sum((Y - P) ** 2) / n``; the update is its gradient ``2 (Y - P)^T X / n`` (and
``2 sum(Y - P) / n`` for ``b``). Every matrix operation goes through the cached core, so
after the first minibatch of each size a step allocates nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import bidlab as bl
from bidlab.learn.datasource import DataInfo
from bidlab.learn.model import Model, register_model
from bidlab.learn.options import Option
from bidlab.learn.staging import Minibatch
from bidlab.mat import Mat, SMat

__all__ = ["LeastSquares"]


class LeastSquares(Model):
    """Linear least squares trained by minibatch gradient steps (any updater)."""

    score_name = "-mse"
    mat_names = ("W", "b")
    OPTIONS = (
        Option("fit_intercept", bool, True, "learn an intercept b (a second model matrix)",
               live=False),
        Option("init_scale", float, 0.0, "scale of the random initial weights (0: zeros)",
               low=0.0, live=False),
        Option("random_state", int, 0, "seed of the random initial weights", live=False),
    )

    def init(self, info: DataInfo) -> None:
        if len(info.specs) < 2:
            raise ValueError("LeastSquares needs targets: give the data as (X, Y) (samples "
                             f"as rows); got {len(info.specs)} matrix")
        if info.specs[1].sparse:
            raise ValueError("LeastSquares needs dense targets Y; convert them with "
                             "Y.toarray()")
        k, f = info.n_targets, info.n_features
        dtype = np.promote_types(info.dtype, np.float32)
        dev = info.device
        w = bl.zeros((k, f), dtype=dtype, device=dev)
        if self.opts.init_scale > 0:
            rng = np.random.default_rng(self.opts.random_state)
            init = (rng.standard_normal((k, f)) * self.opts.init_scale).astype(dtype)
            w.data[...] = init if dev == "cpu" else w.xp.asarray(init)
        self.modelmats = [w]
        self.updatemats = [bl.zeros((k, f), dtype=dtype, device=dev)]
        if self.opts.fit_intercept:
            self.modelmats.append(bl.zeros((k, 1), dtype=dtype, device=dev))
            self.updatemats.append(bl.zeros((k, 1), dtype=dtype, device=dev))
        self.weighted = len(info.specs) > 2

    # -- the shared forward pass ----------------------------------------------------------
    def _residual(self, batch: Minibatch) -> tuple[Mat, Mat, Any]:
        """(R^T = (Y - P)^T, weighted R^T, X) for the minibatch (k x n, cached)."""
        X, Y = batch.mats[0], batch.mats[1]
        W = self.modelmats[0]
        pt = W @ X.T  # k x n: dense matmul, or dense_sparse_t for a CSR X
        if self.opts.fit_intercept:
            pt = pt + self.modelmats[1]
        rt = Y.T - pt
        rtw = rt * batch.mats[2].T if self.weighted else rt
        return rt, rtw, X

    def _score(self, rt: Mat, rtw: Mat, n: int) -> Mat:
        return (rt * rtw).sum() * (-1.0 / n)

    def update(self, batch: Minibatch) -> Mat:
        rt, rtw, X = self._residual(batch)
        n = batch.n
        grad = rtw @ X  # k x f: matmul, or dense_sparse for a CSR X
        bl.multiply(grad, 2.0 / n, out=self.updatemats[0])
        if self.opts.fit_intercept:
            bl.multiply(rtw.sum(axis=1), 2.0 / n, out=self.updatemats[1])
        return self._score(rt, rtw, n)

    def evaluate(self, batch: Minibatch) -> Mat:
        rt, rtw, _ = self._residual(batch)
        return self._score(rt, rtw, batch.n)

    def flops(self, batch: Minibatch) -> float:
        X = batch.mats[0]
        k = self.modelmats[0].shape[0]
        work = X.nnz if isinstance(X, SMat) else X.shape[0] * X.shape[1]
        return 4.0 * work * k + 6.0 * batch.n * k

    # -- convenience ----------------------------------------------------------------------
    @property
    def coef_(self) -> np.ndarray:
        """Weights, targets x features (numpy copy)."""
        return np.array(self.modelmats[0].numpy(), copy=True)

    @property
    def intercept_(self) -> np.ndarray:
        """Intercepts, one per target (numpy copy; zeros without fit_intercept)."""
        if not self.opts.fit_intercept:
            return np.zeros(self.modelmats[0].shape[0])
        return np.array(self.modelmats[1].numpy(), copy=True).ravel()


register_model("lsq", LeastSquares)
