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
(``rho_t``, the D/|batch| scale) are 1 x 1 matrices set in place, so with caching on a
minibatch allocates nothing after the first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.models import _lda_common as common
from bidlab.models._lda_base import LDABase


class LDA(LDABase):
    """LDA topic model trained by online or batch variational Bayes.

    Parameters
    ----------
    k: number of topics (>= 1).
    method: ``"online"`` (a step per minibatch, Hoffman's rho_t) or ``"batch"`` (one
        update per pass over the data).
    alpha: symmetric Dirichlet prior on documents' topic proportions (> 0).
    beta: symmetric Dirichlet prior on topics' word probabilities (> 0; eta in Hoffman).
    batch_size: documents per minibatch (default: 512 on the CPU, 16384 on a GPU).
    n_passes: passes over the data made by ``fit``.
    e_iters: E-step iterations per minibatch.
    e_iters_warm: E-step iterations once warm-started (``fit``'s passes after the first;
        None: ``e_iters``).
    tau0, kappa: the online step size rho_t = (tau0 + t)^-kappa.
    total_docs: documents in the whole stream, for ``partial_fit`` (default: those of X).
    warm_start: in ``fit``, start each document's E-step from its values of the previous
        pass (keeps a documents x k matrix) instead of from a random point.
    init: ``"kmeans"`` (topics nudged apart by a k-means clustering of the first
        documents, see ``LDABase._seed_topics``) or ``"random"`` (scikit-learn's
        Gamma(100, 0.01) start).
    seed: initialisation seed. dtype: float32 or float64. device: 'cpu', 'gpu' or None
        (the data's device).
    """

    _owner = "LDA"

    def __init__(
        self,
        k: int = 10,
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
        warm_start: bool = True,
        init: str = "kmeans",
        seed: int = 0,
        dtype: Any = np.float32,
        device: str | None = None,
    ) -> None:
        if method not in ("online", "batch"):
            raise ValueError(
                f"The 'method' parameter of LDA must be 'online' or 'batch'. Got {method!r} "
                "instead (for SAME Gibbs sampling use bidlab.models.LDAGibbs)."
            )
        self.method = method
        super().__init__(
            k,
            alpha=alpha,
            beta=beta,
            batch_size=batch_size,
            n_passes=n_passes,
            e_iters=e_iters,
            e_iters_warm=e_iters_warm,
            tau0=tau0,
            kappa=kappa,
            total_docs=total_docs,
            warm_start=warm_start,
            init=init,
            seed=seed,
            dtype=dtype,
            device=device,
        )

    # ------------------------------------------------------------------ state
    def _allocate(self, V: int, xp: Any, rng: np.random.Generator, seedT: np.ndarray) -> None:
        k, B, dt = self.k, self.batch_size, self.dtype
        dev = "cpu" if xp is np else "gpu"
        init = (seedT * V).astype(dt)  # mean entry 1, like scikit-learn's Gamma(100, 0.01)
        self.lamT = bl.Mat(backend.empty((V, k), dt, xp))
        self.lamT.data[...] = init if xp is np else xp.asarray(init)
        self.ebT = bl.Mat(backend.empty((V, k), dt, xp))
        self.gamma = bl.zeros((B, k), dt, dev)
        self.et = bl.zeros((B, k), dt, dev)
        self.sstats_acc = bl.zeros((V, k), dt, dev)  # the batch method's pass total
        self.alpha_m = bl.scalar(self.alpha, dt, dev)
        self.beta_m = bl.scalar(self.beta, dt, dev)
        self.rho_m = bl.scalar(0.0, dt, dev)
        self.keep_m = bl.scalar(1.0, dt, dev)  # 1 - rho
        self.scale_m = bl.scalar(1.0, dt, dev)  # rho * D / |batch|
        self._tiny = common.mu_floor(dt)
        self._doc_init <<= bl.expdigamma(self._doc_init)  # exp E[log theta] of the start
        self._update_eb()

    def _update_eb(self) -> None:
        with bl.caching():
            self.ebT <<= bl.expdigamma(self.lamT) / bl.expdigamma(self.lamT.sum(axis=0))

    # ------------------------------------------------------------------ one minibatch
    def _estep(self, sb: bl.SMat, ndocs: int) -> bl.Mat:
        """Fit the minibatch's gamma (documents x k); returns eb o ((X / mu).T @ et)."""
        gamma, et, ebT = self.gamma, self.et, self.ebT
        # a random start (or last pass's values); exp E[log theta]'s scale per document cancels
        self._init_doc_topics(et, ndocs)
        for _ in range(self._n_e_iters()):
            mu = bl.sddmm(et.T, ebT.T, sb)
            ratio = sb / (mu + self._tiny)
            gamma <<= et * (ratio @ ebT) + self.alpha_m
            bl.expdigamma(gamma, out=et)
        self._save_doc_topics(et, ndocs)
        mu = bl.sddmm(et.T, ebT.T, sb)
        ratio = sb / (mu + self._tiny)
        return ebT * (ratio.T @ et)

    def _refresh(self) -> None:
        """Recompute exp E[log phi] after the topics changed (a learner's updater step)."""
        self._update_eb()

    def _train_batch(self, sb: bl.SMat, ndocs: int) -> None:
        sstats = self._estep(sb, ndocs)
        if self.method == "batch":
            self.sstats_acc <<= self.sstats_acc + sstats
            return
        rho = self._rho(ndocs)
        self.rho_m.set(rho)
        self.keep_m.set(1.0 - rho)
        self.scale_m.set(rho * self._total_docs / max(ndocs, 1))
        lam = self.lamT
        lam <<= lam * self.keep_m + sstats * self.scale_m + self.beta_m * self.rho_m
        self._update_eb()

    def _end_pass(self) -> None:
        if self.method != "batch":
            return
        self.lamT <<= self.sstats_acc + self.beta_m
        self.sstats_acc.data.fill(0)
        self._update_eb()

    def _topicsT(self) -> bl.Mat:
        with bl.caching():
            return self.lamT / self.lamT.sum(axis=0)
