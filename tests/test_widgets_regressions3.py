"""Live views headless: a dashboard's update rate is checked and applied whether or not
its learner already has a pump, and it offers only the controls its learner accepts."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import Dashboard, pump_for  # noqa: E402

from bidlab.models import NMF, KMeans  # noqa: E402


@pytest.fixture
def kmeans_learner():
    X = np.random.default_rng(0).random((200, 4))
    lr = KMeans(n_clusters=3, batch_size=30).learner(X, n_passes=3)
    yield lr
    pump_for(lr).close()


@pytest.mark.parametrize("rate", [0, -1, 100, float("nan"), "fast"])
def test_a_bad_rate_is_refused_when_the_learner_already_has_a_pump(kmeans_learner,
                                                                   rate) -> None:
    first = Dashboard(kmeans_learner)
    with pytest.raises(ValueError, match="pump rate must be in"):
        Dashboard(kmeans_learner, rate=rate)
    assert first.pump.rate == 10.0


def test_a_new_valid_rate_takes_effect_on_the_running_pump(kmeans_learner) -> None:
    Dashboard(kmeans_learner)
    dash = Dashboard(kmeans_learner, rate=4)
    assert dash.pump.rate == 4.0
    ticks = dash.pump.ticks
    time.sleep(1.0)
    assert dash.pump.ticks - ticks <= 6  # about 4 a second, not 10


def test_full_batch_learners_offer_no_val_every_control(kmeans_learner) -> None:
    assert "val_every" not in Dashboard(kmeans_learner).controls.widgets
    X = np.random.default_rng(0).random((50, 6))
    nmf = NMF(n_components=2).learner(X, n_passes=2)
    dash = Dashboard(nmf)
    try:
        assert "val_every" not in dash.controls.widgets
        assert "tol" in dash.controls.widgets  # the others stay
        with pytest.raises(ValueError, match="refuses to change it.*full-batch"):
            Dashboard(nmf, controls=["val_every"])
    finally:
        dash.pump.close()


def test_options_that_cannot_be_tried_here_keep_their_controls() -> None:
    """The ranks' proxy learner polls rank 0's option table and has no ``check``: the
    dashboard offers its live options (a Dashboard on ranks raised AttributeError)."""
    from types import SimpleNamespace

    from bidlab.widgets._controls import refusal

    class Polled:  # what bidlab.distributed.proxy's option table offers
        specs = {"lrate": SimpleNamespace(type=float, choices=None)}

        def get(self, name):
            return 0.1

    assert refusal(SimpleNamespace(opts=Polled()), "lrate") is None
