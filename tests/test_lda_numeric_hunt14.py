"""LDA / LDAGibbs numeric robustness: words every topic has forgotten, and long SAME runs
on large counts in float32."""

from __future__ import annotations

import numpy as np
import pytest

from bidlab.models import LDA, LDAGibbs


def _corpus(n_docs: int = 200, n_words: int = 50, k: int = 3, length: int = 40,
            seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_words, 0.1), size=k)
    theta = rng.dirichlet(np.full(k, 0.3), size=n_docs)
    return np.array([rng.multinomial(length, t @ phi) for t in theta], float)


@pytest.mark.parametrize(("dtype", "beta"), [(np.float32, 0.01), (np.float64, 1e-4)])
def test_vb_learns_a_word_every_topic_had_at_the_prior(dtype: type, beta: float) -> None:
    # Batch VB leaves a word absent from the first corpus at lambda = beta in every topic;
    # exp E[log phi] of it underflowed to 0 (float32 at the default beta, float64 at a
    # small one), so the word took no statistics ever after: continued training on
    # documents full of it kept it at the prior and the perplexity ~30x a fresh model's.
    X = _corpus()
    first = X.copy()
    first[:, 0] = 0
    lda = LDA(n_components=3, method="batch", n_passes=5, beta=beta, dtype=dtype,
              random_state=0).fit(first)
    later = X.copy()
    later[:, 0] = 20  # a third of every document's tokens
    lda.set_params(warm_start=True).fit(later)
    assert lda.components_[:, 0].min() > 0.1
    fresh = LDA(n_components=3, method="batch", n_passes=5, beta=beta, dtype=dtype,
                random_state=0).fit(later)
    assert lda.perplexity(later) < 1.2 * fresh.perplexity(later)


def test_vb_delete_topic_keeps_its_words_learnable() -> None:
    # Words held by deleted topics only are at beta in every topic that stays: training on
    # must bring them back (float32, the default dtype).
    X = _corpus()
    lda = LDA(n_components=4, method="batch", n_passes=3, random_state=0).fit(X)
    for _ in range(3):
        lda.delete_topic(0)
    lda.set_params(warm_start=True).fit(X)
    unigram = X.sum(axis=0) / X.sum()
    assert np.abs(lda.components_[0] - unigram).max() < 1e-3


def test_gibbs_float32_long_run_on_large_counts_stays_finite() -> None:
    # The CPU sampler keeps the counts as a * NT and decays a alone; NT grows as 1 / a and
    # was only folded back once a < 1e-30, so with large counts float32 NT overflowed to
    # inf first: fit raised DivergedError after ~1200 minibatches.
    X = _corpus(n_docs=40) * 1e7
    lda = LDAGibbs(n_components=3, n_passes=300, batch_size=8, tau0=0.0, kappa=0.51,
                   random_state=0).fit(X)
    model = lda.model_
    assert np.isfinite(model.NT.data).all()
    assert np.isfinite(lda.components_).all()
    assert float(model.NT.data.max()) * 1e4 < float(np.finfo(np.float32).max)


def test_online_vb_float32_keeps_a_rare_word() -> None:
    # A word first seen late in a pass (here: in the last document only) had its
    # lambda decayed to beta in every topic by then; in float32 it was lost for good
    # (lambda beta everywhere), where float64 learns it.
    X = _corpus(n_docs=400)
    X[:, 0] = 0
    X[-1, 0] = 5
    lams = [LDA(n_components=3, batch_size=20, n_passes=3, dtype=dtype, random_state=0)
            .fit(X).model_.lamT.data[0].astype(np.float64)
            for dtype in (np.float32, np.float64)]
    assert lams[0].max() > 1.0
    np.testing.assert_allclose(lams[0], lams[1], rtol=1e-3, atol=1e-6)
