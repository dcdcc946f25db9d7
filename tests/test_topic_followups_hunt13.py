"""Topic-quality follow-ups: the coherence KPI refuses settings no score could be computed
with when it is made or attached (a failing KPI only shows as NaN), pyLDAvis's export
refuses a relevance grid too fine to build, and the live intertopic map draws topics whose
coherence cannot be computed."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDAGibbs
from bidlab.models.lda import export
from bidlab.models.lda.coherence_kpi import CoherenceKPI


@pytest.fixture(scope="module")
def corpus():
    return block_diagonal_corpus(k=4, words_per_topic=6, n_docs=200, doc_len=30, seed=1)


def _wide_counts(n_docs: int = 60, V: int = 3000, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    return sp.random(n_docs, V, density=0.01, format="csr", random_state=rng,
                     data_rvs=lambda n: rng.integers(1, 4, n)).astype(np.float64)


# -- the coherence KPI -----------------------------------------------------------------------
def test_coherence_kpi_refuses_a_top_n_over_the_memory_budget_when_made():
    # 10,000 top words need ~5 GiB of working arrays even for one topic: every score
    # failed, and the learner showed each as NaN
    with pytest.raises(ValueError, match=r"CoherenceKPI: top_n=10000 .*MEMORY_BUDGET"):
        CoherenceKPI("c_npmi", top_n=10_000)
    CoherenceKPI("c_npmi", top_n=1000)  # fits one topic: checked again once k is known


def test_coherence_kpi_refuses_a_top_n_too_large_for_the_models_topics_when_attached():
    X = _wide_counts()
    kpi = CoherenceKPI("c_npmi", top_n=3000, every=0.0)  # fits 1 topic, not 10
    with pytest.raises(ValueError, match=r"top_n=3000 .*pass a smaller top_n"):
        LDAGibbs(n_components=10, random_state=0).learner(X, mixins=[kpi])


def test_coherence_kpi_refuses_reference_documents_over_another_vocabulary(corpus):
    kpi = CoherenceKPI("u_mass", X=sp.csr_matrix(np.ones((3, 5))), every=0.0)
    with pytest.raises(ValueError, match=r"X have 5 words .* the model has 24"):
        LDAGibbs(n_components=4, random_state=0).learner(corpus, mixins=[kpi])


def test_coherence_kpi_refuses_a_vocabulary_of_one_word():
    X = sp.csr_matrix(np.full((20, 1), 3.0))
    with pytest.raises(ValueError, match=r"the model has 1 word\(s\).*two or more"):
        LDAGibbs(n_components=2, random_state=0).learner(X, mixins=[CoherenceKPI()])


@pytest.mark.parametrize("every", [float("nan"), -1.0, "5"])
def test_coherence_kpi_refuses_an_every_that_is_not_seconds(every):
    with pytest.raises(ValueError, match="every must be a number of seconds >= 0"):
        CoherenceKPI("c_v", every=every)


def test_a_coherence_kpi_that_cannot_score_says_why_once(corpus):
    # reference documents that hold words, but not among the first max_docs
    X = sp.vstack([sp.csr_matrix((3, corpus.X.shape[1])), corpus.X]).tocsr()
    kpi = CoherenceKPI("c_npmi", X=X, every=0.0, max_docs=3)
    LDAGibbs(n_components=4, random_state=0).learner(corpus, mixins=[kpi])
    with pytest.warns(RuntimeWarning, match="coherence_c_npmi KPI is NaN.*no word"):
        assert math.isnan(kpi.score())
    assert "hold no word" in kpi.error
    kpi.max_docs = 50
    assert np.isfinite(kpi.score()) and kpi.error is None


# -- pyLDAvis's relevance grid ---------------------------------------------------------------
@pytest.mark.parametrize("step", [1e-5, 5e-4])
def test_prepared_data_refuses_a_relevance_grid_too_fine_to_build(step):
    # a 1e-6 step sorted every topic's words a million times (hours on a real vocabulary)
    X = sp.csr_matrix(np.array([[3, 1, 0], [0, 1, 4]]))
    topics = np.array([[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
    theta = np.array([[0.9, 0.1], [0.1, 0.9]])
    with pytest.raises(ValueError, match=r"at least MIN_LAMBDA_STEP = 0\.001"):
        export.prepared_data(topics, theta, X, ["a", "b", "c"], lambda_step=step)
    d = export.prepared_data(topics, theta, X, ["a", "b", "c"],
                             lambda_step=export.MIN_LAMBDA_STEP)
    assert d["lambda.step"] == export.MIN_LAMBDA_STEP


def test_to_pyldavis_refuses_a_relevance_grid_too_fine_to_build(corpus):
    est = LDAGibbs(n_components=4, n_passes=1, random_state=0).fit(corpus)
    with pytest.raises(ValueError, match="MIN_LAMBDA_STEP"):
        est.to_pyldavis(corpus, lambda_step=1e-6)


# -- the live intertopic map -----------------------------------------------------------------
def test_the_intertopic_map_draws_topics_without_a_coherence():
    pytest.importorskip("bokeh", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.widgets import IntertopicMap
    from bidlab.widgets.intertopic import NO_COHERENCE

    # a vocabulary of one word: no pair of words to score a coherence on
    lr = LDAGibbs(n_components=4, random_state=0).learner(
        sp.csr_matrix(np.full((50, 1), 3.0)))
    view = IntertopicMap(lr, ["word"], coherence_every=0.0)
    view.pump.stop()  # the renders below are the test's own
    try:
        stat = lr.model.modelmats[0].numpy()
        for _ in range(2):  # each frame: was a ValueError, so the map was never drawn
            view.render_topics(stat)
        data = view.source.data
        assert len(data["x"]) == 4 and np.isnan(np.asarray(data["coherence"])).all()
        assert list(data["color"]) == [NO_COHERENCE] * 4
        assert "two or more" in view.coherence_error
        view.select([1])
        assert "topic 1" in view.words.value
    finally:
        view.close()



def _mixtures(shares: list[tuple[float, float]], V: int = 24) -> np.ndarray:
    """Topics mixing three blocks of six words: their distances nearly lie in a plane, so a
    placement of them has one best shape (up to a rotation, a reflection and a shift)."""
    blocks = np.zeros((3, V))
    for b in range(3):
        blocks[b, 6 * b : 6 * b + 6] = 1.0
    return np.array([a * blocks[0] + b * blocks[1] + (1 - a - b) * blocks[2] + 0.01
                     for a, b in shares]) * 100


SHARES = [(0.9, 0.05), (0.6, 0.3), (0.3, 0.6), (0.05, 0.9), (0.3, 0.1), (0.1, 0.3),
          (0.45, 0.45)]


@pytest.mark.parametrize("edit", ["delete", "merge", "split"])
def test_the_intertopic_map_keeps_each_topics_place_when_an_edit_renumbers_them(
        edit, corpus, monkeypatch):
    pytest.importorskip("bokeh", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.widgets import IntertopicMap, intertopic

    monkeypatch.setattr(intertopic, "LAYOUT_EVERY", 0.0)  # a placement every frame
    lr = LDAGibbs(n_components=4, random_state=0).learner(corpus)
    view = IntertopicMap(lr, corpus.vocab)
    view.pump.stop()  # the renders below are the test's own
    try:
        S = _mixtures(SHARES)
        for _ in range(20):  # the placement settles
            view.render_topics(S)
        before = view._coords.copy()
        extent = float(np.ptp(before, axis=0).max())
        # the topics after the edit, as the model numbers them (later ids move down; a
        # split's second half is appended), and the old id of each topic left alone
        if edit == "delete":  # topic 1
            new, kept = S[[0, 2, 3, 4, 5, 6]], {0: 0, 1: 2, 2: 3, 3: 4, 4: 5, 5: 6}
        elif edit == "merge":  # topics 0 and 1, at 0
            new = np.vstack([S[:1] + S[1:2], S[2:]])
            kept = {1: 2, 2: 3, 3: 4, 4: 5, 5: 6}
        else:  # topic 4: its halves at 4 and 7
            halves = _mixtures([(0.32, 0.1), (0.28, 0.1)]) / 2
            new = np.vstack([S[:4], halves[:1], S[5:], halves[1:]])
            kept = {0: 0, 1: 1, 2: 2, 3: 3, 5: 5, 6: 6}
        view.render_topics(new)
        after = view._coords
        assert len(after) == len(new)
        # was a fresh placement of the new set, not aligned with the old one: it could
        # flip or turn the whole map
        moved = max(float(np.linalg.norm(after[n] - before[o])) for n, o in kept.items())
        assert moved < 0.1 * extent, (moved, extent)
    finally:
        view.close()
