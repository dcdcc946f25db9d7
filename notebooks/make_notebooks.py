"""Write the demo notebooks with nbformat: ``python notebooks/make_notebooks.py``.

The notebooks are generated so their code stays reviewable here, in one file. Each starts
with a cell tagged ``parameters`` (the data folder and sizes), which papermill-style tools
and the tests override; each runs headless (nbclient) on small data in well under a
minute, falls back to synthetic data, with a printed note, when the data is absent, and
ends with the trained model on screen: the live demos wait for their learner to finish,
then print its state, passes, scores and what it learned.

``--execute`` also runs every notebook headless and saves its outputs, so the committed
notebooks (and the copies shipped in the wheel) show a trained model before anyone runs
them. The saved copy is slimmed by :func:`slim`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

#: The text a saved live widget shows: its state is not kept (see :func:`slim`).
WIDGET_NOTE = "[live widget: it appears when this cell runs in JupyterLab]"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

DATA_PARAM = '''# parameters
# The folder holding the shared data sets (uci-kos/, libsvm-a9a/, ...). None: found by
# bidlab.datasets.shared_data_dir ($BIDLAB_SHARED_DATA, else shared/data beside the checkout).
DATA = None'''

LOAD_DATA = '''from pathlib import Path

from bidlab.datasets import shared_data_dir


def data_dir(name):
    """The data set's folder, or None (then the synthetic fallback is used)."""
    try:
        base = Path(DATA) if DATA is not None else shared_data_dir()
    except FileNotFoundError:
        base = None
    if base is not None and (base / name).is_dir():
        return base / name
    print(f"note: {name}/ not found in {base or 'the shared data folders'}: using synthetic "
          "data instead (set DATA, or $BIDLAB_SHARED_DATA, to the folder that holds the "
          "shared data sets)")
    return None'''

WAIT_NOTE = ("## The trained model\n\n"
             "The next cell waits until the learner has run its `NPASSES` passes (the views "
             "above keep updating), so a headless run or *Run All* ends with the trained "
             "model. It does not wait when the passes would take longer than `MAX_WAIT_S` "
             "seconds: the learner then keeps training and the cells below show the model so "
             "far. While the cell waits the kernel is busy, so clicks on the views take effect "
             "when it returns; to steer the learner by hand, raise `NPASSES` or run the cells "
             "above one at a time.")

WAIT = '''import math
import time


def wait_for_passes(learner, max_seconds):
    """True once the learner is done; False, leaving it training, when its passes would
    take more than max_seconds (judged once a pass is done) or max_seconds have passed."""
    start = time.monotonic()
    while not learner.join(timeout=0.25):  # a training failure re-raises here
        m = learner.metrics
        too_long = m["pass"] >= 1 and m["elapsed"] / max(m["progress"], 1e-9) > max_seconds
        if too_long or time.monotonic() - start > max_seconds:
            return False
    return True


finished = wait_for_passes(learner, MAX_WAIT_S)
m = learner.metrics
print(f"state: {m['state']}, passes: {m['pass']}/{m['n_passes']}, minibatches: {m['step']}, "
      f"progress: {learner.progress:.0%}")
print(f"last {m['score_name']}: " + ", ".join(
    f"{part} {m[part + '_score']:.4f}" for part in ("train", "val")
    if math.isfinite(m[part + "_score"])))
if not finished:
    print(f"not waiting: the passes take longer than MAX_WAIT_S = {MAX_WAIT_S} s; the learner "
          "keeps training, and the cells below show the model so far")'''

WAIT_PARAM = "\nMAX_WAIT_S = 120  # the last cells wait at most this long for the trained model"

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "01_quickstart.ipynb": [
        ("markdown", "# bidlab quickstart: the cached matrix core in ten lines\n\n"
         "Every operation looks up its result container by (operator, operand GUIDs, scalar "
         "arguments) and writes into it, so after the first step the loop allocates nothing."),
        ("code", DATA_PARAM + "\nN_DOCS, N_WORDS, K = 1000, 5000, 64"
         "\nLDA_DOCS, LDA_TOPICS, LDA_PASSES = 3000, 10, 5"),
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
        ("markdown", "## A trained model on the same core\n\n"
         "The loop above is the E-step of variational LDA. The estimators wrap such loops: "
         "`LDA(...).fit` trains a topic model on the KOS blog corpus (planted synthetic "
         "topics when the data is absent) and returns when its passes are done."),
        ("code", LOAD_DATA),
        ("code", '''from bidlab.datasets import load_kos, synthetic_lda_corpus
from bidlab.models import LDA

folder = data_dir("uci-kos")
if folder:
    corpus = load_kos(folder.parent)
else:
    corpus = synthetic_lda_corpus(n_docs=LDA_DOCS + 500, n_words=2000, k=LDA_TOPICS, seed=0)
train, test = corpus.X[:LDA_DOCS], corpus.X[LDA_DOCS:]
lda = LDA(n_components=LDA_TOPICS, n_passes=LDA_PASSES, random_state=0).fit(train)
print(f"{corpus.name}: {train.shape[0]} documents x {train.shape[1]} words, "
      f"{lda.n_passes_done_} passes done")
print(f"held-out perplexity ({test.shape[0]} documents): {lda.perplexity(test):.0f}")
for t, words in enumerate(lda.top_words(8, corpus.vocab)):
    print(f"topic {t}: {' '.join(words)}")'''),
    ],
    "02_lda_live.ipynb": [
        ("markdown", "# Live LDA: a word x topic bubble chart you can steer\n\n"
         "SAME Gibbs LDA trains in a background thread. The dashboard streams its scores ten "
         "times a second; the bubble chart shows each topic's top words (area ∝ weight). "
         "Click a bubble to select that (topic, word) parameter and set its temperature: "
         "the sampler uses it from its next minibatch, and heated bubbles get a red ring."),
        ("code", DATA_PARAM + "\nMAX_DOCS = 2000   # documents trained on (small: a quick demo)"
         "\nN_TEST = 500     # held-out documents for the final score"
         "\nK = 10\nNPASSES = 40      # about 10 s of training on a laptop core" + WAIT_PARAM),
        ("code", LOAD_DATA),
        ("code", '''from bidlab.datasets import load_kos, synthetic_lda_corpus

folder = data_dir("uci-kos")
if folder:
    corpus = load_kos(folder.parent)
else:
    corpus = synthetic_lda_corpus(n_docs=MAX_DOCS + N_TEST, n_words=2000, k=K, seed=0)
X, vocab = corpus.X[:MAX_DOCS], corpus.vocab
X_test = corpus.X[MAX_DOCS:MAX_DOCS + N_TEST]
print(f"{corpus.name} ({X.shape[0]} documents x {X.shape[1]} words; "
      f"{X_test.shape[0]} held out)")'''),
        ("code", '''from bidlab.widgets import Dashboard, TopicBubbles

from bidlab.models import LDAGibbs

learner = LDAGibbs(n_components=K, nsamps=20, batch_size=64,
                   random_state=0).learner(X, n_passes=NPASSES)
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
        ("markdown", WAIT_NOTE),
        ("code", WAIT),
        ("code", '''lda = learner.estimator   # the estimator follows its learner: a fitted LDAGibbs
print(f"held-out perplexity ({X_test.shape[0]} documents): {lda.perplexity(X_test):.0f}")
for t, words in enumerate(lda.top_words(8, vocab)):
    print(f"topic {t}: {' '.join(words)}")'''),
        ("code", '''# The temperature log says at which pass and minibatch each change took effect.
for change in learner.temperature_log:
    print(f"pass {change['pass']}, minibatch {change['batch']}: topic {change['topic']}, "
          f"word {vocab[change['word']]!r} -> temperature {change['value']:g}")'''),
    ],
    "03_glm_sweep.ipynb": [
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
    ],
    "04_kmeans.ipynb": [
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
    ],
    "08_topic_steering.ipynb": [
        ("markdown", "# Steer the topics while LDA trains: merge, split, seed\n\n"
         "SAME Gibbs LDA trains on 20 Newsgroups in a background thread. The intertopic map "
         "places the topics by Jensen-Shannon distance (area: share of the tokens, colour: "
         "NPMI coherence); select topics on it and press *merge*, *split* or *delete*, or "
         "call the same edits from code as below. Each edit takes effect at the learner's "
         "next minibatch: no refit, no reloading of the documents."),
        ("code", DATA_PARAM + "\nCATEGORIES = ['rec.autos', 'sci.space', 'sci.med', "
         "'comp.graphics', 'rec.sport.hockey']"
         "\nK = 8\nNPASSES = 15      # about 10 s of training on a laptop core" + WAIT_PARAM),
        ("code", LOAD_DATA),
        ("code", '''from bidlab.datasets import load_20newsgroups, synthetic_lda_corpus

folder = data_dir("20newsgroups-bydate")
if folder:
    corpus = load_20newsgroups(folder.parent, "train", categories=CATEGORIES,
                               remove=("headers", "footers", "quotes"), min_df=5)
else:
    corpus = synthetic_lda_corpus(n_docs=2000, n_words=2000, k=K, seed=0)
vocab = list(corpus.vocab)
print(f"{corpus.name}: {corpus.X.shape[0]} documents x {corpus.X.shape[1]} words")'''),
        ("code", '''from bidlab.widgets import Dashboard, IntertopicMap

from bidlab.models import LDAGibbs

learner = LDAGibbs(n_components=K, random_state=0).learner(corpus, n_passes=NPASSES)
Dashboard(learner)'''),
        ("code", '''topic_map = IntertopicMap(learner, vocab)
topic_map'''),
        ("code", '''import time

learner.start()   # returns at once: training runs in a background thread
while learner.metrics["pass"] < 3 and learner.state == "running":
    time.sleep(0.2)
before = learner.coherence(measure="c_npmi", per_topic=True)
print(f"after {learner.metrics['pass']} passes: mean NPMI coherence {before.mean():.4f}")
for t, words in enumerate(learner.estimator.top_words(8, vocab)):
    print(f"topic {t} ({before[t]:+.3f}): {' '.join(words)}")'''),
        ("code", '''import numpy as np

# merge the two closest topics on the map
D = learner.intertopic_map()["distance"]
D[np.diag_indices_from(D)] = np.inf
a, b = (int(i) for i in np.unravel_index(np.argmin(D), D.shape))
print("merge:", learner.merge_topics([a, b]).wait())
# split the least coherent topic by its two most distinct word groups
worst = int(np.argmin(learner.coherence(measure="c_npmi", per_topic=True)))
print("split:", learner.split_topic(worst).wait())
# seed a topic from words (those in the vocabulary)
seeds = [w for w in ("space", "nasa", "orbit", "launch", "shuttle") if w in vocab] or vocab[:3]
print("seeded:", learner.add_topic(seed_words=seeds, weight=20.0).wait())'''),
        ("markdown", WAIT_NOTE),
        ("code", WAIT),
        ("code", '''after = learner.coherence(measure="c_npmi", per_topic=True)
print(f"mean NPMI coherence: before the edits {before.mean():.4f} ({len(before)} topics), "
      f"after {after.mean():.4f} ({len(after)} topics)")
for t, words in enumerate(learner.estimator.top_words(8, vocab)):
    print(f"topic {t} ({after[t]:+.3f}): {' '.join(words)}")
for e in learner.topic_edit_log:
    print(f"pass {e['pass']}, minibatch {e['batch']}: {e['kind']}, k {e['k_before']} -> "
          f"{e['k_after']}")'''),
    ],
    "05_factor_models.ipynb": [
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

sfa = SFA(K, l2=10.0, random_state=0)
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
    ],
    "06_graphs_bayesnets.ipynb": [
        ("markdown", "# Graphs and Bayesian networks, live\n\nPageRank on the wiki-Vote graph "
         "(one sparse mat-vec per pass, the L1 change per iteration on the dashboard), then "
         "the alarm network: every variable's marginal by blocked Gibbs sampling, with "
         "evidence set by a click on a bar while the chains run."),
        ("code", DATA_PARAM + "\nNCHAINS = 300    # Gibbs chains sampled at once\n"
         "NSAMPLES = 400   # kept sweeps" + WAIT_PARAM),
        ("code", LOAD_DATA),
        ("code", '''import numpy as np
import scipy.sparse as sp

from bidlab.datasets.graphs import load_snap_edges

folder = data_dir("snap-wiki-vote")
if folder is not None:
    g = load_snap_edges(folder / "wiki-Vote.txt")
    A, labels = g.A, g.ids
else:  # a random directed graph of 2,000 vertices
    rng = np.random.default_rng(0)
    A = sp.random(2000, 2000, density=0.005, format="csr", random_state=rng)
    labels = np.arange(2000)
print(f"{A.shape[0]:,} vertices, {A.nnz:,} edges")'''),
        ("code", '''from bidlab.widgets import Dashboard

from bidlab.models import PageRank

pr = PageRank(tol=1e-10, max_iter=200)
learner = pr.learner(A)
Dashboard(learner)   # the score curve is the L1 change of each iteration'''),
        ("code", "learner.start()"),
        ("markdown", WAIT_NOTE),
        ("code", WAIT),
        ("code", '''print(f"{pr.n_iter_} iterations, converged: {pr.converged_}")
print("top 10 vertices:")
for vertex, score in pr.top(10, labels=labels):
    print(f"  {vertex!s:>8}  {score:.5f}")'''),
        ("markdown", "## The alarm network\n\nEach bar is a state's posterior marginal "
         "(Rao-Blackwellised, over all chains). Click a bar to clamp that variable to that "
         "state from the next sweep on, click it again to clear it: the chains keep "
         "running, burn in again, and the bars move to the new posterior."),
        ("code", '''from bidlab.models import BayesNet
from bidlab.models.bayesnet import Network

folder = data_dir("bnlearn")
if folder is not None:
    bn = BayesNet.from_bif(folder / "alarm.bif.gz", n_chains=NCHAINS, burn_in=50,
                           n_samples=NSAMPLES, random_state=0)
    SHOW = ["HYPOVOLEMIA", "LVFAILURE", "STROKEVOLUME", "CO", "BP", "HRBP"]
    CLICK = "BP = LOW"
else:  # rain -> wet grass <- sprinkler
    net = Network(["rain", "sprinkler", "wet"], [["no", "yes"]] * 3, [[], [], [0, 1]],
                  [np.array([[0.8, 0.2]]), np.array([[0.6, 0.4]]),
                   np.array([[0.99, 0.01], [0.1, 0.9], [0.2, 0.8], [0.01, 0.99]])])
    bn = BayesNet(net, n_chains=NCHAINS, burn_in=50, n_samples=NSAMPLES, random_state=0)
    SHOW, CLICK = ["rain", "sprinkler", "wet"], "wet = yes"
print(bn.network_)'''),
        ("code", '''from bidlab.widgets import BayesNetView

learner = bn.learner()
view = BayesNetView(learner, variables=SHOW)
view'''),
        ("code", '''learner.start()
before = learner.model.marginals()
# what a click on the bar does (the same call the bar's click handler makes)
view.click(view.source.data["label"].index(CLICK))
print("evidence from the next sweep on:", learner.model.chains.evidence)'''),
        ("markdown", WAIT_NOTE),
        ("code", "finished" + WAIT.split("\n\n\nfinished", 1)[1]),
        ("code", '''model = learner.model
after = model.marginals()
net = bn.network_
print(f"evidence {model.chains.evidence}; {model.chains.kept} sweeps kept since it was set; "
      f"max R-hat {model.chains.rhat():.3f}")
print(f"{'variable':<14} {'state':<8} {'before':>7} {'after':>7}")
for name in SHOW:
    v = net.index(name)
    for s, state in enumerate(net.states[v]):
        print(f"{name:<14} {state:<8} {before[v][s]:>7.3f} {after[v][s]:>7.3f}")
print(f"PageRank above: {pr.n_iter_} iterations, converged: {pr.converged_}, top vertex "
      f"{pr.top(1, labels=labels)[0][0]}")'''),
    ],
}

NOTEBOOKS["07_distributed.ipynb"] = [
    ("markdown", "# Beyond one machine: data-parallel learners on MPI ranks, steered live\n\n"
     "`start_engines` starts ipyparallel engines that are the ranks of one MPI job (here 2 "
     "on this machine; any ipyparallel launcher, e.g. Slurm, by name). `RankedLearner` "
     "builds the same estimator's learner on every rank, each on its share of the rows, "
     "combined at the learner's sync points over MPI. Its `learner` is a proxy in this "
     "kernel that reads the ranks' merged metrics, so `Dashboard(...)` and the JupyterLab "
     "Learners panel work on it: buttons, option controls and `set(...)` reach every rank "
     "at the same step. Needs `pip install 'bidlab[mpi]'`."),
    ("code", DATA_PARAM + "\nNRANKS = 2         # MPI engines started from this notebook"
     "\nK = 10             # LDA topics\nLDA_PASSES = 3     # the LDA is stopped after these"
     "\nNPASSES = 4        # GLM passes\nNEW_LRATE = 0.05   # the GLM's rate, set mid-run"
     + WAIT_PARAM),
    ("code", LOAD_DATA),
    ("code", '''from bidlab.distributed import RankedLearner, start_engines

cluster, client = start_engines(NRANKS)   # local MPI engines (mpiexec)
print(f"{len(client.ids)} MPI engines")'''),
    ("markdown", "## Online LDA on 2 ranks, stopped from the notebook\n\n"
     "Every rank trains on its half of the documents; the topic matrices are averaged "
     "every minibatch. The dashboard's curve is the ranks' mean score."),
    ("code", '''from bidlab.datasets import load_kos, synthetic_lda_corpus

folder = data_dir("uci-kos")
corpus = load_kos(folder.parent) if folder else synthetic_lda_corpus(
    n_docs=2000, n_words=2000, k=K, seed=0)
lda_ranks = RankedLearner(client, "lda", (corpus.X,),
                          params={"n_components": K, "random_state": 0},
                          options={"n_passes": 1000, "batch_size": 256})
print(f"{corpus.name}: {corpus.X.shape[0]} documents on {lda_ranks.size} ranks")'''),
    ("code", '''from bidlab.widgets import Dashboard

lda_learner = lda_ranks.learner    # the ranks as one learner of this kernel
Dashboard(lda_learner)'''),
    ("code", '''import time

lda_learner.start()
while lda_learner.metrics["pass"] < LDA_PASSES and lda_learner.state == "running":
    time.sleep(0.2)
print("stopped:", lda_learner.stop(), "| each rank:", lda_ranks.states,
      "| steps per rank:", [m["step"] for m in lda_ranks.metrics(per_rank=True)])
lda = lda_ranks.estimator()        # rank 0's model, copied here
for t, words in enumerate(lda.top_words(6, corpus.vocab)[:5]):
    print(f"topic {t}: {' '.join(words)}")'''),
    ("markdown", "## A GLM on 2 ranks, its learning rate changed mid-run\n\n"
     "Logistic regression on a9a (ADAGrad), the weights averaged every minibatch. The "
     "cell after the dashboard pauses both ranks at the same step, sets a new `lrate` and "
     "resumes: every rank's record shows the new value from the same step on (the "
     "dashboard's `lrate` slider does the same through `learner.set`)."),
    ("code", '''from bidlab.datasets import load_a9a, synthetic_glm

folder = data_dir("libsvm-a9a")
if folder:
    X, y, X_test, y_test = load_a9a(folder.parent, zero_one=True)
else:
    Xs, ys, _ = synthetic_glm(12000, 500, 20, seed=0)
    X, y, X_test, y_test = Xs[:10000], ys[:10000], Xs[10000:], ys[10000:]
glm_ranks = RankedLearner(client, "glm", (X, y), params={"link": "logistic"},
                          options={"n_passes": NPASSES, "batch_size": 500})
learner = glm_ranks.learner
Dashboard(learner, controls=["lrate", "l2"])'''),
    ("code", '''import numpy as np

learner.start()
while learner.metrics["step"] < 10 and learner.state == "running":
    time.sleep(0.05)
learner.pause(wait=True)              # every rank stops at the same minibatch
paused_at = [m["step"] for m in glm_ranks.metrics(per_rank=True)]
version = learner.set(lrate=NEW_LRATE)
learner.resume()
print(f"paused at steps {paused_at} (rank 0, rank 1, ...); lrate {NEW_LRATE} set")'''),
    ("markdown", WAIT_NOTE),
    ("code", WAIT),
    ("code", '''from bidlab.lab.snapshot import describe  # what the JupyterLab Learners panel shows

first = [int(r["step"][np.flatnonzero(r["opts_version"] >= version)[0]])
         for r in glm_ranks.records()]
print(f"the new lrate took effect at steps {first} (rank 0, rank 1, ...); lrate on each "
      f"rank: {[float(np.ravel(v)[0]) for v in glm_ranks.option('lrate')]}")
glm = glm_ranks.estimator()
print(f"merged: {learner.metrics['samples']} samples on {learner.metrics['ranks']} ranks; "
      f"held-out accuracy {glm.score(X_test, y_test):.4f}")
print("Learners panel:", ", ".join(f"{d['name']} {d['state']}"
                                    for d in map(describe, (lda_learner, learner))))'''),
    ("code", '''from bidlab.distributed import stop_engines

stop_engines(cluster, client, lda_ranks, glm_ranks)   # ends the MPI job
print("engines stopped")'''),
]


def build(name: str) -> nbformat.NotebookNode:
    """The notebook ``name`` without outputs."""
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


def _is_bokeh_loader(output: nbformat.NotebookNode) -> bool:
    data = output.get("data", {})
    return any(k == "application/javascript" or k.startswith("application/vnd.bokehjs")
               for k in data)


def slim(nb: nbformat.NotebookNode, forbidden: tuple[str, ...] = ()) -> nbformat.NotebookNode:
    """Make an executed notebook fit to commit and ship; return it (changed in place).

    * BokehJS, inlined by the first chart (megabytes), is dropped: it is sent again when
      the notebook runs.
    * The saved widget state is dropped and each live widget's output becomes
      :data:`WIDGET_NOTE`: the state is large and would be stale (the charts stream
      through messages it does not hold), and without it JupyterLab would show "model
      not found" instead of the note.
    * ValueError when an output contains one of the ``forbidden`` strings (this machine's
      folders): a shipped notebook must not show them.
    """
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            if _is_bokeh_loader(out):
                continue
            if WIDGET_MIME in out.get("data", {}):
                # a static picture of the final state (widgets/static.py) stays beside it
                out["data"] = {**{k: v for k, v in out["data"].items()
                                  if k.startswith("image/")}, "text/plain": WIDGET_NOTE}
                out["metadata"] = {}
            text = nbformat.writes(nbformat.from_dict({"o": out}))
            hit = next((s for s in forbidden if s and s in text), None)
            if hit is not None:
                raise ValueError(f"cell {cell.get('id')} prints this machine's path {hit!r}: "
                                 "change what it prints before saving the outputs")
            kept.append(out)
        cell.outputs = kept
    return nb


def execute(name: str, timeout: int = 600) -> nbformat.NotebookNode:
    """Run notebook ``name`` headless (kernel in notebooks/) and return it, slimmed."""
    import nbclient
    from bidlab.widgets.static import attach_snapshots, snapshot_cell

    nb = build(name)
    nb.cells.append(snapshot_cell())  # pictures of the live views' final state
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(HERE)}}).execute()
    attach_snapshots(nb)
    forbidden = [str(HERE.parent), str(HERE.parent.parent), str(Path.home())]
    try:
        from bidlab.datasets import shared_data_dir

        forbidden.append(str(shared_data_dir().resolve()))
    except FileNotFoundError:
        pass
    return slim(nb, forbidden=tuple(s for s in forbidden if len(s) > 1))


def main(argv: list[str] | None = None) -> int:
    """Write the notebooks; with ``--execute``, with their outputs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execute", action="store_true",
                        help="run each notebook headless and save its outputs")
    parser.add_argument("--data", default=None,
                        help="the shared data folder for the run (sets $BIDLAB_SHARED_DATA "
                        "for the kernel; the notebooks' DATA parameter stays None)")
    parser.add_argument("names", nargs="*", help="notebooks to write (default: all)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in NOTEBOOKS]
    if unknown:
        parser.error(f"unknown notebooks {unknown}; the notebooks are {list(NOTEBOOKS)}")
    if args.data:
        os.environ["BIDLAB_SHARED_DATA"] = str(Path(args.data).resolve())
    for name in args.names or NOTEBOOKS:
        nb = execute(name) if args.execute else build(name)
        nbformat.write(nb, HERE / name)
        print("wrote", HERE / name, "(executed)" if args.execute else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
