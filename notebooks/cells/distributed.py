"""The cells of ``07_distributed.ipynb``: learners on MPI ranks steered from the notebook,
LDA stopped mid-run and a GLM's learning rate changed mid-run."""

from __future__ import annotations

from .common import DATA_PARAM, LOAD_DATA, WAIT, WAIT_NOTE, WAIT_PARAM

CELLS: list[tuple[str, str]] = [
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
     "\nNPASSES = 60       # GLM passes (seconds of training: time to pause it mid-run)"
     "\nNEW_LRATE = 0.05   # the GLM's rate, set mid-run"
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
