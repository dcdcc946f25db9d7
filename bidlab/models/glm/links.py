"""GLM links: where each target's columns sit in the model, and the in-place link step.

A multi-target GLM keeps every target's weights in one matrix of T weight columns
(stored T x d, one row per weight column): a linear, logistic or svm target owns one
column, a softmax target over C classes owns C adjacent columns. :class:`Layout` records
that arrangement; consecutive targets with the same link and width form one
:class:`Block`, so 100 logistic targets, or 32 replicas of a 20-class softmax, are each
handled by a few whole-block array operations.

:class:`LinkStep` turns the margins ``E = X @ W.T + b.T`` (n x T) into the loss gradient
``dL/dE`` *in place*, and adds each target's summed loss to a 1 x K row, using work
buffers allocated once per batch size (through the counted allocator), so a training loop
allocates nothing after its first step. Targets ``Y`` arrive aligned with the model's
targets (n x K): 0/1 for logistic, +-1 for svm, the class index for softmax, the value
for linear.

Per link (rows i, one target; p = the link's prediction):

=========  ==============================  ===========================================
link       loss                            dL/dE
=========  ==============================  ===========================================
linear     (E - y)^2 / 2                   E - y
logistic   log(1 + e^E) - y E              sigmoid(E) - y
svm        max(0, 1 - y E)                 -y if y E < 1 else 0
softmax    logsumexp(E_row) - E_y          softmax(E_row) - onehot(y)
=========  ==============================  ===========================================

Everything here works on raw numpy / cupy arrays (``xp`` comes from the operands); the
matrix products around it go through the cached Mat layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.glm_links import logistic_step
from bidlab.learn.persist import persistable

LINKS = ("linear", "logistic", "softmax", "svm")
CLASSIFIER_LINKS = ("logistic", "softmax", "svm")


@persistable
@dataclass(frozen=True)
class Block:
    """Consecutive model targets ``k0:k1`` with one link and width, in columns ``c0:c1``."""

    link: str
    k0: int
    k1: int
    c0: int
    c1: int
    width: int

    @property
    def n_targets(self) -> int:
        return self.k1 - self.k0


@persistable
class Layout:
    """Where each of K model targets' T weight columns sit."""

    def __init__(self, links: Sequence[str], widths: Sequence[int]) -> None:
        if len(links) != len(widths) or not links:
            raise ValueError(f"need one width per link; got {len(links)} links, {len(widths)}")
        self.links = tuple(links)
        self.widths = tuple(int(w) for w in widths)
        self.K = len(self.links)
        starts = np.concatenate([[0], np.cumsum(self.widths)]).astype(np.int64)
        self.col_start = starts[:-1]
        self.T = int(starts[-1])
        self.col_target = np.repeat(np.arange(self.K, dtype=np.int64), self.widths)
        blocks: list[Block] = []
        k0 = 0
        for k in range(1, self.K + 1):
            if (
                k == self.K
                or self.links[k] != self.links[k0]
                or self.widths[k] != self.widths[k0]
            ):
                blocks.append(
                    Block(self.links[k0], k0, k, int(starts[k0]), int(starts[k]), self.widths[k0])
                )
                k0 = k
        self.blocks = tuple(blocks)

    def columns(self, k: int) -> slice:
        """The columns of model target ``k``."""
        return slice(int(self.col_start[k]), int(self.col_start[k]) + self.widths[k])

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Layout)
            and other.links == self.links
            and other.widths == self.widths
        )

    def __hash__(self) -> int:
        return hash((self.links, self.widths))


def _special(xp: Any) -> Any:
    return backend.special_module(xp)


class LinkStep:
    """The link step for batches of ``n`` rows: margins -> loss gradient, in place.

    Work buffers (a few n x T arrays, small next to the T x d model) are allocated here,
    once; calling the step allocates nothing through the core's counted allocator.
    """

    def __init__(self, layout: Layout, n: int, dtype: Any, xp: Any) -> None:
        self.layout, self.n, self.xp = layout, n, xp
        T = layout.T
        self.tmp = backend.empty((n, T), dtype, xp)
        self.tmp2 = backend.empty((n, T), dtype, xp)
        self.mask = backend.empty((n, T), np.bool_, xp)
        self.col_loss = backend.empty((1, T), dtype, xp)
        self.soft: dict[int, dict[str, Any]] = {}
        for i, blk in enumerate(layout.blocks):
            if blk.link != "softmax":
                continue
            nk = blk.n_targets
            base = (
                np.arange(n, dtype=np.int64)[:, None] * T
                + blk.c0
                + np.arange(nk, dtype=np.int64)[None, :] * blk.width
            )
            work = {
                "mx": backend.empty((n, nk, 1), dtype, xp),
                "s": backend.empty((n, nk, 1), dtype, xp),
                "ey": backend.empty((n, nk), dtype, xp),
                "lin": backend.empty((n, nk), np.int64, xp),
                "base": backend.empty((n, nk), np.int64, xp),
                "ksum": backend.empty((1, nk), dtype, xp),
            }
            work["base"][...] = xp.asarray(base)
            self.soft[i] = work

    def __call__(self, E: Any, Y: Any, loss: Any | None = None, weights: Any = None) -> None:
        """Overwrite margins ``E`` (n x T) with dL/dE; add per-target loss sums to ``loss``.

        ``Y`` is n x K (model-aligned targets); ``loss`` a 1 x K array or None; ``weights``
        an n x 1 column of sample weights the loss sums are weighted by (None: all 1).
        """
        xp = self.xp
        for i, blk in enumerate(self.layout.blocks):
            e = E[:, blk.c0 : blk.c1]
            y = Y[:, blk.k0 : blk.k1]
            if blk.link == "softmax":
                self._softmax(i, blk, E, e, y, loss, weights)
                continue
            t = self.tmp[:, blk.c0 : blk.c1]
            if blk.link == "linear":
                xp.subtract(e, y, out=e)
                if loss is not None:
                    xp.multiply(e, e, out=t)
                    xp.multiply(t, 0.5, out=t)
            elif blk.link == "logistic" and xp is np and E.flags.c_contiguous:
                cl64 = self._col_loss64(blk.c1 - blk.c0)
                logistic_step(E, Y, blk.c0, blk.c1, blk.k0, cl64, weights, loss is not None,
                              (self.tmp, self.tmp2))
                if loss is not None:
                    lk = loss[:, blk.k0 : blk.k1]
                    lk += cl64
                continue
            elif blk.link == "logistic":
                if loss is not None:
                    t2 = self.tmp2[:, blk.c0 : blk.c1]
                    xp.logaddexp(0.0, e, out=t)
                    xp.multiply(y, e, out=t2)
                    xp.subtract(t, t2, out=t)
                _special(xp).expit(e, out=e)
                xp.subtract(e, y, out=e)
            elif blk.link == "svm":
                m = self.mask[:, blk.c0 : blk.c1]
                xp.multiply(y, e, out=e)  # the margin y * E
                if loss is not None:
                    xp.subtract(1.0, e, out=t)
                    xp.maximum(t, 0.0, out=t)
                xp.less(e, 1.0, out=m)
                xp.multiply(y, m, out=e)
                xp.negative(e, out=e)
            else:  # pragma: no cover - Layout only holds known links
                raise ValueError(f"unknown link {blk.link!r}")
            if loss is not None:
                if weights is not None:
                    xp.multiply(t, weights, out=t)
                cl = self.col_loss[:, blk.c0 : blk.c1]
                xp.sum(t, axis=0, keepdims=True, out=cl)
                lk = loss[:, blk.k0 : blk.k1]
                xp.add(lk, cl, out=lk)

    def _col_loss64(self, width: int) -> np.ndarray:
        """A float64 scratch row for the fused steps' column sums (made once)."""
        buf = getattr(self, "_cl64", None)
        if buf is None or buf.shape[0] < width:
            buf = self._cl64 = backend.empty((self.layout.T,), np.float64)
        return buf[:width]

    def _softmax(self, i: int, blk: Block, E: Any, e: Any, y: Any, loss: Any | None,
                 weights: Any = None) -> None:
        xp = self.xp
        w = self.soft[i]
        n, nk, C = self.n, blk.n_targets, blk.width
        v = _groups(xp, e, n, nk, C)
        flat = E.reshape(-1)
        lin = w["lin"]
        lin[...] = y  # class index per (row, target), as int64 (unsafe cast of floats)
        xp.add(lin, w["base"], out=lin)
        ey = w["ey"]
        if loss is not None:
            backend.take_into(flat, lin, out=ey)
        mx, s = w["mx"], w["s"]
        xp.max(v, axis=2, keepdims=True, out=mx)
        xp.subtract(v, mx, out=v)
        xp.exp(v, out=v)
        xp.sum(v, axis=2, keepdims=True, out=s)
        xp.divide(v, s, out=v)
        if loss is not None:
            # loss = log(sum exp(E - max)) + max - E_y
            xp.log(s, out=s)
            xp.add(s, mx, out=s)
            s2 = s.reshape(n, nk)
            xp.subtract(s2, ey, out=s2)
            if weights is not None:
                xp.multiply(s2, weights, out=s2)
            lk = loss[:, blk.k0 : blk.k1]
            xp.sum(s2, axis=0, keepdims=True, out=w["ksum"])
            xp.add(lk, w["ksum"], out=lk)
        backend.take_into(flat, lin, out=ey)
        xp.subtract(ey, 1.0, out=ey)
        flat[lin] = ey


def _groups(xp: Any, e: Any, n: int, nk: int, C: int) -> Any:
    """A writable (n, nk, C) *view* of the n x (nk*C) column block ``e`` (never a copy)."""
    s0, s1 = e.strides
    return xp.lib.stride_tricks.as_strided(e, shape=(n, nk, C), strides=(s0, C * s1, s1))


def predict_transform(layout: Layout, E: Any) -> None:
    """Margins -> the links' predictions in place: probabilities for logistic / softmax."""
    xp = backend.namespace(E)
    n = E.shape[0]
    for blk in layout.blocks:
        e = E[:, blk.c0 : blk.c1]
        if blk.link == "logistic":
            _special(xp).expit(e, out=e)
        elif blk.link == "softmax":
            v = _groups(xp, e, n, blk.n_targets, blk.width)
            v -= v.max(axis=2, keepdims=True)
            xp.exp(v, out=v)
            v /= v.sum(axis=2, keepdims=True)
