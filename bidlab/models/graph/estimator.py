"""``PageRank``: PageRank by power iteration, a sparse mat-vec per pass on the Learner (by
Gauss-Seidel sweeps on small graphs).

A scikit-learn-style face on one engine, :class:`~bidlab.models.graph.model.PageRankModel`:
``fit(G)`` builds the transition once and runs a :class:`bidlab.learn.Learner` to
convergence in the calling thread; ``learner(G)`` hands out a live learner (pause, resume,
one residual per iteration in its history) on the same kind of model::

    from bidlab.datasets.graphs import load_snap_edges
    from bidlab.models import PageRank
    g = load_snap_edges("wiki-Vote.txt")
    pr = PageRank(damping=0.85, tol=1e-8).fit(g.A)
    pr.scores_, pr.n_iter_, pr.residuals_, pr.top(10, labels=g.ids)

Input: the adjacency matrix, rows = source vertices (``A[i, j]``: weight of ``i -> j``), as
a scipy / CuPy CSR matrix (taken as is), another sparse format or a dense array
(converted), a bidlab ``SMat`` or a :class:`bidlab.datasets.graphs.EdgeList`. Results match
``networkx.pagerank``: with ``method="power"`` the same update and stopping rule; by
Gauss-Seidel sweeps (the default on small graphs) the same scores within the same error
bound, in fewer iterations.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from bidlab import backend
from bidlab.learn import Learner, Option
from bidlab.learn.blocks import BlockSource
from bidlab.learn.comm import shard_range
from bidlab.learn.model import register_model
from bidlab.models.base import BidlabEstimator, FittedByModel
from bidlab.models.graph.model import PageRankModel
from bidlab.models.graph.transition import as_adjacency, transition, vertex_weights
from bidlab.models.saved_state import PageRankSaved
from bidlab.models.sk_params import N_JOBS, VERBOSE
from bidlab.models.validation import device_row, dtype_row

__all__ = ["GAUSS_SEIDEL_EDGES", "POWER_DAMPING", "PageRank", "sweeps"]

#: ``fit``'s learner (nobody watches it) runs iterations of the in-edge engine in passes
#: of at least this many seconds: the learner's own cost per pass (bookkeeping, checks,
#: the record) then stays a few percent of a small graph's time (BENCHMARKS.md, pagerank)
FIT_PASS_SECONDS = 0.002
#: ``method="auto"`` sweeps by Gauss-Seidel (serial, fewer iterations) a graph of at most
#: this many edges and runs the parallel power iteration on larger ones (BENCHMARKS.md,
#: pagerank)
GAUSS_SEIDEL_EDGES = 1_000_000
#: ``method="auto"`` runs the power iteration at a damping of at most this, whatever the
#: graph: each iteration shrinks the error by the damping, and sweeps then gain nothing.
#: Iterations (power / sweeps) to tol on the SNAP graphs ca-GrQc, email-Eu-core and
#: wiki-Vote, directed and undirected, tol 1e-4..1e-10: at damping 0.01 power 1-3 against
#: sweeps 2-9; at 0.1, power 1-6 against 2-9 (never more); at 0.2, power 8 against 7 on
#: ca-GrQc at tol 1e-10, at 0.3 power 6 against 5 at the default tol; at 0.85, 10-43
#: against 8-19. Time per fit at the default tol (one core) followed the iterations.
POWER_DAMPING = 0.1
METHODS = ("auto", "power", "gauss-seidel")


def sweeps(method: str, n_edges: int, damping: float = 0.85) -> bool:
    """Whether ``method`` ranks a graph of ``n_edges`` edges at ``damping`` by Gauss-Seidel
    sweeps (on the in-edge engine) rather than power iterations: the one place that
    chooses ("auto": sweeps up to :data:`GAUSS_SEIDEL_EDGES` edges, above a damping of
    :data:`POWER_DAMPING`).

    Examples
    --------
    >>> sweeps("auto", 30_000), sweeps("auto", 20_000_000), sweeps("power", 10)
    (True, False, False)
    >>> sweeps("auto", 30_000, damping=0.01)
    False
    """
    return method == "gauss-seidel" or (method == "auto" and n_edges <= GAUSS_SEIDEL_EDGES
                                        and damping > POWER_DAMPING)


def _valid_weights(x: Any) -> bool:
    return isinstance(x, dict) or len(np.shape(x)) == 1


class PageRank(PageRankSaved, FittedByModel, BidlabEstimator):
    """PageRank of a graph's vertices: networkx's power iteration, or Gauss-Seidel sweeps.

    Parameters
    ----------
    damping
        probability of following an out-edge at each step (networkx's ``alpha``),
        in (0, 1); the rest teleports by ``personalization``.
    tol
        stop when an iteration changes the scores by less than ``tol * n`` in L1 norm
        (networkx's rule). The default, 1e-8, is tighter than networkx's 1e-6: at 1e-6
        only 24 of ca-GrQc's top 100 vertices were in their exact places (81 on
        wiki-Vote), at 1e-8 98 (100), for about a millisecond more.
    max_iter
        most iterations; if the change is still above the tolerance then, the
        scores are kept and a ``ConvergenceWarning`` says so (networkx raises).
    method
        ``"power"``: networkx's power iteration, iteration for iteration;
        ``"gauss-seidel"``: in-place Gauss-Seidel sweeps (serial; fewer iterations to
        the same tolerance), stopped where the result is within the power iteration's
        error bound (module :mod:`bidlab.models.graph.model`); the whole graph on the CPU
        only; ``"auto"`` (default): Gauss-Seidel on graphs of at most
        :data:`GAUSS_SEIDEL_EDGES` edges ranked whole on the CPU at a damping above
        :data:`POWER_DAMPING`, the power iteration otherwise.
    personalization
        teleport weights, one per vertex (a length-n array) or a dict
        {vertex index: weight} (missing vertices weigh 0); normalised to sum 1. None:
        uniform.
    dangling
        where the score of a vertex without out-edges goes, in the same form;
        None: by ``personalization`` (networkx's default).
    directed
        False reads every stored edge as undirected: the graph is
        ``maximum(A, A.T)`` (an edge stored in one direction or both is one edge).
    dtype
        float32 or float64 (default: float64; float32 cannot reach a tolerance
        much below 1e-7 per vertex).
    device
        ``"cpu"`` or ``"gpu"``; None (default): where the graph lives.
    verbose
        progress on stderr while fitting: 0 none, 1 a bar, 2 a line per iteration.
    n_jobs
        CPU threads of the kernels (None: leave the limits alone; -1: every core).

    Notes
    -----

    Edges: duplicate entries of a sparse matrix (a COO or non-canonical CSR input, an edge
    listed twice) are summed into one edge of their total weight; a self-loop ``A[i, i]``
    is kept as an edge like any other (networkx keeps them too); weights must be >= 0; a
    vertex whose out-weights sum to 0 is dangling.

    Learned: ``scores_`` (n,) summing to 1, ``n_iter_`` (iterations run),
    ``residuals_`` (the L1 change of each iteration), ``converged_`` (whether the
    tolerance was reached), ``model_`` (the
    :class:`~bidlab.models.graph.model.PageRankModel`), ``ids_`` (the original id of each
    vertex, ``scores_[i]`` being vertex ``ids_[i]``'s score, when the graph was an
    :class:`~bidlab.datasets.graphs.EdgeList` or ``bidlab train`` read it from an edge
    list; else None). They are saved with the estimator; ``top()`` names vertices by them.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from bidlab.models import PageRank
    >>> A = sp.csr_matrix(([1.0, 1.0, 1.0], ([0, 1, 2], [1, 2, 0])), shape=(3, 3))  # a cycle
    >>> pr = PageRank().fit(A)
    >>> [round(float(s), 3) for s in pr.scores_]
    [0.333, 0.333, 0.333]
    """

    ROWS_ARE_SAMPLES = False  # rows are vertices
    PARAMS = (
        Option("damping", float, 0.85, "probability of following an edge", low=0.0, high=1.0,
               low_open=True, high_open=True),
        Option("tol", float, 1e-8, "converged when the L1 change is below tol x n", low=0.0),
        Option("max_iter", int, 100, "most iterations", low=1),
        Option("method", str, "auto", "power iterations or Gauss-Seidel sweeps",
               choices=METHODS),
        Option("personalization", str, None, "teleport weights", test=_valid_weights,
               none_ok=True, text="None, a length-n array or a dict {vertex index: weight}"),
        Option("dangling", str, None, "where dangling vertices' score goes",
               test=_valid_weights, none_ok=True,
               text="None, a length-n array or a dict {vertex index: weight}"),
        Option("directed", bool, True, "False: every stored edge is undirected"),
        dtype_row("scores", text="None (float64), float32 or float64"),
        device_row(None),
        VERBOSE,
        N_JOBS,
    )

    method = "auto"  # (what an estimator saved before the parameter reads)
    ids_: np.ndarray | None = None  # (fitted: see the class doc)
    verbose = 0
    n_jobs = None

    @classmethod
    def check_loaded(cls, state: dict[str, Any]) -> None:
        """A loaded estimator's ``ids_`` (:mod:`bidlab.learn.persist_check`): None, or an
        array of vertex ids as :meth:`fit` keeps them (integers, finite floats or text);
        a crafted or corrupt file could hold NaN, booleans, a list of anything or objects,
        which ``top()`` would hand out as vertex names; then the model's rules
        (:class:`~bidlab.models.saved_state.PageRankSaved`)."""
        super().check_loaded(state)
        ids = state.get("ids_")
        if ids is None:
            return
        why = _ids_problem(ids)
        if why is not None:
            exc = ValueError(f"{why}, where a fitted PageRank's ids_ is None or an array of "
                             "the vertices' ids (integers, finite numbers or strings); the "
                             "file is corrupt: fit the graph and save the model again")
            exc.field = "ids_"  # type: ignore[attr-defined]
            raise exc

    def __init__(self, damping: float = 0.85, tol: float = 1e-8, max_iter: int = 100,
                 personalization: Any = None, dangling: Any = None, *,
                 method: str = "auto", directed: bool = True, dtype: Any = None,
                 device: str | None = None, verbose: int = 0,
                 n_jobs: int | None = None) -> None:
        self._keep_params(locals())

    # -- fitted state ---------------------------------------------------------------------
    @property
    def scores_(self) -> np.ndarray:
        """The PageRank of each vertex (n,), summing to 1 (a host copy). Gauss-Seidel
        sweeps leave the total free until the run ends (the model's doc): the scores of
        a learner stopped or paused before that (or one that loaded a checkpoint of such
        a run, before its first pass) are scaled here."""
        check_is_fitted(self)
        model = self.model_
        s = np.array(backend.to_host(model.modelmats[0].data), dtype=np.float64,
                     copy=True).reshape(-1)
        if getattr(model, "gauss_seidel", False) and not model.converged:
            total = float(s.sum())
            if total > 0:
                s /= total
        return s

    @property
    def n_iter_(self) -> int:
        check_is_fitted(self)
        return int(self.model_.n_iter)

    @property
    def residuals_(self) -> np.ndarray:
        """The L1 change of each iteration run (``n_iter_`` values)."""
        check_is_fitted(self)
        return self.model_.residuals[: self.model_.n_iter].copy()

    @property
    def converged_(self) -> bool:
        check_is_fitted(self)
        return bool(self.model_.reached_tol)

    def top(self, n: int = 10, labels: Any = None) -> list[tuple[Any, float]]:
        """The ``n`` highest-ranked vertices, best first, as ``(vertex, score)`` pairs;
        ``labels[i]`` names vertex ``i`` (e.g. ``EdgeList.ids``); None: ``ids_`` when the
        graph came with ids (an ``EdgeList``), else each vertex's index."""
        s = self.scores_
        if labels is None:
            labels = self.ids_
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"top(n): n must be an int >= 0; got {n!r}")
        if labels is not None and len(labels) != s.shape[0]:
            raise ValueError(f"top: labels has {len(labels)} entries but the graph has "
                             f"{s.shape[0]} vertices: give one label per vertex")
        order = np.argsort(-s, kind="stable")[: int(n)]
        names = [labels[i] for i in order] if labels is not None else [int(i) for i in order]
        names = [v.item() if isinstance(v, np.generic) else v for v in names]
        return list(zip(names, (float(s[i]) for i in order), strict=True))

    # -- training -------------------------------------------------------------------------
    def _learner(self, G: Any, first_row: int | None, options: dict[str, Any],
                 live: bool = False) -> Learner:
        self._validate_params()
        dtype = np.dtype(self.dtype or np.float64)
        comm = options.get("comm")
        ranked = first_row is None and comm is not None and int(comm.size) > 1
        A = as_adjacency(G, dtype, square=first_row is None and not ranked,
                         directed=self.directed, device=self.device)
        n = int(A.shape[1])
        if ranked:
            first_row = _rank_first_row(int(A.shape[0]), n, comm)
        first = 0 if first_row is None else int(first_row)
        if first < 0 or first + A.shape[0] > n:
            raise ValueError(f"PageRank: first_row={first_row} puts the block's {A.shape[0]} "
                             f"rows outside the graph's {n} vertices")
        if A.shape[0] < n and (comm is None or int(comm.size) < 2):
            raise ValueError(f"PageRank: a block of {A.shape[0]} rows of a graph of {n} "
                             "vertices needs the ranks holding the other rows (comm=): "
                             "alone, the other vertices' out-edges are missing and the "
                             "scores leak away; give the whole graph, or each rank its "
                             "block with comm=")
        p = vertex_weights(self.personalization, n, "personalization")
        u = vertex_weights(self.dangling, n, "dangling")
        batch = options.pop("batch_size", None) or A.shape[0]
        pull = (first_row is None and options.get("comm") is None and batch >= n
                and not backend.is_cupy_array(A.data))
        if self.method == "gauss-seidel" and not pull:
            raise ValueError("PageRank: method='gauss-seidel' ranks the whole graph in one "
                             "block on the CPU; for a GPU graph, blocks of rows or ranks "
                             "use method='power' (or 'auto')")
        model = PageRankModel(n, first_row=first, personalization=p, dangling=u, pull=pull,
                              gauss_seidel=pull and sweeps(self.method, int(A.nnz),
                                                            float(self.damping)),
                              pass_seconds=0.0 if live else FIT_PASS_SECONDS,
                              damping=self.damping, tol=self.tol, max_iter=self.max_iter)
        if pull:  # the in-edge engine: A itself, its in-edges and out-weights built at the
            src = BlockSource(A, batch_size=batch, names=("A",))  # first pass
        else:
            P, rows = transition(A)
            src = BlockSource(P, rows, batch_size=batch, names=("P", "rows"))
        options.setdefault("n_passes", min(int(self.max_iter) + 1, _MOST_PASSES))
        lrn = self._build_learner(model, src, live=live, **options)
        self.model_ = model
        self.n_features_in_ = n
        ids = getattr(G, "ids", None)  # an EdgeList's original vertex ids
        self.ids_ = None if ids is None or len(ids) != n else _kept_ids(np.asarray(ids))
        return lrn

    def fit(self, G: Any, y: Any = None) -> PageRank:
        """Rank the vertices of ``G`` (n x n adjacency, rows = source vertices); ``y`` is
        ignored."""
        lrn = self._learner(G, None, {})
        with self._threads():
            lrn.fit(progress=self._progress())
        if not self.model_.reached_tol:
            warnings.warn(f"PageRank {self.model_.stop_text()}", ConvergenceWarning,
                          stacklevel=2)
        return self

    def learner(self, G: Any, y: Any = None, *, first_row: int | None = None,
                **options: Any) -> Learner:
        """A live :class:`bidlab.learn.Learner` ranking ``G``'s vertices; its model becomes
        this estimator's model (``scores_`` follows the training).

        ``first_row``: ``G`` holds only rows ``first_row..first_row + m`` of an n x n graph
        (an m x n block; with ``comm=``, each rank its own block: without ``first_row``,
        the rank's contiguous share, as ``bidlab.distributed.shard`` cuts it). ``options``: learner
        options (``n_passes``, default ``max_iter + 1``: the last pass only measures the
        last change; ``batch_size``, default all rows; ``comm``; ``checkpoint``; ...).
        """
        return self._learner(G, first_row, dict(options), live=True)


#: the learner's most passes: a larger max_iter (set high "to be safe") still stops on tol
_MOST_PASSES = next(o.high for o in Learner.OPTIONS if o.name == "n_passes")


def _kept_ids(ids: np.ndarray) -> np.ndarray | None:
    """A graph's vertex ids as ``ids_``, or None with a warning when they are not what a
    saved model can hold (:func:`_ids_problem`): a model saved with them would not load."""
    why = "a 2-D array" if ids.ndim != 1 else _ids_problem(ids)
    if why is None:
        return ids
    warnings.warn(f"PageRank: the graph's ids are {why}; ids_ is None (scores_ and top() "
                  "go by vertex index): give ids as integers, finite numbers or strings",
                  stacklevel=4)
    return None


def _ids_problem(ids: Any) -> str | None:
    """What is wrong with ``ids`` as a loaded ``ids_`` (see ``PageRank.check_loaded``), or
    None when it is an array of integers, finite floats or strings."""
    if not isinstance(ids, np.ndarray):
        return f"a {type(ids).__name__}"
    kind = ids.dtype.kind
    if kind in "iuU":
        return None
    if kind == "f":
        return None if np.isfinite(ids).all() else "an array holding NaN or infinity"
    if kind == "O":
        odd = next((v for v in ids.reshape(-1) if not isinstance(v, str)), None)
        return None if odd is None else f"an object array holding a {type(odd).__name__}"
    return f"an array of dtype {ids.dtype}"


def _rank_first_row(m: int, n: int, comm: Any) -> int:
    """The first row of this rank's block when each rank holds its contiguous share of the
    n rows (``bidlab.distributed.shard``'s split, which ``bidlab train --ranks`` and the
    notebook's ranked learners use); a block of another size needs ``first_row``."""
    a, b = shard_range(n, int(comm.rank), int(comm.size))
    if m != b - a:
        raise ValueError(f"PageRank: rank {comm.rank} of {comm.size} holds {m} rows of a "
                         f"graph of {n} vertices, not its contiguous share (rows {a}..{b}): "
                         "give each rank its own rows (bidlab.distributed.shard(comm, A)), "
                         "or pass first_row=, the global index of the block's first row")
    return a


register_model("pagerank", PageRank)
