"""The cells of ``03_glm_sweep.ipynb``: a live GLM hyperparameter sweep, every
configuration one target of a single GLM, the losers frozen, the winner tested."""

from __future__ import annotations

from .common import DATA_PARAM, LOAD_DATA, WAIT, WAIT_NOTE, WAIT_PARAM

CELLS: list[tuple[str, str]] = [
    ("markdown", "# A live GLM hyperparameter sweep\n\n"
     "`glm_sweep` trains every (lrate, l2) configuration as one target of a single GLM, "
     "so one pass shares each sparse product among them all. The view draws one curve "
     "per configuration, highlights the current best, and can freeze the losers (their "
     "learning rate drops to ~0; the target map of a running GLM cannot shrink)."),
    ("code", DATA_PARAM + "\nMAX_ROWS = 20000\nNPASSES = 20\nKEEP = 2" + WAIT_PARAM),
    ("code", LOAD_DATA),
    ("code", '''from bidlab.datasets import load_a9a, synthetic_glm

folder = data_dir("libsvm-a9a")
if folder:
    Xtr, ytr, X_test, y_test = load_a9a(folder.parent, zero_one=True)
    X, y = Xtr[:MAX_ROWS], ytr[:MAX_ROWS]
    name = "a9a"
else:
    Xs, Ys, _ = synthetic_glm(MAX_ROWS + MAX_ROWS // 4, 2000, 20, seed=0)
    X, y, X_test, y_test = Xs[:MAX_ROWS], Ys[:MAX_ROWS], Xs[MAX_ROWS:], Ys[MAX_ROWS:]
    name = "synthetic-glm"
print(f"{name}: train {X.shape}, test {X_test.shape}")'''),
    ("code", '''from bidlab.widgets import Dashboard, SweepView

from bidlab.models.glm import glm_sweep

lrates, l2s = [0.01, 0.1, 1.0], [0.0, 1e-4]
sweep = glm_sweep("logistic", lrate=lrates, l2=l2s, batch_size=500)
learner = sweep.learner(X, y, n_passes=NPASSES)
view = SweepView(learner, labels=[f"lrate={a:g} l2={b:g}" for a in lrates for b in l2s])
view'''),
    ("code", "Dashboard(learner, controls=[\"texp\", \"n_passes\"])"),
    ("code", "learner.start()"),
    ("code", '''# Once the curves have separated (or use the button above): keep the KEEP best.
import math
import time

time.sleep(1.0)  # a second of training, so the curves can separate
while learner.state == "running" and all(math.isnan(s) for s in view.scores):
    time.sleep(0.1)  # (a busy machine) until the view has scored the configurations
frozen = view.request_freeze(KEEP)
print("frozen:", [view.labels[i] for i in frozen])'''),
    ("markdown", WAIT_NOTE),
    ("code", WAIT),
    ("code", '''from bidlab.models.glm import best_config

# every configuration's accuracy on the held-out test rows, best first
best = best_config(sweep, X_test, y_test)
print(f"{'configuration':<20} {'test accuracy':>13}  status")
for row in best.table():
    status = "frozen" if row["index"] in frozen else "trained"
    print(f"{view.labels[row['index']]:<20} {row['score']:>13.4f}  {status}")
print(f"best: {view.labels[best.index]}, test accuracy {best.score:.4f}")'''),
]
