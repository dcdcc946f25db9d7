"""Live views of learners that are not training: a view made after ``fit()`` draws the
trained model, and a topic edit on an idle learner redraws the topic views (no snapshot
comes from a learner that is not running; no browser, each tick is the test's own)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import (  # noqa: E402
    BayesNetView,
    IntertopicMap,
    SimilarItemsView,
    TopicBubbles,
)

from bidlab.datasets import synthetic_lda_corpus  # noqa: E402
from bidlab.datasets.paths import find_shared_data_dir  # noqa: E402
from bidlab.models import LDA, SFA, BayesNet, LDAGibbs  # noqa: E402


def _trained_lda(cls=LDAGibbs, k: int = 4):
    corpus = synthetic_lda_corpus(n_docs=100, n_words=40, k=3, seed=0)
    lr = cls(n_components=k, batch_size=20, random_state=0).learner(corpus.X, n_passes=2)
    lr.fit(progress=None)
    return lr, corpus.vocab


def _own_ticks(*views) -> None:
    """Stop the pump thread: every render below comes from the test's own ticks."""
    for v in views:
        v.pump.stop()


@pytest.mark.parametrize("cls", [LDAGibbs, LDA])
def test_topic_views_made_after_fit_draw_the_trained_topics(cls):
    lr, vocab = _trained_lda(cls)
    bubbles, imap = TopicBubbles(lr, vocab, n_top=3), IntertopicMap(lr, vocab)
    try:
        _own_ticks(bubbles, imap)
        imap.pump.tick()  # was: no snapshot ever comes, so both charts stayed empty
        assert len(imap.source.data["x"]) == 4 and imap.frames == 1
        assert max(bubbles.source.data["size"]) > 0
        assert sum(map(bool, bubbles.labels.data["word"])) >= 3  # the top words are listed
        imap.pump.tick()  # the same model: not drawn again
        assert imap.frames == 1 and not imap.view.errors and not bubbles.view.errors
    finally:
        bubbles.close()
        imap.close()


def test_an_edit_of_an_idle_learner_redraws_the_topic_views():
    lr, vocab = _trained_lda()
    bubbles, imap = TopicBubbles(lr, vocab, n_top=3), IntertopicMap(lr, vocab)
    try:
        _own_ticks(bubbles, imap)
        imap.pump.tick()
        imap.select([0, 1])
        imap.edit("merge").wait(10)
        assert lr.model.modelmats[0].shape[0] == 3
        imap.pump.tick()  # was: 4 circles and 4 bubble columns, after the merge too
        assert len(imap.source.data["x"]) == 3 and bubbles.k == 3
        assert len(bubbles.source.data["topic"]) == 3 * 3 * 3
        imap.select([0])
        imap.edit("split").wait(10)
        imap.pump.tick()
        assert len(imap.source.data["x"]) == 4 and bubbles.k == 4
        assert not imap.view.errors and not bubbles.view.errors
    finally:
        bubbles.close()
        imap.close()


def test_similar_items_of_a_trained_sfa_learner_are_listed():
    R = sp.random(60, 25, density=0.3, format="csr", random_state=0)
    R.data = R.data * 4 + 1
    lr = SFA(3, random_state=0).learner(R, n_passes=2)
    lr.fit(progress=None)
    view = SimilarItemsView(lr, [f"m{j}" for j in range(25)], n=4)
    try:
        _own_ticks(view)
        view.pump.tick()  # was: no list until the learner trained again
        assert view.lists and all(len(names) == 4 for names in view.lists)
        assert not view.view.errors
    finally:
        view.close()


def test_an_edit_of_a_learner_that_never_ran_redraws_the_map():
    corpus = synthetic_lda_corpus(n_docs=40, n_words=30, k=3, seed=1)
    lr = LDAGibbs(n_components=3, batch_size=20, random_state=0).learner(corpus.X)
    imap = IntertopicMap(lr, corpus.vocab)  # initialises the model
    try:
        _own_ticks(imap)
        imap.pump.tick()  # its initial topics: left as the view was made
        imap.select([0])
        imap.edit("split").wait(10)
        imap.pump.tick()
        imap.pump.tick()
        assert imap.frames == 1 and len(imap.source.data["x"]) == 4
    finally:
        imap.close()


_SHARED = find_shared_data_dir()


@pytest.mark.skipif(_SHARED is None or not (_SHARED / "bnlearn").is_dir(),
                    reason="shared data folder with bnlearn/ not found")
def test_bayesnet_view_made_after_fit_shows_the_marginals():
    bn = BayesNet.from_bif(_SHARED / "bnlearn" / "asia.bif.gz", n_chains=100, burn_in=5,
                           n_samples=10, random_state=0)
    lr = bn.learner()
    lr.fit(progress=None)
    view = BayesNetView(lr)
    try:
        _own_ticks(view)
        view.pump.tick()  # was: every bar at 0 until the learner ran again
        np.testing.assert_allclose(view.source.data["p"], lr.model.chains.marginals())
        assert not view.view.errors
    finally:
        view.close()
