"""LDA and LDAGibbs as a scikit-learn user drives them on small corpora: the online step
schedule at its edge (``tau0=0``) and ``partial_fit`` on a batch variational model."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.datasets import synthetic_lda_corpus
from bidlab.models import LDA, LDAGibbs


@pytest.fixture(scope="module")
def corpus():
    return synthetic_lda_corpus(n_docs=400, n_words=200, k=5, doc_len=(20, 60), seed=4).X


def test_gibbs_tau0_zero_takes_a_full_first_step(corpus):
    # tau0=0 is allowed (>= 0) and makes the first step rho_1 = 1: the counts are
    # replaced by the minibatch's; the lazily scaled CPU counts divided by a = 1 - rho = 0
    train = corpus[:300]
    lda = LDAGibbs(n_components=5, nsamps=5, tau0=0.0, n_passes=2, random_state=0)
    lda.fit(train)
    comp = lda.components_
    assert np.isfinite(comp).all()
    np.testing.assert_allclose(comp.sum(axis=1), 1.0, rtol=1e-9)
    # a model that learnt something: far better than uniform on held-out documents
    assert lda.perplexity(corpus[300:]) < 0.5 * corpus.shape[1]


def test_gibbs_tau0_zero_first_minibatch_is_its_own_estimate(corpus):
    # one minibatch of the whole corpus with rho = 1: the counts become that minibatch's
    # full-data estimate, whatever the initial topics were
    fits = [LDAGibbs(n_components=5, nsamps=5, tau0=0.0, n_passes=1, e_iters=2,
                     batch_size=corpus.shape[0], random_state=0, init=init).fit(corpus)
            for init in ("kmeans", "random")]
    for lda in fits:
        assert lda.n_batches_ == 1
        assert np.isfinite(lda.components_).all()
        assert lda.model_.scale == 1.0


def test_batch_vb_partial_fit_continues_the_model(corpus):
    # scikit-learn's partial_fit is an online step whatever learning_method; a batch pass
    # here replaced lambda with the statistics of the few new documents alone, forgetting
    # every document the model was fitted on (held-out perplexity about doubled)
    train, test = corpus[:300], corpus[300:]
    lda = LDA(n_components=5, method="batch", n_passes=5, random_state=0).fit(train)
    before, topics = lda.perplexity(test), lda.components_
    lda.partial_fit(train[:20])
    assert lda.perplexity(test) < 1.05 * before
    assert np.abs(lda.components_ - topics).max() < 0.01
    assert lda.n_passes_done_ == 6
    # the estimator stays a batch model: a warm-started fit makes batch passes again
    assert type(lda.updater_).__name__ == "Batch"
    lda.set_params(warm_start=True, n_passes=1).fit(train)
    assert lda.n_passes_done_ == 7


def test_batch_vb_partial_fit_shards_equal_one_online_pass(corpus):
    # partial_fit's documented promise, for method="batch" too: shards (multiples of
    # batch_size, the first holding the documents the initialisation looks at) equal one
    # online pass over their concatenation
    train = corpus[:400]
    online = LDA(n_components=5, n_passes=1, batch_size=50, random_state=0).fit(train)
    shards = LDA(n_components=5, method="batch", n_passes=1, batch_size=50,
                 total_docs=400, random_state=0)
    shards.partial_fit(train[:300])
    shards.partial_fit(train[300:])
    np.testing.assert_allclose(shards.components_, online.components_, rtol=0, atol=1e-6)
