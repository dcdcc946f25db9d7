"""Write the demo notebooks (outputs empty) with nbformat: ``python notebooks/make_notebooks.py``.

The notebooks are generated so their code stays reviewable here, in one file. Each starts
with a cell tagged ``parameters`` (the data path and sizes), which papermill-style tools
and the tests override; each runs headless (nbclient) on small data in well under a
minute and falls back to synthetic data, with a printed note, when the data is absent.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

DATA_PARAM = '''# parameters
# the shared data folder, relative to notebooks/ (it is ../shared/data from the repo root)
DATA = "../../shared/data"'''

LOAD_DATA = '''from pathlib import Path


def data_dir(name):
    """The data set's folder under DATA, or None (then the synthetic fallback is used)."""
    path = Path(DATA) / name
    if path.is_dir():
        return path
    print(f"note: {path} not found: using synthetic data instead (set DATA to the folder "
          "that holds the shared data sets)")
    return None'''

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "01_quickstart.ipynb": [
        ("markdown", "# bidlab quickstart: the cached matrix core in ten lines\n\n"
         "Every operation looks up its result container by (operator, operand GUIDs, scalar "
         "arguments) and writes into it, so after the first step the loop allocates nothing."),
        ("code", DATA_PARAM + "\nN_DOCS, N_WORDS, K = 1000, 5000, 64"),
        ("code", '''import numpy as np
import scipy.sparse as sp

import bidlab as bl

X = bl.SMat(sp.random(N_DOCS, N_WORDS, density=0.01, format="csr", dtype=np.float32))
mm = bl.Mat(np.asfortranarray(np.random.rand(K, N_WORDS).astype(np.float32)))     # k x words
user = bl.Mat(np.asfortranarray(np.random.rand(K, N_DOCS).astype(np.float32)))    # k x docs
alpha = bl.scalar(0.1)                        # a live hyperparameter: a 1x1 matrix
with bl.caching():                            # every result container is cached...
    for step in range(10):
        preds = bl.sddmm(user, mm, X)          # user[:, d] . mm[:, w] at each nonzero (d, w)
        user <<= bl.expdigamma(user * bl.dense_sparse_t(mm, X / preds) + alpha)
        alpha.set(0.1 / (step + 1))            # ...so changing it never grows the cache
print(bl.cache_stats())                        # hits, misses, allocations, bytes held'''),
    ],
    "02_lda_live.ipynb": [
        ("markdown", "# Live LDA: a word x topic bubble chart you can steer\n\n"
         "SAME Gibbs LDA trains in a background thread. The dashboard streams its scores ten "
         "times a second; the bubble chart shows each topic's top words (area ∝ weight). "
         "Click a bubble to select that (topic, word) parameter and set its temperature: "
         "the sampler uses it from its next minibatch, and heated bubbles get a red ring."),
        ("code", DATA_PARAM + "\nMAX_DOCS = 2000   # documents used (small: a quick demo)"
         "\nK = 10\nNPASSES = 40      # about 20 s of training on a laptop core"),
        ("code", LOAD_DATA),
        ("code", '''from bidlab.datasets import load_kos, synthetic_lda_corpus

folder = data_dir("uci-kos")
if folder:
    corpus = load_kos(DATA)
else:
    corpus = synthetic_lda_corpus(n_docs=MAX_DOCS, n_words=2000, k=K, seed=0)
X, vocab = corpus.X[:MAX_DOCS], corpus.vocab
print(corpus.name, X.shape)'''),
        ("code", '''from bidlab.widgets import Dashboard, TopicBubbles

from bidlab.models import LDAGibbs

learner = LDAGibbs(k=K, nsamps=20, batch_size=64, random_state=0).learner(X, n_passes=NPASSES)
dash = Dashboard(learner)     # re-running this cell replaces the dashboard: one update loop
dash'''),
        ("code", '''bubbles = TopicBubbles(learner, vocab, n_top=5)
bubbles'''),
        ("code", "learner.start()   # returns at once: training runs in a background thread"),
        ("code", '''# Heat one parameter from code (or click a bubble, then use its slider):
# topic 0's current top word gets temperature 4 from the sampler's next minibatch.
word = int(learner.estimator.components_[0].argmax())
learner.set_temperature(4.0, topic=0, word=word)
print("heated: topic 0, word", repr(vocab[word]))'''),
        ("code", '''# The temperature log says at which minibatch each change took effect
# (empty until the sampler's next minibatch: run this cell again after a moment).
learner.temperature_log'''),
    ],
    "03_glm_sweep.ipynb": [
        ("markdown", "# A live GLM hyperparameter sweep\n\n"
         "`glm_sweep` trains every (lrate, l2) configuration as one target of a single GLM, "
         "so one pass shares each sparse product among them all. The view draws one curve "
         "per configuration, highlights the current best, and can freeze the losers (their "
         "learning rate drops to ~0; the target map of a running GLM cannot shrink)."),
        ("code", DATA_PARAM + "\nMAX_ROWS = 20000\nNPASSES = 20\nKEEP = 2"),
        ("code", LOAD_DATA),
        ("code", '''from bidlab.datasets import load_a9a, synthetic_glm

folder = data_dir("libsvm-a9a")
if folder:
    Xtr, ytr, Xte, yte = load_a9a(DATA, zero_one=True)
    X, y = Xtr[:MAX_ROWS], ytr[:MAX_ROWS]
else:
    X, y, _ = synthetic_glm(MAX_ROWS, 2000, 20, seed=0)
print(X.shape)'''),
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
import time

time.sleep(1.0)  # a second of training, so every configuration has a score
frozen = view.request_freeze(KEEP)
print("frozen:", [view.labels[i] for i in frozen])'''),
    ],
    "04_kmeans.ipynb": [
        ("markdown", "# Live minibatch k-means\n\nCluster sizes and how far the centres "
         "move per update; the movement falls towards zero as k-means converges."),
        ("code", DATA_PARAM + "\nN, D, K = 50000, 16, 8\nNPASSES = 30"),
        ("code", '''from bidlab.datasets import blobs

data = blobs(N, D, K, spread=2.0, seed=0)   # synthetic: k-means needs no data files
print(data.X.shape)'''),
        ("code", '''from bidlab.widgets import Dashboard, KMeansView

from bidlab.models.kmeans import KMeans

learner = KMeans(K, algorithm="minibatch", random_state=0,
                 batch_size=1000).learner(data.X, n_passes=NPASSES)
KMeansView(learner)'''),
        ("code", "Dashboard(learner)"),
        ("code", "learner.start()"),
    ],
}


def build(name: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    for kind, src in NOTEBOOKS[name]:
        if kind == "markdown":
            nb.cells.append(nbformat.v4.new_markdown_cell(src))
        else:
            cell = nbformat.v4.new_code_cell(src)
            if src.startswith("# parameters"):
                cell.metadata["tags"] = ["parameters"]
            nb.cells.append(cell)
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating gives no diff
        cell["id"] = f"{Path(name).stem.split('_')[0]}-{i:02d}"
    return nb


def main() -> None:
    for name in NOTEBOOKS:
        nbformat.write(build(name), HERE / name)
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
