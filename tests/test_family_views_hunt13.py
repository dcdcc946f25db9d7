"""The live views of the k-means, SFA and Bayesian-network families and the dashboard's
controls, driven without a browser: each test is a notebook user's step that went wrong."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import BayesNetView, KMeansView, SimilarItemsView  # noqa: E402
from bidlab.widgets._controls import OptionControls  # noqa: E402
from bidlab.widgets.bayesnet_view import CLAMPED, FREE  # noqa: E402

from bidlab.datasets.paths import find_shared_data_dir  # noqa: E402
from bidlab.learn import Snapshot  # noqa: E402
from bidlab.models import SFA, BayesNet, KMeans  # noqa: E402

_SHARED = find_shared_data_dir()
_ASIA = None if _SHARED is None else _SHARED / "bnlearn" / "asia.bif.gz"
needs_asia = pytest.mark.skipif(_ASIA is None or not _ASIA.is_file(),
                                reason="shared data folder with bnlearn/asia.bif.gz not found")


def _ratings(seed: int = 0) -> sp.csr_matrix:
    """30 users x 12 items, ratings 1..5, about half of them given (all of item 0)."""
    rng = np.random.default_rng(seed)
    R = rng.integers(1, 6, (30, 12)) * (rng.random((30, 12)) < 0.5)
    R[:, 0] = 3
    return sp.csr_matrix(R.astype(np.float64))


def _wait(cond, seconds: float = 30.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_a_view_computed_by_a_function_returning_an_array_reaches_the_observer():
    # observe()'s views may be "a callable f(model) -> Mat or array": an array came as
    # its memoryview (ndarray.data) and the view was dropped from every snapshot
    lr = KMeans(n_clusters=2, max_iter=3).learner(np.random.default_rng(0).random((40, 2)))
    got = []
    lr.observe(lambda s: got.append(({k: v.copy() for k, v in s.views.items()}, s.error,
                                     s.state)),
               rate=50, views={"twice": lambda m: 2 * m.modelmats[0].data})
    lr.fit(progress=None)
    assert _wait(lambda: bool(got) and got[-1][2] == "done")
    views, error, _ = got[-1]
    assert error is None
    np.testing.assert_allclose(views["twice"], 2 * lr.model.modelmats[0].data)


@needs_asia
def test_bayesnet_view_follows_the_marginals_while_the_learner_runs():
    # the marginals and the evidence are computed views: the bars and the status stayed
    # as drawn before the run (every live snapshot came without them)
    bn = BayesNet.from_bif(_ASIA, n_chains=50, burn_in=5, n_samples=1_000_000,
                           random_state=0)
    lr = bn.learner()
    view = BayesNetView(lr)
    try:
        lr.start()
        assert _wait(lambda: "· running ·" in view.status.value)
        assert _wait(lambda: sum(view.source.data["p"]) > 0)
    finally:
        lr.stop()
        lr.join()
        view.close()


@needs_asia
def test_a_click_on_a_finished_bayesnet_learner_is_shown_at_once():
    bn = BayesNet.from_bif(_ASIA, n_chains=50, burn_in=5, n_samples=10, random_state=0)
    lr = bn.learner()
    lr.fit(progress=None)
    view = BayesNetView(lr)
    try:
        view.pump.stop()  # the ticks below are the test's own
        view.pump.tick()
        assert "evidence: none" in view.status.value
        i = view.source.data["label"].index("xray = yes")
        view.click(i)
        view.pump.tick()  # was: nothing changed until the learner ran again
        assert "evidence: xray = yes (from the next sweep)" in view.status.value
        assert view.source.data["color"][i] == FREE  # not clamped by any sweep yet
        lr.set(n_passes=lr.opts.n_passes + 2)
        lr.fit(progress=None)
        view.pump.tick()
        assert view.source.data["color"][i] == CLAMPED
        assert "evidence: xray = yes" in view.status.value
        assert "next sweep" not in view.status.value
    finally:
        view.close()


def test_an_int_box_takes_a_value_typed_far_above_the_current_one():
    # options without an upper bound got a box capped at max(4 * value, low + 100):
    # max_no_improvement=500 typed into it became 101, silently
    X = np.random.default_rng(0).random((60, 2))
    lr = KMeans(n_clusters=2, algorithm="minibatch", batch_size=20).learner(X)
    controls = OptionControls(lr)
    try:
        controls.widgets["max_no_improvement"].value = 500
        assert lr.opts.max_no_improvement == 500
        controls.widgets["reassign_every"].value = 10_000
        assert lr.opts.reassign_every == 10_000
    finally:
        for w in controls.widgets.values():
            w.close()



@pytest.mark.parametrize("algorithm", ["lloyd", "minibatch"])
def test_no_lrate_control_where_the_updater_ignores_it(algorithm):
    # Lloyd k-means (like SFA, PageRank and BayesNet learning) replaces its model by each
    # pass's result: its dashboard had an lrate slider that changed nothing, and said the
    # change "took effect"
    X = np.random.default_rng(0).random((60, 2))
    lr = KMeans(n_clusters=2, algorithm=algorithm, batch_size=20).learner(X)
    names = OptionControls(lr).widgets
    try:
        assert ("lrate" in names) == (algorithm == "minibatch")  # a running mean's step
    finally:
        for w in names.values():
            w.close()
    if algorithm == "lloyd":
        with pytest.raises(ValueError, match="no control for 'lrate': the learner ignores"):
            OptionControls(lr, ["lrate"])


def test_no_alpha_control_for_explicit_ratings():
    ratings = _ratings()
    explicit = OptionControls(SFA(2).learner(ratings)).widgets
    implicit = OptionControls(SFA(2, feedback="implicit").learner(ratings)).widgets
    try:
        assert "alpha" not in explicit and "l2" in explicit
        assert "alpha" in implicit
    finally:
        for w in [*explicit.values(), *implicit.values()]:
            w.close()


def test_kmeans_and_sfa_views_show_a_run_that_failed_after_its_last_step():
    # a run that fails in a minibatch sends its final snapshot with the step of the last
    # one that ran: the views skipped it as seen and said "running" for good
    X = np.random.default_rng(0).random((60, 2))
    km = KMeans(n_clusters=2, max_iter=3).learner(X)
    R = _ratings()
    sfa = SFA(2).learner(R)
    kview = KMeansView(km)
    sview = SimilarItemsView(sfa, [f"<item {j}>" for j in range(R.shape[1])])
    try:
        kview.pump.stop()
        sview.pump.stop()
        error = "Traceback (most recent call last):\nFloatingPointError: factors <inf>"
        for view, name, mat in ((kview, "centers", km.model.modelmats[0].data),
                                (sview, "items", sfa.model.modelmats[0].data)):
            views = {name: np.array(mat)}
            view.render(Snapshot({"train_score": -1.0}, views, "running", 3))
            assert "running" in view.status.value
            view.render(Snapshot({"train_score": -1.0}, views, "failed", 3, error))
            assert "· failed: " in view.status.value
            assert "FloatingPointError: factors &lt;inf&gt;" in view.status.value
            assert "running" not in view.status.value
        assert kview.points == 1  # the repeated step drew nothing twice
    finally:
        kview.close()
        sview.close()
