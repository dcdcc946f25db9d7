"""The cells of ``05_factor_models.ipynb``: NMF with missing values (its components chosen
by cross-validation), then SFA on MovieLens with its live view of similar movies."""

from __future__ import annotations

from .common import DATA_PARAM, LOAD_DATA, WAIT, WAIT_NOTE, WAIT_PARAM

CELLS: list[tuple[str, str]] = [
    ("markdown", "# Factor models: NMF with missing values, SFA on MovieLens\n\n"
     "NMF counts only the observed entries (NaN marks the missing ones), so the number "
     "of components can be chosen by cross-validation. SFA factorises ratings by "
     "alternating least squares with conjugate-gradient steps; its live view lists the "
     "movies closest to a few popular ones while the factors train."),
    ("code", DATA_PARAM + "\nK = 32\nNPASSES = 15" + WAIT_PARAM),
    ("code", '''import numpy as np
from sklearn.model_selection import GridSearchCV

from bidlab.models import NMF

rng = np.random.default_rng(0)
full = rng.random((300, 4)) @ rng.random((4, 60))       # rank 4, nonnegative
X = full.copy()
missing = rng.random(X.shape) < 0.3
X[missing] = np.nan                                      # 30 % of the entries unknown
nmf = NMF(4, max_iter=200, random_state=0).fit(X)
filled = nmf.inverse_transform(nmf.transform(X))
print(f"RMSE on the missing entries: {np.sqrt(np.mean((filled - full)[missing] ** 2)):.4f} "
      f"(their spread: {full[missing].std():.4f})")
search = GridSearchCV(NMF(max_iter=100, random_state=0), {"n_components": [2, 4, 6]},
                      cv=3).fit(X)
print("best n_components:", search.best_params_["n_components"])'''),
    ("code", LOAD_DATA),
    ("code", '''import scipy.sparse as sp

from bidlab.datasets import load_movielens
from bidlab.datasets.movielens import Ratings

folder = data_dir("movielens-latest-small")
if folder is not None:
    ml = load_movielens(folder.parent)
else:  # synthetic ratings: 300 users x 200 items of rank 5
    r = np.random.default_rng(1)
    scores = r.normal(size=(300, 5)) @ r.normal(size=(5, 200)) / 2 + 3.5
    keep = r.random(scores.shape) < 0.1
    keep[:, 0] = True
    u, i = np.nonzero(keep)
    R = sp.csr_matrix((np.clip(scores[u, i], 0.5, 5), (u, i)), shape=scores.shape)
    ml = Ratings(R, np.arange(300), np.arange(200), [f"item {j}" for j in range(200)])
parts = ml.split(0.2, seed=0)
print(f"{ml.X.shape[0]} users x {ml.X.shape[1]} items, {parts.train.nnz} training and "
      f"{parts.test.nnz} held-out ratings")'''),
    ("code", '''from bidlab.widgets import Dashboard, SimilarItemsView

from bidlab.models import SFA

sfa = SFA(K, random_state=0)
learner = sfa.learner(parts.train, n_passes=NPASSES)
SimilarItemsView(learner, ml.titles, n=5, train=parts.train, test=parts.test, min_ratings=10)'''),
    ("code", "Dashboard(learner)"),
    ("code", "learner.start()"),
    ("markdown", WAIT_NOTE),
    ("code", WAIT),
    ("code", '''from bidlab.models.sfa.metrics import ranking_metrics, rmse

test = parts.test
users = np.repeat(np.arange(test.shape[0]), np.diff(test.indptr))
mean = np.full(test.nnz, parts.train.data.mean())
print(f"held-out RMSE: {rmse(test.data, sfa.predict(users, test.indices)):.4f} "
      f"(predicting the mean: {rmse(test.data, mean):.4f})")
U, V, b = sfa.user_factors_, sfa.item_factors_, sfa.item_bias_
m = ranking_metrics(lambda u: U[u] @ V.T + b, parts.train, test, k=10)
print("held-out ranking: " + ", ".join(f"{k} {v:.4f}" for k, v in m.items()))
items, scores = sfa.recommend(0, n=5)
print("recommended to user 0:")
for j, s in zip(items, scores, strict=True):
    print(f"  {s:.2f}  {ml.titles[j]}")
first = int(np.argmax(np.diff(parts.train.tocsc().indptr)))
print(f"most similar to {ml.titles[first]}:",
      "; ".join(ml.titles[j] for j in sfa.similar_items(first, n=3, min_ratings=10)[0]))'''),
]
