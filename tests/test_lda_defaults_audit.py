"""Default minibatch sizes of the LDA estimators on short documents.

The default minibatch is counted in documents (512 for variational Bayes, 64 for SAME
Gibbs on the CPU); with documents of a few tokens such a minibatch carries so few tokens
that the online steps are too noisy and training settles on a poor optimum. The defaults
therefore grow the minibatch until it holds enough tokens, and leave longer documents be.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models import LDA, LDAGibbs


def lda_corpus(n_docs: int, n_words: int, k: int, lengths: tuple[int, int],
               seed: int) -> sp.csr_matrix:
    """Documents drawn from plain LDA: overlapping Dirichlet(0.05) topics, alpha 0.1."""
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_words, 0.05), size=k)
    theta = rng.dirichlet(np.full(k, 0.1), size=n_docs)
    p = theta @ phi
    sizes = rng.integers(lengths[0], lengths[1] + 1, size=n_docs)
    rows = [rng.multinomial(sizes[d], p[d] / p[d].sum()) for d in range(n_docs)]
    return sp.csr_matrix(np.asarray(rows, dtype=np.float64))


@pytest.fixture(scope="module")
def short_docs() -> tuple[sp.csr_matrix, sp.csr_matrix]:
    X = lda_corpus(4000, 1000, 20, (5, 15), seed=0)  # about 10 tokens a document
    return X[:3200], X[3200:]


@pytest.mark.parametrize("cls, tokens", [(LDA, LDA._min_batch_tokens),
                                         (LDAGibbs, LDAGibbs._min_batch_tokens)])
def test_short_documents_get_minibatches_of_enough_tokens(short_docs, cls, tokens):
    train, _ = short_docs
    est = cls(n_components=20, n_passes=1).fit(train)
    per_doc = float(train.sum()) / train.shape[0]
    rows = est.model_.batch_rows
    assert rows == train.shape[0] or rows * per_doc >= tokens  # all, or enough tokens
    assert est.model_.batch_rows > cls._cpu_batch


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_documents_of_64_tokens_or_more_keep_the_default_batch(cls):
    X = lda_corpus(600, 300, 5, (70, 90), seed=1)
    est = cls(n_components=5, n_passes=1).fit(X)
    assert est.model_.batch_rows == min(cls._cpu_batch, X.shape[0])


@pytest.mark.parametrize("cls, old_batch", [(LDA, 512), (LDAGibbs, 64)])
def test_default_fit_on_short_documents_beats_the_fixed_document_count(short_docs, cls,
                                                                        old_batch):
    train, test = short_docs
    default = cls(n_components=20).fit(train).score(test)
    fixed = cls(n_components=20, batch_size=old_batch).fit(train).score(test)
    assert default > fixed + 0.05, (default, fixed)
