"""Regressions of the LDA topic-model tools used as gensim / pyLDAvis / scikit-learn users
would: the pyLDAvis export on documents that lack some words, ``transform_texts`` on bad
or empty input, ``topic_diff`` against other libraries' models and for near-equal topics,
and coherence given raw text."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDA, LDAGibbs
from bidlab.models.lda.coherence import coherence
from bidlab.models.lda.export import map_html, relevance, topic_diff

BLOCK = 6  # words per planted topic


@pytest.fixture(scope="module")
def corpus():
    return block_diagonal_corpus(k=4, words_per_topic=BLOCK, n_docs=300, doc_len=30, seed=3)


@pytest.fixture(scope="module")
def fitted(corpus):
    return LDA(n_components=4, n_passes=3, random_state=0).fit(corpus)


def _without_block(corpus, block: int) -> sp.csr_matrix:
    """The corpus's counts (float32, as loaded) with every word of one block removed."""
    X = sp.csr_matrix(corpus.X, dtype=np.float32, copy=True)
    X.data[(X.indices // BLOCK) == block] = 0
    X.eliminate_zeros()
    return X


def test_to_pyldavis_on_documents_lacking_words_lists_only_their_words(corpus, fitted, tmp_path):
    X = _without_block(corpus, 2)
    absent = {corpus.vocab[j] for j in range(2 * BLOCK, 3 * BLOCK)}
    data = fitted.to_pyldavis(X)
    ti = data["tinfo"]
    assert np.isfinite(ti["loglift"]).all() and np.isfinite(ti["logprob"]).all()
    json.dumps(data, allow_nan=False)  # a browser's JSON.parse takes no Infinity
    assert not absent & set(ti["Term"]) and not absent & set(data["token.table"]["Term"])
    assert all(t > 0 for t in ti["Total"])
    page = map_html(data, tmp_path / "map.html").read_text()
    tips = " ".join(re.findall(r"<title>(topic .*?)</title>", page))
    assert tips and not any(w in tips.split(", ") or f": {w}" in tips for w in absent)


def test_relevance_of_a_float32_share_with_zeros_stays_finite():
    topics = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])
    share = np.array([0.6, 0.4, 0.0], np.float32)
    assert np.isfinite(relevance(topics, share, 0.6)).all()


@pytest.mark.parametrize("bad", [[1, 2], ["fine text", None]])
def test_transform_texts_names_a_document_that_is_not_text(fitted, bad):
    with pytest.raises(TypeError, match=r"document \d+ is a (int|NoneType).*not a string"):
        fitted.transform_texts(bad)


def test_transform_texts_of_no_documents_is_an_empty_result(fitted):
    theta = fitted.transform_texts([])
    assert theta.shape == (0, 4) and theta.dtype == np.float64


def test_topic_diff_takes_scikit_learn_and_gensim_style_models(corpus, fitted):
    from sklearn.decomposition import LatentDirichletAllocation

    sk = LatentDirichletAllocation(3, max_iter=2, random_state=0).fit(corpus.X)
    want = topic_diff(fitted.components_, sk.components_, "hellinger")
    np.testing.assert_allclose(fitted.topic_diff(sk, "hellinger"), want, rtol=1e-12)

    class GensimLike:  # gensim's LdaModel exposes its topics through get_topics()
        def get_topics(self) -> np.ndarray:
            comp = sk.components_.astype(np.float64)
            return comp / comp.sum(axis=1, keepdims=True)

    np.testing.assert_allclose(fitted.topic_diff(GensimLike(), "hellinger"), want, rtol=1e-12)
    with pytest.raises(TypeError, match="topic_diff: other is a dict, not topics"):
        fitted.topic_diff({"topics": 3})


@pytest.mark.parametrize("distance", ["hellinger", "kullback_leibler"])
def test_topic_diff_of_equal_and_near_equal_topics_matches_gensim(distance):
    matutils = pytest.importorskip("gensim.matutils")
    fn = getattr(matutils, distance)
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.full(2000, 0.05), 30)
    same = topic_diff(P, P, distance)  # a model against itself: gensim gives 0 (not -1e-15)
    assert (np.diagonal(same) == 0.0).all() and (same >= 0.0).all()
    P = P[:4]
    Q = P.copy()
    Q[1] *= 1.0 + 1e-10 * rng.random(2000)
    Q[1] /= Q[1].sum()
    D = topic_diff(P, Q, distance)
    g = np.array([[fn(p, q) for q in Q] for p in P])
    np.testing.assert_allclose(D, np.maximum(g, 0.0), rtol=1e-6, atol=1e-15)


def test_coherence_given_raw_text_says_to_count_the_words(fitted):
    with pytest.raises(TypeError, match="coherence: X holds text"):
        fitted.coherence(["t0_w0 t0_w1", "t1_w0"])
    with pytest.raises(TypeError, match="coherence: X holds text"):
        coherence(fitted.components_, ["t0_w0 t0_w1"])


@pytest.mark.parametrize("cls", [LDA, LDAGibbs])
def test_pyldavis_after_adding_a_topic_on_a_test_split(cls, corpus):
    est = cls(n_components=3, n_passes=2, random_state=0).fit(corpus)
    est.add_topic([corpus.vocab[0], corpus.vocab[1]]).wait()
    data = est.to_pyldavis(_without_block(corpus, 0))
    assert len(data["mdsDat"]["x"]) == 4 == est.n_components
    json.dumps(data, allow_nan=False)


def test_views_refuse_a_corpus_over_another_vocabulary(corpus, fitted):
    from bidlab.datasets.corpus import Corpus

    perm = np.random.default_rng(0).permutation(len(corpus.vocab))
    other = Corpus(X=sp.csr_matrix(corpus.X)[:, perm], vocab=[corpus.vocab[j] for j in perm])
    for call in (lambda: fitted.coherence(other), lambda: fitted.to_pyldavis(other),
                 lambda: fitted.intertopic_map(other), lambda: fitted.split_topic(0, X=other)):
        with pytest.raises(ValueError, match="counted over another vocabulary"):
            call()
    assert fitted.n_components == 4
    assert np.isfinite(fitted.coherence(corpus))  # the training vocabulary is accepted


def test_to_pyldavis_checks_lambda_step_before_measuring_the_documents(corpus, fitted,
                                                                       monkeypatch):
    """A bad ``lambda_step`` is refused at once, naming the call, before the documents'
    topic shares are computed (a large corpus took that time for nothing)."""
    calls = []
    real = type(fitted)._theta
    monkeypatch.setattr(type(fitted), "_theta", lambda self, X: calls.append(1) or real(self, X))
    with pytest.raises(ValueError, match=r"to_pyldavis: lambda_step must be in"):
        fitted.to_pyldavis(corpus, lambda_step=0.0)
    assert calls == []
    assert fitted.to_pyldavis(corpus, lambda_step=0.5)["lambda.step"] == 0.5
    assert calls == [1]
