"""The cells of ``01_quickstart.ipynb``: the cached matrix core in ten lines, then LDA
trained on a corpus."""

from __future__ import annotations

from .common import DATA_PARAM, LOAD_DATA, corpus_cell

CELLS: list[tuple[str, str]] = [
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
    ("code", corpus_cell(
        "load_kos", "uci-kos", "load_kos(folder.parent)", "LDA_DOCS + 500", "LDA_TOPICS",
        '''train, test = corpus.X[:LDA_DOCS], corpus.X[LDA_DOCS:]
lda = LDA(n_components=LDA_TOPICS, n_passes=LDA_PASSES, random_state=0).fit(train)
print(f"{corpus.name}: {train.shape[0]} documents x {train.shape[1]} words, "
      f"{lda.n_passes_done_} passes done")
print(f"held-out perplexity ({test.shape[0]} documents): {lda.perplexity(test):.0f}")
for t, words in enumerate(lda.top_words(8, corpus.vocab)):
    print(f"topic {t}: {' '.join(words)}")''', extra_import="from bidlab.models import LDA\n")),
]
