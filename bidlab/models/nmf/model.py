"""The NMF engine: :class:`NMFModel`, a :class:`bidlab.learn.Model` for the Learner.

The components ``H`` (k x features) are the model matrix; the row factors ``W`` (one row of
k per data row) are per-row state (:class:`bidlab.learn.RowState`, keyed by the rows'
global ids), so they follow their rows across passes, shuffled or not. Each training
minibatch:

1. reads its rows of ``W`` (rows never seen start at ``w_start``, the constant scikit-learn
   starts ``transform`` from) and takes ``w_iters`` multiplicative steps of them with ``H``
   fixed (``w_iters_new`` for rows seen for the first time), then stores them back;
2. adds the statistics of ``H``'s multiplicative step: ``method="batch"`` is full-batch
   (:attr:`full_batch`): the model sums them over the pass
   (:class:`~bidlab.models.nmf.pass_sums.PassSums`) and writes the totals
   (``updatemats[0] = {"num": N, "den": D}``) at the pass's last minibatch, and
   :class:`~bidlab.learn.updaters.BatchMult` steps once at the pass end (with ``w_iters``
   1 this is scikit-learn's ``solver="mu"`` iteration exactly); with ``solver="cd"``
   (Frobenius, every entry observed) ``W``'s columns take coordinate-descent sweeps
   instead and the totals are ``{"num": W^T X, "gram": W^T W}``, from which
   :class:`~bidlab.learn.updaters.BatchCD` sweeps ``H``'s rows (scikit-learn's
   ``solver="cd"`` iteration); ``method="online"`` writes
   each minibatch's statistics and
   :class:`~bidlab.learn.updaters.multiplicative.OnlineMult` sets ``H`` at every minibatch
   to the ratio of decaying running averages of ``H * num`` and ``den`` (the online
   multiplicative update scikit-learn's ``MiniBatchNMF`` takes).

``H``'s products that the steps share (``H^T``, ``H H^T``, ``H``'s row sums) are formed
once per value of ``H``: once a pass for the batch method, once a minibatch online.

Only observed entries count (:mod:`bidlab.models.nmf.steps`): the data source's second
matrix, when there is one, is the mask (dense 0 / 1, or a CSR of ones whose pattern marks
the observed entries of a CSR ``X``). The score is minus the loss per observed entry
(half the squared error, or the generalised KL divergence) at the minibatch's new ``W``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.scatter_sums import transpose_into
from bidlab.learn import Model, Option
from bidlab.learn.datasource import DataInfo
from bidlab.learn.rowstate import RowState, RowStatePickling
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters import BatchCD, BatchMult, Updater
from bidlab.learn.updaters.multiplicative import OnlineMult
from bidlab.mat import Mat
from bidlab.models.nmf.pass_redo import PassRedo
from bidlab.models.nmf.pass_sums import PassSums
from bidlab.models.nmf.steps import Block, h_stats, objective, penalised, w_cd_step, w_step
from bidlab.models.pass_history import history_counters, history_from_counters
from bidlab.models.validation import float_dtype, start_matrix

__all__ = ["NMFModel", "LOSSES", "SOLVERS", "data_kind"]

LOSSES = ("frobenius", "kl")
SOLVERS = ("mu", "cd")


def data_kind(info: DataInfo) -> str:
    """Which entries of the source's rows count (see :mod:`bidlab.models.nmf.steps`)."""
    sparse = info.specs[0].sparse
    if len(info.specs) == 1:
        return "sparse" if sparse else "dense"
    if info.specs[1].sparse != sparse or info.specs[1].cols != info.specs[0].cols:
        raise ValueError("NMF: the mask must be like X (a dense mask for a dense X, a CSR "
                         "mask of X's pattern for a CSR X) with X's columns")
    return "stored" if sparse else "masked"


class NMFModel(PassRedo, RowStatePickling, Model):
    """NMF by multiplicative updates on the Learner (see the module doc).

    Parameters
    ----------
    H0
        the initial components (k x features), or None: random ones (the absolute
        values of normal draws times ``w_start``, scikit-learn's random start).
    W0
        initial row factors (rows x k) of the data the first learner trains on, or
        None (every row starts at ``w_start``).
    w_start
        the value new rows of ``W`` start at; None: ``sqrt(mean(X) / k)`` of the
        first minibatch's observed entries.
    dtype
        the arithmetic's float type (None: the data's).
    **options
        the options below, also settable on a learner.
    """

    OPTIONS = (
        Option("k", int, 10, "number of components", low=1, live=False),
        Option("loss", str, "frobenius", "what the factors minimise over the observed "
               "entries: squared error or generalised KL divergence", choices=LOSSES,
               live=False),
        Option("method", str, "batch", "'batch' (one step of H per pass, BatchMult) or "
               "'online' (a step per minibatch, OnlineMult)", choices=("batch", "online"),
               live=False),
        Option("solver", str, "mu", "'mu' (multiplicative updates) or 'cd' (coordinate "
               "descent: Frobenius, batch, every entry observed; BatchCD)",
               choices=SOLVERS, live=False),
        Option("w_iters", int, 1, "steps (sweeps for 'cd') of a minibatch's row factors, "
               "rows seen before", low=1),
        Option("w_iters_new", int, 10, "steps (sweeps for 'cd') of a minibatch's row "
               "factors, rows seen for the first time", low=1),
        Option("tol", float, 0.0, "stop when the error fell by less than tol x the first "
               "pass's error over the last 10 passes (0: never)", low=0.0),
        Option("random_state", int, 0, "seed of the random initial components", low=0,
               live=False),
        Option("alpha_W", float, 0.0, "penalty weight of the row factors (scikit-learn's, "
               "times n_features)", low=0.0),
        Option("alpha_H", float, 0.0, "penalty weight of the components (scikit-learn's, "
               "times the rows trained on)", low=0.0),
        Option("l1_ratio", float, 0.0, "the L1 share of the penalties (the rest is L2)",
               low=0.0, high=1.0),
    )
    score_name = "-loss/entry"
    #: a checkpoint's numbers (bidlab.learn.checkpoint_values)
    CHECKPOINT_NONNEGATIVE = ("model/0", "W.values", "pass.num", "pass.den", "pass.gram")
    CHECKPOINT_FINITE = ("pass.misc",)
    CHECKPOINT_COUNTS = {"n_passes_done": None, "errors_n": None}
    mat_names = ("H",)
    SCRATCH = {"_buf": dict, "_sums": lambda: None,  # rebuilt after unpickling
               "_comm": lambda: None}

    def __init__(self, H0: Any = None, *, W0: Any = None, w_start: float | None = None,
                 dtype: Any = None, **options: Any) -> None:
        super().__init__(**options)
        self.H0 = None if H0 is None else np.array(backend.to_host(H0), copy=True)
        self.W0 = None if W0 is None else np.array(backend.to_host(W0), copy=True)
        self.w_start = None if w_start is None else float(w_start)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.W: RowState | None = None
        self.kind = "dense"
        self.n_passes_done = 0
        self.errors: list[float] = []  # sqrt(2 loss) of each pass, scikit-learn's scale
        self._buf: dict[Any, Any] = {}
        self._sums: PassSums | None = None
        self._pass = [0.0, 0.0]
        self._comm: Any = None

    def bind(self, learner: Any) -> None:
        """On several ranks (each holding some rows) a pass's loss is summed over the
        ranks at its end: the errors and the stopping rule are those of one process
        holding every row."""
        super().bind(learner)

    @property
    def full_batch(self) -> bool:  # type: ignore[override]
        """True for ``method="batch"``: the model sums a pass's statistics itself."""
        return self.opts.method == "batch"

    # -- Model interface ------------------------------------------------------------------
    def default_updater(self, **options: Any) -> Updater:
        """BatchMult (``method="batch"``), BatchCD (``solver="cd"``) or OnlineMult
        (``"online"``), with ``options``."""
        if self.opts.solver == "cd":
            return BatchCD(**options)
        if self.opts.method == "batch":
            return BatchMult(**options)
        return OnlineMult(**options)

    @property
    def cd(self) -> bool:
        """Whether the factors take coordinate-descent sweeps (``solver="cd"``)."""
        return self.opts.solver == "cd"

    def init(self, info: DataInfo) -> None:
        k, d = int(self.opts.k), info.n_features
        self.kind = data_kind(info)
        if self.dtype is None:
            self.dtype = float_dtype(info.dtype)
        xp, dtype = info.xp, self.dtype

        def draw() -> np.ndarray:
            rng = np.random.default_rng(self.opts.random_state)
            scale = self.w_start if self.w_start is not None else 1.0 / math.sqrt(k)
            return np.abs(rng.standard_normal((k, d))).astype(dtype) * dtype.type(scale)

        H = start_matrix(self.H0, (k, d), dtype, draw,
                         f"NMF: the initial components (k={k} of {d} features)")
        missing = self.kind in ("masked", "stored")
        if self.cd and (self.opts.loss != "frobenius" or self.opts.method != "batch"
                        or missing):
            raise ValueError("NMF: solver='cd' takes the Frobenius loss, method='batch' and "
                             "data with every entry observed; use solver='mu' for "
                             f"loss={self.opts.loss!r}, method={self.opts.method!r}"
                             f"{' or missing entries' if missing else ''}")
        self.modelmats = [Mat(xp.asarray(H))]
        second = ("gram", (k, k)) if self.cd else ("den", (k, d))
        self.updatemats = [{"num": Mat(backend.zeros((k, d), dtype, xp)),
                            second[0]: Mat(backend.zeros(second[1], dtype, xp))}]
        self._Ht = Mat(backend.zeros((d, k), dtype, xp))
        self.rebind(info)

    def rebind(self, info: DataInfo) -> None:
        """Train on the rows of another source from now on: new per-row factors (the
        initial ``W0`` only for the first source)."""
        k = int(self.opts.k)
        rows = RowState.for_source(info, k, self.dtype,
                                   "NMF keeps one row of factors per data row")
        if info.n_features != self.modelmats[0].shape[1]:
            raise ValueError(f"NMF: the data has {info.n_features} features while the "
                             f"components have {self.modelmats[0].shape[1]}")
        kind = data_kind(info)
        if self.cd and kind in ("masked", "stored"):
            raise ValueError("NMF: these components take coordinate-descent steps "
                             "(solver='cd'), which count every entry as observed, but this "
                             "data has missing entries (NaN or a mask): fit with "
                             "solver='mu' to go on training on data with missing entries")
        self.kind = kind
        self.info = info
        self.W, n = rows, rows.n_rows
        if self.W0 is not None:
            if self.W0.shape != (n, k):
                raise ValueError(f"NMF: the initial row factors have shape {self.W0.shape}; "
                                 f"{n} rows of k={k} need ({n}, {k})")
            self.W.values.data[...] = info.xp.asarray(self.W0.astype(self.dtype))
            self.W.seen.data[...] = 1
            self.W0 = None
        self._buf = {}
        self._sums = None
        self._redo = self._void = False
        self.converged = False
        self.errors = []

    def extra_state(self) -> dict[str, Mat]:
        """The row factors and, for the batch method, the pass's sums so far."""
        state = self.W.state("W") if self.W is not None else {}
        sums = self._pass_sums()
        return state if sums is None else state | sums.state()

    def counters(self) -> dict[str, int]:
        """The passes done and the errors of this source's passes (the stopping rule's),
        so a resumed run counts and stops as the run it resumes."""
        return ({"n_passes_done": int(self.n_passes_done)}
                | history_counters("errors", self.errors) | self.redo_counters())

    def set_counters(self, values: dict[str, int]) -> None:
        self.n_passes_done = int(values.get("n_passes_done", self.n_passes_done))
        self.errors = history_from_counters("errors", values, self.errors)
        self.set_redo_counters(values)

    def refresh(self) -> None:
        self._h_changed()

    def restored(self, earlier: dict[str, Any]) -> None:
        self._h_changed()

    def _pass_sums(self) -> PassSums | None:
        """The batch method's pass sums (made on first use), or None (online)."""
        if self.opts.method != "batch" or not self.modelmats:
            return None
        if self._sums is None:
            self._sums = PassSums(self.kind, self.opts.loss, self.modelmats[0])
        return self._sums

    def _h_products(self) -> tuple[Mat, Mat | None, Mat | None]:
        """``H^T`` (C-ordered), ``H H^T`` (Frobenius) and ``H``'s row sums as a 1 x k row
        (KL), formed once per value of ``H`` (see :meth:`_h_changed`)."""
        found = self._buf.get("h")
        if found is not None:
            return found
        H, Ht = self.modelmats[0], self._Ht
        if H.xp is np:
            transpose_into(H.data, Ht.data)
        else:
            Ht.data[...] = H.data.T
        key = ("hprod", "frobenius" if self.opts.loss == "frobenius" else "kl")
        out = self._buf.get(key)
        if out is None:
            xp, k = H.xp, H.shape[0]
            shape = (k, k) if self.opts.loss == "frobenius" else (1, k)
            out = self._buf[key] = Mat(backend.zeros(shape, self.dtype, xp))
        if self.opts.loss == "frobenius":
            H.xp.matmul(H.data, Ht.data, out=out.data)
            found = (Ht, out, None)
        else:
            H.xp.sum(Ht.data, axis=0, keepdims=True, out=out.data)
            found = (Ht, None, out)
        self._buf["h"] = found
        return found

    def _h_changed(self) -> None:
        """``H`` moved (or may have): its products are formed again on next use."""
        self._buf.pop("h", None)

    def _rows(self, n: int, which: str) -> Mat:
        key = (which, n)
        W = self._buf.get(key)
        if W is None:
            xp = self.modelmats[0].xp
            W = self._buf[key] = Mat(backend.zeros((n, int(self.opts.k)), self.dtype, xp))
        return W

    def _block(self, batch: Minibatch) -> Block:
        mats = batch.mats
        return Block(self.kind, mats[0], mats[1] if len(mats) > 1 else None)

    def _start_rows(self, batch: Minibatch, W: Mat, b: Block) -> bool:
        """``W``'s rows from the row state; unseen rows start at ``w_start``. True when
        every row was seen before."""
        if self.W.get(batch, W):
            return True
        if self.w_start is None:
            self.w_start = _observed_start(b, int(self.opts.k))
        ids = batch.ids[: batch.n]
        unseen = np.flatnonzero(np.asarray(backend.to_host(self.W.seen.data[ids, 0])) == 0)
        W.data[unseen] = self.w_start
        return False

    def start_pass(self, pass_: int) -> None:
        self._pass = [0.0, 0.0]
        self._h_changed()
        sums = self._pass_sums()
        if sums is not None:
            sums.zero()

    def _w_steps(self, b: Block, W: Mat, iters: int) -> Mat | None:
        """``iters`` multiplicative steps of ``W`` with ``H`` fixed; ``X H^T`` (Frobenius)."""
        H, loss = self.modelmats[0], self.opts.loss
        Ht, HHt, Htsum = self._h_products()
        XHt = b.X @ Ht if loss == "frobenius" else None
        num = None if loss == "frobenius" else self._rows(W.shape[0], "kl_num")
        l1, l2 = self.w_penalties()
        if self.cd:
            cols = self._buf.get(("cd_cols", W.shape[0]))
            if cols is None:
                cols = self._buf[("cd_cols", W.shape[0])] = Mat(backend.zeros(
                    (W.shape[0], 2), self.dtype, W.xp))
            for _ in range(iters):
                w_cd_step(W, XHt, HHt, l1, l2, cols)
            return XHt
        for _ in range(iters):
            w_step(b, W, H, Ht, loss, l1, l2, XHt=XHt, HHt=HHt, Htsum=Htsum, num_out=num)
        return XHt

    def update(self, batch: Minibatch) -> float:
        if (self._redo or self._void) and self.void_pass(batch):  # (pass_redo)
            return self.void_update(batch)
        b = self._block(batch)
        W = self._rows(batch.n, "train")
        seen = self._start_rows(batch, W, b)
        XHt = self._w_steps(b, W, self.opts.w_iters if seen else self.opts.w_iters_new)
        self.W.put(batch, W)
        H, u, o = self.modelmats[0], self.updatemats[0], self.opts
        sums = self._pass_sums()
        if sums is not None:
            Ht, HHt, Htsum = self._h_products()
            total, count = sums.add(b, W, H, Ht, XHt, HHt, Htsum)
            if batch.last:  # the pass's totals, for the updater's step at the pass end
                self._pass = [float(sums.misc.data[0, 1]), float(sums.misc.data[0, 2])]
                l1, l2 = o.alpha_H * o.l1_ratio, o.alpha_H * (1 - o.l1_ratio)
                if self.cd:
                    sums.finish_cd(u["num"], u["gram"], l1, l2)
                else:
                    sums.finish(u["num"], u["den"], H, l1, l2)
            return -total / max(count, 1.0)
        total, count = h_stats(b, W, H, self._Ht, o.loss, u["num"], u["den"])
        if o.alpha_H:  # scikit-learn's n_samples x alpha_H penalties
            rows = float(batch.n) * o.alpha_H
            u["den"] <<= penalised(u["den"], H, rows * o.l1_ratio, rows * (1 - o.l1_ratio))
        self._h_changed()  # OnlineMult steps H after this minibatch
        self._pass[0] += total
        self._pass[1] += count
        return -total / max(count, 1.0)

    def evaluate(self, batch: Minibatch) -> float:
        b = self._block(batch)
        W = self._rows(batch.n, "eval")
        self._start_rows(batch, W, b)
        self._w_steps(b, W, self.opts.w_iters_new)
        H, Ht = self.modelmats[0], self._h_products()[0]
        total, count = objective(b, W, H, Ht, self.opts.loss)
        return -total / max(count, 1.0)

    def w_penalties(self) -> tuple[float, float]:
        """The row factors' L1 and L2 penalties, scikit-learn's ``n_features x alpha_W``
        split by ``l1_ratio``."""
        o = self.opts
        scale = float(self.modelmats[0].shape[1]) * o.alpha_W
        return scale * o.l1_ratio, scale * (1.0 - o.l1_ratio)

    def end_pass(self, pass_: int) -> None:
        self._h_changed()
        H = self.modelmats[0].data
        if self.opts.loss == "kl":  # scikit-learn's guard against denormal components
            H[H < np.finfo(np.float64).eps] = 0.0
        if self._comm is not None:  # one allreduce of 2 numbers a pass, on every rank
            both = np.array(self._pass, dtype=np.float64)
            self._comm.allreduce([both], "sum")
            self._pass = [float(both[0]), float(both[1])]
        if self.end_void():  # the pass is run again (pass_redo): no step, none counted
            return
        self.n_passes_done += 1
        self.errors.append(math.sqrt(2.0 * max(self._pass[0], 0.0)))
        tol, errs = self.opts.tol, self.errors
        p = len(errs)
        if tol > 0 and p % 10 == 0 and errs[0] > 0:  # scikit-learn checks every 10
            previous = errs[p - 11] if p > 10 else errs[0]
            if (previous - errs[-1]) / errs[0] < tol:
                self.converged = True

    def flops(self, batch: Minibatch) -> float:
        n, d = batch.mats[0].shape
        nz = batch.mats[0].nnz if self.kind in ("sparse", "stored") else n * d
        k = int(self.opts.k)
        return float(2 * k * nz * (2 + self.opts.w_iters))

    # -- read side ------------------------------------------------------------------------
    def factors(self) -> np.ndarray:
        """The row factors of the data trained on (rows x k, a host copy)."""
        return np.array(backend.to_host(self.W.values.data), copy=True)


def _observed_start(b: Block, k: int) -> float:
    """``sqrt(mean / k)`` of the block's observed entries (scikit-learn's start value)."""
    X = b.X
    total = float(X.sum().data[0, 0])
    if b.kind == "masked":
        count = float(b.M.sum().data[0, 0])
    elif b.kind == "stored":
        count = float(X.nnz)
    else:
        count = float(X.shape[0] * X.shape[1])
    return math.sqrt(max(total / max(count, 1.0), 1e-12) / k)
