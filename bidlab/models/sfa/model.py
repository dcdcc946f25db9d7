"""The SFA engine: :class:`SFAModel`, alternating least squares by conjugate gradient.

The data's rows are users and its columns items; a stored entry is a rating (explicit) or
an interaction count (implicit). The item factors are the model matrix (items x f); the
user factors are per-row state (:class:`bidlab.learn.RowState`, by the rows' global ids).
With explicit ratings ``f = k + 1``: a user's row holds ``[w_u, b_u]`` and an item's
``[y_j, c_j]`` and the prediction is ``mu + b_u + c_j + w_u . y_j``; with implicit
feedback ``f = k`` and the score is ``w_u . y_j`` (Hu, Koren and Volinsky's confidence
weighting, ``c = 1 + alpha r``).

Each pass is one sweep of ALS with the loop interleaved (BIDMach's SFA): every minibatch of
users takes ``n_cg`` conjugate-gradient steps on its rows' normal equations with the item
factors fixed, warm-started from the last sweep (:mod:`bidlab.kern.als`); at the pass's
last minibatch the items take ``n_cg`` steps with every user fixed, from their current
values, and the :class:`~bidlab.learn.updaters.Batch` updater puts them in place. A sweep
costs ``O(nnz f n_cg + (users + items) f^2 n_cg)``, with no ``f^3`` solve. The item-major
copy of the ratings the item step reads is gathered from the minibatches of the first pass.
With implicit feedback and at least :data:`ROTATE_MIN_F` factors (CPU), each side's steps
run in the eigenvector basis of the other side's Gram matrix (:func:`bidlab.kern.als.
rotation`): ``O((users + items) f^2)`` a sweep for the turns into that basis and back, and
``f`` instead of ``f^2`` per row and step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import backend
from bidlab.kern import als
from bidlab.learn import Model, Option
from bidlab.learn.datasource import DataInfo
from bidlab.learn.rowstate import RowState, RowStatePickling
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters import Batch, Updater
from bidlab.mat import Mat
from bidlab.models.pass_history import history_counters, history_from_counters
from bidlab.models.validation import float_dtype, start_matrix

__all__ = ["SFAModel", "FEEDBACK", "ROTATE_MIN_F"]

FEEDBACK = ("explicit", "implicit")
#: from this many factors on, implicit feedback's CG steps run in the eigenvector basis of
#: the Gram matrix on the CPU (a step's Gram product f per row instead of f^2)
ROTATE_MIN_F = 128


def _csr_on(xp: Any, S: sp.csr_matrix) -> Any:
    if xp is np:
        return S
    import cupyx.scipy.sparse as csp  # a GPU model: CuPy is there

    return csp.csr_matrix(S)


def _sorted_csr(M: Any) -> Any:
    """``M`` as CSR with sorted column indices (host or device)."""
    M = M.tocsr()
    M.sort_indices()
    return M


def _transposed(xp: Any, parts: list[Any]) -> Any:
    """The item-major CSR of the user rows ``parts`` (every user once, in order), built
    where they live: on a GPU by cuSPARSE, with no trip through the host."""
    if xp is np:
        rows = parts[0] if len(parts) == 1 else sp.vstack(parts, format="csr")
        return _sorted_csr(rows.T)
    import cupyx.scipy.sparse as csp  # a GPU model: CuPy is there

    rows = parts[0] if len(parts) == 1 else csp.vstack(parts, format="csr")
    return _sorted_csr(rows.T)


class SFAModel(RowStatePickling, Model):
    """ALS by conjugate gradient on the Learner (see the module doc).

    Parameters
    ----------
    V0
        initial item factors (items x f), or None: normal draws of ``init_scale``
        (bias column 0).
    mu
        the global mean of the ratings (explicit); None: the first minibatch's.
    mu_count
        the number of ratings ``mu`` is the mean of: on several ranks, each
        holding some users, ``mu`` becomes the ranks' means weighted by it (None: 0,
        the rank's ``mu`` does not count unless every rank's count is 0).
    dtype
        the arithmetic's float type (None: the data's).
    **options
        the options below, also settable on a learner (``l2``, ``alpha``,
        ``n_cg`` live).

    Examples
    --------
    >>> from bidlab.learn import Learner, MemorySource
    >>> model = SFAModel(k=8, feedback="implicit", l2=0.1)          # doctest: +SKIP
    >>> Learner(model, MemorySource(R), n_passes=10).fit()          # doctest: +SKIP
    >>> model.user_factors().shape, model.item_factors().shape      # doctest: +SKIP
    """

    OPTIONS = (
        Option("k", int, 10, "number of factors", low=1, live=False),
        Option("feedback", str, "explicit", "'explicit' ratings (squared loss on the "
               "stored entries, biases) or 'implicit' feedback (confidence weighting)",
               choices=FEEDBACK, live=False),
        Option("l2", float, 0.1, "L2 penalty weight of every factor (and bias)", low=0.0),
        Option("alpha", float, 1.0, "implicit confidence slope: c = 1 + alpha r", low=0.0),
        Option("n_cg", int, 3, "conjugate-gradient steps per side per sweep", low=1),
        Option("init_scale", float, 0.01, "standard deviation of the random item factors",
               low=0.0, live=False),
        Option("random_state", int, 0, "seed of the random item factors", low=0,
               live=False),
    )
    score_name = "-rmse"
    CHECKPOINT_FINITE, CHECKPOINT_COUNTS = ("W.values",), {"n_passes_done": None}  # (a file's)
    mat_names = ("items",)
    full_batch = True
    #: on several ranks the item step sums its systems' data terms over the ranks within
    #: its CG steps (:meth:`item_step`): every rank ends the pass with the same items
    totals_reduced = True
    mu_count: int | None = None  # (what a model saved without it reads)
    SCRATCH = {"_buf": dict, "_by_item": lambda: None, "_gather": list,  # rebuilt after
               "_gram": lambda: None, "_gram_key": lambda: None,        # unpickling
               "_rot": lambda: None, "_rot_key": lambda: None, "_comm": lambda: None,
               "_mu_summed": lambda: False}

    def __init__(self, V0: Any = None, *, mu: float | None = None, mu_count: int | None = None,
                 dtype: Any = None, **options: Any) -> None:
        super().__init__(**options)
        self.V0 = None if V0 is None else np.array(backend.to_host(V0), copy=True)
        self.mu = None if mu is None else float(mu)
        self.mu_count = None if mu_count is None else int(mu_count)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.W: RowState | None = None
        self.n_passes_done = 0
        self.rmse: list[float] = []  # training RMSE of each sweep (before its user step)
        self._buf: dict[Any, Any] = {}
        self._by_item: Any = None
        self._gather: list[Any] = []
        self._gram: Any = None
        self._gram_key: Any = None
        self._rot: Any = None
        self._rot_key: Any = None
        self._mu_summed = False
        self._pass = [0.0, 0.0]

    def inert_options(self) -> dict[str, str]:
        if not self.bias:
            return {}
        return {"alpha": "alpha is the confidence slope of implicit feedback; these are "
                         "explicit ratings"}

    def bind(self, learner: Any) -> None:
        """On several ranks (each holding some users) the item step, the first
        minibatch's mean and each sweep's training RMSE are summed over the ranks: the
        items (and ``rmse``) are those of one process holding every user."""
        super().bind(learner)
        self._mu_summed = False

    # -- shape ------------------------------------------------------------------------------
    @property
    def bias(self) -> bool:
        """Whether the last factor column holds biases (explicit ratings)."""
        return self.opts.feedback == "explicit"

    @property
    def width(self) -> int:
        """Numbers per user or item: k, plus one (the bias) for explicit ratings."""
        return int(self.opts.k) + int(self.bias)

    # -- Model interface --------------------------------------------------------------------
    def default_updater(self, **options: Any) -> Updater:
        """:class:`~bidlab.learn.updaters.Batch` in ``"replace"`` mode: the item step's
        result, written at the pass's last minibatch, becomes the item factors."""
        return Batch(**options)

    def init(self, info: DataInfo) -> None:
        if not info.specs[0].sparse:
            raise ValueError("SFA trains on a sparse users x items matrix of the observed "
                             "entries (CSR); pass scipy.sparse.csr_matrix(ratings)")
        if self.dtype is None:
            self.dtype = float_dtype(info.dtype)
        xp, dtype, f, d = info.xp, self.dtype, self.width, info.n_features

        def draw() -> np.ndarray:
            rng = np.random.default_rng(self.opts.random_state)
            V = (rng.standard_normal((d, f)) * self.opts.init_scale).astype(dtype)
            if self.bias:
                V[:, -1] = 0
            return V

        V = start_matrix(self.V0, (d, f), dtype, draw,
                         f"SFA: the initial item factors ({d} items of f={f})")
        self.modelmats = [Mat(xp.asarray(V))]
        self.updatemats = [Mat(backend.zeros((d, f), dtype, xp))]
        self.rebind(info)

    def rebind(self, info: DataInfo) -> None:
        """Train on the rows of another source: new user factors, the item-major copy
        gathered again."""
        rows = RowState.for_source(info, self.width, self.dtype,
                                   "SFA keeps one row of factors per user")
        if info.n_features != self.modelmats[0].shape[0]:
            raise ValueError(f"SFA: the data has {info.n_features} items while the model "
                             f"has {self.modelmats[0].shape[0]}")
        self.info, self.W = info, rows
        self._buf, self._gather, self._by_item = {}, [], None
        self.converged = False
        self.rmse = []

    def extra_state(self) -> dict[str, Mat]:
        return self.W.state("W") if self.W is not None else {}

    def counters(self) -> dict[str, int]:
        """The sweeps done, their RMSEs and ``mu`` (a resumed run keeps the first pass's)."""
        mu = {} if self.mu is None else {"mu_count": int(self.mu_count or 0)}
        return {"n_passes_done": int(self.n_passes_done), **mu} | history_counters(
            "rmse", self.rmse) | history_counters("mu", [self.mu] if mu else [])

    def set_counters(self, values: dict[str, int]) -> None:
        self.n_passes_done = int(values.get("n_passes_done", self.n_passes_done))
        self.rmse = history_from_counters("rmse", values, self.rmse)
        for mu in history_from_counters("mu", values, []):  # (none: mu was not yet known)
            self.mu, self.mu_count = mu, int(values.get("mu_count", 0))

    def restored(self, earlier: dict[str, Any]) -> None:
        """New item factors were written: their Gram matrix (and its rotation) are formed
        again on next use."""
        self._gram_key = self._rot_key = None

    def start_pass(self, pass_: int) -> None:
        self.check_data()
        self._pass = [0.0, 0.0]

    def check_data(self) -> None:
        """Refuse to train on when the model's users or items are no longer those of the
        learner's data: ``SFA.partial_fit_users`` / ``partial_fit_items`` folded in rows
        the data lacks (the item step would read past the data's arrays)."""
        users, items = self.W.n_rows, int(self.modelmats[0].shape[0])
        n, d = int(self.info.n_samples), int(self.info.n_features)
        if (users, items) != (n, d):
            raise ValueError(
                f"SFA: the model has {users} users x {items} items but this learner's data "
                f"has {n} x {d}: users or items were folded in (partial_fit_users / "
                "partial_fit_items) after the learner was made, and it cannot train them. "
                "Make a new learner on ratings that hold them (the estimator's train_ holds "
                "every rating so far: est.learner(est.train_)), or fold in after training")

    def _rows(self, n: int) -> tuple[Any, als.Scratch]:
        got = self._buf.get(n)
        if got is None:
            xp = self.modelmats[0].xp
            got = self._buf[n] = (backend.zeros((n, self.width), self.dtype, xp),
                                  als.Scratch.new(n, self.width, self.dtype, xp))
        return got

    def gram(self, F: Any, key: Any) -> Any:
        """``F' F + l2 I`` (implicit feedback), kept until ``key`` changes; None for
        explicit ratings."""
        if self.bias:
            return None
        if self._gram is None:
            self._gram = backend.zeros((self.width, self.width), self.dtype,
                                       backend.namespace(F))
        if self._gram_key != key:
            xp = backend.namespace(F)
            with als.blas_threads(0):  # a threaded BLAS's idle threads spin: the next
                # kernel's threads would wait for the cores
                xp.copyto(self._gram, F.T @ F)  # BLAS, where an out= transposed is not
            d = self._gram.reshape(-1)[:: self.width + 1]
            d += self.dtype.type(self.opts.l2)
            self._gram_key = key
        return self._gram

    @property
    def rotates(self) -> bool:
        """Whether the CG steps run in the eigenvector basis of the Gram matrix
        (:func:`bidlab.kern.als.rotation`): implicit feedback, on the CPU, f >=
        :data:`ROTATE_MIN_F`."""
        return (not self.bias and self.width >= ROTATE_MIN_F
                and self.modelmats[0].xp is np)

    def rotated(self, F: Any, key: Any) -> tuple[Any, Any, Any]:
        """``(lam, Q, F Q)`` for the Gram matrix of ``F`` (:meth:`gram`), kept until
        ``key`` changes; ``F Q`` is written into a buffer kept per shape."""
        G = self.gram(F, key)
        if self._rot_key != key:
            lam, Q = als.rotation(G)
            buf = self._buf.get(("rotated", F.shape))
            if buf is None:
                buf = self._buf[("rotated", F.shape)] = backend.zeros(F.shape, self.dtype, np)
            with als.blas_threads(F.size * F.shape[1]):
                np.matmul(F, Q, out=buf)
            self._rot, self._rot_key = (lam, Q, buf), key
        return self._rot

    def _solve(self, S: Any, other: Any, X: Any, sc: als.Scratch, key: Any) -> None:
        """``n_cg`` CG steps on the rows of ``X`` against ``other``'s factors, whose
        Gram matrix (and rotation) are kept under ``key``."""
        o = self.opts
        kw = dict(steps=int(o.n_cg), l2=float(o.l2), alpha=float(o.alpha),
                  mu=float(self.mu or 0.0), bias=self.bias)
        if not self.rotates:
            als.solve_rows(S, other, X, sc, gram=self.gram(other, key), **kw)
            return
        lam, Q, rotated = self.rotated(other, key)
        Y = self._buf.get(("rows", X.shape))
        if Y is None:
            Y = self._buf[("rows", X.shape)] = backend.zeros(X.shape, self.dtype, np)
        with als.blas_threads(X.size * X.shape[1]):
            np.matmul(X, Q, out=Y)
        als.solve_rows(S, rotated, Y, sc, gram=lam, diagonal=True, **kw)
        with als.blas_threads(X.size * X.shape[1]):
            np.matmul(Y, Q.T, out=X)

    def update(self, batch: Minibatch) -> float:
        S = batch.mats[0].csr
        if self.mu is None:
            self.mu = float(S.data.sum()) / max(int(S.nnz), 1) if self.bias else 0.0
            self.mu_count = int(S.nnz)
        if self._comm is not None and not self._mu_summed:
            self._sum_mu()
        if self._by_item is None:  # a copy where S lives: the source reuses its buffers
            self._gather.append((np.array(batch.ids[: batch.n], copy=True), S.copy()))
        X, sc = self._rows(batch.n)
        self.W.get(batch, X)
        V = self.modelmats[0].data
        o = self.opts
        self._solve(S, V, X, sc, ("items", self.n_passes_done, o.l2))
        self.W.put(batch, X)
        err = float(sc.err.sum())
        self._pass[0] += err
        self._pass[1] += float(S.nnz)
        if batch.last:
            self.item_step()
        return -float(np.sqrt(err / max(float(S.nnz), 1.0)))

    def _sum_mu(self) -> None:
        """On several ranks (a run's first minibatch): ``mu`` becomes the mean over every
        rank's ratings, each rank's mean weighted by its ``mu_count``."""
        n = float(self.mu_count or 0)
        sums = np.array([float(self.mu or 0.0) * n, n])
        self._comm.allreduce([sums], "sum")
        if sums[1] > 0:
            self.mu = float(sums[0] / sums[1])
        self._mu_summed = True

    def by_item(self) -> Any:
        """The ratings item-major (items x users CSR), from the minibatches seen since the
        learner started; None while they do not yet hold every row (a run resumed in the
        middle of a pass: the gathering goes on through the next pass)."""
        if self._by_item is None:
            n = int(self.info.n_samples)
            seen = np.concatenate([g[0] for g in self._gather])
            if seen.size == n and np.array_equal(seen, np.arange(n)):
                by_item = _transposed(self.modelmats[0].xp, [g[1] for g in self._gather])
            else:
                ids, first = np.unique(seen, return_index=True)
                if ids.size < n:
                    return None
                rows = sp.vstack([backend.to_host(g[1]) for g in self._gather],
                                 format="csr")[first]
                perm = sp.csr_matrix((np.ones(ids.size, rows.dtype),
                                      (ids, np.arange(ids.size))), shape=(n, ids.size))
                by_user = (perm @ rows).tocsr()
                by_item = _csr_on(self.modelmats[0].xp, _sorted_csr(by_user.T))
            self._by_item = by_item if by_item.dtype == self.dtype else by_item.astype(
                self.dtype)
            self._gather = []
        return self._by_item

    def item_step(self) -> None:
        """``n_cg`` steps of every item's system with the users fixed, into
        ``updatemats[0]``."""
        self.check_data()  # (a run resumed within a pass has not met start_pass)
        T = self.updatemats[0].data
        V = self.modelmats[0].data
        xp = backend.namespace(V)
        xp.copyto(T, V)
        U = self.W.values.data
        key = ("item-scratch", T.shape[0])
        sc = self._buf.get(key)
        if sc is None:
            sc = self._buf[key] = als.Scratch.new(T.shape[0], self.width, self.dtype, xp)
        S = self.by_item()
        comm = self._comm
        if comm is not None:  # any rank still gathering: every rank skips the step
            seen = np.array([0.0 if S is None else 1.0])
            comm.allreduce([seen], "sum")
            if seen[0] < comm.size:
                return
            self._ranked_item_step(S, U, T, sc)
            return
        if S is None:  # not every row seen yet: the items stay as they are this pass
            return
        self._solve(S, U, T, sc, ("users", self.n_passes_done, self.opts.l2))

    def _ranked_item_step(self, S: Any, U: Any, T: Any, sc: als.Scratch) -> None:
        """The item step of several ranks, each holding some users: the whole-array CG
        (:func:`bidlab.kern.als.solve_rows_reference`) with its data terms, and the users'
        Gram matrix (implicit feedback), summed over the ranks."""
        o, comm = self.opts, self._comm
        gram = None
        if not self.bias:
            with als.blas_threads(0):
                gram = U.T @ U
            comm.allreduce([gram], "sum")
            d = gram.reshape(-1)[:: self.width + 1]
            d += self.dtype.type(o.l2)
        als.solve_rows_reference(
            S, U, T, sc, steps=int(o.n_cg), gram=gram, l2=float(o.l2), alpha=float(o.alpha),
            mu=float(self.mu or 0.0), bias=self.bias,
            allreduce=lambda arrays: comm.allreduce(arrays, "sum"))

    def evaluate(self, batch: Minibatch) -> float:
        S = batch.mats[0].csr
        X, sc = self._rows(batch.n)
        self.W.get(batch, X)
        als.solve_rows(S, self.modelmats[0].data, X, sc, steps=0, gram=self.gram(
            self.modelmats[0].data, ("items", self.n_passes_done, self.opts.l2)),
            l2=float(self.opts.l2), alpha=float(self.opts.alpha), mu=float(self.mu or 0.0),
            bias=self.bias)
        err = float(sc.err.sum())
        return -float(np.sqrt(err / max(float(S.nnz), 1.0)))

    def end_pass(self, pass_: int) -> None:
        self.n_passes_done += 1
        if self._comm is not None:  # every rank's ratings: one process's training RMSE
            both = np.array(self._pass, dtype=np.float64)
            self._comm.allreduce([both], "sum")
            self._pass = [float(both[0]), float(both[1])]
        self.rmse.append(float(np.sqrt(self._pass[0] / max(self._pass[1], 1.0))))

    def flops(self, batch: Minibatch) -> float:
        nnz, f = batch.mats[0].nnz, self.width
        per = 4.0 * nnz * f + (2.0 * f * f if not self.bias else 4.0 * f) * batch.n
        return per * (1 + int(self.opts.n_cg))

    # -- read side --------------------------------------------------------------------------
    def user_factors(self) -> np.ndarray:
        """The user rows (users x f, a host copy)."""
        return np.array(backend.to_host(self.W.values.data), copy=True)

    def item_factors(self) -> np.ndarray:
        """The item rows (items x f, a host copy)."""
        return np.array(backend.to_host(self.modelmats[0].data), copy=True)
