"""Topic models: :class:`LDA` (online or batch variational Bayes) and :class:`LDAGibbs`
(SAME Gibbs sampling with per-parameter temperatures).

Modules: ``vb`` (LDA's engine and estimator), ``gibbs`` (LDAGibbs; its engine in
``gibbs_model``), ``estimator`` (the estimator face both share), ``core`` (the engine both
share), ``common`` (E-step, held-out score, input checks), ``learner`` (the learner both
train with).
"""

from bidlab.models.lda.gibbs import LDAGibbs, LDAGibbsModel
from bidlab.models.lda.vb import LDA, LDAModel

__all__ = ["LDA", "LDAGibbs", "LDAModel", "LDAGibbsModel"]
