"""k-means: :class:`KMeans`, Lloyd's algorithm with GEMM distances and Hamerly bounds, or a
minibatch variant.

Modules: ``estimator`` (the scikit-learn face), ``model`` (the engine), ``lloyd`` and
``minibatch`` (the two algorithms), ``seeding`` (k-means++ and random starts),
``distances`` (squared distances and nearest centres), ``blocks`` (dense row blocks).
"""

from bidlab.models.kmeans.estimator import KMeans

__all__ = ["KMeans"]
