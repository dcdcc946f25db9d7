"""Live views and the JupyterLab launcher at their edges: controls that follow options set
from Python (and take back a refused value), text the views write as HTML or draw with
matplotlib (vocabulary words, labels, state names), widgets closed with their layouts and
styles, a sweep whose scores are all NaN, and the lab URL of a notebook with an odd name
(no browser; the pumps are stopped so each render is the test's own)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import (  # noqa: E402
    BayesNetView,
    Dashboard,
    IntertopicMap,
    KMeansView,
    SimilarItemsView,
    SweepView,
    TopicBubbles,
)
from bidlab.widgets.static import render_png  # noqa: E402
from ipywidgets.widgets.widget import _instances  # noqa: E402

from bidlab.datasets import synthetic_lda_corpus  # noqa: E402
from bidlab.datasets.paths import find_shared_data_dir  # noqa: E402
from bidlab.lab.bridge import LearnerBridge  # noqa: E402
from bidlab.lab.launcher import lab_command  # noqa: E402
from bidlab.learn import Snapshot  # noqa: E402
from bidlab.models import GLM, SFA, BayesNet, KMeans, LDAGibbs, glm_sweep  # noqa: E402

NASTY = ["<script>alert(1)</script>", "a&b", "\"q\" 'r'", "$\\w$", "é€"]


def _glm(**kw):
    rng = np.random.default_rng(0)
    X = rng.random((200, 5))
    return GLM(link="logistic").learner(X, (X[:, 0] > 0.5).astype(float), n_passes=1, **kw)


def _lda(vocab_fn=lambda i, w: w):
    corpus = synthetic_lda_corpus(n_docs=60, n_words=40, k=3, seed=0)
    vocab = [vocab_fn(i, w) for i, w in enumerate(corpus.vocab)]
    learner = LDAGibbs(n_components=3, nsamps=2, batch_size=20,
                       random_state=0).learner(corpus.X, n_passes=1)
    return learner, vocab


def _nasty_vocab(i: int, word: str) -> str:
    return NASTY[i % len(NASTY)] + str(i)


def _sweep(k: int = 2):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = (X[:, 0] > 0).astype(int)
    return glm_sweep("logistic", lrate=list(np.geomspace(0.1, 1.0, k)), n_passes=1,
                     random_state=0).learner(X, y)


@pytest.fixture
def glm_dash():
    """A GLM learner and its Dashboard, the pump stopped (each render is the test's own);
    closed after the test."""
    lr = _glm()
    dash = Dashboard(lr)
    dash.pump.stop()
    yield lr, dash
    dash.close()


# -- controls -------------------------------------------------------------------------------


def test_controls_follow_options_set_from_python_and_send_nothing_back(glm_dash):
    lr, dash = glm_dash
    w = dash.controls.widgets
    v0 = lr.opts.version
    lr.opts.lrate = 0.05
    lr.set(val_every=500, momentum=0.5)  # 500: beyond the text box's first max (100)
    dash.render(None)  # was: the controls kept showing 0.3, 11 and 0.0
    assert w["lrate"].value == pytest.approx(0.05)
    assert w["val_every"].value == 500 and w["momentum"].value == 0.5
    lr.opts.lrate = 50.0  # beyond the log slider's first range (10^-4 .. 10^2): 10^2 ok
    lr.opts.epsilon = 0.5  # epsilon's slider ended at 10^-3
    dash.render(None)
    assert w["lrate"].value == pytest.approx(50.0)
    assert w["epsilon"].value == pytest.approx(0.5)
    # showing them set nothing on the learner: only the four sets above
    assert lr.opts.version == v0 + 4 and dash.controls.pending == []
    # a control moved by the user still reaches the learner
    w["momentum"].value = 0.25
    assert lr.opts.momentum == 0.25 and lr.opts.version == v0 + 5
    dash.render(None)
    assert lr.opts.version == v0 + 5


def test_a_refused_value_is_taken_back_in_the_control(glm_dash):
    lr, dash = glm_dash
    box = dash.controls.widgets["texp"]  # a FloatText: any number can be typed
    box.value = -1.0
    assert lr.opts.texp == 0.5
    assert box.value == 0.5  # was: -1 stayed in the box while the learner kept 0.5
    assert "texp" in dash.controls.message and ">= 0" in dash.controls.message
    box.value = 0.75  # the control still works afterwards
    assert lr.opts.texp == 0.75


def test_a_vector_value_disables_the_scalar_control_until_a_scalar_is_set(glm_dash):
    lr, dash = glm_dash
    slider = dash.controls.widgets["lrate"]
    lr.set(lrate=[0.1, 0.2])  # one value per row group: no slider can show it
    dash.render(None)
    assert slider.disabled and lr.opts.lrate == (0.1, 0.2)
    lr.set(lrate=0.2)
    dash.render(None)
    assert not slider.disabled and slider.value == pytest.approx(0.2)


def test_a_change_in_the_shell_thread_is_not_held_back_by_a_sync_in_another_thread(glm_dash):
    lr, dash = glm_dash
    controls = dash.controls
    holding, release = threading.Event(), threading.Event()

    def pump_side() -> None:  # what the pump thread holds while it shows a value
        controls._quiet.on = True
        holding.set()
        release.wait(5)
        controls._quiet.on = False

    t = threading.Thread(target=pump_side, daemon=True)
    t.start()
    assert holding.wait(5)
    controls.widgets["momentum"].value = 0.5
    release.set()
    t.join(5)
    assert lr.opts.momentum == 0.5


# -- HTML written by the views ----------------------------------------------------------------


def _no_raw_tags(text: str) -> None:
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_topic_views_escape_vocabulary_words():
    lr, vocab = _lda(_nasty_vocab)
    bubbles = TopicBubbles(lr, vocab, n_top=5)
    imap = IntertopicMap(lr, vocab, n_words=40)
    try:
        bubbles.pump.stop()
        stat = np.random.default_rng(0).random((3, 40)) + 0.01
        stat[:, 0] += 10  # word 0 ("<script>...") tops every topic: it is in row 0
        bubbles._render_topics(stat)
        _no_raw_tags(bubbles.top_words.value)
        bubbles.select_index(0)
        bubbles.render(None)
        _no_raw_tags(bubbles.selection.value)
        imap.render_topics(stat)
        imap.select([0])
        _no_raw_tags(imap.words.value)
        assert "a&amp;b" in imap.words.value
    finally:
        bubbles.close()
        imap.close()


def test_an_edit_error_is_escaped_in_the_intertopic_status():
    lr, vocab = _lda()
    imap = IntertopicMap(lr, vocab)
    try:
        imap.pump.stop()
        imap.select([0])
        lr.merge_topics = lambda _sel: (_ for _ in ()).throw(ValueError("<b>no</b>"))
        assert imap.edit("merge") is None
        assert "&lt;b&gt;no&lt;/b&gt;" in imap.status.value
    finally:
        imap.close()


def test_sweep_status_escapes_labels():
    view = SweepView(_sweep(2), labels=["<i>a</i>", "b & c"])
    try:
        view.pump.stop()
        view.render(Snapshot({}, {"loss": np.array([1.0, 2.0])}, "running", 3))
        assert view.status.value.startswith("best: <b>&lt;i&gt;a&lt;/i&gt;</b>")
    finally:
        view.close()


def test_sweep_view_with_every_score_nan_shows_no_best():
    view = SweepView(_sweep(2), labels=["x", "y"])
    try:
        view.pump.stop()
        # every loss overflowed: no best (was: nanargmax's ValueError on every tick)
        view.render(Snapshot({}, {"loss": np.array([np.nan, np.nan])}, "running", 4))
        assert view.view.errors == [] and view.best is None
        assert "none yet" in view.status.value
        view.render(Snapshot({}, {"loss": np.array([np.nan, 1.0])}, "running", 5))
        assert view.best == 1 and "<b>y</b>" in view.status.value
    finally:
        view.close()


def test_dashboard_message_is_escaped():
    lr = _glm(name="<b>lr</b>")
    dash = Dashboard(lr)
    try:
        dash.pump.stop()
        lr.set(n_passes=1000)
        lr.start()
        lr.pause(wait=True)
        dash._click("start")(None)  # a click that raced the button's disabling
        dash.render(None)
        assert "already paused" in dash.message.value
        assert "&lt;b&gt;lr&lt;/b&gt;" in dash.message.value
    finally:
        lr.stop(wait=True)
        dash.close()


_SHARED = find_shared_data_dir()


@pytest.mark.skipif(_SHARED is None or not (_SHARED / "bnlearn" / "child.bif.gz").is_file(),
                    reason="shared data folder with bnlearn/child.bif.gz not found")
def test_bayesnet_status_escapes_state_names():
    bn = BayesNet.from_bif(_SHARED / "bnlearn" / "child.bif.gz", n_chains=20, burn_in=2,
                           n_samples=2, random_state=0)
    lrn = bn.learner()
    view = BayesNetView(lrn, variables=["CO2Report"])
    try:
        view.pump.stop()
        view.click(view.source.data["label"].index("CO2Report = <7.5"))
        model = lrn.model
        view.render(Snapshot({}, {"marginals": model.chains.marginals(),
                                  "evidence": model.chains.ev.astype(np.float64)},
                             "running", 1))
        assert "evidence: CO2Report = &lt;7.5" in view.status.value
    finally:
        view.close()


# -- closing ---------------------------------------------------------------------------------


def _sfa_learner():
    rng = np.random.default_rng(0)
    full = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 12)) + 3
    rows, cols = np.nonzero(rng.random(full.shape) < 0.5)
    X = sp.csr_matrix((full[rows, cols], (rows, cols)), shape=full.shape)
    return SFA(2, max_iter=2, random_state=0).learner(X)


VIEWS = {
    "dashboard": lambda: Dashboard(_glm()),
    "kmeans": lambda: KMeansView(KMeans(n_clusters=3).learner(
        np.random.default_rng(0).random((60, 2)), n_passes=1)),
    "sweep": lambda: SweepView(_sweep(3)),
    "topics": lambda: TopicBubbles(*_lda()),
    "intertopic": lambda: IntertopicMap(*_lda()),
    "sfa": lambda: SimilarItemsView(_sfa_learner(), [f"t{i}" for i in range(12)]),
}


@pytest.mark.parametrize("kind", sorted(VIEWS))
def test_a_closed_view_leaves_no_widget_open(kind):
    before = set(_instances)
    view = VIEWS[kind]()
    view.close()
    view.close()  # twice: nothing more to do
    left = [type(_instances[k]).__name__ for k in set(_instances) - before]
    # was: the sweep's HBox, and a Layout or Style per widget (and a Layout made for each
    # text box and checkbox of the dashboard's controls, never used)
    assert left == []
    deadline = time.monotonic() + 5
    while view.pump.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not view.pump.alive


# -- static pictures --------------------------------------------------------------------------


def test_static_picture_draws_words_with_dollar_signs_as_text():
    lr, vocab = _lda(lambda i, w: f"$\\w{i}$" if i % 2 else f"${i} to ${i + 1}")
    view = TopicBubbles(lr, vocab, n_top=3)
    try:
        view.pump.stop()
        view._render_topics(np.random.default_rng(0).random((3, 40)) + 0.01)
        assert any("\\w" in w for w in view.labels.data["word"])
        view.figure.title.text = "cost in $ ($\\q$)"
        assert render_png(view.chart._model)[:4] == b"\x89PNG"  # was: ValueError (mathtext)
    finally:
        view.close()


# -- the lab launcher -------------------------------------------------------------------------


def test_lab_url_percent_encodes_the_notebook_path_and_the_token(tmp_path: Path):
    nb = tmp_path / "my run #2?.ipynb"
    nb.write_text("{}")
    _cmd, url = lab_command(nb, 9999, "t&k#n", open_browser=False, root_dir=tmp_path)
    # was: ".../tree/my run #2?.ipynb?token=t&k#n": the browser cut the path at the "#"
    # and the token never reached the server
    assert url == "http://127.0.0.1:9999/lab/tree/my%20run%20%232%3F.ipynb?token=t%26k%23n"


def test_lab_snapshot_of_a_learner_with_an_int_past_float_range_keeps_its_state():
    class Huge:
        name = "huge"

        def summary(self):
            return {"name": "huge", "model": "M", "state": "running", "progress": 0.5,
                    "train_score": 10**400, "val_score": float("nan"),
                    "samples_per_s": np.float32("inf")}

    info = LearnerBridge(learners=lambda: [Huge()], open_comm=lambda d: None).snapshot()[0]
    # was: OverflowError in describe, and the panel showed it as a failed "OverflowError"
    assert info["state"] == "running" and info["model"] == "M"
    assert info["train_score"] is None and info["val_score"] is None
    assert info["samples_per_s"] is None and info["progress"] == 0.5
