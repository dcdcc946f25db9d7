"""The multi-target GLM on the cached matrix core: its state and its minibatch step.

One step for a minibatch ``Xb`` (n x d sparse) and its targets, for all T weight columns
of all K targets at once::

    E = Xb @ W + b             # sparse_dense: the one shared sparse product, n x T
    E <- dL/dE                 # the links, in place (see _glm_links)
    G = Xb.T @ (E / n)         # sparse_t_dense: all targets' gradients, d x T
    W, b <- update(G, lrate, l1, l2)    # per-target rows, in place (see _glm_update)

On the CPU the last two lines run as one pass over the rows of W that the minibatch touches
(plus, when some target is regularised, the regulariser's step on the others), and G is
never formed (see _glm_touched: 20 Newsgroups, 32-configuration sweep, 4.1 -> 2.3 s).

With ``bidlab.caching()`` on, the products find their result containers in the cache
(keyed by the minibatch's and W's GUIDs, which never change: minibatches are copied into
the same SMat), the gradient (off the CPU) goes into one owned d x T buffer, and the link
work buffers exist once per batch size, so after the first full and the first short batch a step
allocates nothing.

``RowBatches`` cuts contiguous row minibatches from a CSR matrix into those fixed
containers; ``sgd_epochs`` is the plain training loop that ``GLM.fit`` runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.models._glm_links import Layout, LinkStep, predict_transform
from bidlab.models._glm_update import Updater


def _row(values: Any, K: int, dtype: Any, xp: Any, name: str) -> bl.Mat:
    """A 1 x K hyperparameter row from a number or a length-K sequence."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0:
        v = np.full(K, float(v))
    if v.shape != (K,):
        raise ValueError(
            f"{name} has {v.size} values but the model has {K} targets: give one number or "
            f"one value per target ({K})"
        )
    out = bl.Mat(backend.empty((1, K), dtype, xp))
    out.data[...] = xp.asarray(v.reshape(1, K), dtype=dtype)
    return out


class GLMCore:
    """Weights, hyperparameter rows and the minibatch step of a K-target GLM.

    Args:
        layout: where each model target's columns sit (links and widths).
        d: number of features.
        targmap: for each model target, the column of the data targets it learns
            (BIDMach's ``targmap``); None means the identity.
        lrate, l1, l2: numbers or one value per model target (1 x K rows, live-editable
            with ``core.lrate.set(...)``).
        updater: ``"adagrad"`` or ``"grad"``.
    """

    def __init__(
        self,
        layout: Layout,
        d: int,
        *,
        targmap: Sequence[int] | None,
        lrate: Any,
        l1: Any = 0.0,
        l2: Any = 0.0,
        updater: str = "adagrad",
        eps: float = 1e-8,
        dtype: Any = np.float32,
        xp: Any = np,
        fused: bool | None = None,
    ) -> None:
        self.layout, self.d, self.xp = layout, int(d), xp
        self.dtype = np.dtype(dtype)
        K, T = layout.K, layout.T
        self.W = bl.Mat(backend.zeros((self.d, T), self.dtype, xp))
        self.b = bl.Mat(backend.zeros((1, T), self.dtype, xp))
        self._G: bl.Mat | None = None  # the dense gradient, made when a step first needs it
        self.lrate = _row(lrate, K, self.dtype, xp, "lrate")
        self.l1 = _row(l1, K, self.dtype, xp, "l1")
        self.l2 = _row(l2, K, self.dtype, xp, "l2")
        tm = np.arange(K) if targmap is None else np.asarray(targmap, dtype=np.int64)
        self.identity_map = targmap is None or bool(np.array_equal(tm, np.arange(tm.size)))
        self.targmap = xp.asarray(tm.astype(np.int64))
        self._col_target = xp.asarray(layout.col_target)
        self._cols = {n: backend.empty((1, T), self.dtype, xp) for n in ("lr", "l1", "l2")}
        self.updater = Updater(updater, self.W.data, self.b.data, eps=eps, fused=fused)
        self._links: dict[int, LinkStep] = {}
        self._targets: dict[int, Any] = {}
        self.steps = 0

    # -- pieces of the step ---------------------------------------------------------------
    @property
    def G(self) -> bl.Mat:
        """The d x T gradient buffer of :meth:`gradient` (the fused CPU step never needs it)."""
        if self._G is None:
            self._G = bl.Mat(backend.empty((self.d, self.layout.T), self.dtype, self.xp))
        return self._G

    def link_step(self, n: int) -> LinkStep:
        found = self._links.get(n)
        if found is None:
            found = self._links[n] = LinkStep(self.layout, n, self.dtype, self.xp)
        return found

    def model_targets(self, Yb: Any) -> Any:
        """Data targets (n x q) -> model targets (n x K) through the target map."""
        if self.identity_map:
            return Yb
        n = Yb.shape[0]
        buf = self._targets.get(n)
        if buf is None:
            buf = self._targets[n] = backend.empty((n, self.layout.K), self.dtype, self.xp)
        self.xp.take(Yb, self.targmap, axis=1, out=buf)
        return buf

    def _expanded(self) -> tuple[Any, Any, Any]:
        """The 1 x K hyperparameter rows spread over the T weight columns."""
        xp, c = self.xp, self._cols
        for name, row in (("lr", self.lrate), ("l1", self.l1), ("l2", self.l2)):
            xp.take(row.data, self._col_target, axis=1, out=c[name])
        return c["lr"], c["l1"], c["l2"]

    # -- the step -------------------------------------------------------------------------
    def margin_gradient(
        self, Xb: bl.SMat, Yb: Any, loss: Any | None = None
    ) -> tuple[bl.Mat, bl.Mat]:
        """(E, gb): dL/d(margins) / n (n x T) and the bias gradient for minibatch ``Xb``.

        Adds each target's summed loss (before the step) to ``loss`` (1 x K) when given.
        """
        n = Xb.shape[0]
        E = bl.sparse_dense(Xb, self.W)
        bl.add(E, self.b, out=E)
        self.link_step(n)(E.data, self.model_targets(Yb), loss)
        self.xp.multiply(E.data, 1.0 / n, out=E.data)
        return E, E.sum(axis=0)

    def gradient(self, Xb: bl.SMat, Yb: Any, loss: Any | None = None) -> tuple[bl.Mat, bl.Mat]:
        """(G, gb): the mean-loss gradients for minibatch ``Xb`` and data targets ``Yb``.

        Adds each target's summed loss (before the step) to ``loss`` (1 x K) when given.
        """
        E, gb = self.margin_gradient(Xb, Yb, loss)
        return bl.sparse_t_dense(Xb, E, out=self.G), gb

    def step(self, Xb: bl.SMat, Yb: Any, loss: Any | None = None) -> None:
        """One SGD step on a minibatch, in place.

        On the CPU the gradient product and the update run fused over the rows the
        minibatch touches (:mod:`bidlab.models._glm_touched`); elsewhere G is formed.
        """
        up = self.updater
        if up.fused and Xb.xp is np:
            E, gb = self.margin_gradient(Xb, Yb, loss)
            lr, l1, l2 = self._expanded()
            up.apply_sparse(Xb, E.data, self.W.data, self.b.data, gb.data, lr, l1, l2)
        else:
            G, gb = self.gradient(Xb, Yb, loss)
            lr, l1, l2 = self._expanded()
            up.apply(self.W.data, G.data, self.b.data, gb.data, lr, l1, l2)
        self.steps += 1

    def evaluate(self, Xb: bl.SMat, Yb: Any, loss: Any) -> None:
        """Add each target's summed loss on ``Xb`` to ``loss`` (1 x K) without training."""
        E = bl.sparse_dense(Xb, self.W)
        bl.add(E, self.b, out=E)
        self.link_step(Xb.shape[0])(E.data, self.model_targets(Yb), loss)

    def margins(self, X: Any) -> Any:
        """X @ W + b (n x T raw array) for a CSR matrix on the model's backend."""
        E = bl.sparse_dense(bl.SMat(X), self.W)
        bl.add(E, self.b, out=E)
        return E.data

    def predictions(self, X: Any) -> Any:
        """Margins passed through each target's link (probabilities for classifiers)."""
        E = self.margins(X)
        predict_transform(self.layout, E)
        return E


class RowBatches:
    """Contiguous row minibatches of a CSR matrix, always delivered in the same containers.

    Each batch is copied into an SMat kept per batch size (so the cache keys of every
    product on it stay the same); targets are row views of ``Y``. ``X`` and ``Y`` live on
    one backend.
    """

    def __init__(self, X: Any, Y: Any, batch_size: int) -> None:
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}")
        self.X, self.Y, self.batch_size = X, Y, int(batch_size)
        self.xp = backend.namespace(X.data)
        self._csp = backend.sparse_module(self.xp)
        self._smats: dict[int, bl.SMat] = {}
        self._indptr: dict[int, Any] = {}

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)

    def batch(self, start: int, stop: int) -> tuple[bl.SMat, Any]:
        """Rows ``start:stop`` as (SMat, targets view)."""
        X, rows = self.X, stop - start
        ip = self._indptr.get(rows)
        if ip is None:
            ip = self._indptr[rows] = backend.empty((rows + 1,), X.indptr.dtype, self.xp)
        src = X.indptr[start : stop + 1]
        a0, a1 = int(src[0]), int(src[-1])
        self.xp.subtract(src, a0, out=ip)
        view = self._csp.csr_matrix(
            (X.data[a0:a1], X.indices[a0:a1], ip), shape=(rows, X.shape[1]), copy=False
        )
        sm = self._smats.get(rows)
        if sm is None:  # copy_from makes the SMat own (and later reuse) its buffers
            sm = self._smats[rows] = bl.SMat(view)
        sm.copy_from(view)
        return sm, self.Y[start:stop]

    def __iter__(self) -> Iterator[tuple[bl.SMat, Any]]:
        for start in range(0, self.n, self.batch_size):
            yield self.batch(start, min(start + self.batch_size, self.n))


def sgd_epochs(core: GLMCore, batches: RowBatches, n_epochs: int, loss: Any | None = None) -> int:
    """Run ``n_epochs`` passes of minibatch SGD with result caching on; return steps taken.

    ``loss`` (1 x K) receives the summed training loss of the last pass when given.
    """
    steps = 0
    with bl.caching():
        for epoch in range(n_epochs):
            last = loss if epoch == n_epochs - 1 else None
            for Xb, Yb in batches:
                core.step(Xb, Yb, last)
                steps += 1
    return steps
