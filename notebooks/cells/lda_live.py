"""The cells of ``02_lda_live.ipynb``: SAME Gibbs LDA trained live, its dashboard and the
word x topic bubble chart whose clicks set parameters' temperatures."""

from __future__ import annotations

from .common import DATA_PARAM, LOAD_DATA, WAIT, WAIT_NOTE, WAIT_PARAM, corpus_cell

CELLS: list[tuple[str, str]] = [
    ("markdown", "# Live LDA: a word x topic bubble chart you can steer\n\n"
     "SAME Gibbs LDA trains in a background thread. The dashboard streams its scores ten "
     "times a second; the bubble chart shows each topic's top words (area ∝ weight). "
     "Click a bubble to select that (topic, word) parameter and set its temperature: "
     "the sampler uses it from its next minibatch, and heated bubbles get a red ring."),
    ("code", DATA_PARAM + "\nMAX_DOCS = 2000   # documents trained on (small: a quick demo)"
     "\nN_TEST = 500     # held-out documents for the final score"
     "\nK = 10\nNPASSES = 40      # about 10 s of training on a laptop core" + WAIT_PARAM),
    ("code", LOAD_DATA),
    ("code", corpus_cell(
        "load_kos", "uci-kos", "load_kos(folder.parent)", "MAX_DOCS + N_TEST", "K",
        '''X, vocab = corpus.X[:MAX_DOCS], corpus.vocab
X_test = corpus.X[MAX_DOCS:MAX_DOCS + N_TEST]
print(f"{corpus.name} ({X.shape[0]} documents x {X.shape[1]} words; "
      f"{X_test.shape[0]} held out)")''')),
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
]
