"""Sparse-gradient steps of ADAGrad and plain gradient ascent, over the rows a minibatch touches.

Why: a model whose update is ``U = X.T @ A`` for a sparse minibatch ``X`` (n x d) and a
dense ``A`` (n x T) -- a GLM's gradient, with ``A`` the loss gradient per margin -- touches
few of its d rows per minibatch (20 Newsgroups, 500 documents: ~8,300 of 39,115). Forming
``U`` densely writes all d x T elements and the updater then reads them all again: with
T = 640 (a sweep of 32 configurations x 20 classes) ~1 GB per minibatch. These steps
instead

1. list the minibatch's nonzeros by column (:class:`~bidlab.kern.columns.ColumnListing`:
   the touched rows in increasing order, and for each the nonzeros that hold it),
2. run one fused pass over the rows: a touched row gets its update row
   ``sum_p data[p] * A[row_of[p]]`` accumulated in a per-thread scratch row and the step
   applied at once. Without L1 / L2 an untouched row is skipped (``u = 0`` changes neither
   ADAGrad's sum of squares nor the weight). With them, an untouched row owes its
   regulariser terms, and the step chooses by the share of rows the minibatch touches:
   under 1 / :data:`DEFER_BELOW` the terms are deferred (below), so a minibatch costs the
   rows it touches; otherwise they are swept over every row, as the dense step does (the
   sweep streams the model at memory bandwidth, which beats the catch-up's arithmetic when
   most rows are touched anyway or the model fits in cache).

Deferred regularisation. Over the k steps a row skipped, each weight shrinks as the dense
update would shrink it with no data term: by ``(1 - l2 * eta) ** k`` for L2 and then by
``k * l1 * eta`` towards zero for L1, clipped at zero (as the steps' L1 proximal step
clips), where ``k * eta`` is the sum of the k step sizes: exact for Grad
(prefix sums of the decay schedule); for ADAGrad the sum of squares grows by the k squared
L2 updates of the gap's first weight, and the step sizes take it and ``epsilon``
at the gap's middle. The terms land when the row is next touched (before its data term)
and for every row at :meth:`TouchedStep.catch_up`, which the updater calls at the end of
each pass, before a checkpoint, when a run ends and before a swept or dense step. They
are computed with the learning rates and penalties in force when they land (a live change
of ``lrate`` or ``l2`` mid-pass applies to the gap before it too). A minibatch's margins
see its rows before their deferred terms land. So Grad with L2, a
constant rate and a data factor that does not depend on the weights equals the dense
update to 3e-5 (a polynomial stands in for the power when ``l2 * eta`` is small), and
otherwise tests/test_glm_touched.py bounds the difference from the dense update (5 % of
the regularisation's own effect; measured 2.8 %).

The formulas are :class:`bidlab.learn.updaters.ADAGrad`'s and ``Grad``'s with the
L1 / L2 mixins' terms (ascent: the score is maximised; L1 a proximal step)::

    u = (X.T @ A)[i, c] - l2[c] * w; S[i, c] += u * u     # w = M[i, c]; S: ADAGrad only
    eta = lr[c] / (sqrt(S[i, c] * inv_t) + eps[c]) * scale    # ADAGrad; Grad: lr[c] * scale
    M[i, c] += u * eta; M[i, c] = sign(M[i, c]) * max(|M[i, c]| - l1[c] * eta, 0)

``M`` and ``S`` are C-ordered d x T numpy arrays (a T x d column-major model matrix seen
transposed); the per-column vectors are 1-D of length T in ``M``'s dtype. Each model row
is computed by one thread, so the kernels go through
:func:`~bidlab.kern.adaptive.adaptive_kernel` (the split never changes a bit).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from bidlab import backend
from bidlab.kern import touched_arrays as arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.columns import ColumnListing
from bidlab.kern.cpu import _add_listed_rows
from bidlab.kern.standin import stand_in

__all__ = ["TouchedStep"]


@numba.njit(inline="always")
def _rows_of_part(d, t, nparts):  # pragma: no cover - compiled
    return d * t // nparts, d * (t + 1) // nparts


@numba.njit(inline="always")
def _data_term(i, pos, colptr, perm, row_of, data, A, buf):  # pragma: no cover
    """Put touched row i's data term in buf."""
    u = pos[i]
    for c in range(buf.shape[0]):
        buf[c] = 0
    _add_listed_rows(buf, A, perm, row_of, data, colptr[u], colptr[u + 1])


@numba.njit(inline="always")
def _prox(w, thr, zero):  # pragma: no cover - compiled
    return np.copysign(max(abs(w) - thr, zero), w)  # L1's proximal step


#: how the kernels compile: fastmath, and numpy's error model, under which a division is
#: plain IEEE arithmetic instead of a branch that raises ZeroDivisionError: that branch
#: kept every loop with a division scalar (BENCHMARKS.md, "design measurements")
_VECTOR = dict(fastmath=True, error_model="numpy", cache=True, nogil=True)

#: untouched rows' regulariser terms are deferred when a minibatch touches under 1 /
#: DEFER_BELOW of the rows, else swept over every row (a sweep streams each weight once, a
#: catch-up costs a root and a division a weight: BENCHMARKS.md, "design measurements")
DEFER_BELOW = 5
_SMALL = 0.05  # below this l2 * eta_sum a polynomial replaces the power (rel. error < 3e-5)


@numba.njit(inline="always")
def _decays(k, eta_sum, l2, pw):  # pragma: no cover - compiled
    """``pw[0, c]``: the L2 decay of k regulariser-only steps whose sizes sum to
    ``eta_sum[c]``, ``(1 - x/k) ** k`` with ``x = l2[c] * eta_sum[c]`` (the polynomial
    where x <= _SMALL). The power goes by square-and-multiply over k's bits: the exponent
    is the row's gap, the same for every column, so each step is one multiply across the
    row, which vectorises (a ``pow`` per weight stays a scalar call). ``pw`` is a float64
    scratch pair of rows, as precise as the ``pow`` it replaces."""
    c2 = 0.5 * (1.0 - 1.0 / k)
    acc, base = pw[0], pw[1]
    T = eta_sum.shape[0]
    for c in range(T):
        acc[c] = 1.0
        base[c] = max(1.0 - float(l2[c]) * float(eta_sum[c]) / k, 0.0)
    e = k
    while e > 0:
        if e & 1:
            for c in range(T):
                acc[c] *= base[c]
        e >>= 1
        if e > 0:
            for c in range(T):
                base[c] *= base[c]
    for c in range(T):
        x = float(l2[c]) * float(eta_sum[c])
        acc[c] = 1.0 - x + c2 * x * x if x <= _SMALL else acc[c]


@numba.njit(inline="always")
def _shrunk_small(w, c2, eta_sum, l1, l2, one, zero):  # pragma: no cover - compiled
    """w after k regulariser-only steps whose sizes sum to eta_sum, when l2 * eta_sum <=
    _SMALL: L2 decay by the polynomial for ``(1 - x/k) ** k`` (``c2 = (1 - 1/k) / 2``),
    then L1 towards zero, clipped at zero; no branch, so the loop vectorises. ``one`` /
    ``zero`` are typed as the model, so a float32 model's arithmetic stays float32."""
    x = l2 * eta_sum
    w = w * (one - x + c2 * x * x)
    return np.copysign(max(abs(w) - l1 * eta_sum, zero), w)


@numba.njit(inline="always")
def _catch_up_row(M, S, i, lr, l1, l2, eps, done, t, rates, base, end, adagrad,
                  buf, typed, pw):  # pragma: no cover - compiled
    """Row i's deferred terms of steps done .. t-1. ``rates[j - base]`` holds the prefix
    sums of the decay (column 0) and, for ADAGrad, of decay * sqrt(step + 1) (column 1);
    ``end`` is its row for step t, which the calling kernel reads before its loop
    (:func:`_record_end`).
    Two branch-free loops that vectorise: the step-size sums into ``buf`` (and ADAGrad's
    grown sums of squares), then the shrinking; a row with a nonzero weight whose decay is
    too large for the polynomial takes the power itself (:func:`_decays`, float64). A zero
    weight stays zero whatever its decay, so it never sends the row there: a row still all
    zero (ADAGrad's sums of squares zero, so its step-size sums are huge) keeps the
    polynomial.

    The row's scalars are computed in float64 and stored through ``typed`` (a scratch
    row in the model's dtype), so the per-weight loops run in the model's dtype: a float32
    model's catch-up is float32 arithmetic (8 lanes, a cheap square root and division)."""
    k = t - done
    a = done - base
    typed[0] = 0.5 * (1.0 - 1.0 / k)
    typed[1] = k
    typed[2] = end[1] - rates[a, 1] if adagrad else end[0] - rates[a, 0]
    typed[3] = np.sqrt(0.5 * (done + t - 1) + 1.0)
    typed[4] = 0.5
    typed[5] = 1.0
    typed[6] = 0.0
    c2, kf, q, mid, half, one, zero = (typed[0], typed[1], typed[2], typed[3], typed[4],
                                       typed[5], typed[6])
    T = M.shape[1]
    large = zero  # how many nonzero weights decay too much for the polynomial (a sum, not
    # a max: a max reduction kept these loops scalar)
    if adagrad:
        for c in range(T):
            w = M[i, c]
            u = l2[c] * w
            grow = kf * u * u  # the squares of the k L2-only updates (L1 is proximal)
            s = S[i, c]
            eta_sum = lr[c] * q / (np.sqrt(s + half * grow) + eps[c] * mid)
            buf[c] = eta_sum
            S[i, c] = s + grow
            large += (l2[c] * eta_sum > _SMALL) * (w != zero)
    else:
        for c in range(T):
            buf[c] = lr[c] * q
            large += (l2[c] * buf[c] > _SMALL) * (M[i, c] != zero)
    if large == zero:
        for c in range(T):
            M[i, c] = _shrunk_small(M[i, c], c2, buf[c], l1[c], l2[c], one, zero)
    else:
        _decays(k, buf, l2, pw)
        for c in range(T):
            w = M[i, c] * pw[0, c]
            M[i, c] = np.copysign(max(abs(w) - l1[c] * buf[c], zero), w)


@numba.njit(inline="always")
def _record_end(rates, t, base, defer):  # pragma: no cover - compiled
    """The step-size record's row for step t, read before a kernel's ``prange`` loop and
    only while the terms are deferred: numba's parfor pass hoists a loop-invariant load
    such as ``rates[t - base]`` out of the loop and out of the branches that guard it, so
    read inside the loop it ran on every call, and a step that does not defer has no row
    there (``base`` is the step the record started at, t - base past its end: a read out
    of bounds, which crashed long runs). Without deferring the row is never used."""
    return rates[t - base] if defer else rates[0]


@numba.njit(inline="always")
def _row_update(i, M, S, pos, colptr, perm, row_of, data, A, lr, l1, l2, eps, dense_reg, defer,
                done, t, rates, base, end, adagrad, buf, typed, pw):  # pragma: no cover
    """Put row i's data term in buf after its deferred terms; False: leave the row as it is.

    An untouched row is updated (with its regulariser terms alone) only when they are swept
    densely; a touched row that is behind on its deferred terms catches up first."""
    if pos[i] < 0:
        if not dense_reg:
            return False
        for c in range(buf.shape[0]):
            buf[c] = 0
        return True
    if defer:
        if done[i] < t:
            _catch_up_row(M, S, i, lr, l1, l2, eps, done[i], t, rates, base, end, adagrad,
                          buf, typed, pw)
        done[i] = t + 1
    _data_term(i, pos, colptr, perm, row_of, data, A, buf)
    return True


@adaptive_kernel(**_VECTOR)
def _adagrad_touched(M, S, pos, colptr, perm, row_of, data, A, lr, l1, l2, eps, inv_t, scale,
                     dense_reg, defer, done, t, rates, base, work, scalars, powers, touched,
                     nu, has_l1):
    d, T = M.shape  # pragma: no cover - compiled
    nparts = work.shape[0]
    rows = d if dense_reg else nu  # a sweep visits every row, else the touched ones only
    end = _record_end(rates, t, base, defer)
    zero = M.dtype.type(0)
    for p in prange(nparts):
        lo, hi = _rows_of_part(rows, p, nparts)
        buf = work[p]
        for j in range(lo, hi):
            i = j if dense_reg else touched[j]
            if _row_update(i, M, S, pos, colptr, perm, row_of, data, A, lr, l1, l2, eps,
                           dense_reg, defer, done, t, rates, base, end, True, buf, scalars[p],
                           powers[p]):
                if has_l1:
                    for c in range(T):
                        w = M[i, c]
                        u = buf[c] - l2[c] * w
                        s = S[i, c] + u * u
                        S[i, c] = s
                        den = np.sqrt(s * inv_t) + eps[c]
                        M[i, c] = _prox(w + u / den * lr[c] * scale,
                                        lr[c] / den * scale * l1[c], zero)
                else:
                    for c in range(T):
                        w = M[i, c]
                        u = buf[c] - l2[c] * w
                        s = S[i, c] + u * u
                        S[i, c] = s
                        M[i, c] = w + u / (np.sqrt(s * inv_t) + eps[c]) * lr[c] * scale


@adaptive_kernel(**_VECTOR)
def _grad_touched(M, pos, colptr, perm, row_of, data, A, lr, l1, l2, scale, dense_reg, defer,
                  done, t, rates, base, work, scalars, powers, touched, nu, has_l1):
    d, T = M.shape  # pragma: no cover - compiled
    nparts = work.shape[0]
    rows = d if dense_reg else nu
    end = _record_end(rates, t, base, defer)
    zero = M.dtype.type(0)
    for p in prange(nparts):
        lo, hi = _rows_of_part(rows, p, nparts)
        buf = work[p]
        for j in range(lo, hi):
            i = j if dense_reg else touched[j]
            if _row_update(i, M, M, pos, colptr, perm, row_of, data, A, lr, l1, l2, lr,
                           dense_reg, defer, done, t, rates, base, end, False, buf, scalars[p],
                           powers[p]):
                if has_l1:
                    for c in range(T):
                        w = M[i, c]
                        M[i, c] = _prox(w + (buf[c] - l2[c] * w) * lr[c] * scale,
                                        lr[c] * scale * l1[c], zero)
                else:
                    for c in range(T):
                        w = M[i, c]
                        M[i, c] = w + (buf[c] - l2[c] * w) * lr[c] * scale


@adaptive_kernel(**_VECTOR)
def _catch_up_all(M, S, lr, l1, l2, eps, done, t, rates, base, adagrad, work, scalars,
                  powers):
    d = M.shape[0]  # pragma: no cover - compiled
    nparts = work.shape[0]
    end = _record_end(rates, t, base, True)
    for p in prange(nparts):
        lo, hi = _rows_of_part(d, p, nparts)
        buf = work[p]
        for i in range(lo, hi):
            if done[i] < t:
                if _any_weight(M, i):  # an all-zero row stays as it is (its u is 0)
                    _catch_up_row(M, S, i, lr, l1, l2, eps, done[i], t, rates, base,
                                  end, adagrad, buf, scalars[p], powers[p])
                done[i] = t


@numba.njit(inline="always")
def _any_weight(M, i):  # pragma: no cover - compiled
    """Row i has a nonzero weight. The catch-up leaves an all-zero row unchanged (its
    regulariser updates and ADAGrad's added squares are 0), so the sweep at each pass's
    end skips it: a wide model (hashed features) is mostly such rows, and their
    arithmetic made that sweep cost more than the pass's steps."""
    for c in range(M.shape[1]):
        if M[i, c] != 0:
            return True
    return False


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
stand_in(_adagrad_touched)(arrays.adagrad_touched)
stand_in(_grad_touched)(arrays.grad_touched)
stand_in(_catch_up_all)(arrays.catch_up_all)


class TouchedStep:
    """The fused sparse-gradient step for one C-ordered numpy d x T model matrix.

    Owns the column listing, the per-thread scratch rows (allocated once; the listing's
    nonzero buffers grow with the largest minibatch) and, under L1 / L2, each row's count of
    steps whose regulariser terms it has received (``done``) with the prefix sums of the
    step sizes since the last :meth:`catch_up` (``rates``; they grow during the first pass
    only). ``X`` is the n x d CSR minibatch (scipy matrix or SMat), ``A`` the n x T
    C-ordered dense factor, ``t`` the updater's step count (0 for its first step) and
    ``scale`` that step's learning-rate decay.
    """

    def __init__(self, d: int, T: int, dtype: Any) -> None:
        self.d, self.T, self.dtype = int(d), int(T), np.dtype(dtype)
        self.columns = ColumnListing(self.d)
        self.nparts = max(1, min(self.d, 4 * numba.config.NUMBA_NUM_THREADS))
        self.work = backend.empty((self.nparts, self.T), self.dtype)
        self.scalars = backend.empty((self.nparts, 8), self.dtype)  # a row's typed scalars
        self.powers = backend.empty((self.nparts, 2, self.T), np.float64)  # decays by power
        self.done = backend.empty((self.d,), np.int64)
        self.rates = backend.zeros((64, 2), np.float64)
        self.base = 0
        self._pending: tuple | None = None  # what catch_up applies the deferred terms with
        #: defer whatever share of rows a minibatch touches (only touched rows may change
        #: between a sparse exchange's syncs); False: by :data:`DEFER_BELOW`
        self.always_defer = False

    def _check(self, X: Any, A: Any, M: Any, S: Any, *vectors: Any) -> None:
        """Refuse operands the kernels would index out of bounds (they do not check): A
        n x T for an n-row minibatch, M and S d x T, each per-column vector of length T (the
        minibatch's width is checked by the column listing)."""
        if X.data.dtype != M.dtype or A.dtype != M.dtype:  # before fill(): nothing listed yet
            raise TypeError(f"minibatch values are {X.data.dtype} and its factor {A.dtype} "
                            f"but the model is {M.dtype}: convert the data to {M.dtype}")
        d, T = self.d, self.T
        n = X.shape[0]
        if tuple(M.shape) != (d, T) or tuple(S.shape) != (d, T) or tuple(A.shape) != (n, T):
            raise ValueError(f"TouchedStep for a {d} x {T} model: got the model {tuple(M.shape)}"
                             f" (sums {tuple(S.shape)}) and, for a minibatch of {n} rows, the "
                             f"factor {tuple(A.shape)}; need {d} x {T} and {n} x {T}")
        for v in vectors:
            if tuple(v.shape) != (T,):
                raise ValueError(f"TouchedStep for a {d} x {T} model: a per-column "
                                 f"hyperparameter vector has shape {tuple(v.shape)}; need "
                                 f"({T},)")

    @property
    def deferring(self) -> bool:
        """True while some rows hold regulariser terms that :meth:`catch_up` will apply."""
        return self._pending is not None

    def _record(self, defer: bool, t: int, scale: float, pending: tuple) -> None:
        """Record step t's size for the deferred terms. A step that does not defer first
        applies what earlier steps deferred; deferring that starts at step t starts every
        row's count there (the rows are exact up to t)."""
        if not defer:
            if self._pending is not None:
                self.catch_up(t)
            return
        if self._pending is None:
            self.done.fill(t)
            self.base = t
            self.rates[0] = 0.0
        self._pending = pending
        j = t - self.base
        if j + 1 >= self.rates.shape[0]:
            grown = backend.zeros((2 * (j + 1), 2), np.float64)
            grown[: self.rates.shape[0]] = self.rates
            self.rates = grown
        self.rates[j + 1, 0] = self.rates[j, 0] + scale
        self.rates[j + 1, 1] = self.rates[j, 1] + scale * np.sqrt(t + 1.0)

    def _run(self, X: Any, reg: bool, t: int, scale: float, pending: tuple, call: Any) -> None:
        """List the minibatch's columns, choose how the regulariser terms are applied and
        run ``call(work, listing, dense_reg, defer)``."""
        cols = self.columns
        nu = cols.fill(X)
        defer = reg and (self.always_defer or nu * DEFER_BELOW < self.d)
        dense_reg = reg and not defer
        self._record(defer, t, scale, pending)
        # the work the adaptive dispatch sorts by: update multiply-adds + updated weights
        work = float(X.indptr[-1]) * self.T + (self.d if dense_reg else nu) * self.T
        try:
            call(work, cols, dense_reg, defer)
        finally:
            cols.clear()

    def adagrad(self, X: Any, A: Any, M: Any, S: Any, lr: Any, l1: Any, l2: Any, eps: Any,
                inv_t: float, scale: float, t: int = 0) -> None:
        """ADAGrad's step on M (and its sums of squares S) from ``X.T @ A``, in place."""
        self._check(X, A, M, S, lr, l1, l2, eps)
        reg, has_l1 = bool(l1.any() or l2.any()), bool(l1.any())
        ty = M.dtype.type

        def call(work: float, c: ColumnListing, dense_reg: bool, defer: bool) -> None:
            _adagrad_touched(work, M, S, c.pos, c.colptr, c.perm, c.row_of, X.data, A, lr, l1,
                             l2, eps, ty(inv_t), ty(scale), dense_reg, defer, self.done, t,
                             self.rates, self.base, self.work, self.scalars, self.powers,
                             c.touched, c.n_touched, has_l1)

        self._run(X, reg, t, scale, (M, S, lr, l1, l2, eps, True), call)

    def grad(self, X: Any, A: Any, M: Any, lr: Any, l1: Any, l2: Any, scale: float,
             t: int = 0) -> None:
        """Plain gradient ascent on M from ``X.T @ A``, in place."""
        self._check(X, A, M, M, lr, l1, l2)
        reg, has_l1 = bool(l1.any() or l2.any()), bool(l1.any())

        def call(work: float, c: ColumnListing, dense_reg: bool, defer: bool) -> None:
            _grad_touched(work, M, c.pos, c.colptr, c.perm, c.row_of, X.data, A, lr, l1, l2,
                          M.dtype.type(scale), dense_reg, defer, self.done, t, self.rates,
                          self.base, self.work, self.scalars, self.powers, c.touched,
                          c.n_touched, has_l1)

        self._run(X, reg, t, scale, (M, M, lr, l1, l2, lr, False), call)

    def catch_up(self, t: int) -> None:
        """Apply every row's deferred regulariser terms of the steps before ``t`` (the
        number of steps taken), so the model matrix is the step-by-step result; the next
        step starts a new record of step sizes."""
        if self._pending is None:
            return
        M, S, lr, l1, l2, eps, adagrad = self._pending
        _catch_up_all(float(M.size), M, S, lr, l1, l2, eps, self.done, int(t), self.rates,
                      self.base, adagrad, self.work, self.scalars, self.powers)
        self._pending = None
