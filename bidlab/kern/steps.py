"""Fused CPU element-wise steps of the learner's updaters and regularisers.

Why: an updater written as ``xp`` ufuncs with ``out=`` allocates nothing and runs on any
backend, but each ufunc is one pass over the whole model matrix. ADAGrad is nine of them
and an L2 term two more; for a 640 x 39,115 float32 GLM sweep that is ~1 GB moved per
minibatch (timings: BENCHMARKS.md, "design measurements").
These numba kernels do each step in one pass, on the cores the adaptive dispatch picks
(:mod:`bidlab.kern.adaptive`; every element is computed by one thread, so the split never
changes a bit of the answer).

They compute exactly what the ufunc sequences compute, operation by operation in the
same order and precision (no fast-math reassociation or fused multiply-adds), so a fused
step equals the generic one bit for bit; ``tests/test_learn_updaters.py`` checks that.

Every function takes 2-d numpy matrices of one shape and one memory order (all C- or all
F-ordered; anything else returns False and the caller takes its generic path) and
hyperparameters as ``rows x 1`` columns (one value per matrix row, as
:class:`bidlab.learn.hyper.Hyper` holds them). Scalars are passed in the matrices'
dtype, as numpy casts a Python float operand to a float32 array's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import prange

from bidlab.kern import arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.standin import stand_in

__all__ = ["adagrad", "grad", "subtract_scaled", "subtract_scaled_sign"]

# L1 (``l1`` given to :func:`adagrad` / :func:`grad`) is a proximal step after the data
# step, with each weight's own step size ``eta``: ``w <- sign(w) * max(|w| - eta * l1, 0)``
# (soft-thresholding reaches exact zeros where a ``sign(w)`` subgradient oscillates
# around them). The generic path of :class:`bidlab.learn.updaters.ADAGrad` and ``Grad``
# computes it in the same operation order.


# In each kernel ``by_inner`` says which axis the per-row hyperparameters follow: the
# outer one (C-ordered matrices) or the inner one (F-ordered matrices passed transposed,
# so the loops still walk memory in order). Two loop nests, not a test per element.


@adaptive_kernel(cache=True, nogil=True)
def _adagrad(M, U, S, lr, eps, inv_t, scale, by_inner):  # pragma: no cover - compiled
    n, k = M.shape
    if by_inner:
        for i in prange(n):
            for j in range(k):
                u = U[i, j]
                s = S[i, j] + u * u
                S[i, j] = s
                M[i, j] = M[i, j] + u / (np.sqrt(s * inv_t) + eps[j]) * lr[j] * scale
    else:
        for i in prange(n):
            a, e = lr[i], eps[i]
            for j in range(k):
                u = U[i, j]
                s = S[i, j] + u * u
                S[i, j] = s
                M[i, j] = M[i, j] + u / (np.sqrt(s * inv_t) + e) * a * scale


@adaptive_kernel(cache=True, nogil=True)
def _adagrad_l1(M, U, S, lr, eps, l1, inv_t, scale, by_inner):  # pragma: no cover - compiled
    n, k = M.shape
    zero = M.dtype.type(0)
    for i in prange(n):
        for j in range(k):
            a = lr[j] if by_inner else lr[i]
            e = eps[j] if by_inner else eps[i]
            g = l1[j] if by_inner else l1[i]
            u = U[i, j]
            s = S[i, j] + u * u
            S[i, j] = s
            den = np.sqrt(s * inv_t) + e
            w = M[i, j] + u / den * a * scale
            M[i, j] = np.copysign(max(abs(w) - a / den * scale * g, zero), w)


@adaptive_kernel(cache=True, nogil=True)
def _grad_l1(M, U, lr, l1, scale, by_inner):  # pragma: no cover - compiled
    n, k = M.shape
    zero = M.dtype.type(0)
    for i in prange(n):
        for j in range(k):
            a = lr[j] if by_inner else lr[i]
            g = l1[j] if by_inner else l1[i]
            w = M[i, j] + U[i, j] * a * scale
            M[i, j] = np.copysign(max(abs(w) - a * scale * g, zero), w)


@adaptive_kernel(cache=True, nogil=True)
def _grad(M, U, lr, scale, by_inner):  # pragma: no cover - compiled
    n, k = M.shape
    if by_inner:
        for i in prange(n):
            for j in range(k):
                M[i, j] = M[i, j] + U[i, j] * lr[j] * scale
    else:
        for i in prange(n):
            a = lr[i]
            for j in range(k):
                M[i, j] = M[i, j] + U[i, j] * a * scale


@adaptive_kernel(cache=True, nogil=True)
def _subtract_scaled(U, M, c, by_inner):  # pragma: no cover - compiled
    n, k = M.shape
    if by_inner:
        for i in prange(n):
            for j in range(k):
                U[i, j] = U[i, j] - M[i, j] * c[j]
    else:
        for i in prange(n):
            a = c[i]
            for j in range(k):
                U[i, j] = U[i, j] - M[i, j] * a


@adaptive_kernel(cache=True, nogil=True)
def _subtract_scaled_sign(U, M, c, by_inner):  # pragma: no cover - compiled
    n, k = M.shape
    zero, one = M.dtype.type(0), M.dtype.type(1)
    for i in prange(n):
        for j in range(k):
            w = M[i, j]
            if w > zero:
                sg = one
            elif w < zero:
                sg = -one
            else:
                sg = w  # 0 stays 0 (with its sign, as np.sign), NaN stays NaN
            U[i, j] = U[i, j] - sg * (c[j] if by_inner else c[i])


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
stand_in(_adagrad)(arrays.adagrad_step)
stand_in(_grad)(arrays.grad_step)
stand_in(_adagrad_l1)(arrays.adagrad_l1_step)
stand_in(_grad_l1)(arrays.grad_l1_step)
stand_in(_subtract_scaled)(arrays.subtract_scaled)
stand_in(_subtract_scaled_sign)(arrays.subtract_scaled_sign)


def _oriented(*mats: Any) -> tuple[list[Any], bool] | None:
    """The matrices as C-ordered 2-d arrays, and whether rows became the inner axis."""
    first = mats[0]
    if not isinstance(first, np.ndarray) or first.ndim != 2:
        return None
    if any(not isinstance(a, np.ndarray) or a.shape != first.shape or a.dtype != first.dtype
           for a in mats):
        return None
    if all(a.flags.c_contiguous for a in mats):
        return list(mats), False
    if all(a.flags.f_contiguous for a in mats):
        return [a.T for a in mats], True
    return None


def _column(h: Any, rows: int, dtype: Any) -> Any:
    """A rows x 1 hyperparameter column as the 1-d array the kernels index (None if not)."""
    if not isinstance(h, np.ndarray) or h.shape != (rows, 1) or h.dtype != dtype:
        return None
    return h[:, 0]


def _prepared(mats: tuple[Any, ...], *hypers: Any) -> tuple[list[Any], list[Any], bool] | None:
    """(oriented matrices, hyperparameter vectors, by_inner), or None when not fusable."""
    got = _oriented(*mats)
    if got is None:
        return None
    first = mats[0]
    cols = [_column(h, first.shape[0], first.dtype) for h in hypers]
    if any(c is None for c in cols):
        return None
    return got[0], cols, got[1]


def adagrad(M: Any, U: Any, S: Any, lrate: Any, eps: Any, inv_t: float, scale: float,
            l1: Any = None) -> bool:
    """ADAGrad with ``vexp = 0.5`` and no momentum, in place; False if not fusable.

    ``S += U*U; M += U / (sqrt(S * inv_t) + eps) * lrate * scale`` (``S``: the sums of
    squares, so ``S * inv_t`` is their mean over the ``1 / inv_t`` updates); with ``l1``
    (a rows x 1 column) then the L1 proximal step with the step size
    ``lrate / (sqrt(S * inv_t) + eps) * scale``.
    """
    ready = _prepared((M, U, S), lrate, eps, *(() if l1 is None else (l1,)))
    if ready is None:
        return False
    (m, u, s), cols, by_inner = ready
    t = M.dtype.type
    if l1 is None:
        _adagrad(M.size, m, u, s, cols[0], cols[1], t(inv_t), t(scale), by_inner)
    else:
        _adagrad_l1(M.size, m, u, s, cols[0], cols[1], cols[2], t(inv_t), t(scale), by_inner)
    return True


def grad(M: Any, U: Any, lrate: Any, scale: float, l1: Any = None) -> bool:
    """``M += U * lrate * scale`` in place, then with ``l1`` (a rows x 1 column) the L1
    proximal step with the step size ``lrate * scale``; False if not fusable."""
    ready = _prepared((M, U), lrate, *(() if l1 is None else (l1,)))
    if ready is None:
        return False
    (m, u), cols, by_inner = ready
    if l1 is None:
        _grad(M.size, m, u, cols[0], M.dtype.type(scale), by_inner)
    else:
        _grad_l1(M.size, m, u, cols[0], cols[1], M.dtype.type(scale), by_inner)
    return True


def _subtract(kernel: Any, U: Any, M: Any, c: Any) -> bool:
    ready = _prepared((U, M), c)
    if ready is None:
        return False
    (u, m), (col,), by_inner = ready
    kernel(M.size, u, m, col, by_inner)
    return True


def subtract_scaled(U: Any, M: Any, c: Any) -> bool:
    """``U -= M * c`` (an L2 term's gradient) in place; False if not fusable."""
    return _subtract(_subtract_scaled, U, M, c)


def subtract_scaled_sign(U: Any, M: Any, c: Any) -> bool:
    """``U -= sign(M) * c`` (an L1 term's gradient) in place; False if not fusable."""
    return _subtract(_subtract_scaled_sign, U, M, c)
