"""The engine shared by the LDA models: :class:`LDACore` (a :class:`bidlab.learn.Model`).

Online training blends each minibatch's full-data estimate into the topics with the spine's
incremental updater, :class:`bidlab.learn.IncNorm` (Hoffman's step
``rho_t = (tau0 + t)^-kappa``, a short minibatch taking its share of a step).

:class:`~bidlab.models.lda.LDAModel` (variational Bayes) and
:class:`~bidlab.models.lda.gibbs_model.LDAGibbsModel` (SAME Gibbs) subclass :class:`LDACore`,
which owns what both need around one minibatch step:

* **fixed-shape minibatches**: each minibatch is copied into one ``batch_rows``-row
  ``SMat`` padded with empty documents, so every cached container keeps its shape and,
  once the buffers have grown to the largest minibatch, a step allocates nothing;
* **warm starts**: with ``warm_docs`` and several passes over the same documents, each
  document's topic weights are kept between passes (a documents x k matrix) and later
  passes take ``e_iters_warm`` iterations;
* **initial topics** from a light spherical k-means of the leading documents
  (:func:`~bidlab.models.lda.seeding.seed_topics`), or scikit-learn's Gamma(100, 0.01) start;
* the public read side: :meth:`LDACore.topicsT`, :meth:`LDACore.components`,
  :meth:`LDACore.transform` (the variational E-step with the topics fixed) and
  :meth:`LDACore.heldout_score` (document completion).

Call :meth:`LDACore.prepare` with the documents before a learner trains the model: it
hands over the leading documents for the initialisation and says whether the passes
revisit the same documents (warm starts). Without it the model starts from the random
topics and counts the stream's documents from the data source.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

import bidlab as bl
from bidlab import backend
from bidlab.learn import IncNorm, Model, Option, Updater
from bidlab.learn.option_upgrade import rebuild_options
from bidlab.learn.persistable import alias
from bidlab.learn.rowstate import RowState
from bidlab.learn.staging import Minibatch
from bidlab.mat.sparse import csr_view
from bidlab.models.lda import common
from bidlab.models.lda.doc_start import doc_start
from bidlab.models.lda.seeding import seed_topics

__all__ = ["LDACore", "seed_topics", "OLD_OPTION_NAMES"]

# -- the option rows shared by the models (live options) and the estimators (parameters) --
N_COMPONENTS = Option("n_components", int, 10, "number of topics", low=1, live=False)
ALPHA = Option("alpha", float, 0.1, "symmetric Dirichlet prior on documents' topic "
               "proportions", low=0.0, low_open=True)
BETA = Option("beta", float, 0.01, "symmetric Dirichlet prior on topics' word probabilities",
              low=0.0, low_open=True)
E_ITERS = Option("e_iters", int, 5, "E-step iterations (Gibbs: sampling sweeps) per minibatch",
                 low=1)
E_ITERS_WARM = Option("e_iters_warm", int, 3, "E-step iterations once warm-started (None: "
                      "e_iters)", low=1, none_ok=True)
TOTAL_DOCS = Option("total_docs", int, None, "documents in the whole stream (None: those of "
                    "the data)", low=1, none_ok=True, live=False)
WARM_DOCS = Option("warm_docs", bool, True, "start each document's E-step from its values "
                    "of the previous pass", live=False)
INIT = Option("init", str, "kmeans", "initial topics: k-means of the leading documents, or "
              "random", choices=("random", "kmeans"), live=False)
RANDOM_STATE = Option("random_state", int, 0, "seed of the initialisation (and the sampler)",
                      low=0, none_ok=True, live=False)
TRAIN_SCORE = Option("train_score", bool, True, "score each training minibatch (one more "
                     "SDDMM per minibatch)")
#: the delay of the online step's schedule a model takes by default (rho_t = (tau0 + t)^-kappa)
DEFAULT_TAU0 = 1.0

#: files written when LDA had its own step updater name it RhoStep: they load as IncNorm
RhoStep = IncNorm
for _old in ("bidlab.models.lda.core.RhoStep", "bidlab.models._lda_core.RhoStep"):
    alias(_old, IncNorm)

_TRANSIENT = ("_scratch", "_store", "_head", "_learner_ref", "_cur", "_comm", "l1_prox")
#: option names of files written by earlier versions -> today's names
OLD_OPTION_NAMES = {"k": "n_components", "warm_start": "warm_docs"}


def _renamed_options(component: Any) -> None:
    """Rebuild a loaded component's options written under :data:`OLD_OPTION_NAMES`."""
    if any(name in component.opts for name in OLD_OPTION_NAMES):
        rebuild_options(component, OLD_OPTION_NAMES)


class LDACore(Model):
    """What the LDA models share; subclasses implement the step (see the module doc).

    Parameters
    ----------
    dtype
        float32 or float64, the model's arithmetic.
    **options
        the options below (``n_components``, ``alpha``, ...), also settable on a learner.

    Attributes
    ----------
    n_batches
        training minibatches so far (t of the step-size schedule).
    n_docs_seen
        documents trained on so far.
    n_passes_done
        passes finished so far.
    step_weight
        documents / batch rows of the last minibatch (a short minibatch's
        share of :class:`~bidlab.learn.IncNorm`'s step).
    """

    score_name = "ll/word"
    OPTIONS = (N_COMPONENTS, ALPHA, BETA, E_ITERS, E_ITERS_WARM, TOTAL_DOCS, WARM_DOCS, INIT,
               RANDOM_STATE, TRAIN_SCORE)
    kmeans_tokens = 30.0  # pseudo-tokens of its k-means cluster in an initial topic
    #: the stored vocabulary x k matrices of LDAModel and LDAGibbsModel (modelmats are
    #: views of them, made on load): float32 / float64 and of these shapes once loaded
    FLOAT_STATE = ("lamT", "ebT", "upd", "NT", "phiT", "temp", "phi_hat")
    STATE_SHAPES = {name: ("vocab_size", "opts.n_components") for name in FLOAT_STATE}

    def __init__(self, *, dtype: Any = np.float32, **options: Any) -> None:
        super().__init__(**options)
        self.dtype = np.dtype(dtype)
        self.n_batches = 0
        self.n_docs_seen = 0
        self.n_passes_done = 0
        self.step_weight = 1.0
        self.total_docs: int | None = None  # the stream's documents, once known
        self.vocab_size: int | None = None
        self.batch_rows = 0
        self.seed = 0
        self._plan_passes: int | None = None
        self._head: Any = None
        self._head_tokens: float | None = None
        self._store_rows = 0
        self._store: RowState | None = None  # each document's topic weights, by row id
        self._warm = False  # the current minibatch started from its documents' last values
        self._cur: Minibatch | None = None
        self._scratch: dict[str, Any] | None = None

    # -- pickling: scratch is rebuilt on demand ------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in _TRANSIENT}
        state["_warm"] = False
        # the model matrices are views of the stored ones: rebuilt by link()
        state["modelmats"], state["updatemats"] = [], []
        return backend.portable_state(state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state.pop("_store_ready", None)  # files from before per-row state keep these two
        state.pop("_lo", None)
        self.__dict__.update(backend.restore_state(state))
        self.__dict__.setdefault("_warm", False)
        for name in _TRANSIENT:
            self.__dict__.setdefault(name, None)
        if "opts" in self.__dict__:
            _renamed_options(self)
        # files written before the starts were drawn per document kept a B x k block
        initialised = self.__dict__.pop("_doc_init", None) is not None
        if self.vocab_size is not None and (initialised or "alpha_m" in self.__dict__):
            self.link()
            self.xp = self.modelmats[0].xp
            self.device = "cpu" if self.xp is np else "gpu"

    # -- before training -----------------------------------------------------------------
    def seed_docs(self) -> int:
        """How many leading documents the k-means initialisation looks at (8 per topic,
        between 256 and 1024)."""
        return min(1024, max(256, 8 * int(self.opts.n_components)))

    def prepare(self, X: Any, n_passes: int, warm: bool = True) -> None:
        """Get ready to train on the documents x vocabulary counts ``X`` (canonical CSR).

        Before the first training: keeps the leading documents for the initialisation,
        takes ``total_docs`` from ``X`` unless set and plans ``n_passes`` passes (Gibbs
        annealing). Always: with ``warm`` (the passes revisit these same documents in
        order) and ``warm_docs`` and ``n_passes > 1``, documents are warm-started from
        their previous pass.
        """
        n = int(X.shape[0])
        if not self.initialised:
            head = X[: min(n, self.seed_docs())]
            self._head = sp.csr_matrix(backend.to_host(head), dtype=np.float64)
            self._head_tokens = float(self._head.sum()) / max(int(self._head.shape[0]), 1)
            self._plan_passes = int(n_passes)
            if self.total_docs is None:
                self.total_docs = int(self.opts.total_docs or max(n, 1))
        self._store = None
        self._warm = False
        self._store_rows = n if warm and self.opts.warm_docs and n_passes > 1 else 0

    # -- Model -----------------------------------------------------------------------------
    def default_updater(self, **options: Any) -> Updater:
        """:class:`~bidlab.learn.IncNorm` (``options``: its options, e.g. ``tau0``,
        ``kappa``; ``tau0`` defaults to :data:`DEFAULT_TAU0`)."""
        return IncNorm(**{"tau0": DEFAULT_TAU0, **options})

    def init(self, info: Any) -> None:
        o = self.opts
        k, V, B = int(o.n_components), int(info.n_features), int(info.batch_size)
        self.device = info.device
        self.xp = np if info.device == "cpu" else backend.cupy()
        self.vocab_size, self.batch_rows = V, B
        if self.total_docs is None:
            self.total_docs = int(o.total_docs or info.n_samples or B)
        if self._plan_passes is None:
            self._plan_passes = int(o.n_passes) if "n_passes" in o else 1
        self.seed = (int(o.random_state) if o.random_state is not None
                     else int(np.random.SeedSequence().entropy % (2**31)))
        # each document's E-step starts from its own random point, drawn from the
        # document (bidlab.models.lda.doc_start), so nothing drawn here depends on B
        rng = np.random.default_rng(self.seed)
        if o.init == "kmeans" and self._head is not None and self._head.shape[1] == V:
            seedT = seed_topics(self._head, k, rng, self.kmeans_tokens)
        else:  # Hoffman's / scikit-learn's Gamma(100, 0.01), as probabilities
            seedT = rng.gamma(100.0, 0.01, size=(V, k))
            seedT /= seedT.sum(axis=0, keepdims=True)
        self._head = None
        # built again (a checkpoint of another k): the scratch and the documents' kept
        # topic weights are made anew for this k when first used
        self._scratch = self._store = None
        self.alpha_m = bl.scalar(o.alpha, self.dtype, self.device)
        self.beta_m = bl.scalar(o.beta, self.dtype, self.device)
        self.allocate(seedT)

    def allocate(self, seedT: np.ndarray) -> None:
        """Make the model's matrices from the initial topics (vocabulary x k)."""
        raise NotImplementedError

    def link(self) -> None:
        """Set ``modelmats`` / ``updatemats``: topics x vocabulary views of the stored
        vocabulary x k matrices (so observers see topics as rows)."""
        raise NotImplementedError

    def apply_changes(self, changes: dict[str, Any]) -> None:
        super().apply_changes(changes)
        if not self.initialised:
            return
        if "alpha" in changes:
            self.alpha_m.set(float(changes["alpha"]))
        if "beta" in changes:
            self.beta_m.set(float(changes["beta"]))

    def start_pass(self, pass_: int) -> None:
        del pass_

    def end_pass(self, pass_: int) -> None:
        self.n_passes_done += 1

    def flops(self, batch: Minibatch) -> float:
        x = batch.mats[0]
        return self.sweep_flops() * float(self.opts.n_components) * float(x.nnz)

    def sweep_flops(self) -> float:
        """Flops per topic and nonzero of one training minibatch."""
        return 0.0

    def evaluate(self, batch: Minibatch) -> Any:
        """Per-word log-likelihood of a held-out minibatch, its documents' proportions
        fitted by ``e_iters`` variational E-steps with the topics fixed."""
        self.sync()
        sb = self.rows(batch)
        s = self.scratch()
        gamma, et = s["ev_gamma"], s["ev_et"]
        et <<= 1.0
        common.estep(sb, self.topicsT(), et, gamma, self.alpha_m, int(self.opts.e_iters))
        return self.score_with(sb, gamma)

    # -- the read side ---------------------------------------------------------------------
    def sync(self) -> None:
        """Bring derived quantities up to date after the model matrices moved."""

    def refresh(self) -> None:
        """Recompute everything derived from the model matrices (after they were written
        from outside, e.g. a checkpoint loaded into them)."""
        self.sync()

    def topicsT(self) -> bl.Mat:
        """The normalised topics, vocabulary x k (columns sum to 1), on the model's device."""
        raise NotImplementedError

    def components(self) -> np.ndarray:
        """The topics, k x vocabulary host float64, each row summing to 1."""
        phiT = np.asarray(backend.to_host(self.topicsT().data), dtype=np.float64)
        comp = np.ascontiguousarray(phiT.T)
        comp /= comp.sum(axis=1, keepdims=True)
        return comp

    def transform(self, X: Any) -> Any:
        """Topic proportions of the documents ``X`` (canonical CSR in the model's dtype on
        its device): documents x k float64, rows sum to 1 (normalised in float64, so
        they do to double precision), an empty document gets the prior mean (uniform:
        its gamma, alpha in the model's dtype, is 0 for an alpha below that range)."""
        gamma = common.infer_theta(self.topicsT(), bl.SMat(X), float(self.opts.alpha))
        theta = gamma.data.astype(np.float64)
        theta = theta + (theta.sum(axis=1, keepdims=True) == 0)  # all zero: uniform
        return theta / theta.sum(axis=1, keepdims=True)

    def heldout_score(self, X: Any, random_state: int = 0) -> float:
        """Held-out per-word log-likelihood of ``X`` by document completion."""
        return float(common.heldout_loglik(self.components(), X, float(self.opts.alpha),
                                           seed=random_state))

    # -- minibatch helpers -------------------------------------------------------------------
    def scratch(self) -> dict[str, Any]:
        """Per-minibatch working matrices, allocated on first use (and after unpickling)."""
        s = self._scratch
        if s is None:
            B, k, dt, dev = self.batch_rows, int(self.opts.n_components), self.dtype, self.device
            s = self._scratch = {"batch": None, "ptr": None,
                                 "start": bl.zeros((B, k), dt, dev),
                                 "ev_gamma": bl.zeros((B, k), dt, dev),
                                 "ev_et": bl.zeros((B, k), dt, dev)}
            self.make_scratch(s)
        if self._store is None and self._store_rows:
            self._store = RowState(self._store_rows, int(self.opts.n_components), self.dtype,
                                   self.xp)
        return s

    def make_scratch(self, s: dict[str, Any]) -> None:
        """Add the subclass's working matrices to ``s``."""

    def rows(self, batch: Minibatch) -> bl.SMat:
        """The minibatch copied into a persistent ``batch_rows``-row SMat (padded with
        empty documents); its rows' ids are remembered for warm starts."""
        self._cur = batch
        return self.load_rows(batch.mats[0].csr, 0, batch.n)

    def load_rows(self, X: Any, lo: int, hi: int) -> bl.SMat:
        """Rows lo..hi of CSR ``X`` in the padded minibatch SMat (allocates only the first
        time, or when its buffers must grow)."""
        s = self.scratch()
        xp = self.xp
        B = self.batch_rows
        indptr = X.indptr
        start, stop = int(indptr[lo]), int(indptr[hi])
        n = hi - lo
        if s["ptr"] is None or s["ptr"].dtype != indptr.dtype:
            s["ptr"] = backend.empty((B + 1,), indptr.dtype, xp)
        ptr = s["ptr"]
        xp.subtract(indptr[lo : hi + 1], start, out=ptr[: n + 1])
        ptr[n + 1 :] = stop - start
        view = csr_view(X.data[start:stop], X.indices[start:stop], ptr, (B, self.vocab_size))
        batch = s["batch"]
        if batch is None:
            batch = s["batch"] = bl.SMat(view.copy())
        batch.copy_from(view)
        return batch

    def init_doc_topics(self, target: bl.Mat, n: int, sb: bl.SMat) -> None:
        """Start the document-topic weights of the padded minibatch ``sb`` (its first
        ``n`` rows the documents): last pass's values (warm start) or each document's own
        random start (:func:`~bidlab.models.lda.doc_start.doc_start`: a function of the
        document, not of its row in the minibatch). A minibatch is warm-started when every
        one of its documents was trained on before (by row id: shuffled passes too); then
        only a padded minibatch draws starts (for its padding rows)."""
        store, batch = self._store, self._cur
        self._warm = store is not None and batch is not None and store.all_seen(batch)
        if not self._warm or n < self.batch_rows:  # cold, or padding rows to start too
            start = self.scratch()["start"]
            doc_start(sb.csr, self.seed, int(start.shape[1]), self.dtype, out=start.data)
            self.start_weights(start, target)
        if self._warm:
            store.get(batch, target)

    def start_weights(self, start: bl.Mat, target: bl.Mat) -> None:
        """Write the document-topic weights that the random ``start`` points mean into
        ``target`` (the subclass's parametrisation; here the points themselves)."""
        target <<= start

    def save_doc_topics(self, source: bl.Mat, n: int) -> None:
        if self._store is not None and self._cur is not None:
            self._store.put(self._cur, source)

    def n_e_iters(self) -> int:
        """E-step iterations for this minibatch (fewer once warm-started)."""
        warm = self.opts.e_iters_warm
        if self._warm and warm is not None:
            return int(warm)
        return int(self.opts.e_iters)

    def score_with(self, sb: bl.SMat, doc_params: bl.Mat) -> bl.Mat:
        """Per-word log-likelihood of ``sb`` under the current topics, each document's
        proportions its row of ``doc_params`` normalised; one SDDMM, a 1 x 1 Mat."""
        phiT = self.topicsT()
        tiny = common.mu_floor(self.dtype)
        theta = doc_params / doc_params.sum(axis=1)
        prob = bl.sddmm(theta.T, phiT.T, sb)
        return (sb * bl.log(prob + tiny)).sum() / sb.sum()

    def extra_state(self) -> dict[str, bl.Mat]:
        """Each document's topic weights (the warm starts, by row id), when they are kept:
        a resumed run starts its documents where the checkpoint left them."""
        if not self._store_rows or not self.initialised:
            return {}
        self.scratch()  # makes the store
        return self._store.state("warm")

    def counters(self) -> dict[str, int]:
        return {"n_batches": int(self.n_batches), "n_docs_seen": int(self.n_docs_seen),
                "n_passes_done": int(self.n_passes_done)}

    def set_counters(self, values: dict[str, int]) -> None:
        self.n_batches = int(values.get("n_batches", self.n_batches))
        self.n_docs_seen = int(values.get("n_docs_seen", self.n_docs_seen))
        self.n_passes_done = int(values.get("n_passes_done", self.n_passes_done))

    def restored(self, earlier: dict[str, Any]) -> None:
        """Recompute what derives from the matrices. A checkpoint written before the
        counters were integers held them in a 1 x 5 float matrix ``counters``."""
        old = earlier.get("counters")
        if old is not None and old.size >= 3:
            v = np.asarray(old, np.float64).reshape(-1)
            self.n_batches, self.n_docs_seen, self.n_passes_done = (int(x) for x in v[:3])
        self.refresh()


def ceil_batches(total_docs: int, batch_rows: int) -> int:
    """Minibatches per pass over ``total_docs`` documents (at least 1)."""
    return max(1, math.ceil(total_docs / max(batch_rows, 1)))
