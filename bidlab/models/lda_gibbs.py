"""LDA by SAME Gibbs sampling with the coordinate-factored Poisson approximation (thesis ch. 4).

SAME (State Augmentation for Marginal Estimation) replicates each token's topic
assignment m times, which sharpens the posterior over the parameters towards its mode: a
cooled sampler. Drawing m assignments per token would cost m times a plain Gibbs sweep;
the Poisson approximation instead draws, for each (document, word) nonzero and topic,

    z ~ Poisson(m * c_dw * theta_dk * phi_kw / mu_dw),    mu = sddmm(theta, phi, X)

(c_dw the count) and accumulates z / m into theta_hat and phi_hat: per topic, the Poisson
stands in for the count of that topic among the token's m multinomial samples (the
coordinate-factored approximation), one draw instead of m. One fused kernel
(:mod:`bidlab.kern.lda_sampler`, numba and CUDA) computes mu, samples and accumulates, so a
sweep costs about one SDDMM plus the draws. Per minibatch::

    theta = a random start (fit: last pass's theta);  e_iters times:
        theta_hat, phi_hat = sample(theta, phi);  theta = theta_hat + alpha
    N   = (1 - rho_t) N + rho_t * (D / |batch|) * phi_hat        # moving average of counts
    phi = (N + beta) / column sums                                # vocabulary x k

N is held as a * NT with a scalar a: the decay multiplies a, so on the CPU a minibatch
touches only its words' rows of NT, and the kernel forms phi from NT on the fly (no
normalised copy per minibatch). On a GPU the dense update is cheap and a stays 1.

m follows an annealing schedule from ``nsamps0`` up to ``nsamps`` over ``anneal_passes``
passes: constant, linear, logarithmic or inverse-linear (1/m, the temperature, falls
linearly).

**Per-parameter temperature.** A k x vocabulary matrix T (default all 1) divides each
parameter's effective sample count: its draws use m / T_kw samples and are weighted T_kw / m,
so heating (T > 1) keeps the mean of that parameter's sampled statistics and multiplies
their variance by T. :meth:`LDAGibbs.set_temperature` changes one entry, one topic row,
one word column or all of it while training runs: the change is queued, applied by the
training thread at the start of its next minibatch by writing into the existing matrix
(nothing is allocated, the cache does not grow) and recorded in ``temperature_log_`` with
that minibatch's number.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.kern import lda_sampler
from bidlab.models import _lda_common as common
from bidlab.models._lda_base import LDABase

ANNEAL_SCHEDULES = ("constant", "linear", "log", "inverse_linear")


def anneal_nsamps(schedule: str, progress: float, m0: float, m1: float) -> float:
    """The number of samples m at ``progress`` (0 at the start, >= 1 once annealed)."""
    t = min(max(progress, 0.0), 1.0)
    if schedule == "constant":
        return m1
    if schedule == "linear":
        return m0 + (m1 - m0) * t
    if schedule == "log":
        return m0 + (m1 - m0) * math.log1p(9.0 * t) / math.log(10.0)
    if schedule == "inverse_linear":
        return 1.0 / (1.0 / m0 + (1.0 / m1 - 1.0 / m0) * t)
    raise ValueError(
        f"The 'anneal' parameter of LDAGibbs must be one of {ANNEAL_SCHEDULES}. "
        f"Got {schedule!r} instead."
    )


class LDAGibbs(LDABase):
    """LDA topic model trained by SAME Gibbs sampling (fused Poisson sampler).

    Parameters
    ----------
    k: number of topics (>= 1).
    nsamps: m, samples per token once annealed (> 0); higher is colder.
    anneal: ``"constant"``, ``"linear"``, ``"log"`` or ``"inverse_linear"``.
    nsamps0: m at the start of annealing (> 0).
    anneal_passes: passes over which m anneals (default: ``n_passes``).
    alpha, beta: symmetric Dirichlet priors (> 0).
    batch_size: documents per minibatch (default: 64 on the CPU, 8192 on a GPU).
    n_passes, e_iters, e_iters_warm: passes of ``fit``; sampling sweeps per minibatch, and
        once warm-started (``fit``'s passes after the first).
    tau0, kappa: the moving average's step rho_t = (tau0 + t)^-kappa.
    total_docs, warm_start, init, seed, dtype, device: as for :class:`bidlab.models.LDA`.

    Counts must be whole numbers: fractional counts are refused (ValueError), not rounded.
    """

    _owner = "LDAGibbs"
    _integer_counts = True
    _cpu_batch = 64  # small minibatches: many cheap moving-average steps per pass
    _gpu_batch = 8192

    def __init__(
        self,
        k: int = 10,
        nsamps: float = 100.0,
        *,
        anneal: str = "constant",
        nsamps0: float = 1.0,
        anneal_passes: int | None = None,
        alpha: float = 0.1,
        beta: float = 0.01,
        batch_size: int | None = None,
        n_passes: int = 10,
        e_iters: int = 5,
        e_iters_warm: int | None = 3,
        tau0: float = 8.0,
        kappa: float = 0.7,
        total_docs: int | None = None,
        warm_start: bool = True,
        init: str = "kmeans",
        seed: int = 0,
        dtype: Any = np.float32,
        device: str | None = None,
    ) -> None:
        common.check_params("LDAGibbs", nsamps=nsamps)
        common.check_params("LDAGibbs", nsamps=nsamps0)
        anneal_nsamps(anneal, 0.0, 1.0, 1.0)  # validates the name
        if anneal_passes is not None:
            common.check_params("LDAGibbs", n_passes=anneal_passes)
        self.nsamps = float(nsamps)
        self.nsamps0 = float(nsamps0)
        self.anneal = anneal
        self.anneal_passes = anneal_passes
        self._temp_lock = threading.Lock()
        self._pending: deque = deque()
        self._in_training = False
        self._learner_ref: Any = None  # weakref to a live learner training this model
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
    def _reset(self) -> None:
        super()._reset()
        self._sweep = 0
        self._needs_scale = True
        self.nsamps_ = self.nsamps0 if self.anneal != "constant" else self.nsamps
        self.temperature_log_: list[dict[str, Any]] = []
        self._temp_active = False
        self._pending.clear()

    def _allocate(self, V: int, xp: Any, rng: np.random.Generator, seedT: np.ndarray) -> None:
        k, B, dt = self.k, self.batch_size, self.dtype
        dev = "cpu" if xp is np else "gpu"
        init = (seedT * V).astype(dt)  # rescaled to the corpus's counts before training
        # The counts are held as N = a * NT: decaying all of N is one multiply of the
        # scalar a, so a CPU step only touches the rows of the minibatch's words.
        self.NT = bl.Mat(backend.empty((V, k), dt, xp))
        self.NT.data[...] = init if xp is np else xp.asarray(init)
        self._a = 1.0
        self._colsum = backend.empty((k,), np.float64, xp)  # column sums of NT
        self._invden = backend.empty((k,), dt, xp)  # 1 / (a * colsum + V beta)
        self._den = backend.empty((k,), np.float64, xp)
        self.phiT = bl.zeros((V, k), dt, dev)  # normalised topics, formed when asked for
        self._phi_stale = True
        self.temp = bl.ones((V, k), dt, dev)
        # CPU: the sampler's mask of words with a temperature other than 1, refreshed when
        # the temperatures change (lda_sampler.heated_words)
        self._hot = np.zeros(V, np.uint8) if xp is np else None
        self.theta = bl.zeros((B, k), dt, dev)
        self.theta_hat = bl.zeros((B, k), dt, dev)
        self.phi_hat = bl.zeros((V, k), dt, dev)
        self.work = lda_sampler.workspace(V, k, dt, xp)
        self._stamp = backend.zeros((V,), np.int64, np) if xp is np else None
        self._rows_buf = backend.empty((V,), np.int64, np) if xp is np else None
        self._tick = 0
        self.alpha_m = bl.scalar(self.alpha, dt, dev)
        self.beta_m = bl.scalar(self.beta, dt, dev)
        self.keep_m = bl.scalar(1.0, dt, dev)
        self.scale_m = bl.scalar(1.0, dt, dev)
        self._refresh()

    def _ensure_state(self, X: Any) -> None:
        fresh = self._V is None
        super()._ensure_state(X)
        if fresh:  # from the leading documents only, like the k-means start (partial_fit)
            head = X[: min(int(X.shape[0]), self.seed_docs())]
            self._mean_doc_tokens = float(head.sum()) / max(int(head.shape[0]), 1)

    def _update_params(self) -> None:
        """invden = 1 / (a * colsum + V beta): phi = (a NT + beta) * invden, column by column."""
        xp = self._xp
        xp.multiply(self._colsum, self._a, out=self._den)
        xp.add(self._den, self._V * self.beta, out=self._den)
        xp.divide(1.0, self._den, out=self._invden)
        self._phi_stale = True

    def _refresh(self) -> None:
        """Recount the column sums after NT changed wholesale (a learner's updater step)."""
        xp = self._xp
        xp.sum(self.NT.data, axis=0, dtype=np.float64, out=self._colsum)
        self._update_params()

    def _fold_scale(self) -> None:
        """Multiply the lazy scale a into NT (a = 1 afterwards)."""
        if self._a != 1.0:
            self.NT.data *= self.dtype.type(self._a)
            self._a = 1.0
            self._refresh()

    def _scale_init(self) -> None:
        """Scale the initial counts to the corpus: about tokens / (V k) each."""
        self._needs_scale = False
        per = self._mean_doc_tokens * self._total_docs / (self._V * self.k)
        self.NT.data *= self.dtype.type(per)
        self._refresh()

    def _plan(self, n_passes: int) -> None:
        self._anneal_batches = max(
            1,
            math.ceil(self._total_docs / self.batch_size) * (self.anneal_passes or n_passes),
        )

    def current_nsamps(self) -> float:
        """m for the next minibatch, from the annealing schedule."""
        progress = self.n_batches_ / getattr(self, "_anneal_batches", 1)
        return anneal_nsamps(self.anneal, progress, self.nsamps0, self.nsamps)

    # ------------------------------------------------------------------ one minibatch
    def _sample(self, sb: bl.SMat, nsamps: float, ndocs: int, sparse: bool = True) -> Any:
        """e_iters sampling sweeps over the minibatch: fills theta, theta_hat and phi_hat.

        On the CPU with ``sparse`` only the rows of phi_hat of the minibatch's words are
        written (returned; the others stay zero); else all of phi_hat (None returned).
        """
        theta = self.theta
        self._init_doc_topics(theta, ndocs)
        temp = self.temp.data if self._temp_active else None
        csr = sb.csr
        rows = None
        if sparse and self._xp is np:
            self._tick += 1
            rows = lda_sampler.unique_columns(csr, self._stamp, self._tick, self._rows_buf)
        sweeps = self._n_e_iters()
        # one call for the E-step: sweeps with theta = theta_hat + alpha between them, the
        # last one also making phi_hat (on the CPU one GIL-free numba call, see its doc)
        lda_sampler.same_sample_sweeps(
            csr, theta.data, self.NT.data, nsamps, self.seed, self._sweep + 1, sweeps,
            self.alpha, self.theta_hat.data, self.phi_hat.data, temp, self.work,
            scale=self._a, beta=self.beta, invden=self._invden, rows=rows, hot=self._hot,
        )
        self._sweep += sweeps
        self._save_doc_topics(theta, ndocs)
        return rows

    def _begin_batch(self, where: dict[str, Any]) -> float:
        """Before a minibatch: apply queued temperature changes (logged with ``where``)
        and return m from the annealing schedule."""
        if self._needs_scale:
            self._scale_init()
        self._apply_pending(where)
        m = self.current_nsamps()
        self.nsamps_ = m
        return m

    def _train_batch(self, sb: bl.SMat, ndocs: int) -> None:
        self._in_training = True
        m = self._begin_batch({"pass": self.n_passes_done_, "batch": self.n_batches_})
        rows = self._sample(sb, m, ndocs)
        rho = self._rho(ndocs)
        step = rho * self._total_docs / max(ndocs, 1)  # N <- (1 - rho) N + step * phi_hat
        if rows is not None:  # CPU: decay a, add the minibatch's rows only
            self._a *= 1.0 - rho
            lda_sampler.rows_step(self.NT.data, self._colsum, self.phi_hat.data, rows,
                                  step / self._a)
            if self._a < 1e-30:
                self._fold_scale()
            self._update_params()
        else:
            self.keep_m.set(1.0 - rho)
            self.scale_m.set(step)
            self.NT <<= self.NT * self.keep_m + self.phi_hat * self.scale_m
            self._refresh()

    def _after_pass(self) -> None:
        self._in_training = False
        self._apply_pending_if_idle()

    def _topicsT(self) -> bl.Mat:
        """The normalised topics, vocabulary x k, formed from the counts when stale."""
        if self._phi_stale:
            xp = self._xp
            ph = self.phiT.data
            xp.multiply(self.NT.data, self.dtype.type(self._a), out=ph)
            xp.add(ph, self.dtype.type(self.beta), out=ph)
            xp.multiply(ph, self._invden, out=ph)
            self._phi_stale = False
        return self.phiT

    # ------------------------------------------------------------------ temperatures
    @property
    def temperature(self) -> np.ndarray:
        """The k x vocabulary temperature matrix (a host copy)."""
        self._check_fitted()
        self._apply_pending_if_idle()
        return np.ascontiguousarray(np.asarray(backend.to_host(self.temp.data)).T)

    def set_temperature(
        self, value: float, topic: int | None = None, word: int | None = None
    ) -> None:
        """Set the temperature of one (topic, word) entry, a topic row, a word column or all.

        ``topic`` and ``word`` given: one entry; only ``topic``: that topic's row; only
        ``word``: that word's column; neither: every entry. ``value`` must be > 0 (1 is
        the default; > 1 heats). Safe while a learner trains: the change takes effect at
        the next minibatch and is logged in ``temperature_log_``.
        """
        self._check_fitted()
        common.check_params("LDAGibbs", temperature=value)
        V, k = self._V, self.k
        for name, idx, size in (("topic", topic, k), ("word", word, V)):
            if idx is None:
                continue
            if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
                raise TypeError(f"temperature {name} index must be an int; got {idx!r}")
            if not 0 <= int(idx) < size:
                raise IndexError(
                    f"temperature index (topic={topic}, word={word}) is outside the k x "
                    f"vocabulary = {k} x {V} temperature matrix: {name} must be in "
                    f"0..{size - 1}"
                )
        self._pending.append(
            (None if topic is None else int(topic), None if word is None else int(word),
             float(value))
        )
        self._apply_pending_if_idle()

    def reset_temperature(self) -> None:
        """All temperatures back to 1 (logged like any other change)."""
        self.set_temperature(1.0)

    def _training_active(self) -> bool:
        if self._in_training:
            return True
        lr = self._learner_ref() if self._learner_ref is not None else None
        return lr is not None and lr.state in ("running", "paused")

    def _apply_pending_if_idle(self) -> None:
        if not self._training_active():
            self._apply_pending({"pass": self.n_passes_done_, "batch": self.n_batches_})

    def _apply_pending(self, where: dict[str, Any] | None = None) -> None:
        """Write queued temperature changes into the matrix (training thread / when idle).

        Each change is logged with ``where``: the pass and minibatch number it takes
        effect at (a learner adds its step and the minibatch's index in the pass).
        """
        if not self._pending:
            return
        where = where or {"pass": self.n_passes_done_, "batch": self.n_batches_}
        with self._temp_lock:
            while self._pending:
                topic, word, value = self._pending.popleft()
                t = self.temp.data  # V x k
                rows = slice(None) if word is None else word
                cols = slice(None) if topic is None else topic
                t[rows, cols] = value
                if topic is None and word is None:
                    self._temp_active = value != 1.0
                elif value != 1.0:
                    self._temp_active = True
                self.temperature_log_.append(
                    {**where, "topic": topic, "word": word, "value": value}
                )
            if self._hot is not None:
                lda_sampler.heated_words(self.temp.data, self._hot)
