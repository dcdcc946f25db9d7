"""Matrix factorisation by alternating least squares with conjugate gradient: :class:`SFA`,
for explicit ratings (biases, L2) and implicit feedback (confidence weighting).

Modules: ``estimator`` (the scikit-learn face), ``model`` (the engine: item factors as the
model matrix, user factors as per-row state), ``serve`` (predictions, recommendations,
similar items, fold-in), ``inputs`` (input checks), ``metrics`` (RMSE and the ranking
metrics p@k, MAP@k, NDCG@k).
"""

from bidlab.models.sfa.estimator import SFA

__all__ = ["SFA"]
