"""GLM weight updates: plain gradient and ADAGrad, with per-target L1 / L2 and learning rates.

Every hyperparameter is a 1 x T row (one value per weight column; the model expands its
per-target 1 x K rows into these), so a sweep of configurations trains in one pass and a
learning rate changed live costs nothing.

On the CPU (C-ordered numpy weights) :meth:`Updater.apply_sparse` runs the gradient
product, regularisation, the ADAGrad accumulator and the step as one numba pass over the
rows a minibatch touches (:mod:`bidlab.models._glm_touched`). Any other backend (CuPy), or
a gradient already formed, takes the generic path below, written with ``xp`` ufuncs into
preallocated buffers; tests run the generic path on numpy too and compare the two.

Numpy oracle (ADAGrad; ``Grad`` skips the accumulator and divides by 1)::

    g = G + l2 * W + l1 * sign(W)
    S += g * g
    W -= lr * g / (sqrt(S) + eps)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.models._glm_touched import TouchedStep

UPDATERS = ("adagrad", "grad")


class Updater:
    """Owns the update's state (ADAGrad's squared-gradient sums) for a d x T model + bias.

    ``fused=None`` enables the fused numba step (:meth:`apply_sparse`) for C-ordered numpy
    weights; ``fused=False`` leaves only the generic path (tests compare the two).
    """

    def __init__(
        self,
        kind: str,
        W: Any,
        b: Any,
        *,
        eps: float = 1e-8,
        fused: bool | None = None,
    ) -> None:
        if kind not in UPDATERS:
            raise ValueError(f"updater must be one of {list(UPDATERS)}; got {kind!r}")
        self.kind, self.eps = kind, float(eps)
        xp = backend.namespace(W)
        self.xp = xp
        can_fuse = xp is np and W.flags.c_contiguous
        self.fused = can_fuse if fused is None else (bool(fused) and can_fuse)
        self.S = self.Sb = None
        if kind == "adagrad":
            self.S = backend.zeros(W.shape, W.dtype, xp)
            self.Sb = backend.zeros(b.shape, b.dtype, xp)
        self._t1 = self._t2 = None  # the generic path's d x T temporaries, made on first use
        self._tb = backend.empty(b.shape, b.dtype, xp)
        self._tb2 = backend.empty(b.shape, b.dtype, xp)
        self._touched = TouchedStep(W.shape[0], W.shape[1], W.dtype) if self.fused else None

    def reset(self) -> None:
        """Forget the accumulated squared gradients (a fresh ``fit``)."""
        if self.S is not None:
            self.S.fill(0)
            self.Sb.fill(0)

    def apply(self, W: Any, G: Any, b: Any, gb: Any, lr: Any, l1: Any, l2: Any) -> None:
        """Update W (d x T) and b (1 x T) in place from gradients G, gb; rows lr/l1/l2 1 x T."""
        self._generic(W, G, lr, l1, l2)
        self._bias(b, gb, lr)

    def apply_sparse(
        self, X: Any, E: Any, W: Any, b: Any, gb: Any, lr: Any, l1: Any, l2: Any
    ) -> None:
        """Like :meth:`apply` with ``G = X.T @ E`` (X a numpy CSR matrix or SMat), never forming G.

        Only rows of W whose feature occurs in X get a data gradient; the others get the
        regulariser's step when some target has L1/L2 and are left alone otherwise.
        """
        if self._touched is None:
            raise RuntimeError("apply_sparse needs the fused CPU updater (C-ordered numpy W)")
        self._touched.apply(X, E, W, self.S, lr[0], l1[0], l2[0], self.eps)
        self._bias(b, gb, lr)

    def _generic(self, W: Any, G: Any, lr: Any, l1: Any, l2: Any) -> None:
        if self._t1 is None:
            self._t1 = backend.empty(W.shape, W.dtype, self.xp)
            self._t2 = backend.empty(W.shape, W.dtype, self.xp)
        xp, g, t = self.xp, self._t1, self._t2
        xp.multiply(W, l2, out=g)
        xp.add(g, G, out=g)
        xp.sign(W, out=t)
        xp.multiply(t, l1, out=t)
        xp.add(g, t, out=g)
        if self.kind == "adagrad":
            xp.multiply(g, g, out=t)
            xp.add(self.S, t, out=self.S)
            xp.sqrt(self.S, out=t)
            xp.add(t, self.eps, out=t)
            xp.divide(g, t, out=g)
        xp.multiply(g, lr, out=g)
        xp.subtract(W, g, out=W)

    def _bias(self, b: Any, gb: Any, lr: Any) -> None:
        xp, t, t2 = self.xp, self._tb, self._tb2
        if self.kind == "adagrad":
            xp.multiply(gb, gb, out=t)
            xp.add(self.Sb, t, out=self.Sb)
            xp.sqrt(self.Sb, out=t)
            xp.add(t, self.eps, out=t)
            xp.divide(gb, t, out=t2)
        else:
            t2[...] = gb
        xp.multiply(t2, lr, out=t2)
        xp.subtract(b, t2, out=b)
