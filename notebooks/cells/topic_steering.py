"""The cells of ``08_topic_steering.ipynb``: topics merged, split, deleted and seeded while
SAME Gibbs LDA trains, on the intertopic map and from code."""

from __future__ import annotations

from .common import DATA_PARAM, LOAD_DATA, WAIT, WAIT_NOTE, WAIT_PARAM, corpus_cell

CELLS: list[tuple[str, str]] = [
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
    ("code", corpus_cell(
        "load_20newsgroups", "20newsgroups-bydate",
        '''load_20newsgroups(folder.parent, "train", categories=CATEGORIES,
                               remove=("headers", "footers", "quotes"), min_df=5)''',
        "2000", "K",
        '''vocab = list(corpus.vocab)
print(f"{corpus.name}: {corpus.X.shape[0]} documents x {corpus.X.shape[1]} words")''')),
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
]
