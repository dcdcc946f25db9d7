"""BayesNetView's Python side: bars follow the marginals, a click sets or clears evidence
at the next sweep, clamped variables change colour."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import BayesNetView  # noqa: E402
from bidlab.widgets.bayesnet_view import CLAMPED, FREE  # noqa: E402
from bokeh.document.events import ColumnsPatchedEvent  # noqa: E402

from bidlab.datasets.paths import find_shared_data_dir  # noqa: E402
from bidlab.learn import Snapshot  # noqa: E402
from bidlab.models import BayesNet  # noqa: E402

_SHARED = find_shared_data_dir()
pytestmark = pytest.mark.skipif(_SHARED is None or not (_SHARED / "bnlearn").is_dir(),
                                reason="shared data folder with bnlearn/ not found")


def _snap(model: Any, step: int) -> Snapshot:
    return Snapshot({}, {"marginals": model.chains.marginals(),
                         "evidence": model.chains.ev.astype(np.float64)}, "running", step)


def test_bars_clicks_and_evidence_colours():
    bn = BayesNet.from_bif(_SHARED / "bnlearn" / "asia.bif.gz", n_chains=200, burn_in=5,
                           n_samples=10, random_state=0)
    lrn = bn.learner()
    view = BayesNetView(lrn)
    view.pump.stop()  # the renders below are the test's own, not the pump thread's
    sent: list[dict[str, Any]] = []

    def on_change(event: Any) -> None:
        if isinstance(event, ColumnsPatchedEvent) and event.model is view.source:
            sent.append(event.patches)

    view.figure.document.on_change(on_change)
    try:
        model = lrn.model
        n_bars = sum(len(s) for s in bn.network_.states)
        assert len(view.source.data["label"]) == n_bars
        lrn.fit(progress=None)
        view.render(_snap(model, 1))
        m = model.chains.marginals()
        np.testing.assert_allclose(view.source.data["p"], m)
        assert set(sent[-1]) == {"p", "color"} and view.source.data["color"] == [FREE] * n_bars
        # a click on "xray = yes" clamps xray from the next sweep on
        i = view.source.data["label"].index("xray = yes")
        view.click(i)
        assert model.chains.evidence == {"xray": "yes"} and model.chains.ev.max() == -1
        lrn.set(n_passes=lrn.opts.n_passes + 10)
        lrn.fit(progress=None)
        assert model.chains.ev[bn.network_.index("xray")] == 0
        view.render(_snap(model, 2))
        colors = view.source.data["color"]
        assert [c for c, lab in zip(colors, view.source.data["label"], strict=True)
                if lab.startswith("xray")] == [CLAMPED, CLAMPED]
        assert colors.count(CLAMPED) == 2
        assert view.source.data["p"][i] == 1.0
        assert "evidence: xray = yes" in view.status.value
        # the same state again clears it; evidence that did not change is not re-sent
        view.render(_snap(model, 3))
        assert "color" not in sent[-1]
        view.click(i)
        assert model.chains.evidence == {}
        assert view.clicks == 2
    finally:
        view.close()


def test_a_selection_from_the_page_is_a_click_and_runs_live():
    bn = BayesNet.from_bif(_SHARED / "bnlearn" / "cancer.bif.gz", n_chains=100, burn_in=5,
                           n_samples=100_000, random_state=0)
    lrn = bn.learner()
    view = BayesNetView(lrn, variables=["Cancer", "Smoker"])
    try:
        assert view.source.data["label"] == ["Cancer = True", "Cancer = False",
                                             "Smoker = True", "Smoker = False"]
        lrn.start()
        view._on_select("indices", [], [2])  # the page selected bar 2: Smoker = True
        deadline = time.monotonic() + 30
        while lrn.model.chains.ev[1] != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lrn.model.chains.evidence == {"Smoker": "True"}
        deadline = time.monotonic() + 30
        while view.view.renders < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert view.view.renders >= 2  # the pump renders while the learner runs
    finally:
        lrn.stop()
        lrn.join()
        view.close()


def test_refuses_a_learning_learner():
    bn = BayesNet.from_bif(_SHARED / "bnlearn" / "cancer.bif.gz", n_passes=1)
    lrn = bn.learner(bn.sample(20, random_state=0))
    with pytest.raises(TypeError, match="needs an inference learner"):
        BayesNetView(lrn)
