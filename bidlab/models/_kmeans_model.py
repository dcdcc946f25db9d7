"""The k-means engine: one :class:`KMeansModel` for the Learner, both algorithms.

The model matrices are the k x d centres and a k x 1 column of cluster weights (rows, or
summed sample weights). Distances are ``||x||^2 - 2 x.c + ||c||^2`` with the cross term
from one GEMM per minibatch (BLAS / cuBLAS; ``kern.sparse_dense`` for CSR) and a fused
nearest-centre pass (:mod:`bidlab.kern.kmeans`).

``algorithm="minibatch"`` (Sculley 2010), with :class:`~bidlab.learn.Grad` at ``lrate=1``:
per minibatch each row goes to its nearest centre; centre c, which has now seen
``counts[c]`` weight in all, moves towards the mean of its new rows by ``n_c / counts[c]``.
:meth:`KMeansModel.update` writes that move into the update matrix (``lrate`` < 1 damps
it). Every ``reassign_every`` steps, centres that starve (below ``reassign_ratio`` of the
busiest one's weight) move to minibatch rows drawn with probability proportional to their
squared distance, as scikit-learn's MiniBatchKMeans does. **Early stop** (scikit-learn's
MiniBatchKMeans rules, while ``stop_early``): the minibatch inertia per unit weight
(measured before each step; the first step's, of the initial centres, is ignored) is
smoothed as ``ewa = (1 - a) ewa + a inertia`` with ``a = min(1, 2 m / (n + 1))`` (m rows per
minibatch, n in the data); the model sets ``converged`` when ``ewa`` has not reached a new
low for ``max_no_improvement`` steps in a row. ``tol`` is Lloyd's only: a minibatch step's
centre shift follows its step size (which shrinks as 1 / steps) more than convergence
(scikit-learn's MiniBatchKMeans has that test off by default too).

``algorithm="lloyd"`` (full batch), with :class:`~bidlab.learn.Batch` (``replace``): per
minibatch the model adds the clusters' row sums and weights into per-thread partials
(:class:`~bidlab.kern.kmeans.CenterWork`, zeroed and reduced once per pass, not per block);
the pass's last minibatch writes the totals into the update matrices (the others write
zeros), the updater puts them in the model matrices at the pass end, and
:meth:`KMeansModel.end_pass` divides (BIDMach's batch k-means). A checkpoint taken
mid-pass keeps the sums so far, so a resumed pass continues from them. A cluster
left empty takes the row farthest from its centre among the pass's farthest. When the
labels stop changing, or the centres' total squared shift is at most ``tol`` times the
data's mean feature variance (scikit-learn's rule), the model sets ``converged`` and the
learner stops. **Hamerly's bounds** (``bounds=True``) skip the distances that cannot change
an assignment: each row keeps an upper bound ``u`` on the distance to its centre and a
lower bound ``l`` on the distance to any other; when centres move by ``p_j``, ``u += p_a``
and ``l -= max_j p_j``; a row with ``u <= max(l, s_a)`` (``s_a``: half the distance from its
centre to the nearest other) keeps its centre, and only the rest go through the GEMM. The
bounds are per row, so they need a source that yields the same row ranges every pass (no
shuffling; :class:`BlockSource`). In float64 the result equals plain Lloyd's; in float32 a
row tied to within SGEMM rounding may go to the other centre. Dense CPU blocks (Lloyd's
and the minibatch steps') go through :func:`~bidlab.kern.kmeans.lloyd_block`: bound test,
GEMM of the rows left, nearest two centres and cluster sums in one cache-blocked kernel;
a row the bounds clear costs no GEMM work, so the bounds are kept whatever they skip. Small
BLAS products between passes run single-threaded (:func:`~bidlab.kern.kmeans.one_blas_thread`).

The score is minus the mean squared distance of a minibatch's rows to their centres
(weighted), measured before the step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bidlab import backend, kern
from bidlab.kern.kmeans import (
    CenterWork,
    assign,
    assigned_sq_dist,
    center_sums,
    hamerly,
    lloyd_block,
    one_blas_thread,
    row_norms_sq,
)
from bidlab.learn.datasource import DataInfo, DataSource
from bidlab.learn.model import Model
from bidlab.learn.options import Option
from bidlab.learn.staging import MatSpec, Minibatch
from bidlab.mat import Mat, SMat

__all__ = ["KMeansModel", "BlockSource", "init_centers", "nearest", "sq_distances",
           "CHUNK_ENTRIES"]

CHUNK_ENTRIES = 1 << 22  # distances per GEMM block (16 MiB of float32)
_RESERVOIR = 32  # farthest rows kept per Lloyd pass to re-seed empty clusters


def _raw(X: Any) -> Any:
    return X.csr if isinstance(X, SMat) else (X.data if isinstance(X, Mat) else X)


def _xp(X: Any) -> Any:
    return backend.namespace(X.data if backend.is_sparse(X) else X)


def _cross(X: Any, CT: Any, out: Any) -> None:
    """out = X @ CT (X dense or CSR m x d, CT d x k)."""
    if backend.is_sparse(X):
        kern.sparse_dense(X, CT, out=out)
    else:
        _xp(X).matmul(X, CT, out=out)


# --------------------------------------------------------------------------- helpers
def sq_distances(X: Any, C: Any, xx: Any = None) -> Any:
    """n x m squared distances from every row of ``X`` (dense or CSR) to the rows of ``C``
    (GEMM formula, clipped at 0), in ``C``'s dtype."""
    xp = backend.namespace(C)
    if xx is None:
        xx = row_norms_sq(X)
    D = backend.empty((X.shape[0], C.shape[0]), C.dtype, xp)
    _cross(X, xp.ascontiguousarray(C.T), D)
    D *= -2.0
    D += xx[:, None]
    D += xp.einsum("ij,ij->i", C, C)[None, :]
    xp.maximum(D, 0.0, out=D)
    return D


def nearest(X: Any, C: Any, w: Any = None) -> tuple[Any, Any]:
    """(labels, squared distances) of every row of ``X`` to its nearest centre in ``C``.

    Chunked GEMM + fused argmin; the distances are then measured directly (no GEMM
    cancellation), so their (weighted) sum is the inertia.
    """
    xp = backend.namespace(C)
    n, k = X.shape[0], C.shape[0]
    chunk = max(1, CHUNK_ENTRIES // max(k, 1))
    labels = backend.empty((n,), np.int64, xp)
    dist = backend.empty((n,), C.dtype, xp)
    rows = min(chunk, n)
    D = backend.empty((rows, k), C.dtype, xp)
    d1 = backend.empty((rows,), C.dtype, xp)
    d2 = backend.empty((rows,), C.dtype, xp)
    CT = xp.ascontiguousarray(C.T)
    cc = xp.einsum("ij,ij->i", C, C)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        Xc = X[a:b]
        _cross(Xc, CT, D[: b - a])
        assign(D[: b - a], cc, row_norms_sq(Xc), labels[a:b], d1[: b - a], d2[: b - a])
        assigned_sq_dist(Xc, labels[a:b], C, dist[a:b])
    return labels, dist


def _canonical_order(X: Any) -> Any:
    """An order of the rows that depends only on their values (a fixed random projection,
    sorted): sampling along it picks the same rows whatever order the data comes in, and
    a row given weight 2 is picked like two copies of it."""
    xp = _xp(X)
    r = np.random.default_rng(0x6B6D).standard_normal(X.shape[1])
    p = X @ xp.asarray(r.astype(np.float64))
    return xp.argsort(xp.asarray(p).reshape(-1), kind="stable")


def _dense_rows(X: Any, idx: Any) -> Any:
    rows = X[idx]
    return rows.toarray() if backend.is_sparse(rows) else rows


def init_centers(X: Any, k: int, method: Any, rng: np.random.Generator, w: Any = None) -> Any:
    """k initial centres: ``"k-means++"`` (greedy, 2 + log k trials, weighted by ``w``),
    ``"random"`` rows (drawn by weight), or an explicit k x d array."""
    xp = _xp(X)
    dtype = X.dtype
    n = X.shape[0]
    if not isinstance(method, str):
        return xp.array(backend.to_host(method) if xp is np else method, dtype=dtype, copy=True)
    weights = xp.ones(n, np.float64) if w is None else xp.asarray(w, np.float64).reshape(-1)
    order = _canonical_order(X)
    wo = weights[order]
    if method == "random":
        p = np.asarray(backend.to_host(wo), np.float64)
        if np.count_nonzero(p) < k:
            raise ValueError(f"init='random' needs at least k={k} samples with a positive "
                             f"weight; got {np.count_nonzero(p)}")
        pick = rng.choice(n, k, replace=False, p=p / p.sum())
        return xp.ascontiguousarray(_dense_rows(X, order[xp.asarray(pick)])).astype(dtype)
    trials = 2 + int(math.log(k))
    C = backend.empty((k, X.shape[1]), dtype, xp)
    xx = row_norms_sq(X)

    def draw(mass: Any, size: int) -> Any:
        cum = xp.cumsum(mass)
        r = xp.asarray(rng.random(size) * float(cum[-1]))
        return order[xp.minimum(xp.searchsorted(cum, r, side="right"), n - 1)]

    first = int(draw(wo, 1)[0])
    C[0] = _dense_rows(X, slice(first, first + 1))[0]
    closest = sq_distances(X, C[0:1], xx)[:, 0].astype(np.float64)
    pot = float((weights * closest).sum())
    for c in range(1, k):
        cand = draw(wo if pot <= 0 else (weights * closest)[order], trials)
        Cc = _dense_rows(X, cand).astype(dtype)
        Dc = xp.minimum(sq_distances(X, Cc, xx), closest[:, None])
        pots = (weights[:, None] * Dc).sum(axis=0)
        best = int(xp.argmin(pots))
        closest = xp.ascontiguousarray(Dc[:, best]).astype(np.float64)
        pot = float(pots[best])
        C[c] = Cc[best]
    return C


# --------------------------------------------------------------------------- source
class BlockSource(DataSource):
    """Consecutive row blocks of in-memory matrices as views (no copy), the same blocks in
    the same order every pass: what Lloyd's per-row bounds need, at no copying cost.

    Args:
        *mats: aligned matrices (features first): C-ordered dense numpy / CuPy arrays or
            CSR matrices; a 1-D array becomes one column.
        batch_size: rows per block.
        names: one name per matrix (default ``("X", "w", ...)``).
        n_passes: stop after this many passes (None: repeat forever).
    """

    def __init__(self, *mats: Any, batch_size: int, names: tuple[str, ...] | None = None,
                 n_passes: int | None = None) -> None:
        super().__init__(batch_size, n_passes, None)
        raws = [m.reshape(-1, 1) if getattr(m, "ndim", 2) == 1 else _raw(m) for m in mats]
        n = int(raws[0].shape[0])
        if n == 0:
            raise ValueError("the data set is empty (0 samples): nothing to train on")
        names = tuple(names) if names is not None else ("X", "w", "m2", "m3")[: len(raws)]
        specs = []
        for r in raws:
            sparse = backend.is_sparse(r)
            specs.append(MatSpec(int(r.shape[1]), np.dtype(r.dtype), sparse,
                                 np.dtype(r.indices.dtype) if sparse else None))
        gpu = backend.is_cupy_array(raws[0].data if backend.is_sparse(raws[0]) else raws[0])
        b = min(int(batch_size), n)
        self.batch_size = b
        self._info = DataInfo(n, names, tuple(specs), "gpu" if gpu else "cpu", b)
        self._batches = []
        for i, a in enumerate(range(0, n, b)):
            z = min(n, a + b)
            views = tuple(_view(r, a, z) for r in raws)
            nbytes = sum(_nbytes(v) for v in views)
            self._batches.append(Minibatch(views, z - a, 0, i, z >= n, a, nbytes))

    def next(self) -> Minibatch | None:
        if self.n_passes is not None and self._pass >= self.n_passes:
            return None
        batch = self._batches[self._index]
        batch.pass_ = self._pass
        if batch.last:
            self._pass, self._index = self._pass + 1, 0
        else:
            self._index += 1
        return batch


def _view(m: Any, a: int, z: int) -> Any:
    if backend.is_sparse(m):
        p0, p1 = int(m.indptr[a]), int(m.indptr[z])
        csp = backend.sparse_module(_xp(m))
        part = csp.csr_matrix((m.data[p0:p1], m.indices[p0:p1], m.indptr[a : z + 1] - p0),
                              shape=(z - a, m.shape[1]), copy=False)
        return SMat(part)
    return Mat(m[a:z])


def _nbytes(v: Any) -> int:
    if isinstance(v, SMat):
        c = v.csr
        return int(c.data.nbytes + c.indices.nbytes + c.indptr.nbytes)
    return int(v.data.nbytes)


# --------------------------------------------------------------------------- model
_SCRATCH = ("_buf", "_rows", "_work", "_res", "_pending")


class KMeansModel(Model):
    """k-means on the Learner, started from the given k x d centres (see the module doc).

    Attributes (besides ``modelmats``):
        converged: set when Lloyd has converged (:meth:`end_pass`) or minibatch steps
            stop improving (:meth:`update`); the learner stops.
        stop_early: minibatch steps may set ``converged`` (True by default;
            ``partial_fit`` turns it off, as scikit-learn's does not stop early).
        n_updates: Lloyd centre updates that moved a centre (scikit-learn's ``n_iter_``).
        distance_evaluations: row-centre distances computed by GEMM so far (the bounds
            skip some).
    """

    OPTIONS = (
        Option("algorithm", str, "lloyd", "'lloyd' (full batch, with the Batch updater) or "
               "'minibatch' (Sculley's steps, with Grad at lrate 1)",
               choices=("lloyd", "minibatch"), live=False),
        Option("tol", float, 1e-4, "Lloyd: converged when the centres' total squared shift "
               "is at most tol x the mean feature variance", low=0.0),
        Option("bounds", bool, True, "Lloyd: skip the distances Hamerly's bounds rule out "
               "(same result)"),
        Option("reassign_every", int, 10, "minibatch: steps between re-seedings of starved "
               "centres (0: never)", low=0),
        Option("reassign_ratio", float, 0.01, "minibatch: a centre starves below this "
               "fraction of the busiest centre's weight", low=0.0, high=1.0),
        Option("max_no_improvement", int, 10, "minibatch: stop after this many steps in a "
               "row without a new low of the smoothed minibatch inertia (None: never)",
               low=1, none_ok=True),
    )
    score_name = "-sq.dist/sample"

    def __init__(self, centers: Any, *, random_state: int = 0, **options: Any) -> None:
        super().__init__(**options)
        self.start_centers = np.array(backend.to_host(centers), copy=True)
        if self.start_centers.ndim != 2:
            raise ValueError(f"centers must be a k x d array; got shape "
                             f"{self.start_centers.shape}")
        self.random_state = int(random_state)
        self.rng = np.random.default_rng(self.random_state)
        self.converged = False
        self.n_updates = 0
        self.distance_evaluations = 0
        self.steps = 0
        self.stop_early = True
        self._reset_early_stop()
        # checkpointed: tells a reload from a live run (a random start: from another run's)
        self._token_value = float(np.random.default_rng().integers(1, 2**40))
        self._token = Mat(np.full((1, 1), self._token_value))
        self._clear_scratch()

    # -- pickling: scratch buffers and per-row state are rebuilt on demand ---------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in _SCRATCH:
            state[name] = None
        state["_pass_state"] = None
        return backend.portable_state(state)

    def _clear_scratch(self) -> None:
        self._buf: dict[str, Any] | None = None  # per-minibatch buffers
        self._rows: dict[str, Any] | None = None  # Lloyd: labels and bounds of every row
        self._work: CenterWork | None = None  # Lloyd: the pass's cluster sums so far
        self._res: dict[str, Any] | None = None  # Lloyd: the pass's farthest rows
        self._pending: Mat | None = None  # Lloyd: the pass's sums so far, checkpointed
        self._pass_state: dict[str, Any] | None = None

    def rebind(self, info: DataInfo) -> None:
        """Train on another source from now on (same features): partial_fit, a new learner
        on new data. The per-row state of the old data is dropped."""
        d = self.modelmats[0].shape[1] if self.modelmats else self.start_centers.shape[1]
        if info.n_features != d:
            raise ValueError(f"the data has {info.n_features} features while the centres "
                             f"have {d}")
        self.info = info
        self._rows = None
        self._pass_state = None
        self.converged = False
        self._reset_early_stop()

    def _reset_early_stop(self) -> None:
        # minibatch early stop: steps seen, smoothed inertia, its lowest, steps since then
        self._es: dict[str, Any] = {"step": 0, "ewa": None, "low": None, "since": 0}

    def forget_rows(self) -> None:
        """Drop the per-row state and scratch buffers (memory; a later Lloyd pass without
        them computes every distance once and rebuilds the bounds)."""
        self._clear_scratch()

    # -- Model interface ------------------------------------------------------------------
    def init(self, info: DataInfo) -> None:
        k, d = self.start_centers.shape
        if info.n_features != d:
            raise ValueError(f"the data has {info.n_features} features while the centres "
                             f"have {d}")
        if info.specs[0].dtype.kind != "f":
            raise TypeError(f"k-means needs float features; got {info.specs[0].dtype}: "
                            "convert with X.astype(np.float32)")
        xp, dtype = info.xp, info.dtype
        self.xp = xp
        self.modelmats = [Mat(xp.asarray(self.start_centers.astype(dtype))),
                          Mat(backend.zeros((k, 1), dtype, xp))]
        self.updatemats = [Mat(backend.zeros((k, d), dtype, xp)),
                           Mat(backend.zeros((k, 1), dtype, xp))]

    @property
    def centers(self) -> Mat:
        """The k x d centres (the live model matrix)."""
        return self.modelmats[0]

    @property
    def counts(self) -> Any:
        """Weight per cluster (k,): absorbed so far (minibatch) or in the last pass (Lloyd)."""
        return self.modelmats[1].data[:, 0]

    def extra_state(self) -> dict[str, Mat]:
        state = {"token": self._token}
        if self.modelmats and self.opts.algorithm == "lloyd":
            state["pass_sums"] = self._pass_sums_state()
        return state

    def flops(self, batch: Minibatch) -> float:
        return self._flops

    _flops = 0.0

    def start_pass(self, pass_: int) -> None:
        if self.opts.algorithm == "lloyd":
            self._prepare_pass(pass_, at_start=True)

    def update(self, batch: Minibatch) -> float:
        if self.opts.algorithm == "lloyd":
            return self._lloyd_step(batch)
        return self._minibatch_step(batch)

    def evaluate(self, batch: Minibatch) -> float:
        X, w = self._batch_data(batch)
        C = self.modelmats[0].data
        _, dist = nearest(X, C)
        return self._score(dist, w)

    def end_pass(self, pass_: int) -> None:
        if self.opts.algorithm == "lloyd":
            self._lloyd_end(pass_)

    # -- shared pieces --------------------------------------------------------------------
    def _batch_data(self, batch: Minibatch) -> tuple[Any, Any]:
        X = _raw(batch.mats[0])
        names = self.info.names if self.info is not None else ("X",)
        w = _raw(batch.mats[names.index("w")])[:, 0] if "w" in names else None
        return X, w

    def _score(self, dist: Any, w: Any) -> float:
        if w is None:
            return -float(dist.mean())
        tot = float(w.sum())
        return -float((w * dist).sum()) / tot if tot > 0 else math.nan

    def _buffers(self, m: int) -> dict[str, Any]:
        """Buffers for minibatches of up to ``m`` rows, allocated once (the row-sized ones
        grow when a larger minibatch comes), and the centres' GEMM operand ``CT``."""
        C = self.modelmats[0].data
        xp, dtype = self.xp, C.dtype
        k, d = C.shape
        buf = self._buf
        if buf is None or buf["CT"].shape != (d, k) or buf["CT"].dtype != dtype:
            buf = self._buf = {
                "cap": 0,
                "S": backend.zeros((k, d), np.float64, xp),
                "N": backend.zeros((k,), np.float64, xp),
                "CT": backend.empty((d, k), dtype, xp),
                "cc": backend.empty((k,), dtype, xp),
                "kcol": backend.empty((k, 1), dtype, xp),
                "G": None,  # gathered rows (dense Lloyd pruning), made when first needed
            }
            self._work = CenterWork(k, d, xp)
        if buf["cap"] < m:
            buf["cap"] = m
            buf["D"] = backend.empty((m, k), dtype, xp)
            buf["G"] = None
            for name, dt in (("lab", np.int64), ("d1", dtype), ("d2", dtype), ("xx", dtype),
                             ("dist", dtype), ("need", np.int64)):
                buf[name] = backend.empty((m,), dt, xp)
        return buf

    def _set_centers(self, buf: dict[str, Any]) -> None:
        C = self.modelmats[0].data
        buf["CT"][...] = C.T
        row_norms_sq(C, out=buf["cc"])

    def _nearest_rows(self, X: Any, lab: Any, buf: dict[str, Any], m: int, w: Any = None,
                      add: bool = False) -> bool:
        """Nearest centre of every row of a minibatch into ``lab``, its squared distance
        into ``buf["d1"]``; with ``add``, dense CPU rows also go into the cluster sums
        ``buf["S"]`` / ``buf["N"]`` in the same kernel (returns whether they did)."""
        k = self.modelmats[0].shape[0]
        d1, d2, xx = buf["d1"][:m], buf["d2"][:m], buf["xx"][:m]
        self.distance_evaluations += m * k
        self._flops = 2.0 * (X.nnz if backend.is_sparse(X) else m * X.shape[1]) * k
        if self._fused(X):
            if add:
                self._work.reset()
            lloyd_block(X, self.modelmats[0].data, buf["cc"], xx, lab, d1, d2, self._work, w,
                        xx_ready=False, sums=add, root=False)
            if add:
                S, N = buf["S"], buf["N"]
                S.fill(0)
                N.fill(0)
                self._work.total(S, N)
            return add
        row_norms_sq(X, out=xx)
        _cross(X, buf["CT"], buf["D"][:m])
        assign(buf["D"][:m], buf["cc"], xx, lab, d1, d2)
        return False

    def _stats(self, X: Any, lab: Any, w: Any, buf: dict[str, Any], m: int) -> None:
        S, N = buf["S"], buf["N"]
        S.fill(0)
        N.fill(0)
        center_sums(X, lab, S, N, w, self._work)

    # -- minibatch (Sculley) --------------------------------------------------------------
    def _minibatch_step(self, batch: Minibatch) -> float:
        X, w = self._batch_data(batch)
        m = batch.n
        buf = self._buffers(m)
        xp = self.xp
        C = self.modelmats[0].data
        seen = self.modelmats[1].data
        self._set_centers(buf)
        lab, d1 = buf["lab"][:m], buf["d1"][:m]
        if not self._nearest_rows(X, lab, buf, m, w=w, add=True):
            self._stats(X, lab, w, buf, m)
        N, kcol = buf["N"], buf["kcol"]
        kcol[:, 0] = N
        xp.add(seen, kcol, out=seen)
        # (sums - n_c C) / seen_c == (n_c / seen_c) (mean_c - C): Sculley's per-centre step
        U = self.updatemats[0].data
        xp.multiply(C, kcol, out=U)
        xp.subtract(buf["S"], U, out=U, casting="same_kind")
        xp.maximum(seen, 1e-300 if seen.dtype == np.float64 else 1e-30, out=kcol)
        xp.divide(U, kcol, out=U)
        self.updatemats[1].data.fill(0)
        self.steps += 1
        every = self.opts.reassign_every
        if every and self.steps % every == 0:
            self._reassign(X, d1, w)
        score = self._score(d1, w)
        if self.stop_early:
            self._early_stop(-score, m)
        return score

    def _early_stop(self, inertia: float, m: int) -> None:
        """Set ``converged`` when minibatch steps stop improving (the module doc's rule)."""
        es = self._es
        es["step"] += 1
        if es["step"] == 1 or not math.isfinite(inertia):
            return  # the first step measures the initial centres
        a = min(1.0, 2.0 * m / (self.info.n_samples + 1))
        es["ewa"] = inertia if es["ewa"] is None else (1 - a) * es["ewa"] + a * inertia
        if es["low"] is None or es["ewa"] < es["low"]:
            es["low"], es["since"] = es["ewa"], 0
        else:
            es["since"] += 1
        limit = self.opts.max_no_improvement
        if limit is not None and es["since"] >= limit:
            self.converged = True

    def _reassign(self, X: Any, d1: Any, w: Any) -> None:
        """Move starved centres to minibatch rows drawn by squared distance."""
        xp = self.xp
        C, U = self.modelmats[0].data, self.updatemats[0].data
        seen = self.modelmats[1].data[:, 0]
        low = seen < self.opts.reassign_ratio * seen.max()
        starved = xp.flatnonzero(low)
        n_st = int(starved.shape[0])
        if n_st == 0 or n_st > X.shape[0] // 2:
            return
        p = np.asarray(backend.to_host(d1), np.float64).copy()
        if w is not None:
            p *= np.asarray(backend.to_host(w), np.float64) > 0
        if np.count_nonzero(p) < n_st:
            return
        pick = self.rng.choice(X.shape[0], n_st, replace=False, p=p / p.sum())
        C[starved] = _dense_rows(X, xp.asarray(pick)).astype(C.dtype)
        U[starved] = 0
        rest = seen[~low]
        seen[starved] = rest.min() if rest.shape[0] else 1

    # -- Lloyd ------------------------------------------------------------------------------
    def _prepare_pass(self, pass_: int, at_start: bool) -> dict[str, Any]:
        """Per-pass state: centres for the GEMM, whether the bounds hold, counters."""
        tok = float(self._token.data[0, 0])
        if tok != self._token_value:  # a checkpoint was loaded: the row state is not its
            self._rows = None
            self._pass_state = None
            self._token_value = tok
        ps = self._pass_state
        if ps is not None and ps["pass"] == pass_:
            return ps
        n = self.info.n_samples
        rows = self._rows
        if rows is None or rows["n"] != n:
            xp, dtype = self.xp, self.modelmats[0].dtype
            rows = self._rows = {
                "n": n,
                "labels": backend.zeros((n,), np.int64, xp),
                "u": backend.empty((n,), dtype, xp),
                "lo": backend.empty((n,), dtype, xp),
                "xx": backend.empty((n,), dtype, xp),
                "bounds_pass": None,  # the pass the bounds are ready for
                "labels_pass": None,  # the pass whose start the labels belong to
                "xx_ok": False,
                "current": False,  # the labels belong to the current centres
            }
        C = self.modelmats[0].data
        pruned = bool(self.opts.bounds and at_start and rows["bounds_pass"] == pass_)
        ps = self._pass_state = {
            "pass": pass_,
            "complete": at_start,  # started at its first minibatch
            "pruned": pruned,
            "labels_ok": at_start and rows["labels_pass"] == pass_,
            "changed": 0,
            "sxx": 0.0,
            "prev": C.copy(),
            "prev_n": self.modelmats[1].data.copy(),
            "centers_set": False,
            "sums_next": None,  # the block the accumulated sums expect next
            "sums_ok": True,  # they hold every block of the pass so far
            "u_zero": False,  # updatemats hold zeros
        }
        self._res = None
        return ps

    def _lloyd_step(self, batch: Minibatch) -> float:
        X, w = self._batch_data(batch)
        m, a = batch.n, batch.start
        ps = self._prepare_pass(batch.pass_, at_start=batch.index == 0)
        rows = self._rows
        buf = self._buffers(m)
        if not ps["centers_set"]:
            self._set_centers(buf)
            ps["centers_set"] = True
        sl = slice(a, a + m)
        lab, u, lo, xx = rows["labels"][sl], rows["u"][sl], rows["lo"][sl], rows["xx"][sl]
        self._begin_sums(ps, batch)
        if not self._assign_rows(X, lab, u, lo, xx, buf, ps, m, count=True, w=w, add=True):
            self._work.add(X, lab, w)
        self._end_sums(buf, ps, batch)
        if not rows["xx_ok"]:
            ps["sxx"] += float(xx.sum(dtype=np.float64) if w is None
                               else (w * xx).sum(dtype=np.float64))
        # u bounds each row's distance from above (exact where it was computed this pass)
        far = buf["dist"][:m]
        self.xp.multiply(u, u, out=far)
        self._keep_farthest(X, lab, far, w, a)
        return self._score(far, w)

    def _begin_sums(self, ps: dict[str, Any], batch: Minibatch) -> None:
        """Get the pass's cluster sums (per-thread partials, reduced once) ready for the
        block: zeroed at the pass's first block. A pass resumed mid-way continues from the
        sums a checkpoint kept (:meth:`extra_state`); without them its sums miss blocks and
        :meth:`_lloyd_end` does not use them."""
        i = batch.index
        if i == 0:
            self._work.reset()
            ps["sums_ok"] = True
        elif ps["sums_next"] != i:
            ps["sums_ok"] = self._resume_sums(batch.pass_, i)

    def _end_sums(self, buf: dict[str, Any], ps: dict[str, Any], batch: Minibatch) -> None:
        """After the block's rows were added: the last block writes the pass's totals into
        ``updatemats``, the others zeros, so the Batch updater's sum at the pass end is the
        totals."""
        work = self._work
        ps["sums_next"] = batch.index + 1
        U, Un = self.updatemats[0].data, self.updatemats[1].data
        if batch.last:
            S, N = buf["S"], buf["N"]
            S.fill(0)
            N.fill(0)
            work.total(S, N)
            U[...] = S
            Un[:, 0] = N
            ps["u_zero"] = False
        elif not ps["u_zero"]:
            U.fill(0)
            Un.fill(0)
            ps["u_zero"] = True

    def _pass_sums_state(self) -> Mat:
        """The current pass's sums so far as one float64 matrix for a checkpoint: sums |
        weights (k rows), then a row (pass, next block, valid, token)."""
        xp = self.xp
        shape = self._pending_shape()
        k, d = self.modelmats[0].shape
        P = self._pending
        if P is None or P.shape != shape:
            P = self._pending = Mat(backend.zeros(shape, np.float64, xp))
        A = P.data
        A.fill(0)
        ps, buf = self._pass_state, self._buf
        if (ps is not None and ps["sums_ok"] and ps["sums_next"] is not None
                and self._work is not None and buf is not None):
            S, N = buf["S"], buf["N"]
            S.fill(0)
            N.fill(0)
            self._work.total(S, N)
            A[:k, :d] = S
            A[:k, d] = N
            A[k, :4] = xp.asarray([ps["pass"], ps["sums_next"], 1.0, self._token_value])
        return P

    def _pending_shape(self) -> tuple[int, int]:
        k, d = self.modelmats[0].shape
        return k + 1, max(d + 1, 4)

    def _resume_sums(self, pass_: int, index: int) -> bool:
        """Restart the accumulation from a checkpoint's sums of the blocks before ``index``
        of pass ``pass_``; False when it holds none for that point."""
        P = self._pending
        k, d = self.modelmats[0].shape
        if P is None or P.shape != self._pending_shape():
            return False
        A = P.data
        tag = [float(v) for v in backend.to_host(A[k, :4])]
        if tag != [float(pass_), float(index), 1.0, self._token_value]:
            return False
        self._work.seed(A[:k, :d], A[:k, d])
        return True

    def _fused(self, X: Any) -> bool:
        """Whether :func:`~bidlab.kern.kmeans.lloyd_block` takes these rows (dense, CPU)."""
        return (isinstance(X, np.ndarray) and X.flags.c_contiguous and self._work is not None
                and self._work.cpu)

    def _assign_rows(self, X: Any, lab: Any, u: Any, lo: Any, xx: Any, buf: dict[str, Any],
                     ps: dict[str, Any], m: int, count: bool, w: Any = None,
                     add: bool = False) -> bool:
        """Nearest centres of a block of rows: by Hamerly's test where the bounds hold,
        else for every row. With ``add``, dense CPU rows are also added to the pass's
        cluster sums in the same kernel; returns whether they were."""
        xp = self.xp
        k = self.modelmats[0].shape[0]
        CT, cc = buf["CT"], buf["cc"]
        if self._fused(X):
            pruned = bool(ps["pruned"])
            changed, cnt = lloyd_block(X, self.modelmats[0].data, cc, xx, lab, u, lo,
                                       self._work, w,
                                       xx_ready=self._rows["xx_ok"],
                                       bounds=self._pass_bounds if pruned else None, sums=add)
            if count:
                ps["changed"] += changed if pruned or ps["labels_ok"] else m
            self.distance_evaluations += cnt * k
            self._flops = 2.0 * cnt * X.shape[1] * k
            return add
        if ps["pruned"]:
            b = self._pass_bounds
            need = buf["need"]
            cnt = hamerly(lab, u, lo, b["drift"], b["s"], b["top"], b["m1"], b["m2"], need)
            if cnt:
                idx = need[:cnt]
                if backend.is_sparse(X):
                    Xg = X[idx]
                else:
                    if buf["G"] is None or buf["G"].shape[0] < buf["cap"]:
                        buf["G"] = backend.empty((buf["cap"], X.shape[1]), X.dtype, xp)
                    Xg = buf["G"][:cnt]
                    xp.take(X, idx, axis=0, out=Xg)
                D = buf["D"][:cnt]
                _cross(Xg, CT, D)
                newlab, d1, d2 = buf["lab"][:cnt], buf["d1"][:cnt], buf["d2"][:cnt]
                xxg = buf["xx"][:cnt]
                xp.take(xx, idx, out=xxg)
                assign(D, cc, xxg, newlab, d1, d2)
                if count:
                    ps["changed"] += int(xp.count_nonzero(newlab != lab[idx]))
                lab[idx] = newlab
                u[idx] = xp.sqrt(d1)
                lo[idx] = xp.sqrt(d2)
            self.distance_evaluations += cnt * k
            self._flops = 2.0 * cnt * X.shape[1] * k
            return False
        rows = self._rows
        if not rows["xx_ok"]:
            row_norms_sq(X, out=xx)
        _cross(X, CT, buf["D"][:m])
        newlab, d1, d2 = buf["lab"][:m], buf["d1"][:m], buf["d2"][:m]
        assign(buf["D"][:m], cc, xx, newlab, d1, d2)
        if count:
            ps["changed"] += int(xp.count_nonzero(newlab != lab)) if ps["labels_ok"] else m
        lab[...] = newlab
        xp.sqrt(d1, out=u)
        xp.sqrt(d2, out=lo)
        self.distance_evaluations += m * k
        self._flops = 2.0 * (X.nnz if backend.is_sparse(X) else m * X.shape[1]) * k
        return False

    def _keep_farthest(self, X: Any, lab: Any, dist: Any, w: Any, start: int) -> None:
        """Keep the pass's farthest rows (their data too): an empty cluster takes one.

        Only the block's rows beyond the nearest kept one are ranked (after the first
        block, a handful)."""
        xp = self.xp
        res = self._res
        R = min(_RESERVOIR, self.modelmats[0].shape[0])
        floor = -math.inf if res is None or res["d"].shape[0] < R else float(res["d"].min())
        cand = xp.flatnonzero(dist > floor)
        if w is not None:
            cand = cand[w[cand] > 0]
        n_c = int(cand.shape[0])
        if n_c == 0:
            return
        score = dist[cand].astype(np.float64)
        take = min(R, n_c)
        if take < n_c:
            top = xp.argpartition(-score, take - 1)[:take]
            cand, score = cand[top], score[top]
        new = {"d": score, "row": cand + start, "lab": lab[cand],
               "w": (xp.ones(take, np.float64) if w is None
                     else w[cand].astype(np.float64)),
               "x": _dense_rows(X, cand).astype(np.float64)}
        if res is not None:
            new = {key: xp.concatenate([res[key], new[key]]) for key in new}
        if new["d"].shape[0] > R:
            keep = xp.argpartition(-new["d"], R - 1)[:R]
            new = {key: v[keep] for key, v in new.items()}
        self._res = new

    def _lloyd_end(self, pass_: int) -> None:
        ps = self._pass_state
        if ps is None or ps["pass"] != pass_:
            return
        xp = self.xp
        S, Nm = self.modelmats[0].data, self.modelmats[1].data  # the pass's totals
        N = Nm[:, 0]
        prev = ps["prev"]
        rows = self._rows
        if not ps["sums_ok"]:  # they miss blocks: keep the centres, the next pass redoes it
            S[...] = prev
            Nm[...] = ps["prev_n"]
            rows["labels_pass"] = rows["bounds_pass"] = None
            rows["current"] = False
            self._bump_token()
            return
        if ps["complete"]:
            rows["xx_ok"] = True
            if getattr(self, "_tol_abs", None) is None:
                W = float(N.sum(dtype=np.float64))
                mean = S.sum(axis=0, dtype=np.float64) / max(W, 1e-300)
                var = (ps["sxx"] / max(W, 1e-300) - float((mean * mean).sum())) / S.shape[1]
                self._tol_abs = max(var, 0.0) * self.opts.tol
        ps["changed"] += self._reseed_empty(S, N)
        if ps["complete"] and ps["labels_ok"] and ps["changed"] == 0:
            # nothing moved: the centres are those of the pass's start, its labels final
            S[...] = prev
            self.converged = True
            rows["labels_pass"] = pass_ + 1
            rows["bounds_pass"] = None
            rows["current"] = True
            self._bump_token()
            return
        empty = N <= 0
        xp.divide(S, xp.where(empty, 1, N)[:, None], out=S)
        if bool(empty.any()):
            S[empty] = prev[empty]
        diff = S.astype(np.float64) - prev
        drift = xp.sqrt((diff * diff).sum(axis=1))
        shift = float((drift * drift).sum())
        self.n_updates += 1
        tol_abs = getattr(self, "_tol_abs", None)
        if tol_abs is not None and shift <= tol_abs:
            self.converged = True
        rows["labels_pass"] = pass_ + 1 if ps["complete"] else None
        rows["bounds_pass"] = pass_ + 1 if ps["complete"] else None
        self._pass_bounds = self._bounds_for(S, drift.astype(S.dtype))
        rows["current"] = False
        self._bump_token()

    def _bump_token(self) -> None:
        self._token_value += 1.0
        self._token.data[0, 0] = self._token_value

    def _bounds_for(self, C: Any, drift: Any) -> dict[str, Any]:
        """Hamerly's per-pass quantities for the new centres ``C`` that moved by ``drift``."""
        xp = self.xp
        k = C.shape[0]
        if k > 1:
            top = xp.argsort(-drift)[:2]
            t0, m1, m2 = int(top[0]), float(drift[top[0]]), float(drift[top[1]])
            if xp is np:
                with one_blas_thread():  # no BLAS threads left spinning for the next pass
                    cd = sq_distances(C, C)
            else:
                cd = sq_distances(C, C)
            cd[xp.arange(k), xp.arange(k)] = xp.inf
            s = (0.5 * xp.sqrt(cd.min(axis=1))).astype(C.dtype)
        else:
            t0, m1, m2 = 0, 0.0, 0.0
            s = xp.full((1,), xp.inf, dtype=C.dtype)
        return {"drift": drift, "s": s, "top": t0, "m1": m1, "m2": m2}

    def _reseed_empty(self, S: Any, N: Any) -> int:
        """An empty cluster takes the farthest kept row whose own cluster can spare it;
        returns how many clusters were re-seeded."""
        xp = self.xp
        empty = xp.flatnonzero(N <= 0)
        res = self._res
        if int(empty.shape[0]) == 0 or res is None:
            return 0
        order = np.argsort(-np.asarray(backend.to_host(res["d"])), kind="stable").tolist()
        rows = self._rows
        taken = moved = 0
        for j in backend.to_host(empty).tolist():
            while taken < len(order):
                q = order[taken]
                taken += 1
                old, wq = int(res["lab"][q]), float(res["w"][q])
                if float(N[old]) > wq:
                    break
            else:
                break
            x = res["x"][q]
            S[old] -= (wq * x).astype(S.dtype)
            N[old] -= wq
            S[j] = (wq * x).astype(S.dtype)
            N[j] = wq
            r = int(res["row"][q])
            rows["labels"][r] = j
            rows["u"][r] = 0  # it is its centre now
            rows["lo"][r] = 0  # and its old centre may be the nearest other
            moved += 1
        return moved

    # -- after training -------------------------------------------------------------------
    def label_pass(self, source: DataSource) -> tuple[Any, float]:
        """Labels of every row of one pass of ``source`` (unshuffled) and the inertia.

        After a Lloyd run this is the final assignment to the final centres, pruned by the
        bounds as in training (nothing to assign when the labels stopped changing);
        otherwise every distance is computed. The inertia is measured directly.
        """
        n = source.n_samples
        C = self.modelmats[0].data
        xp = self.xp
        rows = self._rows
        own = (self.opts.algorithm == "lloyd" and rows is not None and rows["n"] == n
               and rows["xx_ok"])
        labels = rows["labels"] if own else backend.empty((n,), np.int64, xp)
        ps = {"pruned": own and self.opts.bounds and rows["bounds_pass"] is not None,
              "labels_ok": True, "changed": 0}
        total = 0.0
        source.seek(0, 0)
        for _ in range(source.batches_per_pass):
            batch = source.next()
            X, w = self._batch_data(batch)
            m, a = batch.n, batch.start
            sl = slice(a, a + m)
            buf = self._buffers(m)
            if own and not rows["current"]:
                self._set_centers(buf)
                self._assign_rows(X, labels[sl], rows["u"][sl], rows["lo"][sl],
                                  rows["xx"][sl], buf, ps, m, count=False)
            elif not own:
                self._set_centers(buf)
                self._nearest_rows(X, labels[sl], buf, m)
            dist = buf["dist"][:m]
            assigned_sq_dist(X, labels[sl], C, dist)
            total += float(dist.sum(dtype=np.float64) if w is None
                           else (w * dist).sum(dtype=np.float64))
        return labels.copy(), total
