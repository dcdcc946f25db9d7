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
their variance by T. :meth:`LDAGibbsModel.set_temperature` changes one entry, one topic
row, one word column or all of it while training runs: the change is queued, applied by
the training thread at the start of its next minibatch by writing into the existing matrix
(nothing is allocated, the cache does not grow) and recorded in the temperature log with
that minibatch's number.

One engine: :class:`LDAGibbsModel` is the :class:`bidlab.learn.Model`, stepped by
:class:`bidlab.learn.IncNorm` (which hands rho_t to the model's ``blend``: on the CPU the
lazily scaled counts change on the minibatch's words only).
:class:`~bidlab.models.lda.gibbs.LDAGibbs` is the scikit-learn estimator around it.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.kern import lda_sampler
from bidlab.learn.persistable import alias
from bidlab.learn.staging import Minibatch
from bidlab.models.lda.core import LDACore, ceil_batches
from bidlab.models.lda.edits import TopicEdits
from bidlab.models.lda.gibbs_params import ANNEAL, ANNEAL_PASSES, NSAMPS, NSAMPS0, anneal_nsamps
from bidlab.models.lda.temperature import Temperatures

__all__ = ["LDAGibbsModel"]


def _fold_limit(dtype: Any) -> float:
    """Column sums of NT past which the lazy scale a is folded into NT: NT = N / a grows as
    a decays, and with large counts float32 NT overflowed to inf long before a reached
    1e-30. The margin covers the growth until the next minibatch's check."""
    return float(np.finfo(dtype).max) * 1e-8


class LDAGibbsModel(TopicEdits, Temperatures, LDACore):
    """SAME Gibbs LDA as a :class:`bidlab.learn.Model` (see the module doc for the math).

    The model matrix is the moving-average topic counts, topics x vocabulary (a view of
    the vocabulary x k ``NT``; the counts are ``a * NT`` with the scalar :attr:`scale`);
    the update matrix holds the minibatch's sampled counts phi_hat. Train it with
    :class:`bidlab.learn.IncNorm` (its default updater).
    """

    OPTIONS = (NSAMPS, NSAMPS0, ANNEAL, ANNEAL_PASSES)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._temp_lock = threading.Lock()
        self._pending: deque = deque()
        self._learner_ref: Any = None
        self.temperature_log: list[dict[str, Any]] = []
        self.nsamps_current = float(self.opts.nsamps if self.opts.anneal == "constant"
                                    else self.opts.nsamps0)
        self._sweep = 0
        self._a = 1.0
        self._temp_active = False
        self._rows_touched: Any = None
        self._upd_scale = 1.0

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in ("_temp_lock", "_pending", "_rows_touched"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._temp_lock = threading.Lock()
        self._pending = deque()
        self._rows_touched = None
        self._phi_stale = True

    # -- state ------------------------------------------------------------------------------
    def allocate(self, seedT: np.ndarray) -> None:
        V, k, dt, xp = self.vocab_size, int(self.opts.n_components), self.dtype, self.xp
        dev = self.device
        # The counts are held as N = a * NT: decaying all of N is one multiply of the
        # scalar a, so a CPU step only touches the rows of the minibatch's words.
        self.NT = bl.Mat(backend.empty((V, k), dt, xp))
        tokens = self._head_tokens
        self._head_tokens = None
        if tokens is None:
            tokens = 100.0  # no leading documents given: a typical document length
        per = tokens * self.total_docs / (V * k)  # about tokens / (V k) each
        init = (seedT * V * per).astype(dt)
        self.NT.data[...] = init if xp is np else xp.asarray(init)
        self._a = 1.0
        self._colsum = backend.empty((k,), np.float64, xp)  # column sums of NT
        self._invden = backend.empty((k,), dt, xp)  # 1 / (a * colsum + V beta)
        self._den = backend.empty((k,), np.float64, xp)
        self.phiT = bl.zeros((V, k), dt, dev)  # normalised topics, formed when asked for
        self._phi_stale = True
        self.temp = bl.ones((V, k), dt, dev)
        self.phi_hat = bl.zeros((V, k), dt, dev)
        self.keep_m = bl.scalar(1.0, dt, dev)
        self.scale_m = bl.scalar(1.0, dt, dev)
        self.link()
        self._anneal_batches = ceil_batches(self.total_docs, self.batch_rows) * int(
            self.opts.anneal_passes or self._plan_passes or 1)
        self._count_columns()

    def link(self) -> None:
        self.modelmats = [self.NT.T]
        self.updatemats = [self.phi_hat.T]

    def make_scratch(self, s: dict[str, Any]) -> None:
        B, V, k = self.batch_rows, self.vocab_size, int(self.opts.n_components)
        dt, dev, xp = self.dtype, self.device, self.xp
        s["theta"] = bl.zeros((B, k), dt, dev)
        s["theta_hat"] = bl.zeros((B, k), dt, dev)
        s["work"] = lda_sampler.workspace(V, k, dt, xp)
        if xp is np:
            s["stamp"] = backend.zeros((V,), np.int64, np)
            s["rows"] = backend.empty((V,), np.int64, np)
            s["tick"] = 0
            # the sampler's mask of words with a temperature other than 1
            s["hot"] = np.zeros(V, np.uint8)
            lda_sampler.heated_words(self.temp.data, s["hot"])
        else:
            s["stamp"] = s["rows"] = s["hot"] = None

    @property
    def scale(self) -> float:
        """a in N = a * NT (1 on a GPU; on the CPU the decay multiplies only a)."""
        return self._a

    def _update_params(self) -> None:
        """invden = 1 / (a * colsum + V beta): phi = (a NT + beta) * invden, column by column."""
        xp = self.xp
        xp.multiply(self._colsum, self._a, out=self._den)
        xp.add(self._den, self.vocab_size * float(self.opts.beta), out=self._den)
        xp.divide(1.0, self._den, out=self._invden)
        self._phi_stale = True

    def _count_columns(self) -> None:
        self.xp.sum(self.NT.data, axis=0, dtype=np.float64, out=self._colsum)
        self._update_params()

    def refresh(self) -> None:
        """Recount the column sums after NT was written from outside."""
        self._count_columns()
        self._temp_active = bool((self.temp.data != 1.0).any())
        if self._scratch is not None and self._scratch.get("hot") is not None:
            lda_sampler.heated_words(self.temp.data, self._scratch["hot"])

    def divergence_mats(self) -> list[tuple[bl.Mat, float]]:
        """The counts a * NT: NT grows as the lazy scale a shrinks."""
        return [(m, self._a) for m in self.modelmats]

    def extra_state(self) -> dict[str, bl.Mat]:
        scale = self.__dict__.get("_scale_mat")
        if scale is None:
            scale = self._scale_mat = bl.Mat(np.ones((1, 1), np.float64))
        scale.data[0, 0] = self._a  # the lazy scale of the counts: a number, not a counter
        return {**super().extra_state(), "temperature": self.temp, "scale": scale}

    def counters(self) -> dict[str, int]:
        return {**super().counters(), "sweep": int(self._sweep)}  # the sampler's key

    def set_counters(self, values: dict[str, int]) -> None:
        super().set_counters(values)
        self._sweep = int(values.get("sweep", self._sweep))

    def restored(self, earlier: dict[str, Any]) -> None:
        scale = self.__dict__.get("_scale_mat")
        if scale is not None:
            self._a = float(np.asarray(backend.to_host(scale.data))[0, 0]) or 1.0
        old = earlier.get("counters")  # before: scale and sweep packed with the counters
        if old is not None and old.size >= 5:
            v = np.asarray(old, np.float64).reshape(-1)
            self._a, self._sweep = float(v[3]) or 1.0, int(v[4])
        super().restored(earlier)

    def _fold_scale(self) -> None:
        """Multiply the lazy scale a into NT (a = 1 afterwards)."""
        if self._a != 1.0:
            self.NT.data *= self.dtype.type(self._a)
            self._a = 1.0
            self._count_columns()

    def apply_changes(self, changes: dict[str, Any]) -> None:
        super().apply_changes(changes)
        if self.initialised and "beta" in changes:
            self._update_params()

    def current_nsamps(self) -> float:
        """m for the next minibatch, from the annealing schedule."""
        o = self.opts
        progress = self.n_batches / max(getattr(self, "_anneal_batches", 1), 1)
        return anneal_nsamps(o.anneal, progress, float(o.nsamps0), float(o.nsamps))

    # -- one minibatch ----------------------------------------------------------------------
    def sample(self, sb: bl.SMat, nsamps: float, ndocs: int, sparse: bool = True) -> Any:
        """e_iters sampling sweeps over the minibatch: fills theta, theta_hat and phi_hat.

        On the CPU with ``sparse`` only the rows of phi_hat of the minibatch's words are
        written (their indices are returned; the others stay zero); else all of phi_hat
        (None returned).
        """
        s = self.scratch()
        theta = s["theta"]
        self.init_doc_topics(theta, ndocs, sb)
        temp = self.temp.data if self._temp_active else None
        csr = sb.csr
        rows = None
        if sparse and self.xp is np:
            s["tick"] += 1
            rows = lda_sampler.unique_columns(csr, s["stamp"], s["tick"], s["rows"])
        sweeps = self.n_e_iters()
        # one call for the E-step: sweeps with theta = theta_hat + alpha between them, the
        # last one also making phi_hat (on the CPU one GIL-free numba call, see its doc)
        lda_sampler.same_sample_sweeps(
            csr, theta.data, self.NT.data, nsamps, self.seed, self._sweep + 1, sweeps,
            float(self.opts.alpha), s["theta_hat"].data, self.phi_hat.data, temp, s["work"],
            scale=self._a, beta=float(self.opts.beta), invden=self._invden, rows=rows,
            hot=s["hot"],
        )
        self._sweep += sweeps
        self.save_doc_topics(theta, ndocs)
        return rows

    def update(self, batch: Minibatch) -> Any:
        self.apply_pending({"pass": batch.pass_, "index": batch.index,
                            "batch": self.n_batches})
        self.apply_topic_edits()
        sb = self.rows(batch)
        n = batch.n
        m = self.current_nsamps()
        self.nsamps_current = m
        self._rows_touched = self.sample(sb, m, n)
        score = self.score_with(sb, self.scratch()["theta"]) if self.opts.train_score else None
        self.step_weight = min(1.0, n / self.batch_rows)
        self._upd_scale = self.total_docs / max(n, 1)
        self.n_batches += 1
        self.n_docs_seen += n
        return score

    def blend(self, rho: float) -> bool:
        """N <- (1 - rho) N + rho (D / |batch|) phi_hat (IncNorm's step, in this model's
        representation: on the CPU a decays and only the minibatch's words' rows move)."""
        step = rho * self._upd_scale
        rows = self._rows_touched
        if rows is not None and rho >= 1.0:  # a full step (tau0=0's first) replaces N
            self.NT.data.fill(0)
            self._colsum.fill(0)
            self._a = 1.0
            lda_sampler.rows_step(self.NT.data, self._colsum, self.phi_hat.data, rows, step)
            self._update_params()
        elif rows is not None:
            self._a *= 1.0 - rho
            lda_sampler.rows_step(self.NT.data, self._colsum, self.phi_hat.data, rows,
                                  step / self._a)
            if self._a < 1e-30 or float(self._colsum.max()) > _fold_limit(self.dtype):
                self._fold_scale()
            self._update_params()
        else:
            self.keep_m.set(1.0 - rho)
            self.scale_m.set(step)
            self.NT <<= self.NT * self.keep_m + self.phi_hat * self.scale_m
            self._count_columns()
        return True

    def set_temperature(self, value: float, topic: int | None = None,
                        word: int | None = None, owner: str = "LDAGibbs") -> None:
        with self._edit_lock:  # checked and queued while k stays: no topic edit lands between
            super().set_temperature(value, topic=topic, word=word, owner=owner)

    def _before_edits(self) -> None:
        """The queued temperature changes name topics as they are before the queued
        edits: write them first (a topic id they name may be gone after)."""
        self.apply_pending(self._position())

    def sweep_flops(self) -> float:
        """Each sweep is the fused SDDMM and the accumulation of the draws (2 flops per
        topic and nonzero each)."""
        return 4.0 * self.n_e_iters() + 2.0

    def end_pass(self, pass_: int) -> None:
        super().end_pass(pass_)
        self.apply_pending_if_idle()

    def topicsT(self) -> bl.Mat:
        """The normalised topics, vocabulary x k, formed from the counts when stale."""
        if self._phi_stale:
            xp = self.xp
            ph = self.phiT.data
            xp.multiply(self.NT.data, self.dtype.type(self._a), out=ph)
            xp.add(ph, self.dtype.type(self.opts.beta), out=ph)
            xp.multiply(ph, self._invden, out=ph)
            self._phi_stale = False
        return self.phiT


#: files written while the model lived beside its estimator name it by those modules
for _old in ("bidlab.models.lda.gibbs.LDAGibbsModel", "bidlab.models.lda_gibbs.LDAGibbsModel"):
    alias(_old, LDAGibbsModel)
