"""LDA on the live learner: ``LDA(...).learner(X)`` / ``LDAGibbs(...).learner(X)``.

The estimator keeps its math; :class:`LDALearnModel` adapts it to
:class:`bidlab.learn.Model`: its model matrix is the topics x vocabulary view of the
estimator's statistics (variational ``lambda`` or SAME's moving-average counts ``N``),
``update`` runs the E-step (or the sampler) on a minibatch and writes the full-data
estimate ``beta + D / |batch| * sstats`` (Gibbs: ``D / |batch| * phi_hat``) into the update
matrix, and the updater moves the model:

* online VB and Gibbs -- :class:`RhoStep`, Hoffman's ``m <- (1 - rho_t) m + rho_t u`` with
  ``rho_t = (tau0 + t)^-kappa``;
* batch VB -- :class:`bidlab.learn.Batch` (``batch_mode="replace"``): the pass's summed
  statistics replace the model, plus beta, at the pass end.

``evaluate`` scores a held-out minibatch by its per-word log-likelihood with each
document's topic proportions fitted by the E-step (the topics held fixed).

:class:`LDALearner` is a :class:`bidlab.learn.Learner` that also reaches the Gibbs
model's per-parameter temperatures (``set_temperature`` / ``temperature`` /
``temperature_log``); a change made while training runs takes effect at the next
minibatch and is logged with that minibatch's step, pass and index.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

import bidlab as bl
from bidlab.learn import Batch, Learner, Model, Option, Updater
from bidlab.learn.staging import Minibatch

_ALPHA = Option("alpha", float, 0.1, "Dirichlet prior on documents' topic proportions",
                low=0.0, low_open=True)
_BETA = Option("beta", float, 0.01, "Dirichlet prior on topics' word probabilities",
               low=0.0, low_open=True)
_EITERS = Option("e_iters", int, 5, "E-step iterations (Gibbs: sampling sweeps) per minibatch",
                 low=1)


class RhoStep(Updater):
    """Hoffman's online step: ``m <- (1 - rho) m + rho u``, ``rho = (tau0 + t)^-kappa``,
    times the model's ``step_weight`` (documents / batch size for a short minibatch)."""

    OPTIONS = (
        Option("tau0", float, 16.0, "delay of the step-size schedule (tau0 + t)^-kappa",
               low=0.0),
        Option("kappa", float, 0.7, "forgetting rate of the step-size schedule", low=0.5,
               low_open=True, high=1.0),
    )

    def update(self, step: int) -> None:
        xp = self.xp
        rho = float((self.opts.tau0 + self.t + 1) ** (-self.opts.kappa))
        rho *= getattr(self.model, "step_weight", 1.0)  # a short minibatch: a partial step
        for i, (m, u) in enumerate(zip(self.model.modelmats, self.model.updatemats,
                                       strict=True)):
            tmp = self._tmp[i]
            xp.multiply(u.data, rho, out=tmp)
            xp.multiply(m.data, 1.0 - rho, out=m.data)
            xp.add(m.data, tmp, out=m.data)
        self.t += 1


class LDALearnModel(Model):
    """Adapts an :class:`~bidlab.models.LDA` / :class:`~bidlab.models.LDAGibbs` estimator."""

    score_name = "ll/word"
    OPTIONS = (_ALPHA, _BETA, _EITERS)

    def __init__(self, estimator: Any, **options: Any) -> None:
        super().__init__(**options)
        self.estimator = estimator

    def init(self, info: Any) -> None:
        est = self.estimator
        if info.n_features != est._V:
            raise ValueError(
                f"the data has {info.n_features} words while the model was set up with "
                f"{est._V}"
            )
        stat = est.NT if hasattr(est, "NT") else est.lamT  # vocabulary x k
        self._upd = bl.Mat(stat.data.copy())
        self.modelmats = [stat.T]  # topics x vocabulary views: observers see topics as rows
        self.updatemats = [self._upd.T]
        self._scale = bl.scalar(1.0, est.dtype, "cpu" if est._xp is np else "gpu")

    def apply_changes(self, changes: dict[str, Any]) -> None:
        super().apply_changes(changes)
        est = self.estimator
        if "alpha" in changes:
            est.alpha = float(changes["alpha"])
            est.alpha_m.set(est.alpha)
        if "beta" in changes:
            est.beta = float(changes["beta"])
            est.beta_m.set(est.beta)
        if "e_iters" in changes:
            est.e_iters = int(changes["e_iters"])
        if "nsamps" in changes:
            est.nsamps = float(changes["nsamps"])

    def _rows(self, batch: Minibatch) -> bl.SMat:
        return self.estimator._load(batch.mats[0].csr, 0, batch.n)

    def update(self, batch: Minibatch) -> Any:
        est = self.estimator
        est._refresh()  # the updater moved the topics since the last minibatch
        sb = self._rows(batch)
        n = batch.n
        self.step_weight = min(1.0, n / est.batch_size)
        est._lo = 0
        if hasattr(est, "NT"):
            m = est._begin_batch({"pass": batch.pass_, "index": batch.index,
                                  "batch": est.n_batches_})
            est._sample(sb, m, n, sparse=False)
            score = est._score_with(sb, est.theta)
            self._scale.set(est._total_docs / max(n, 1))
            self._upd <<= est.phi_hat * self._scale
        else:
            sstats = est._estep(sb, n)
            score = est._score_with(sb, est.gamma)
            if est.method == "batch":
                self._upd <<= sstats
            else:
                self._scale.set(est._total_docs / max(n, 1))
                self._upd <<= sstats * self._scale + est.beta_m
        est.n_batches_ += 1
        est.n_docs_seen_ += n
        return score

    def flops(self, batch: Minibatch) -> float:
        """Per minibatch: each VB E-step iteration is an SDDMM and a sparse x dense product
        (2 k nnz flops each), plus the sufficient statistics and the score; each Gibbs sweep
        is the fused SDDMM and the accumulation of the draws (2 k nnz each)."""
        est = self.estimator
        x = batch.mats[0]
        k_nnz = float(est.k) * (x.nnz if hasattr(x, "nnz") else x.data.size)
        sweeps = est._n_e_iters()
        if hasattr(est, "NT"):
            return (4.0 * sweeps + 2.0) * k_nnz
        return (4.0 * (sweeps + 1) + 2.0) * k_nnz

    def evaluate(self, batch: Minibatch) -> Any:
        est = self.estimator
        est._refresh()
        return est._batch_loglik(self._rows(batch))

    def end_pass(self, pass_: int) -> None:
        est = self.estimator
        if getattr(est, "method", "online") == "batch":  # the Batch updater replaced lambda
            est.lamT <<= est.lamT + est.beta_m
        est.n_passes_done_ += 1
        est._refresh()

    def extra_state(self) -> dict[str, bl.Mat]:
        est = self.estimator
        return {"temperature": est.temp} if hasattr(est, "temp") else {}


class LDALearner(Learner):
    """A :class:`bidlab.learn.Learner` for LDA, with the Gibbs model's temperatures."""

    @property
    def estimator(self) -> Any:
        return self.model.estimator

    def set_temperature(self, value: float, topic: int | None = None,
                        word: int | None = None) -> None:
        """See :meth:`bidlab.models.LDAGibbs.set_temperature` (takes effect next minibatch)."""
        self._gibbs().set_temperature(value, topic=topic, word=word)

    @property
    def temperature(self) -> np.ndarray:
        """The k x vocabulary temperature matrix (a host copy)."""
        return self._gibbs().temperature

    @property
    def temperature_log(self) -> list[dict[str, Any]]:
        """Every temperature change with the pass, index and minibatch it took effect at."""
        return list(self._gibbs().temperature_log_)

    def _gibbs(self) -> Any:
        est = self.model.estimator
        if not hasattr(est, "set_temperature"):
            raise AttributeError(
                "per-parameter temperatures belong to the SAME Gibbs sampler: build the "
                "learner from bidlab.models.LDAGibbs"
            )
        return est


def make_learner(est: Any, X: Any, **options: Any) -> LDALearner:
    """The live learner for estimator ``est`` on documents x vocabulary counts ``X``."""
    n_passes = int(options.pop("n_passes", est.n_passes))
    if est._V is not None and est._total_docs is not None:
        X = est._counts(X)
        X = est._to_model_device(X)
        est._ensure_state(X)
        X = est._drop_empty(X)
    else:
        est._reset()
        X = est._prepare(X)
        est._total_docs = max(int(X.shape[0]), 1)
        est._plan(n_passes)
    if hasattr(est, "_fold_scale"):
        est._fold_scale()  # the updater moves NT itself: no lazy scale on this path
    model = LDALearnModel(est, alpha=est.alpha, beta=est.beta, e_iters=est.e_iters)
    if getattr(est, "method", "online") == "batch":
        updater: Updater = Batch(batch_mode="replace")
    else:
        updater = RhoStep(tau0=est.tau0, kappa=est.kappa)
    if hasattr(est, "NT"):
        model.opts.declare(Option("nsamps", float, est.nsamps, "SAME samples per token (m) "
                                  "once annealed", low=0.0, low_open=True,
                                  owner="LDALearnModel"), est.nsamps, has_value=True)
    lr = LDALearner(model, X, updater, name=options.pop("name", type(est).__name__.lower()),
                    batch_size=min(est.batch_size, max(int(X.shape[0]), 1)),
                    n_passes=n_passes, **options)
    if hasattr(est, "_learner_ref"):
        est._learner_ref = weakref.ref(lr)
    return lr
