"""``LDAGibbs``: the scikit-learn estimator of LDA by SAME Gibbs sampling.

The sampler, its annealing and its per-parameter temperatures are the engine's,
:class:`~bidlab.models.lda.gibbs_model.LDAGibbsModel` (its module doc has the math); the
options and schedules are :mod:`bidlab.models.lda.gibbs_params`'. ``LDAGibbsModel``,
``anneal_nsamps`` and ``ANNEAL_SCHEDULES`` are importable from here too.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from bidlab import backend
from bidlab.learn import IncNorm, Option
from bidlab.learn.model import register_model
from bidlab.models.lda.estimator import LDAEstimator
from bidlab.models.lda.gibbs_model import LDAGibbsModel
from bidlab.models.lda.gibbs_params import ANNEAL_SCHEDULES, TEMPERATURE, anneal_nsamps

__all__ = ["LDAGibbs", "LDAGibbsModel", "anneal_nsamps", "ANNEAL_SCHEDULES"]


class LDAGibbs(LDAEstimator):
    """LDA topic model trained by SAME Gibbs sampling (fused Poisson sampler).

    Parameters
    ----------
    n_components
        number of topics (>= 1).
    nsamps
        m, samples per token once annealed (> 0); higher is colder.
    anneal
        ``"constant"``, ``"linear"``, ``"log"`` or ``"inverse_linear"``.
    nsamps0
        m at the start of annealing (> 0).
    anneal_passes
        passes over which m anneals (default: ``n_passes``).
    alpha, beta
        symmetric Dirichlet priors (> 0).
    batch_size
        documents per minibatch (default on the CPU: 64, or fewer for long documents, so
        that a minibatch holds about 16,384 tokens at most, and at least 8 documents, or
        more for short documents, so that it holds at least about 4,096 tokens; on a GPU
        up to 8192, as long as a pass keeps at least 16 minibatches).
    n_passes
        passes over the data made by ``fit``.
    e_iters
        sampling sweeps per minibatch.
    e_iters_warm
        sampling sweeps per minibatch once warm-started (``fit``'s passes after the
        first; None: ``e_iters``).
    tau0, kappa
        the moving average's step rho_t = (tau0 + t)^-kappa.
    total_docs, warm_docs, init, random_state, dtype, device, warm_start, n_jobs, verbose
        as for :class:`bidlab.models.LDA`.

    Notes
    -----
    Counts must be whole numbers: fractional counts are refused (ValueError), not rounded.
    So scikit-learn's checks that feed uniform or Gaussian floats fail, by design; they are
    listed in :attr:`EXPECTED_FAILED_CHECKS`, which ``check_estimator`` takes:
    ``check_estimator(LDAGibbs(), expected_failed_checks=LDAGibbs.EXPECTED_FAILED_CHECKS)``.
    Per-parameter temperatures: :meth:`set_temperature`, :attr:`temperature`,
    ``temperature_log_``.

    Examples
    --------
    >>> from bidlab.datasets import synthetic_lda_corpus
    >>> from bidlab.models import LDAGibbs
    >>> corpus = synthetic_lda_corpus(n_docs=300, n_words=200, k=3, seed=0)
    >>> lda = LDAGibbs(n_components=3, nsamps=10, n_passes=2, random_state=0).fit(corpus.X)
    >>> lda.components_.shape
    (3, 200)
    """

    #: scikit-learn's estimator checks that feed non-integer counts: name -> why it fails.
    EXPECTED_FAILED_CHECKS: dict[str, str] = {name: (
        "feeds non-integer counts, which the Gibbs sampler refuses (ValueError)") for name in (
        "check_dict_unchanged", "check_dont_overwrite_parameters", "check_dtype_object",
        "check_estimator_sparse_array", "check_estimator_sparse_matrix",
        "check_estimator_sparse_tag", "check_estimators_dtypes",
        "check_estimators_fit_returns_self", "check_estimators_nan_inf",
        "check_estimators_overwrite_params", "check_estimators_pickle",
        "check_f_contiguous_array_estimator", "check_fit2d_1feature", "check_fit2d_1sample",
        "check_fit2d_predict1d", "check_fit_check_is_fitted", "check_fit_idempotent",
        "check_fit_score_takes_y", "check_methods_sample_order_invariance",
        "check_methods_subset_invariance", "check_n_features_in",
        "check_n_features_in_after_fitting", "check_pipeline_consistency",
        "check_readonly_memmap_input", "check_transformer_data_not_an_array",
        "check_transformer_general", "check_transformer_preserve_dtypes",
    )}

    _integer_counts = True
    _cpu_batch = 64  # small minibatches: many cheap moving-average steps per pass
    _cpu_tokens = 16384  # ... holding at most about this many tokens (long documents)
    _cpu_min_batch = 8
    _min_batch_tokens = 4096  # ... and at least about this many (64 documents of 64 tokens)
    _gpu_batch = 8192
    PARAMS: ClassVar[tuple[Option, ...]] = LDAEstimator.params_of(
        LDAGibbsModel, IncNorm, e_iters=5, e_iters_warm=3, tau0=8.0)

    def _default_batch(self, C: Any) -> int:
        """On the CPU, ``_cpu_batch`` documents unless that many would hold more than
        ``_cpu_tokens`` tokens: a sampler's minibatch costs its tokens, and long documents
        (2,000 tokens each) in 64-document minibatches leave a pass only a few
        moving-average steps. Short documents get more, so that a minibatch holds at least
        ``_min_batch_tokens`` tokens: 64 titles of 10 tokens sample counts so noisy that
        the early, large moving-average steps settle on a poor optimum."""
        B = super()._default_batch(C)
        if backend.is_cupy_array(C.data):
            return B
        per_doc = max(float(C.data.sum()) / max(int(C.shape[0]), 1), 1.0)
        B = max(B, math.ceil(self._min_batch_tokens / per_doc))
        return int(min(B, max(self._cpu_min_batch, self._cpu_tokens // per_doc)))

    def __init__(
        self,
        n_components: int = 10,
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

    def _make_model(self) -> LDAGibbsModel:
        return LDAGibbsModel(dtype=self.dtype, **self._model_options(LDAGibbsModel))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        return tags

    @property
    def nsamps_(self) -> float:
        """m of the last minibatch (the annealing schedule's current value)."""
        return self._fitted().nsamps_current

    @property
    def temperature(self) -> np.ndarray:
        """The k x vocabulary temperature matrix (a host copy)."""
        return self._fitted().temperature()

    @property
    def temperature_log_(self) -> list[dict[str, Any]]:
        """The temperature changes with the pass and minibatch each took effect at: the
        last 10,000 (``TEMPERATURE_LOG_KEPT``), oldest first; the model's
        ``temperature_log_dropped`` counts the older ones."""
        return self._fitted().temperature_log

    def set_temperature(self, value: float, topic: int | None = None,
                        word: int | None = None) -> None:
        """See :meth:`LDAGibbsModel.set_temperature` (safe while a learner trains)."""
        if not self.__sklearn_is_fitted__():
            spec = Option(**{**TEMPERATURE.__dict__, "owner": "LDAGibbs"})
            spec.check(value)
            raise RuntimeError("this LDAGibbs is not fitted yet: call fit(X) or "
                               "partial_fit(X) first")
        self.model_.set_temperature(value, topic=topic, word=word)

    def reset_temperature(self) -> None:
        """All temperatures back to 1 (logged like any other change)."""
        self.set_temperature(1.0)


register_model("ldagibbs", LDAGibbs)
