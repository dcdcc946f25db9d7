"""Generalised linear models: :class:`GLM` (linear / logistic / softmax / SVM links, many
targets or a sweep of configurations in one pass), :func:`glm_sweep`, :func:`best_config`.

Modules: ``estimator`` (the scikit-learn face), ``model`` (the engine), ``links`` (the links'
gradient steps), ``targets`` (target columns and classes), ``params`` (parameter checks),
``inputs`` (the checks of what fit / predict are given), ``weights`` (``coef_``,
``intercept_``, one target as a GLM), ``sweep`` (a sweep's result and winner).
"""

from bidlab.models.glm.estimator import GLM, glm_sweep
from bidlab.models.glm.sweep import SweepResult, best_config

__all__ = ["GLM", "glm_sweep", "best_config", "SweepResult"]
