"""Models: one package per model family, each with a scikit-learn surface and a live ``.learner()``.

* :class:`LDA`: topic models by online or batch variational Bayes;
* :class:`LDAGibbs`: SAME Gibbs sampling with per-parameter temperatures;
* :class:`GLM`: linear / logistic / softmax / SVM, many targets (or a sweep) in one pass;
  :func:`glm_sweep` builds a sweep, :func:`best_config` picks its winner;
* :class:`KMeans`: Lloyd's algorithm by GEMM distances, and a minibatch variant;
* :class:`NMF`: nonnegative matrix factorisation by multiplicative updates, over the
  observed entries (missing values as NaN or a mask), full-batch or online;
* :class:`~bidlab.models.lsq.LeastSquares`: the spine's small reference model (a bare
  :class:`bidlab.learn.Model`, trained by a :class:`bidlab.learn.Learner` directly).

Every estimator saves itself with ``est.save(path)`` (the pickle-free safe format);
:func:`load` reads any of them back.
"""

from bidlab.models.base import BidlabEstimator, load
from bidlab.models.glm import GLM, best_config, glm_sweep
from bidlab.models.kmeans import KMeans
from bidlab.models.lda import LDA, LDAGibbs
from bidlab.models.lsq import LeastSquares
from bidlab.models.nmf import NMF

__all__ = ["LDA", "LDAGibbs", "GLM", "KMeans", "NMF", "LeastSquares", "BidlabEstimator", "load",
           "glm_sweep", "best_config"]
