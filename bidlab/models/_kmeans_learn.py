"""Minibatch k-means on the live learner: ``KMeans(...).learner(X)`` (Sculley 2010).

The model matrix is the k x d matrix of centres. Per minibatch each row goes to its
nearest centre; centre c, which has now seen ``counts[c]`` rows in all, moves towards the
mean of its ``n_c`` new rows by ``n_c / counts[c]`` (a per-centre step that shrinks as it
sees more data). ``update`` writes that move into the update matrix and the updater
(``Grad(lrate=1)``; ``lrate`` < 1 damps it) adds it. The score is minus the mean squared
distance of the minibatch's rows to their nearest centre. ``counts`` (the rows each
centre has absorbed) is public, for live views of the cluster sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.learn.datasource import DataInfo
from bidlab.learn.model import Model
from bidlab.learn.staging import Minibatch

__all__ = ["KMeansLearnModel"]


class KMeansLearnModel(Model):
    """Minibatch k-means for the Learner, started from the given k x d centres."""

    score_name = "-sq.dist/sample"

    def __init__(self, centers: np.ndarray, **options: Any) -> None:
        super().__init__(**options)
        self._init_centers = np.asarray(centers)

    def init(self, info: DataInfo) -> None:
        k, d = self._init_centers.shape
        if info.n_features != d:
            raise ValueError(f"the data has {info.n_features} features while the centres "
                             f"have {d}")
        xp = info.xp
        dtype = np.promote_types(info.dtype, np.float32)
        self.xp = xp
        self.modelmats = [bl.Mat(xp.asarray(self._init_centers.astype(dtype)))]
        self.updatemats = [bl.zeros((k, d), dtype=dtype, device=info.device)]
        self.counts = backend.zeros((k,), np.float64, xp)

    def _nearest(self, X: Any) -> tuple[Any, Any]:
        xp, C = self.xp, self.modelmats[0].data
        Xd = X.csr if isinstance(X, bl.SMat) else X.data
        xx = (Xd.multiply(Xd).sum(axis=1).A1 if hasattr(Xd, "multiply") and not
              isinstance(Xd, xp.ndarray) else (Xd * Xd).sum(axis=1))
        D = xp.asarray(Xd @ C.T) * -2.0 + (C * C).sum(axis=1)[None, :]
        labels = D.argmin(axis=1)
        dist = xp.maximum(D[xp.arange(D.shape[0]), labels] + xp.asarray(xx).reshape(-1), 0)
        return labels, dist

    def update(self, batch: Minibatch) -> float:
        xp, C = self.xp, self.modelmats[0].data
        X = batch.mats[0]
        labels, dist = self._nearest(X)
        k = C.shape[0]
        n_c = xp.bincount(labels, minlength=k).astype(np.float64)
        Xd = X.csr if isinstance(X, bl.SMat) else X.data
        onehot = xp.zeros((k, batch.n), dtype=C.dtype)
        onehot[labels, xp.arange(batch.n)] = 1
        sums = xp.asarray(onehot @ Xd) if not hasattr(Xd, "multiply") or isinstance(
            Xd, xp.ndarray) else xp.asarray((Xd.T @ onehot.T).T)
        self.counts += n_c
        step = (n_c / xp.maximum(self.counts, 1.0)).astype(C.dtype)[:, None]
        mean = sums / xp.maximum(n_c, 1.0).astype(C.dtype)[:, None]
        self.updatemats[0].data[...] = step * (mean - C)
        return -float(dist.mean())

    def evaluate(self, batch: Minibatch) -> float:
        return -float(self._nearest(batch.mats[0])[1].mean())

    def flops(self, batch: Minibatch) -> float:
        X = batch.mats[0]
        work = X.nnz if isinstance(X, bl.SMat) else X.shape[0] * X.shape[1]
        return 2.0 * work * self.modelmats[0].shape[0]

    def extra_state(self) -> dict[str, bl.Mat]:
        return {"counts": bl.Mat(self.counts.reshape(1, -1))}
