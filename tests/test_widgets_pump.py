"""The pump (one update thread per learner, <= 10 Hz, stops on close) and the controls.

In-process: widgets and bokeh documents work without a frontend (nothing is sent), so
these check the threading contract cheaply; the kernel round trips are in
test_widgets_comm.py.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import MAX_RATE, Dashboard, Pump, View, pump_for  # noqa: E402

from bidlab.learn import Grad, Learner  # noqa: E402
from bidlab.models.lsq import LeastSquares  # noqa: E402


def _learner(name: str) -> Learner:
    """A learner that trains until stopped. Its minibatches are big enough that most of a
    step is numpy work with the GIL released, as in real models: with tiny minibatches the
    loop is nearly pure interpreter time and starves the test's own thread of the GIL."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40_000, 200)).astype(np.float32)
    y = (X @ rng.standard_normal((200, 1))).astype(np.float32)
    return Learner(LeastSquares(), (X, y), Grad(lrate=0.01), batch_size=2000,
                   n_passes=100_000, name=name)


def _pump_threads(lr: Learner) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"bidlab-pump-{lr.name}" and
            t.is_alive()]


@pytest.fixture
def running():
    lr = _learner("pumptest")
    lr.start()
    # running means stepping: the first minibatch comes 0.1-0.6 s after start() (staging the
    # data), and a pump attached before it sees no snapshot on those ticks
    end = time.monotonic() + 30
    while lr.step < 1 and lr.state == "running" and time.monotonic() < end:
        time.sleep(0.01)
    assert lr.step >= 1, f"the test learner never stepped (state {lr.state})"
    yield lr
    lr.stop()
    pump_for(lr).close()


def test_pump_rate_at_most_10_hz_and_ticks(running):
    stamps: list[float] = []
    fresh: list[bool] = []

    def render(snap):
        stamps.append(time.monotonic())
        fresh.append(snap is not None)

    pump = pump_for(running)
    pump.attach(View("probe", render))
    time.sleep(2.0)
    pump.detach("probe")
    n = len(stamps)
    span = stamps[-1] - stamps[0]
    # <= 10 Hz is the contract; the floor only catches a pump stuck at a few Hz (a loaded
    # machine may give half the ticks)
    assert 8 <= n <= 2.0 * MAX_RATE + 1, n
    assert (n - 1) / span <= MAX_RATE * 1.02
    assert min(np.diff(stamps)) > 0.045  # no bursts to catch up after a late tick
    assert sum(fresh) >= 0.8 * n  # a running learner gives a new snapshot nearly every tick


def test_late_ticks_keep_the_average_rate(running):
    """A tick that runs late (a slow render, a busy machine) keeps the 10 Hz grid: the
    ticks after it close the gap, at least half an interval apart, so the rate a page sees
    stays 10 a second instead of dropping with every late tick."""
    stamps: list[float] = []
    ends: list[float] = []

    def render(snap):
        stamps.append(time.monotonic())
        if len(stamps) % 4 == 1:
            time.sleep(0.18)  # every fourth tick ends 80 ms after the next one was due
        ends.append(time.monotonic())

    pump = pump_for(running)
    pump.attach(View("slow", render))
    time.sleep(3.0)
    pump.detach("slow")
    # a cycle is a slow tick and the three after it: 0.40 s when the grid is kept (10 a
    # second), 0.48 s when each late tick re-grids (~8.3 a second). A render the machine
    # stretched past one interval late (0.2 s) rightly moves the grid on: those cycles
    # are left out (a loaded 2-core machine stretched some to 0.21 s)
    cycles = [stamps[i + 4] - stamps[i] for i in range(0, len(ends) - 4, 4)
              if ends[i] - stamps[i] <= 0.19]
    if len(cycles) < 3:
        pytest.skip(f"the machine stretched the 0.18 s renders past 0.19 s: {np.diff(stamps)}")
    assert float(np.median(cycles)) <= 0.44, (cycles, np.diff(stamps))
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    assert rate <= MAX_RATE * 1.02, (rate, np.diff(stamps))
    assert min(np.diff(stamps)) > 0.045


def test_rate_above_10_refused(running):
    with pytest.raises(ValueError, match="pump rate must be in"):
        Pump(running, rate=30)


def test_dashboard_carries_the_class_the_lab_panel_scrolls_to(running):
    from bidlab.lab.snapshot import dashboard_class, describe

    dash = Dashboard(running)
    try:
        # the extension's "dashboard" link looks for describe(learner)["dashboard"]
        assert describe(running)["dashboard"] == dashboard_class(running.name)
        assert dashboard_class(running.name) in dash.widget._dom_classes
    finally:
        dash.close()


def test_closing_the_dashboard_stops_its_pump(running):
    dash = Dashboard(running)
    time.sleep(0.3)
    assert len(_pump_threads(running)) == 1
    assert len(running.observers.subscriptions) == 1
    dash.close()
    time.sleep(0.1)
    assert _pump_threads(running) == []
    assert running.observers.subscriptions == []
    assert dash.widget.comm is None  # its widgets are closed


def test_rerunning_the_cell_keeps_one_loop(running):
    first = Dashboard(running)
    second = Dashboard(running)  # what re-running the notebook cell does
    time.sleep(0.5)
    assert len(_pump_threads(running)) == 1
    assert len(running.observers.subscriptions) == 1
    assert first.widget.comm is None and second.widget.comm is not None
    assert second.view.renders > 0 and first.pump is second.pump
    assert not first.view.errors and not second.view.errors
    second.close()


def test_dashboard_streams_points_and_confirms_a_control(running):
    dash = Dashboard(running)
    assert "lrate" in dash.controls.widgets
    assert type(dash.controls.widgets["lrate"]).__name__ == "FloatLogSlider"
    time.sleep(0.5)
    dash.controls.widgets["lrate"].value = 0.02  # as the frontend does, in another thread
    assert running.opts.lrate == pytest.approx(0.02)
    deadline = time.monotonic() + 3
    while not dash.controls.applied and time.monotonic() < deadline:
        time.sleep(0.05)
    applied = dash.controls.applied[0]
    assert running.option_used("lrate", applied.step) == pytest.approx(0.02)
    assert running.option_used("lrate", applied.step - 1) == pytest.approx(0.01)
    assert 0 <= applied.delay_s < 0.5
    assert "took effect at step" in dash.message.value
    n = len(dash.source.data["step"])
    assert n == dash.points > 0  # Python holds exactly the streamed points
    assert np.all(np.diff(dash.source.data["step"]) > 0)
    dash.close()


def test_invalid_control_value_is_reported_not_raised(running):
    dash = Dashboard(running)
    dash.controls._changed({"owner": dash.controls.widgets["lrate"], "new": -1.0})
    assert "must be a float > 0" in dash.controls.message
    assert running.opts.lrate == pytest.approx(0.01)
    dash.close()


def test_batched_iopub_outside_a_kernel_sends_nothing_itself():
    """Without an IPython kernel there is no IOPub thread: the batch is a plain block (no
    exception, nothing held), and held sends run in the order they were held."""
    from bidlab.widgets._iopub import HeldSends, _local, batched_iopub, iopub_thread

    assert iopub_thread() is None
    ran = []
    with batched_iopub():
        assert getattr(_local, "held", None) is None
        ran.append("body")
    held = HeldSends([lambda: ran.append(1), lambda: ran.append(2), lambda: ran.append(3)])
    held()
    assert ran == ["body", 1, 2, 3]
