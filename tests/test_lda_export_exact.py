"""Exact Jensen-Shannon distances of the topic views, must-links kept by batch variational
Bayes, and the errors of edits given the wrong kind of argument."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda import export
from bidlab.models.lda.reshape import topic_counts

BLOCK = 6  # words per planted topic


@pytest.fixture(scope="module")
def corpus():
    return block_diagonal_corpus(k=4, words_per_topic=BLOCK, n_docs=400, doc_len=30, seed=1)


def _tailed(V=1000, seed=0):
    """Topics with one heavy word each and their other words, all below 1/V, spread
    differently: the tail decides much of each distance."""
    rng = np.random.default_rng(seed)
    P = np.zeros((3, V))
    for t in range(3):
        P[t, t] = 0.6
        P[t, 3:] = rng.random(V - 3)
        P[t, 3:] *= 0.4 / P[t, 3:].sum()
    P[2, 3:] = P[1, 3:] * (1.0 + 1e-9 * rng.random(V - 3))  # nearly equal tails
    P[1, 1] = P[2, 2] = 0.0
    P[1, 2], P[2, 1] = 0.6, 0.6
    return P / P.sum(axis=1, keepdims=True)


def test_js_distances_equal_scipy_on_the_full_distributions():
    P = _tailed()
    assert P[:, 3:].max() < 1.0 / P.shape[1]
    want = np.array([[jensenshannon(a, b) if i != j else 0.0 for j, b in enumerate(P)]
                     for i, a in enumerate(P)])
    np.testing.assert_allclose(export.js_distances(P), want, rtol=0, atol=1e-12)
    Q = _tailed(seed=1)[:2]
    want = np.array([[jensenshannon(a, b) for b in Q] for a in P])
    np.testing.assert_allclose(export.js_distances(P, Q), want, rtol=0, atol=1e-12)
    m = export.intertopic_map(P)
    np.testing.assert_allclose(m["distance"], export.js_distances(P), atol=1e-15)


def test_topic_diff_js_is_gensims_divergence():
    P, Q = _tailed(), _tailed(seed=1)
    want = np.array([[jensenshannon(a, b) ** 2 for b in Q] for a in P])
    np.testing.assert_allclose(export.topic_diff(P, Q), want, rtol=0, atol=1e-12)
    matutils = pytest.importorskip("gensim.matutils")
    ref = np.array([[matutils.jensen_shannon(a, b) for b in Q] for a in P])
    np.testing.assert_allclose(export.topic_diff(P, Q), ref, rtol=0, atol=1e-12)


def _tv(est, a, b):
    """Total-variation distance of p(topic | a) and p(topic | b)."""
    C = topic_counts(est.model_)
    pa, pb = C[a] / C[a].sum(), C[b] / C[b].sum()
    return 0.5 * float(np.abs(pa - pb).sum())


def test_must_link_holds_after_batch_passes(corpus):
    a, b = 0, BLOCK  # words of two different planted topics
    est = LDA(n_components=4, n_passes=2, random_state=0, method="batch").fit(corpus)
    assert _tv(est, a, b) > 0.5
    est.must_link([a, b]).wait()
    est.set_params(warm_start=True, n_passes=2)
    est.fit(corpus)
    assert _tv(est, a, b) < 1e-6


@pytest.mark.parametrize("cls", [LDAGibbs, LDA])
def test_edits_name_the_argument_of_the_wrong_kind(cls, corpus):
    est = cls(n_components=3, n_passes=1, random_state=0).fit(corpus)
    before = est.components_.copy()
    with pytest.raises(TypeError, match="list of two or more topic ids"):
        est.merge_topics(1)
    with pytest.raises(TypeError, match="weight must be a number"):
        est.set_word_prior("t0_w0", 1, "5")
    np.testing.assert_array_equal(est.components_, before)
    assert est.n_components == 3 and est.topic_edit_log == []
    assert est.model_.word_priors == {}
