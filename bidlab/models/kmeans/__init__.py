"""k-means: :class:`KMeans`, Lloyd's algorithm with GEMM distances and Hamerly bounds, or a
minibatch variant.

Modules: ``estimator`` (the scikit-learn face), ``model`` (``KMeansModel``, what the two
engines share), ``lloyd`` (``LloydKMeansModel``) with ``bounds`` (its per-row state) and
``farthest`` (empty clusters), ``minibatch`` (``MinibatchKMeansModel``), ``seeding``
(k-means++ and random starts), ``distances`` (squared distances and nearest centres),
``shift`` (dense rows far from the origin moved near it first).
"""

from bidlab.models.kmeans.estimator import KMeans

__all__ = ["KMeans"]
