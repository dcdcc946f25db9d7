"""The dashboard's Start button on a learner with nothing left to train, the LDAGibbs
docstring's Parameters section, and the intertopic map of an idle learner edited in ways
that leave the number of topics as it was (the pump is driven by hand, tick by tick)."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import Dashboard, IntertopicMap  # noqa: E402

from bidlab import backend  # noqa: E402
from bidlab.datasets import synthetic_lda_corpus  # noqa: E402
from bidlab.models import GLM, LDA, LDAGibbs  # noqa: E402


# ------------------------------------------------------------ the Start button
def test_start_button_on_a_finished_learner_shows_which_option_to_raise() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((200, 5))
    lr = GLM(link="logistic").learner(X, (X[:, 0] > 0.5).astype(float), n_passes=1)
    lr.fit(progress=None)
    steps = lr.step
    dash = Dashboard(lr)
    try:
        dash.pump.stop()  # the renders below are the test's own
        with warnings.catch_warnings(record=True) as escaped:
            warnings.simplefilter("always")
            dash.buttons["start"].click()
        assert lr.join(10) and lr.step == steps  # nothing was left to train
        dash.render(None)
        # was: the warning went to the kernel's log, and the dashboard said nothing
        assert "n_passes=1" in dash.message.value
        assert "learner.set(n_passes=2)" in dash.message.value
        assert not [w for w in escaped if "n_passes" in str(w.message)]
        lr.set(n_passes=2)
        dash.buttons["start"].click()  # trains: the hint goes
        assert lr.join(10) and lr.step == 2 * steps
        dash.render(None)
        assert dash.message.value == ""
    finally:
        lr.stop(wait=True)
        dash.close()


# ------------------------------------------------------------ LDAGibbs docstring
def test_lda_gibbs_docstring_lists_every_parameter_under_parameters() -> None:
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import NumpyDocstring

    doc = inspect.getdoc(LDAGibbs)
    rst = str(NumpyDocstring(doc, Config(napoleon_use_ivar=False)))
    for name in inspect.signature(LDAGibbs).parameters:
        assert f":param {name}:" in rst, name
    notes = doc.split("Notes\n-----")[1].split("Examples\n--------")[0]
    assert "total_docs" not in notes and "verbose" not in notes
    # each parameter reads its own description, not the run-on of a shared entry
    line = next(ln for ln in rst.splitlines() if ln.startswith(":param n_passes:"))
    assert "sweeps" not in line


# ------------------------------------------------------------ the map of an idle learner
def _idle_map(estimator):
    corpus = synthetic_lda_corpus(n_docs=80, n_words=40, k=4, seed=0)
    lr = estimator.learner(corpus.X)
    lr.fit(progress=None)
    view = IntertopicMap(lr, corpus.vocab)
    view.pump.stop()  # each tick below is the test's own
    view.pump.tick()
    assert view._topics is not None and view._topics.shape[0] == 4
    return lr, view


def _model_topics(lr) -> np.ndarray:
    P = np.maximum(np.asarray(backend.to_host(lr.model.modelmats[0].data), np.float64), 0.0)
    P += 1e-12
    return P / P.sum(axis=1, keepdims=True)


def test_map_of_an_idle_learner_shows_a_merge_and_a_split_made_together() -> None:
    lr, view = _idle_map(LDAGibbs(n_components=4, n_passes=2, random_state=0))
    try:
        old = view._topics.copy()
        view.select([0, 1])
        assert view.edit("merge").done
        view.select([0])
        assert view.edit("split").done  # k is 4 again, and the step has not moved
        frames = view.frames
        view.pump.tick()
        # was: the step and the shapes were as drawn, so the map kept the old topics
        assert view.frames == frames + 1 and view.view.errors == []
        assert not np.allclose(view._topics, old)
        np.testing.assert_allclose(view._topics, _model_topics(lr), rtol=1e-5)
    finally:
        view.close()


def test_map_of_an_idle_learner_shows_a_word_prior() -> None:
    lr, view = _idle_map(LDA(n_components=4, n_passes=2, random_state=0))
    try:
        old = view._topics.copy()
        assert lr.set_word_prior(3, 0, 500.0).done  # applied at once: the learner is idle
        view.pump.tick()
        assert view._topics[0, 3] > old[0, 3] + 0.1
        np.testing.assert_allclose(view._topics, _model_topics(lr), rtol=1e-5)
        frames = view.frames
        view.pump.tick()  # nothing new: not drawn again
        assert view.frames == frames
    finally:
        view.close()
