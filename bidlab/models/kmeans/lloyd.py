"""Lloyd's full-batch k-means, pruned by Hamerly's bounds: :class:`LloydKMeansModel`.

A full-batch model (``full_batch``: no minibatch held out for validation), with
:class:`~bidlab.learn.Batch` (``replace``): per minibatch the model adds the clusters' row
sums and weights into per-thread partials (:class:`~bidlab.kern.kmeans.CenterWork`, zeroed
and reduced once per pass, not per block); the pass's last minibatch writes the totals into
the update matrices (the others write nothing there), the updater puts them in the model
matrices at the pass end, and :meth:`LloydKMeansModel.end_pass` divides (BIDMach's batch
k-means). A checkpoint taken mid-pass keeps the sums so far, so a resumed pass continues
from them. A cluster left empty takes the row farthest from its centre among the pass's
farthest. When the labels stop changing, or the centres' total squared shift is at most
``tol`` times the data's mean feature variance (scikit-learn's rule), the model sets
``converged`` and the learner stops.

**Hamerly's bounds** (``bounds=True``) skip the distances that cannot change an
assignment: each row keeps an upper bound ``u`` on the distance to its centre and a lower
bound ``l`` on the distance to any other; when centres move by ``p_j``, ``u += p_a`` and
``l -= max_j p_j``; a row with ``u <= max(l, s_a)`` (``s_a``: half the distance from its
centre to the nearest other) keeps its centre, and only the rest go through the GEMM. The
bounds are kept by row id (:class:`~bidlab.models.kmeans.bounds.RowBounds` on
:class:`~bidlab.learn.RowState`), so any source that yields every row once a pass will do
(shuffled, shards); :class:`~bidlab.learn.blocks.BlockSource` lets them be updated in
place. Checkpoints keep them with their flags, so a run resumed at a pass boundary
prunes at once. In float64 the result
equals plain Lloyd's; in float32 a row tied to within SGEMM rounding may go to the other
centre. Dense CPU blocks go through :func:`~bidlab.kern.kmeans_lloyd.lloyd_block`: bound test,
GEMM of the rows left, nearest two centres and cluster sums in one cache-blocked kernel; a
row the bounds clear costs no GEMM work, so the bounds are kept whatever they skip. Small
BLAS products between passes run single-threaded
(:func:`~bidlab.kern.threads.one_blas_thread`).

The block's assignment is :mod:`~bidlab.models.kmeans.lloyd_assign`'s, the pass's cluster
sums and their checkpoint copy :mod:`~bidlab.models.kmeans.lloyd_sums`'.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.kmeans import assigned_sq_dist
from bidlab.kern.kmeans_centres import centre_means
from bidlab.learn.datasource import DataInfo
from bidlab.learn.options import Option
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters import Batch, Updater
from bidlab.mat import Mat
from bidlab.models.kmeans.bounds import RowBounds, pass_bounds
from bidlab.models.kmeans.farthest import keep_farthest, reseed_empty
from bidlab.models.kmeans.lloyd_assign import LloydAssignment
from bidlab.models.kmeans.lloyd_sums import LloydPassSums
from bidlab.models.kmeans.model import KMeansModel
from bidlab.models.kmeans.plusplus import Seeding

__all__ = ["LloydKMeansModel"]

_RESERVOIR = 32  # farthest rows kept per Lloyd pass to re-seed empty clusters


class LloydKMeansModel(LloydAssignment, LloydPassSums, KMeansModel):
    """Lloyd's k-means on the Learner, started from the given k x d centres (see the module
    doc); train it with a source that yields every row once a pass.

    Besides :class:`~bidlab.models.kmeans.model.KMeansModel`'s, it has the attributes below.

    Attributes
    ----------
    n_updates
        centre updates that moved a centre.
    n_iter
        Lloyd iterations run (scikit-learn's ``n_iter_``): the centre updates, and the
        last pass when it found no label changed (it ran, and moved no centre).

    Notes
    -----
    Scratch state, rebuilt on demand and not pickled: the per-row labels and bounds
    ``_rows``, the pass's cluster sums ``_work`` and their checkpoint copy ``_pending``,
    the farthest rows ``_res``, the pass's counters ``_pass_state`` and the lower bounds
    on the centres' distances ``_centre_lb`` (k x k, carried between passes with the rows'
    bounds); Hamerly's per-pass quantities ``_pass_bounds`` and the absolute tolerance
    ``_tol_abs`` are kept with the model.

    Examples
    --------
    ::

        from bidlab.learn import BlockSource, Learner

        model = LloydKMeansModel(X[:8].copy(), tol=1e-4)
        Learner(model, BlockSource(X, batch_size=4096), n_passes=50).fit(progress=None)
        model.converged, model.n_updates
    """

    OPTIONS = (
        Option("tol", float, 1e-4, "converged when the centres' total squared shift is at "
               "most tol x the mean feature variance", low=0.0),
        Option("bounds", bool, True, "skip the distances Hamerly's bounds rule out (same "
               "result)"),
    )
    full_batch = True  # its pass sums are its own, handed over at the last block
    algorithm = "lloyd"
    _SCRATCH = ("_buf", "_work", "_origin_mat", "_vote", "_rows", "_res", "_pending",
                "_pass_state", "_drift", "_seeded", "_centre_lb", "_comm", "_agreed")
    _generation = 0  # centre updates so far; tags a pass's checkpointed sums
    _pass_bounds: dict[str, Any] | None = None
    _centre_lb: Any = None
    _tol_abs: float | None = None
    _drift: Mat | None = None
    _seeded: Seeding | None = None
    _agreed: np.ndarray | None = None  # the pass end's numbers, summed over the ranks
    n_updates = 0
    n_iter = 0

    def __init__(self, centers: Any, *, random_state: int = 0, **options: Any) -> None:
        super().__init__(centers, random_state=random_state, **options)
        self.n_updates = 0
        self.n_iter = 0
        self._generation = 0

    def _clear_scratch(self) -> None:
        super()._clear_scratch()
        self._seeded: Seeding | None = None  # the seeding's first assignment, until init
        self._rows: RowBounds | None = None  # labels and bounds of every row, by row id
        self._res: dict[str, Any] | None = None  # the pass's farthest rows
        self._pending: Mat | None = None  # the pass's sums so far, checkpointed
        self._pass_state: dict[str, Any] | None = None
        self._centre_lb: Any = None  # lower bounds on the centres' distances (k x k)

    def default_updater(self, **options: Any) -> Updater:
        """Batch: the pass's sums replace the model matrices (``options``: Batch's)."""
        return Batch(**options)

    def init(self, info: DataInfo) -> None:
        super().init(info)
        self._rows = RowBounds(info.n_samples, info.dtype, info.xp)
        seeded, self._seeded = self._seeded, None
        if (seeded is not None and seeded.labels is not None and self.opts.bounds
                and seeded.labels.shape[0] == info.n_samples and info.xp is np):
            self._take_seeding(seeded)

    def start_from(self, seeding: Seeding | None) -> None:
        """Start the first pass from the rows' assignment to the initial centres that the
        seeding measured (its labels, exact distances and second-nearest lower bounds, as
        Hamerly's bounds), so the first pass computes only the distances they leave open.
        Used by the next :meth:`init` on data of as many rows; None: no seeding's
        assignment (the first pass measures every row)."""
        self._seeded = seeding

    def _take_seeding(self, seeded: Seeding) -> None:
        rows = self._rows
        for name, values in (("labels", seeded.labels), ("u", seeded.upper),
                             ("lo", seeded.lower)):
            rows.column(name)[...] = values
        rows.bounds_pass = 0  # the bounds hold for the first pass; the labels are not means'
        C = self.modelmats[0].data
        # a pass over its dense rows costs n k d: the centres' bounds are kept if dear
        self._set_pass_bounds(C, np.zeros(C.shape[0], C.dtype),
                              work=float(seeded.labels.shape[0]) * C.size)

    def rebind(self, info: DataInfo) -> None:
        super().rebind(info)
        self._rows = None
        self._pass_state = None
        self._sums_loaded = False

    # -- checkpoints ----------------------------------------------------------------------
    def counters(self) -> dict[str, int]:
        flags = self._rows.flags() if self._rows is not None else {}
        return {"generation": int(self._generation), "n_iter": int(self.n_iter),
                "n_updates": int(self.n_updates), **flags}

    def set_counters(self, values: dict[str, int]) -> None:
        self._generation = int(values.get("generation", self._generation))
        self.n_iter = max(0, int(values.get("n_iter", self.n_iter)))
        self.n_updates = max(0, int(values.get("n_updates", self.n_updates)))
        if self._rows is not None:
            self._rows.set_flags(values)

    def rows_reset(self) -> None:
        """The labels and bounds were not loaded: none is ready (the next pass measures
        every row)."""
        if self._rows is not None:
            self._rows.set_flags({})

    def extra_state(self) -> dict[str, Mat]:
        """The pass's sums so far, the centres' last moves (k x 1, the drift Hamerly's
        bounds are moved by) and the per-row labels and bounds."""
        if not self.modelmats:
            return {}
        state = super().extra_state() | {"pass_sums": self._pass_sums_state(),
                                         "drift": self._drift_state()}
        if self._rows is not None:
            state |= self._rows.state()
        return state

    def _drift_state(self) -> Mat:
        k = self.modelmats[0].shape[0]
        B = self._drift
        if B is None or B.shape != (k, 1):
            B = self._drift = Mat(backend.zeros((k, 1), self.modelmats[0].dtype, self.xp))
        b = self._pass_bounds
        if b is not None:
            B.data[:, 0] = b["drift"]
        return B

    def restored(self, earlier: dict[str, Any]) -> None:
        """The per-row labels and bounds came back with their flags (none from a checkpoint
        of an earlier version): Hamerly's per-pass quantities are rebuilt from the saved
        drift. Ranks that share one file (MPI) find there rank 0's sums of the pass so
        far, not their own: they drop them, and redo that pass together."""
        super().restored(earlier)  # measured from this model's origin first
        self._pass_state = None
        self._sums_loaded = True  # a save before the next block keeps the file's sums
        P = self._pending
        if P is not None and self.shares_checkpoint():
            P.data.fill(0)  # no rank's sums: each pass end sees sums missing (_agree_pass)
        rows = self._rows
        if rows is None:
            return
        if self._tol_abs is None:
            rows.xx_ok = False  # the first full pass measures the data's variance again
        if rows.bounds_pass is None or self._drift is None:
            return
        drift = self.xp.ascontiguousarray(self._drift.data[:, 0])
        self._set_pass_bounds(self.modelmats[0].data, drift)

    def _set_pass_bounds(self, C: Any, drift: Any, carry: bool = False,
                         work: float = 0.0) -> None:
        """Hamerly's quantities for the centres ``C`` that moved by ``drift``
        (:func:`~bidlab.models.kmeans.bounds.pass_bounds`; with ``carry``, from the last
        ones and the pass's assignment ``work``). Their k x k lower bounds on the centres'
        distances go to the scratch ``_centre_lb``: they serve the next pass's rows only,
        so a fitted or pickled model does not hold them."""
        last = None
        if carry and self._pass_bounds is not None:
            last = {**self._pass_bounds, "lb": self._centre_lb}
        b = pass_bounds(C, drift, self.xp, last, work)
        self._centre_lb = b.pop("lb")
        self._pass_bounds = b

    # -- the Learner's hooks --------------------------------------------------------------
    def start_pass(self, pass_: int) -> None:
        if self._vote is not None:
            self._agree_origin()
        self._prepare_pass(pass_, at_start=True)

    def update(self, batch: Minibatch) -> float:
        if self._vote is not None:  # a run resumed mid-pass starts here
            self._agree_origin()
        return self._lloyd_step(batch)

    def frame_moved(self, step: Any) -> None:
        """A checkpoint's pass sums so far move with the centres (by their weights)."""
        P = self._pending
        if P is not None and P.shape == self._pending_shape():
            k, d = self.modelmats[0].shape
            A = P.data
            A[:k, :d] += A[:k, d:d + 1] * self.xp.asarray(step)

    def end_pass(self, pass_: int) -> None:
        self._lloyd_end(pass_)

    def _agree_pass(self, ps: dict[str, Any] | None, sums_ok: bool) -> tuple[float, bool,
                                                                          float]:
        """What the pass end decides by, over every rank (one allreduce of 3 numbers, on
        every rank at every pass end, whatever its own pass did): the labels not known to
        be settled (those that changed, and 1 for a rank whose pass could not tell: it did
        not start at the first block, or held no earlier labels; 0 for all: converged, as
        one process on all the rows), whether every rank's sums hold the whole pass, and
        the rows' weighted squared norms (the data's variance, for ``tol``)."""
        vec = self._agreed
        if vec is None:
            vec = self._agreed = np.zeros(3)
        if ps is None:
            vec[:] = (1.0, 1.0, 0.0)
        else:
            settled = ps["complete"] and ps["labels_ok"]
            vec[:] = (ps["changed"] + (0 if settled else 1), float(not sums_ok), ps["sxx"])
        if self._comm is not None:
            buf = self.xp.asarray(vec)
            self._comm.allreduce([buf], "sum")
            vec[:] = backend.to_host(buf)
        return float(vec[0]), vec[1] == 0, float(vec[2])

    def _prepare_pass(self, pass_: int, at_start: bool) -> dict[str, Any]:
        """Per-pass state: centres for the GEMM, whether the bounds hold, counters."""
        ps = self._pass_state
        if ps is not None and ps["pass"] == pass_:
            return ps
        n = self.info.n_samples
        rows = self._rows
        if rows is None or rows.n != n:
            rows = self._rows = RowBounds(n, self.modelmats[0].dtype, self.xp)
        C = self.modelmats[0].data
        pruned = bool(self.opts.bounds and at_start and rows.bounds_pass == pass_
                      and self._pass_bounds is not None)
        self._sums_loaded = False  # the pass's sums are made (or resumed) from now on
        ps = self._pass_state = {
            "pass": pass_,
            "complete": at_start,  # started at its first minibatch
            "pruned": pruned,
            "labels_ok": at_start and rows.labels_pass == pass_,
            "changed": 0,
            "work": 0.0,  # the pass's assignment work: stored entries x k
            "sxx": 0.0,
            "prev": C.copy(),
            "prev_n": self.modelmats[1].data.copy(),
            "centers_set": False,
            "sums_next": None,  # the block the accumulated sums expect next
            "sums_ok": True,  # they hold every block of the pass so far
        }
        self._res = None
        return ps

    def _lloyd_step(self, batch: Minibatch) -> float:
        X, w = self._batch_data(batch)
        m = batch.n
        ps = self._prepare_pass(batch.pass_, at_start=batch.index == 0)
        rows = self._rows
        buf = self._buffers(m)
        if not ps["centers_set"]:
            self._set_centers(buf)
            ps["centers_set"] = True
        lab, u, lo, xx = rows.block(batch)
        ps["work"] += float(X.nnz if backend.is_sparse(X) else X.size) * self.modelmats[0].shape[0]
        self._begin_sums(ps, batch)
        if not self._assign_rows(X, lab, u, lo, xx, buf, ps, m, count=True, w=w, add=True):
            self._work.add(X, lab, w)
        self._end_sums(buf, ps, batch)
        if not rows.xx_ok:
            ps["sxx"] += float(xx.sum(dtype=np.float64) if w is None
                               else (w * xx).sum(dtype=np.float64))
        # each row's squared distance to its centre, measured (u only bounds it from
        # above where the bounds spared the GEMM): the score is the blocks' inertia, and a
        # row costs d multiply-adds here against k d in the GEMM
        far = buf["dist"][:m]
        assigned_sq_dist(X, lab, self.modelmats[0].data, far, buf["cc"])
        k = self.modelmats[0].shape[0]
        self._res = keep_farthest(self._res, X, lab, far, w, batch.ids[:m],
                                  min(_RESERVOIR, k), self.xp)
        rows.done(batch)
        return self._score(far, w)

    def _lloyd_end(self, pass_: int) -> None:
        ps = self._pass_state
        if ps is None or ps["pass"] != pass_:
            self._agree_pass(None, False)  # the other ranks' pass end meets this one's
            return
        S, Nm = self.modelmats[0].data, self.modelmats[1].data  # the pass's totals
        N = Nm[:, 0]
        prev = ps["prev"]
        rows = self._rows
        unsettled, sums_ok, sxx = self._agree_pass(ps, ps["sums_ok"])
        if sums_ok:  # an empty cluster takes a far row (the same choice on every rank)
            unsettled += reseed_empty(self._res, S, N, rows, self._comm)
        if not sums_ok:  # they miss blocks: keep the centres, the next pass redoes it
            S[...] = prev
            Nm[...] = ps["prev_n"]
            rows.labels_pass = rows.bounds_pass = None
            rows.current = False
            self._generation += 1
            return
        if ps["complete"]:
            rows.xx_ok = True
            if self._tol_abs is None:
                W = float(N.sum(dtype=np.float64))
                mean = S.sum(axis=0, dtype=np.float64) / max(W, 1e-300)
                var = (sxx / max(W, 1e-300) - float((mean * mean).sum())) / S.shape[1]
                self._tol_abs = max(var, 0.0) * self.opts.tol
        if unsettled == 0:
            # nothing moved: the centres are those of the pass's start, its labels final
            S[...] = prev
            self.converged = True
            self.n_iter += 1
            rows.labels_pass = pass_ + 1
            rows.bounds_pass = None
            rows.current = True
            self._generation += 1
            return
        drift = centre_means(S, N, prev)
        shift = float((drift * drift).sum())
        self.n_updates += 1
        self.n_iter += 1
        tol_abs = self._tol_abs
        if tol_abs is not None and shift <= tol_abs:
            self.converged = True
        rows.labels_pass = pass_ + 1 if ps["complete"] else None
        rows.bounds_pass = pass_ + 1 if ps["complete"] else None
        self._set_pass_bounds(S, drift.astype(S.dtype), ps["pruned"], ps["work"])
        rows.current = False
        self._generation += 1
