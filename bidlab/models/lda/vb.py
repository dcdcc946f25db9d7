"""Latent Dirichlet Allocation by variational Bayes, in matrix form (thesis eq. 3.4).

One minibatch of documents X (documents x vocabulary, CSR) is a handful of cached matrix
operations, BIDMach's ``LDA.scala``::

    E-step, e_iters times:
        mu    = sddmm(et, eb, X)               # model prediction at each nonzero
        gamma = et o ((X / mu) @ eb) + alpha    # documents x k
        et    = expdigamma(gamma)               # exp E[log theta] (per-document scale cancels)
    sufficient statistics:
        sstats = eb o ((X / mu).T @ et)         # vocabulary x k
    M-step:
        online (Hoffman et al. 2010):  lam = (1 - rho_t) lam + rho_t (beta + D / |batch| sstats)
                                       rho_t = (tau0 + t)^-kappa
        batch:  lam = beta + sum of sstats over the pass, applied at the end of each pass
        eb = expdigamma(lam) / expdigamma(column sums of lam)     # exp E[log phi]

Layouts: theta-side matrices are documents x k C-ordered (``et.T`` is the k x documents
operand the kernels take) and the topic-word matrices are stored transposed, vocabulary x k
C-ordered, so each word's k topic weights are contiguous for the SDDMM. ``components_``
is the normalised k x vocabulary host copy. Hyperparameters that change during training
(the D/|batch| scale, alpha, beta) are 1 x 1 matrices set in place, so with caching on a
minibatch allocates nothing after the first.

One engine: :class:`LDAModel` is the :class:`bidlab.learn.Model`; online training steps
with :class:`bidlab.learn.IncNorm` (the model writes the full-data estimate
``beta + D / |batch| sstats`` into its update matrix), batch training with
:class:`bidlab.learn.Batch` (``batch_mode="replace"``: the pass's summed statistics
replace lambda, the model adds beta at the pass end). :class:`LDA` is the scikit-learn
estimator around it: ``fit`` runs a :class:`bidlab.learn.Learner` in the calling thread.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.learn import Batch, IncNorm, Option, Updater
from bidlab.learn.model import register_model
from bidlab.learn.staging import Minibatch
from bidlab.models.lda import common
from bidlab.models.lda.core import LDACore
from bidlab.models.lda.edits import TopicEdits
from bidlab.models.lda.estimator import LDAEstimator

__all__ = ["LDA", "LDAModel"]

METHOD = Option("method", str, "online", "online (a step per minibatch) or batch (one update "
                "per pass)", choices=("online", "batch"), live=False)


def is_vb_method(value: Any) -> bool:
    """'online' or 'batch'."""
    return value in ("online", "batch")


METHOD_PARAM = dataclasses.replace(
    METHOD, test=is_vb_method,
    text="'online' or 'batch' (for SAME Gibbs sampling use bidlab.models.LDAGibbs)")


class LDAModel(TopicEdits, LDACore):
    """Variational LDA as a :class:`bidlab.learn.Model` (see the module doc for the math).

    The model matrix is lambda, topics x vocabulary (a view of the vocabulary x k
    C-ordered ``lamT``); train it with :class:`bidlab.learn.IncNorm`
    (``method="online"``) or :class:`bidlab.learn.Batch` (``"batch"``), as
    :meth:`default_updater` does.
    """

    OPTIONS = (METHOD,)

    def default_updater(self, **options: Any) -> Updater:
        """The updater of this model's method: :class:`~bidlab.learn.IncNorm` online
        (``options``: its options, e.g. tau0), :class:`~bidlab.learn.Batch` in batch."""
        if self.opts.method == "batch":
            return Batch(batch_mode="replace")
        return super().default_updater(**options)

    def allocate(self, seedT: np.ndarray) -> None:
        V, k, dt, xp = self.vocab_size, int(self.opts.n_components), self.dtype, self.xp
        dev = self.device
        init = (seedT * V).astype(dt)  # mean entry 1, like scikit-learn's Gamma(100, 0.01)
        self.lamT = bl.Mat(backend.empty((V, k), dt, xp))
        self.lamT.data[...] = init if xp is np else xp.asarray(init)
        self.ebT = bl.Mat(backend.empty((V, k), dt, xp))
        self.upd = bl.zeros((V, k), dt, dev)
        self.scale_m = bl.scalar(1.0, dt, dev)  # D / |batch|
        self.link()
        self._stale = True
        self.sync()

    def start_weights(self, start: bl.Mat, target: bl.Mat) -> None:
        """exp E[log theta] of the random start (its gamma)."""
        bl.expdigamma(start, out=target)

    def link(self) -> None:
        self.modelmats = [self.lamT.T]
        self.updatemats = [self.upd.T]

    def make_scratch(self, s: dict[str, Any]) -> None:
        B, k, dt, dev = self.batch_rows, int(self.opts.n_components), self.dtype, self.device
        s["gamma"] = bl.zeros((B, k), dt, dev)
        s["et"] = bl.zeros((B, k), dt, dev)

    def sync(self) -> None:
        """exp E[log phi] after lambda moved, floored at :func:`common.eb_floor` (a word
        at the prior in every topic underflowed to 0 and could never learn again)."""
        if self._stale:
            eb = bl.expdigamma(self.lamT) / bl.expdigamma(self.lamT.sum(axis=0))
            bl.maximum(eb, common.eb_floor(self.dtype), out=self.ebT)
            self._stale = False

    def refresh(self) -> None:
        self._stale = True
        self.sync()

    def estep(self, sb: bl.SMat, ndocs: int) -> bl.Mat:
        """Fit the minibatch's gamma (documents x k, in the scratch ``gamma``); returns the
        sufficient statistics eb o ((X / mu).T @ et), vocabulary x k."""
        s = self.scratch()
        gamma, et, ebT = s["gamma"], s["et"], self.ebT
        self.init_doc_topics(et, ndocs, sb)
        common.estep(sb, ebT, et, gamma, self.alpha_m, self.n_e_iters())
        self.save_doc_topics(et, ndocs)
        tiny = common.mu_floor(self.dtype)
        mu = bl.sddmm(et.T, ebT.T, sb)
        return ebT * ((sb / (mu + tiny)).T @ et)

    def update(self, batch: Minibatch) -> Any:
        self.apply_topic_edits()
        self.sync()
        sb = self.rows(batch)
        n = batch.n
        self.step_weight = min(1.0, n / self.batch_rows)
        sstats = self.estep(sb, n)
        score = self.score_with(sb, self.scratch()["gamma"]) if self.opts.train_score else None
        if self._batch_step():
            self.upd <<= sstats
        else:
            self.scale_m.set(self.total_docs / max(n, 1))
            self.upd <<= sstats * self.scale_m + self.beta_m
            self._stale = True  # the updater moves lambda next
        self.n_batches += 1
        self.n_docs_seen += n
        return score

    def _batch_step(self) -> bool:
        """Whether the learner steps with batch VB's :class:`~bidlab.learn.Batch` (the
        method's updater, but ``partial_fit`` steps online whatever the method)."""
        lr = self._learner()
        up = lr.updater if lr is not None else None
        return isinstance(up, Batch) if up is not None else self.opts.method == "batch"

    def sweep_flops(self) -> float:
        """Each E-step iteration is an SDDMM and a sparse x dense product (2 flops per topic
        and nonzero each), plus the sufficient statistics and the score."""
        return 4.0 * (self.n_e_iters() + 1) + 2.0

    def end_pass(self, pass_: int) -> None:
        super().end_pass(pass_)
        if self._batch_step() and self._sums_applied():  # lambda is the pass's sums
            self.lamT <<= self.lamT + self.beta_m
            self.refresh()

    def topicsT(self) -> bl.Mat:
        return self.lamT / self.lamT.sum(axis=0)


class LDA(LDAEstimator):
    """LDA topic model trained by online or batch variational Bayes.

    Parameters
    ----------
    n_components
        number of topics (>= 1).
    method
        ``"online"`` (a step per minibatch, Hoffman's rho_t) or ``"batch"`` (one
        update per pass over the data).
    alpha
        symmetric Dirichlet prior on documents' topic proportions (> 0).
    beta
        symmetric Dirichlet prior on topics' word probabilities (> 0; eta in Hoffman).
    batch_size
        documents per minibatch (default: 512 on the CPU; on a GPU up to 16384, as
        long as a pass keeps at least 16 minibatches; with short documents, more, so
        that a minibatch holds at least about 32,768 tokens).
    n_passes
        passes over the data made by ``fit``.
    e_iters
        E-step iterations per minibatch.
    e_iters_warm
        E-step iterations once warm-started (``fit``'s passes after the first;
        None: ``e_iters``).
    tau0, kappa
        the online step size rho_t = (tau0 + t)^-kappa.
    total_docs
        documents in the whole stream, for ``partial_fit`` (default: those of X).
    warm_docs
        in ``fit``, start each document's E-step from its values of the previous
        pass (keeps a documents x n_components matrix) instead of from a random point.
    init
        ``"kmeans"`` (topics nudged apart by a k-means clustering of the first
        documents) or ``"random"`` (scikit-learn's Gamma(100, 0.01) start).
    random_state
        initialisation seed (None: a fresh one).
    dtype
        float32 or float64, the model's arithmetic (``transform`` returns the input's
        float dtype).
    device
        'cpu', 'gpu' or None (the data's device).
    warm_start
        a fitted estimator's ``fit`` continues its model (scikit-learn's meaning:
        ``n_passes_done_`` adds up) instead of starting again.
    n_jobs
        CPU threads of the kernels during fit, transform and score, through
        threadpoolctl (None: as the process is set; -1: every core).
    verbose
        0 silent, 1 a progress bar with the pass summaries, 2 a line per pass (on
        stderr; plain lines when it is not a terminal).

    Attributes
    ----------
    components_
        the topics: n_components x vocabulary, each row sums to 1.
    model_
        the trained :class:`LDAModel`.
    updater_
        the updater kept with the model (``partial_fit`` continues its step-size
        schedule).
    n_features_in_
        the vocabulary size seen in ``fit``.
    n_empty_docs_
        documents without any word, skipped in training.
    n_batches_
        training minibatches so far.
    n_passes_done_
        passes finished so far.
    n_docs_seen_
        documents trained on so far (counting each pass).

    Examples
    --------
    >>> from bidlab.datasets import synthetic_lda_corpus
    >>> from bidlab.models import LDA
    >>> corpus = synthetic_lda_corpus(n_docs=300, n_words=200, k=3, seed=0)
    >>> lda = LDA(n_components=3, n_passes=2, random_state=0).fit(corpus.X)
    >>> lda.components_.shape
    (3, 200)
    >>> lda.transform(corpus.X[:2]).shape
    (2, 3)
    """

    PARAMS: ClassVar[tuple[Option, ...]] = LDAEstimator.params_of(
        LDAModel, IncNorm, extra=(METHOD_PARAM,), e_iters=8, e_iters_warm=3, tau0=1.0)

    def __init__(
        self,
        n_components: int = 10,
        method: str = "online",
        *,
        alpha: float = 0.1,
        beta: float = 0.01,
        batch_size: int | None = None,
        n_passes: int = 10,
        e_iters: int = 8,
        e_iters_warm: int | None = 3,
        tau0: float = 1.0,
        kappa: float = 0.7,
        total_docs: int | None = None,
        warm_docs: bool = True,
        init: str = "kmeans",
        random_state: int | None = 0,
        dtype: Any = np.float32,
        device: str | None = None,
        warm_start: bool = False,
        n_jobs: int | None = None,
        verbose: int = 0,
    ) -> None:
        self._keep_params(locals())

    _min_batch_tokens = 32768  # a default minibatch holds at least about this many tokens

    def _default_batch(self, C: Any) -> int:
        """The per-device default in documents, raised for short documents until a
        minibatch holds ``_min_batch_tokens`` tokens (512 documents of 64 tokens).

        A minibatch's statistics, scaled to the whole corpus, are a noisy estimate of the
        topics, and its noise grows as its tokens shrink: 512 titles of 10 tokens make
        steps so noisy that the early, large online steps settle on a poor optimum that
        later passes do not leave. Documents of 64 tokens or more keep the default.
        """
        B = super()._default_batch(C)
        per_doc = float(C.data.sum()) / max(int(C.shape[0]), 1)
        return max(B, math.ceil(self._min_batch_tokens / max(per_doc, 1.0)))

    def _make_model(self) -> LDAModel:
        return LDAModel(dtype=self.dtype, **self._model_options(LDAModel))


register_model("lda", LDA)
