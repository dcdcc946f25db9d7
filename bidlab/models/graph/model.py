"""The PageRank engine: power iteration (or Gauss-Seidel sweeps) as a full-batch
:class:`~bidlab.learn.Model`.

The data are the rows of the transition ``P`` (one row per source vertex, row-stochastic;
:mod:`bidlab.models.graph.transition`) and, aligned with them, the row table ``[dangling,
1]``. The one model matrix is the 1 x n score vector ``x``. One pass is one iteration,
networkx's::

    x' = d (x P + (sum of x over dangling rows) u) + (1 - d) p

with ``d`` the damping, ``p`` the personalisation and ``u`` the dangling distribution
(``p`` unless given). A block of rows ``R`` contributes ``d x_R P_R + d (x_R . dangling_R)
u + (1 - d) sum(x_R) p`` -- a sum over rows, as ``sum(x) = 1`` -- so the blocks' totals
(and, with several ranks each holding some rows, their sum across ranks: the
:class:`~bidlab.learn.updaters.Batch` updater's pass statistics) are ``x'``; ``Batch``
("replace") makes them the model at the pass end.

The first minibatch of pass ``t`` measures the L1 change ``|x_t - x_{t-1}|`` of the last
iteration and returns it as the minibatch's score (the learner's history then holds one
residual per iteration). Below ``tol * n`` (networkx's rule), or after ``max_iter``
iterations, the model is ``converged``: that pass computes no product -- each block writes
its own entries of ``x`` back, so the totals are ``x`` unchanged -- and the learner stops.

**In-edge engine** (``pull=True``; the CPU, the whole graph in one block): the data are the
adjacency ``A`` alone, not ``P`` and its row table; the first pass builds ``A``'s in-edge
lists (its CSC) and the out-weights once (:func:`bidlab.kern.pagerank.in_edges`), and
each pass is one call of :func:`bidlab.kern.pagerank.pull_step` -- the mat-vec, the
dangling term and the teleport in one pass over the edges, parallel over target
vertices -- after one serial pass that
forms ``y = x / out``, sums the dangling and the total mass and measures the last
iteration's L1 change. With ``pass_seconds`` > 0 a pass may run several iterations
(:meth:`PageRankModel._pull_update`).

**Gauss-Seidel sweeps** (``pull=True, gauss_seidel=True``): the in-edge engine's iterations
are in-place sweeps (:func:`bidlab.kern.pagerank_gs.gauss_seidel_sweep`, serial; each
vertex solved from the newest values), which reach a tolerance in fewer iterations than
the power method; an iteration's residual is the sweep's L1 change ``delta``. The sweeps
do not hold the total ``s = sum(x)`` at 1; the run stops when ``delta / (d * s) < tol *
n`` and hands back ``x / s``: that keeps the power method's guarantee (its result within
``d / (1 - d) * tol * n`` of the exact scores in L1; the bound is in the kernel's module
doc), or when ``delta / s`` is down to the rounding level (:data:`SWEEP_FLOOR`). While
the sweep kernel is being compiled in the background (:mod:`bidlab.kern.standin`) a run
takes the power iterations instead.

After the first pass nothing is allocated: the product goes into the totals (or a 1 x n
buffer) with ``out=``, the vector updates are ``xp`` ufuncs with ``out=``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern import pagerank, pagerank_gs, standin
from bidlab.learn.datasource import DataInfo
from bidlab.learn.model import Model
from bidlab.learn.options import Option
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters import Batch, Updater
from bidlab.mat import Mat, dense_sparse
from bidlab.models.graph.residual_log import ResidualLog, empty_log
from bidlab.models.graph.shared_resume import SharedFileResume
from bidlab.models.graph.stopping import stop_text

__all__ = ["SWEEP_FLOOR", "PageRankModel"]

#: Gauss-Seidel sweeps stop (converged) once a sweep's L1 change is at most this many
#: machine epsilons of the scores' total, whatever ``tol`` asks (``tol=0`` excepted): the
#: scores are then as exact as their float type holds, and rounding alone moves them
#: about that much (up to ~1.6 eps on the SNAP graphs in float32) sweep after sweep. The
#: rule ``delta / (d * s) < tol * n`` asks for less than that with a tiny damping (it
#: divides by ``d``) or float32 scores on a small graph, and was never met
SWEEP_FLOOR = 4.0

_SCRATCH = ("_views", "_in", "_own", "_comm")


class PageRankModel(ResidualLog, SharedFileResume, Model):
    """PageRank by power iteration or Gauss-Seidel sweeps on the Learner (the module doc).

    Besides ``modelmats`` (the 1 x n scores), it has the attributes below.

    Parameters
    ----------
    n
        vertices of the whole graph (the transition's columns).
    first_row
        the global index of the first row this learner's data holds (0 for the
        whole graph; a rank holding rows ``a..b`` of the transition passes ``a``).
    personalization
        the teleport distribution, a host (n,) array summing to 1, or
        None (uniform).
    dangling
        where a dangling vertex's score goes, likewise; None: ``personalization``.
    pull
        the data are the adjacency (not the transition), ranked by the in-edge engine
        (the module doc): CPU, one block of all rows, one learner.
    gauss_seidel
        the in-edge engine runs Gauss-Seidel sweeps, not power iterations
        (the module doc; only with ``pull``).
    pass_seconds
        the in-edge engine runs further iterations within a pass until the
        pass has taken this long (0, the default: one iteration a pass, one residual
        per iteration in the learner's history); ``PageRank.fit``, whose learner
        nobody watches, sets it so that a small graph's iterations do not each pay
        for a learner step. The scores and ``residuals`` are the same either way.
    damping, tol, max_iter
        the options below.

    Attributes
    ----------
    residuals
        host float64 array; ``residuals[t - 1]`` is the L1 change of iteration
        ``t`` (NaN where not yet measured; grown as iterations run: ``residual_log``).
    n_iter
        iterations whose change was measured.
    reached_tol
        whether the last measured change was below ``tol * n`` (Gauss-Seidel: its rule).
    last_bound
        Gauss-Seidel only: the last sweep's ``delta / (d * s)``, what its rule holds
        against ``tol * n`` (NaN before the first sweep is measured).
    """

    OPTIONS = (
        Option("damping", float, 0.85, "probability of following an edge (1 - teleport)",
               low=0.0, high=1.0, low_open=True, high_open=True, live=False),
        Option("tol", float, 1e-8, "converged when the L1 change of an iteration is below "
               "tol x n (networkx's rule)", low=0.0),
        Option("max_iter", int, 100, "most iterations", low=1, live=False),
    )
    score_name = "L1 change"
    CHECKPOINT_NONNEGATIVE, CHECKPOINT_COUNTS = ("model/0", "previous"), {"n_iter": "residuals"}
    mat_names = ("scores",)
    full_batch = True

    pass_seconds = 0.0  # (class defaults: what a model saved without them reads)
    gauss_seidel = False
    sweeping = False
    _own = None
    last_bound = math.nan
    _extra = 0
    _pass_iters = 1

    def __init__(self, n: int, *, first_row: int = 0, personalization: Any = None,
                 dangling: Any = None, pull: bool = False, gauss_seidel: bool = False,
                 pass_seconds: float = 0.0, **options: Any) -> None:
        super().__init__(**options)
        self.n = int(n)
        self.first_row = int(first_row)
        uniform = np.full(self.n, 1.0 / self.n)
        self.personalization = uniform if personalization is None else np.asarray(
            personalization, dtype=np.float64)
        self.dangling = self.personalization if dangling is None else np.asarray(
            dangling, dtype=np.float64)
        self.residuals = empty_log(self.opts.max_iter)
        self.n_iter = 0
        self.reached_tol = False
        self.converged = False
        self._final = False
        self._views: dict[int, tuple[Mat, Any, Any]] | None = None
        self.pull = bool(pull)
        if gauss_seidel and not self.pull:
            raise ValueError("PageRank: Gauss-Seidel sweeps run on the in-edge engine only "
                             "(pull=True: the whole graph in one block on the CPU)")
        self.gauss_seidel = bool(gauss_seidel)
        self.sweeping = False  # whether this run sweeps (set at its first pass)
        self.pass_seconds = float(pass_seconds)
        self._in: tuple[Any, ...] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in _SCRATCH:
            state[name] = None
        return backend.portable_state(state)

    def default_updater(self, **options: Any) -> Updater:
        """Batch ("replace"): the pass's totals (summed across ranks) become the scores."""
        return Batch(**options)

    # -- Model interface ------------------------------------------------------------------
    def init(self, info: DataInfo) -> None:
        if info.n_features != self.n:
            raise ValueError(f"PageRank: the transition has {info.n_features} columns but the "
                             f"graph has {self.n} vertices")
        if self.first_row < 0 or self.first_row + info.n_samples > self.n:
            raise ValueError(f"PageRank: rows {self.first_row}..{self.first_row + info.n_samples}"
                             f" do not lie in a graph of {self.n} vertices")
        xp, dtype = info.xp, info.dtype
        n = self.n
        self.xp = xp
        x = backend.empty((1, n), dtype, xp)
        x.fill(1.0 / n)
        self.modelmats = [Mat(x)]
        self.updatemats = [Mat(backend.zeros((1, n), dtype, xp))]
        self._prev = Mat(backend.zeros((1, n), dtype, xp))
        self._tmp = Mat(backend.empty((1, n), dtype, xp))
        self._p = xp.asarray(self.personalization.reshape(1, n).astype(dtype))
        self._u = xp.asarray(self.dangling.reshape(1, n).astype(dtype))
        self._coef = xp.asarray(np.array([[self.opts.damping, 1.0 - self.opts.damping]],
                                         dtype=dtype))
        self._ab = backend.empty((1, 2), dtype, xp)
        self._r = backend.empty((1,), dtype, xp)
        self.residuals = empty_log(self.opts.max_iter)
        self.n_iter = 0
        self.reached_tol = False
        self.last_bound = math.nan
        self.converged = False
        self._final = False
        self._views = None
        self._in = None
        self._own = None
        self.sweeping = False
        self._extra = 0  # iterations run within passes beyond each pass's first
        self._pass_iters = 1
        self._held, self._skipped, self._redo, self._void = info.n_samples, 0, False, False
        if self.pull and (xp is not np or self.first_row != 0 or info.n_samples != n):
            raise ValueError("PageRank: the in-edge engine (pull=True) ranks the whole graph "
                             "in one block on the CPU; give it all rows of a host graph, or "
                             "use pull=False")

    @property
    def scores(self) -> Mat:
        """The 1 x n scores (the live model matrix)."""
        return self.modelmats[0]

    def divergence_mats(self) -> list[tuple[Mat, float]]:
        """None: the scores are a distribution (they sum to 1) and cannot grow; the NaN /
        inf check still covers them."""
        return []

    def extra_state(self) -> dict[str, Mat]:
        """The previous iteration's scores, the changes measured so far (a resumed run
        goes on counting iterations where the checkpoint left off) and the pass's totals
        so far (a run resumed within a pass of several blocks goes on adding to them)."""
        if not self.modelmats:
            return {}
        return {"previous": self._prev, "residuals": Mat(self.residuals.reshape(1, -1)),
                "totals": self.updatemats[0]}

    def counters(self) -> dict[str, int]:
        return {"n_iter": int(self.n_iter), "reached_tol": int(self.reached_tol),
                "skipped": int(self._skipped)}

    def set_counters(self, values: dict[str, int]) -> None:
        self.n_iter = int(values.get("n_iter", self.n_iter))
        self.reached_tol = bool(values.get("reached_tol", self.reached_tol))
        self._skipped = int(values.get("skipped", 0))

    def pass_label(self) -> str:
        """The head of the learner's progress line at a pass end: the iterations run so
        far (a pass runs one, or in ``fit`` several; ``max_iter`` at most), or how the run
        ended (its last pass measures the last change and runs none)."""
        if self.reached_tol:
            return f"converged after {self.n_iter} iterations"
        if self.converged:
            return f"max_iter={self.n_iter} iterations run, not converged"
        return f"iteration {self.n_iter + 1:>3} (max_iter {self.opts.max_iter})"

    def stop_text(self) -> str:
        """How the run stands, in words (:func:`bidlab.models.graph.stopping.stop_text`)."""
        return stop_text(self)

    def _view(self, batch: Minibatch) -> tuple[Mat, Any, Any]:
        """This block's slice of the scores (a Mat, made once per block) and of the totals."""
        views = self._views
        if views is None:
            views = self._views = {}
        key = batch.start
        v = views.get(key)
        if v is None or v[0].shape[1] != batch.n:
            a = self.first_row + batch.start
            sl = slice(a, a + batch.n)
            v = views[key] = (Mat(self.modelmats[0].data[:, sl]), self.updatemats[0].data[:, sl],
                              self.modelmats[0].data[:, sl])
        return v

    def _start_iteration(self, pass_: int, change: float | None = None,
                         bound: float | None = None) -> float | None:
        """At a pass's first block: measure the last iteration's change, decide whether to
        stop, keep the current scores as the previous ones. ``change``: the change already
        measured (and the scores already kept) by the in-edge engine's first kernel;
        ``bound``: what is held against ``tol * n`` in its place (Gauss-Seidel's rule)."""
        xp = self.xp
        x, prev, tmp = self.modelmats[0].data, self._prev.data, self._tmp.data
        r = None
        pass_ -= self._skipped
        if self._void:  # the last pass was void: its iteration, measured already, runs again
            self._void = False
            self._skipped += 1
        elif pass_ > 0:
            if change is None:
                xp.subtract(x, prev, out=tmp)
                xp.abs(tmp, out=tmp)
                tmp.sum(axis=1, out=self._r)  # into a kept buffer: no device allocation
                r = float(self._r[0])
            else:
                r = float(change)
            t = min(pass_, int(self.opts.max_iter))
            self._log_change(t, r)
            self.n_iter = t
            self.reached_tol = (r if bound is None else bound) < self.opts.tol * self.n
            if self.reached_tol or pass_ >= self.opts.max_iter:
                self.converged = True
        self._final = self.converged
        if change is None:
            xp.copyto(prev, x)
        return r

    def update(self, batch: Minibatch) -> float | None:
        if self.pull:
            return self._pull_update(batch)
        xp = self.xp
        r = self._start_iteration(batch.pass_) if batch.index == 0 else None
        if self._void or (self._redo and self._void_pass(batch)):
            return r
        xb, tb, xraw = self._view(batch)
        T = self.updatemats[0]
        if self._final:  # converged: this block hands its own scores back unchanged
            if batch.index == 0:
                T.data.fill(0)
            xp.copyto(tb, xraw)
            return r
        P, rows = batch.mats[0], batch.mats[1].data
        d, t = self.opts.damping, self._tmp.data
        if batch.index == 0:  # the totals start with this block's d x_R P_R
            dense_sparse(xb, P, out=T)
            xp.multiply(T.data, d, out=T.data)
        else:
            dense_sparse(xb, P, out=self._tmp)
            xp.multiply(t, d, out=t)
            xp.add(T.data, t, out=T.data)
        # [x_R . dangling_R, sum(x_R)] scaled by [d, 1 - d]: the weights of u and p
        ab = self._ab
        xp.matmul(xraw, rows, out=ab)
        xp.multiply(ab, self._coef, out=ab)
        xp.multiply(self._u, ab[:, 0:1], out=t)
        xp.add(T.data, t, out=T.data)
        xp.multiply(self._p, ab[:, 1:2], out=t)
        xp.add(T.data, t, out=T.data)
        return r

    def _in_edges(self, A: Any) -> tuple[Any, ...]:
        """The adjacency's in-edge lists, 1 / out-weight per vertex (0 when dangling) and
        the 1-D buffers of the in-edge engine: built at the first pass."""
        if self._in is None:
            A = A.csr if hasattr(A, "csr") else A
            indptr, indices, w, out = pagerank.in_edges(A.indptr, A.indices, A.data, self.n)
            inv = np.divide(1.0, out, out=np.zeros_like(out), where=out != 0)
            self._in = (indptr, indices, w, inv, np.empty(self.n),
                        self._u.reshape(-1), self._p.reshape(-1), int(indices.shape[0]))
            self.sweeping = False
            if self.gauss_seidel:
                d = self.opts.damping
                self._own = own = pagerank_gs.own_weights(A, inv, self.dangling,
                                                          self.personalization, d)
                x = self.updatemats[0].data.reshape(-1)
                # swept once its kernel runs compiled (power iterations while it compiles)
                self.sweeping = standin.ready(pagerank_gs.gauss_seidel_sweep, indptr, indices,
                                              w, inv, own, x, self._in[4], d, 0.0, 1.0,
                                              self._in[5], self._in[6])
        return self._in

    def _pass_vectors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The in-edge engine's flat vectors for a pass (the iteration count reset): the
        update matrix (written), the previous scores, the model's scores (read)."""
        self._pass_iters = 0
        return (self.updatemats[0].data.reshape(-1), self._prev.data.reshape(-1),
                self.modelmats[0].data.reshape(-1))

    def _sweep_update(self, batch: Minibatch) -> float | None:
        """Gauss-Seidel sweeps of the in-edge engine (the module doc): the pass's scores
        copied to the totals and swept there in place, as many sweeps as ``pass_seconds``
        allows (one at least); ``y``, the masses and the last sweep's change measured
        from the scores at the pass start (one serial pass, as the power engine does)."""
        indptr, indices, w, inv, y, u, p, _ = self._in_edges(batch.mats[0])
        own = self._own
        x, prev, cur = self._pass_vectors()
        d = self.opts.damping
        t0 = time.perf_counter()
        floor = SWEEP_FLOOR * float(np.finfo(x.dtype).eps)
        dangling, total, change = pagerank.source_weights(cur, inv, y, prev)
        while True:
            self.last_bound = bound = change / (d * total)
            if change <= floor * total:  # at the rounding level: sweeps change nothing more
                bound = 0.0
            r = self._start_iteration(batch.pass_ + self._extra, change, bound)
            if self._final:  # converged: the scores handed back, scaled to sum 1
                np.multiply(cur, 1.0 / total, out=x)
                return r
            if cur is x:
                np.copyto(prev, x)
            else:
                np.copyto(x, cur)
                cur = x
            dangling, total, change = pagerank_gs.gauss_seidel_sweep(
                indptr, indices, w, inv, own, x, y, d, dangling, total, u, p)
            self._pass_iters += 1
            if time.perf_counter() - t0 >= self.pass_seconds:
                return r
            self._extra += 1

    def _pull_update(self, batch: Minibatch) -> float | None:
        """Iterations of the in-edge engine (the whole graph, one block). Each: the last
        change measured and ``y = x / out-weights`` formed in one serial pass, then
        ``out = d y A + [dangling mass] u + [total mass] p`` in one kernel.

        One iteration a pass, unless ``pass_seconds`` > 0: then further iterations follow
        within the pass (alternating between the totals and a scratch vector; the model
        matrix is left to the updater) until it has run that long or converged, so a
        small graph's iterations do not each pay for a learner step. The rest of a pass
        resumed within (a checkpoint written by a run in blocks) is void, as on ranks."""
        if batch.n != self.n:  # not the whole graph: the scores handed back unchanged
            self._void = True
            np.copyto(self.updatemats[0].data, self.modelmats[0].data)
            return None
        indptr, indices, w, inv, y, u, p, nnz = self._in_edges(batch.mats[0])
        if self.sweeping:
            return self._sweep_update(batch)
        out, prev, src = self._pass_vectors()
        d = self.opts.damping
        t0 = time.perf_counter()
        while True:
            dangling, total, change = pagerank.source_weights(src, inv, y, prev)
            r = self._start_iteration(batch.pass_ + self._extra, change)
            if self._final:  # converged: the scores handed back unchanged
                if src is not out:
                    np.copyto(out, src)
                return r
            dst = out if src is not out else self._tmp.data.reshape(-1)
            pagerank.pull_step(nnz + self.n, indptr, indices, w, y, d, d * dangling,
                               (1.0 - d) * total, u, p, dst)
            self._pass_iters += 1
            if time.perf_counter() - t0 >= self.pass_seconds:
                if dst is not out:
                    np.copyto(out, dst)
                return r
            src = dst
            self._extra += 1

    def evaluate(self, batch: Minibatch) -> Any:
        """Full-batch: nothing is held out; the score is the last change measured."""
        return float(self.residuals[self.n_iter - 1]) if self.n_iter else None

    def flops(self, batch: Minibatch) -> float:
        return (2.0 * batch.mats[0].nnz + 8.0 * self.n) * max(1, self._pass_iters)
