"""The cells of ``04_kmeans.ipynb``: live minibatch k-means, its cluster sizes and how far
the centres move per update."""

from __future__ import annotations

from .common import DATA_PARAM, WAIT, WAIT_NOTE, WAIT_PARAM

CELLS: list[tuple[str, str]] = [
    ("markdown", "# Live minibatch k-means\n\nCluster sizes and how far the centres "
     "move per update; the movement falls towards zero as k-means converges."),
    ("code", DATA_PARAM + "\nN, D, K = 50000, 16, 8\nNPASSES = 30" + WAIT_PARAM),
    ("code", '''from bidlab.datasets import blobs

data = blobs(N, D, K, spread=2.0, seed=0)   # synthetic: k-means needs no data files
print(data.X.shape)'''),
    ("code", '''from bidlab.widgets import Dashboard, KMeansView

from bidlab.models.kmeans import KMeans

# max_no_improvement=None: run all NPASSES passes (fit stops early by default)
km = KMeans(K, algorithm="minibatch", random_state=0, batch_size=1000, max_no_improvement=None)
learner = km.learner(data.X, n_passes=NPASSES)
KMeansView(learner)'''),
    ("code", "Dashboard(learner)"),
    ("code", "learner.start()"),
    ("markdown", WAIT_NOTE),
    ("code", WAIT),
    ("code", '''import numpy as np
from sklearn.metrics import adjusted_rand_score

# km follows its learner: predict uses the trained centres
labels = km.predict(data.X)
print(f"mean squared distance to the nearest centre: {-km.score(data.X) / N:.3f}")
print(f"adjusted Rand index against the planted clusters: "
      f"{adjusted_rand_score(data.labels, labels):.4f}")
gap = np.linalg.norm(km.cluster_centers_[:, None] - data.centers[None], axis=2)
print("cluster   size   distance to the nearest planted centre")
for c in range(K):
    print(f"{c:>7} {int((labels == c).sum()):>6}   {gap[c].min():.3f}")'''),
]
