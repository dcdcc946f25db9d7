"""What a fitted LDA estimator's parameters change in the model it continues.

``partial_fit``, ``fit`` with ``warm_start=True`` and ``learner`` on a fitted estimator
continue its model. A parameter set with ``set_params`` since the model last trained must
reach it: a live option (``alpha``, ``beta``, ``e_iters``, ``tau0``, ``kappa``, the Gibbs
sampler's ``nsamps``, ...) is handed to the continuing learner; one the model's matrices
were made with (``n_components``, ``method``, ``dtype``) cannot change, and is refused
rather than silently ignored. A value the user tuned on the running learner instead
(``learner.set(alpha=...)``, a dashboard slider) stays: only parameters that differ from
their values when the model last trained (:func:`trained_params`, kept on the estimator)
count as changed. :func:`online_updater` is the updater ``partial_fit`` steps with.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab.learn import Batch, IncNorm

__all__ = ["continued_options", "online_updater", "trained_params"]

#: parameters the fitted model's matrices were made with
FIXED = ("n_components", "method")


def _differs(a: Any, b: Any) -> bool:
    """Whether two parameter values differ (4 and np.int64(4) do not)."""
    try:
        return not bool(np.array_equal(a, b))
    except (TypeError, ValueError):
        return a is not b


def continued_options(est: Any) -> dict[str, Any]:
    """The live model and updater options whose parameter on ``est`` differs from the
    value its fitted model (``est.model_``, ``est.updater_``) trains with.

    Raises ValueError when a parameter the model was built with changed.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import LDA
    >>> X = np.random.default_rng(0).poisson(1.0, size=(40, 12))
    >>> lda = LDA(n_components=2, n_passes=1).fit(X)
    >>> continued_options(lda.set_params(alpha=0.5, kappa=0.9))
    {'alpha': 0.5, 'kappa': 0.9}
    """
    model, params = est.model_, est.get_params(deep=False)
    fixed = [f"{name} (fitted with {model.opts.get(name)!r}, now {params[name]!r})"
             for name in FIXED if name in params and name in model.opts
             and _differs(params[name], model.opts.get(name))]
    if np.dtype(params["dtype"]) != model.dtype:
        fixed.append(f"dtype (fitted with {model.dtype.name}, now "
                     f"{np.dtype(params['dtype']).name})")
    if fixed:
        raise ValueError(
            f"{type(est).__name__}: {', '.join(fixed)} changed since the model was fitted, "
            "and the fitted model cannot follow: fit a new model with the new value "
            "(warm_start=False, or a new estimator)")
    before = est.__dict__.get("_trained_params")  # None: a file from before they were kept
    changes: dict[str, Any] = {}
    for comp in (model, est.updater_):
        for spec in comp.option_table():
            name = spec.name
            if not (spec.live and name in params and name in comp.opts):
                continue
            was = comp.opts.get(name) if before is None else before.get(name, params[name])
            if _differs(params[name], was):
                changes[name] = params[name]
    return changes


def trained_params(est: Any) -> dict[str, Any]:
    """The estimator's parameters that are live options of its model or updater, as they
    are now (the estimator keeps them when a learner starts from its model).

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import LDA
    >>> X = np.random.default_rng(0).poisson(1.0, size=(40, 12))
    >>> sorted(trained_params(LDA(n_components=2, n_passes=1).fit(X)))[:3]
    ['alpha', 'beta', 'e_iters']
    """
    params = est.get_params(deep=False)
    names = {spec.name for comp in (est.model_, est.updater_)
             for spec in comp.option_table() if spec.live}
    return {name: params[name] for name in sorted(names) if name in params}


def online_updater(est: Any) -> Any:
    """The updater ``partial_fit`` steps with: online, as scikit-learn's
    ``LatentDirichletAllocation.partial_fit`` is whatever its ``learning_method``.

    The estimator's own updater, unless that is batch VB's :class:`~bidlab.learn.Batch`
    (``method="batch"``), whose pass would replace the topics with the statistics of the
    given documents alone and so forget what was learnt before: then an
    :class:`~bidlab.learn.IncNorm` with the estimator's ``tau0`` and ``kappa``, its
    schedule going on from the minibatches the model has trained on.
    """
    if not isinstance(est.updater_, Batch):
        return est.updater_
    updater = IncNorm(tau0=est.tau0, kappa=est.kappa)
    updater.t = int(est.model_.n_batches) if est.model_.initialised else 0
    return updater
