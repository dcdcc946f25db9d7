"""The live LDA dashboard (notebooks/02_lda_live.ipynb) in a real JupyterLab and browser.

One JupyterLab on 127.0.0.1 (token, temp config) and headless Debian chromium through
Playwright (the harness of tests/browser_harness.py). The notebook is opened and run
once for the module (its learner trains for the whole module: NPASSES is raised); the
tests then run in file order against that one page and kernel:

1. the page applies chart updates at close to the pump's 10 Hz;
2. dragging the dashboard's ``kappa`` slider reaches the learner quickly;
3. clicking a bubble selects that (topic, word) and its temperature slider heats it;
4. a page reload shows the current chart, with as many points as the kernel holds.

Kernel state is read with a second kernel client (``KernelProbe``); page state from
BokehJS (``Bokeh.documents[..].get_model_by_name``). The targets are 9.5 updates/s and a
p95 control delay of 150 ms; the asserted bounds (:data:`MIN_RATE`, :data:`MAX_P95_S`) are
looser so a loaded 2-core CI machine does not flake, and the measured figures are printed.
Screenshots go to ``test-artifacts/widgets/``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import browser_harness as bh
import pytest
from conftest import SHARED_DATA

from bidlab.bench import _live_page as lp

pytest_plugins = ["conftest_browser"]
pytestmark = [pytest.mark.browser, pytest.mark.slow]

RATE_WINDOW_S = 30.0  # the update rate is measured over 30 s of training
MIN_RATE = 9.0  # asserted floor (noisy shared machine); the target is 9.5 updates/s
N_DRAGS = 16
MAX_P95_S = 0.4  # asserted bound; the target is 0.150 s
OPTION = "kappa"  # see test_slider_drag_reaches_the_learner


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bh.LabServer]:
    reason = bh.skip_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("lab-root")
    server = bh.start_lab(root, tmp_path_factory.mktemp("lab-dirs"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shots(artifacts_dir: Path) -> Path:
    path = artifacts_dir / "widgets"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def live(lab: bh.LabServer, browser: bh.Browser, shots: Path) -> Iterator[dict[str, Any]]:
    """02_lda_live opened and run: ``{"page", "probe"}`` while its learner trains."""
    data = SHARED_DATA if SHARED_DATA.is_dir() else None  # else the synthetic fallback
    lp.lab_notebook(lab.root / "02_lda_live.ipynb", data, "NPASSES = 100_000")
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(f"pageerror {e}"))
    try:
        with bh.live_notebook(
                lab, page, "02_lda_live.ipynb", "'bubbles' in globals() and learner.state"
                " == 'running' and dash.points > 0 and bubbles.patches > 0", 60,
                "the notebook to run and its learner to train",
                shots / "FAILED-setup.png") as probe:
            bh.wait_for(lambda: page.evaluate(f"() => !!{lp.find_source_js(lp.SCORES)}"
                                              f" && !!{lp.find_source_js(lp.BUBBLES)}"), 30,
                        "both bokeh charts in the page")
            yield {"page": page, "probe": probe, "errors": errors}
    finally:
        lab.shutdown_kernels()


def test_chart_updates_near_10_per_second(live: dict[str, Any], shots: Path) -> None:
    """Count the score chart's ``stream`` events in the page over 20 s of training."""
    page = live["page"]
    lp.install_update_counter(page, lp.SCORES)
    probe = live["probe"]
    kernel = "(__import__('time').time(), dash.points, learner.step, dash.pump.ticks)"
    k0 = probe.eval(kernel)
    start = page.evaluate("() => Date.now()")
    time.sleep(RATE_WINDOW_S)
    got = lp.update_rate(page, since_ms=start)
    k1 = probe.eval(kernel)
    page.screenshot(path=str(shots / "dashboard-training.png"))
    dt = k1[0] - k0[0]
    print(f"\nchart updates seen in the page: {got['updates']} in {got['seconds']:.1f} s = "
          f"{got['rate']:.2f}/s (target >= 9.5), longest gap {got['max_gap_s']:.2f} s; "
          f"kernel: {(k1[1] - k0[1]) / dt:.2f} rows streamed/s, "
          f"{(k1[3] - k0[3]) / dt:.2f} pump ticks/s, {(k1[2] - k0[2]) / dt:.1f} minibatches/s")
    assert got["rate"] >= MIN_RATE, got
    # every update added a new minibatch: no repeated step (no echo, no duplicate stream)
    assert got["distinct_steps"] == got["updates"], got
    steps = lp.browser_steps(page)
    assert steps == sorted(set(steps)), "the page's score curve holds repeated steps"
    # the page keeps the echoes of the kernel's patches (QUIET_ECHOES_JS): of the
    # ~200 streams and patches of this window none came back to the kernel (the change that
    # installs the page's filter may echo once per document)
    echoes = probe.eval("(dash.chart.echo_counts, bubbles.chart.echo_counts)")
    for counts in echoes:
        data_echoes = sum(counts.get(k, 0) for k in ("ColumnsStreamed", "ColumnsPatched",
                                                     "ColumnDataChanged"))
        assert data_echoes <= 1, echoes


def test_bokeh_style_sheets_skip_identical_rewrites(live: dict[str, Any]) -> None:
    """STEADY_STYLES_JS: the page's BokehJS rewrites an inline style sheet only
    when its text changes (each rewrite re-collects the page's styles)."""
    got = live["page"].evaluate("""async () => {
      const dom = Bokeh.require("core/dom");
      const sheet = new dom.InlineStyleSheet(":host { width: 10px; }");
      document.head.appendChild(sheet.el);
      let writes = 0;
      const seen = new MutationObserver((records) => { writes += records.length; });
      seen.observe(sheet.el, {childList: true, characterData: true, subtree: true});
      const flush = () => new Promise((done) => setTimeout(done, 0));
      sheet.replace(":host { width: 10px; }");
      await flush();
      const same = writes;
      sheet.replace(":host { width: 12px; }");
      await flush();
      seen.disconnect();
      sheet.remove();
      return {patched: dom.InlineStyleSheet.prototype.__bidlab_steady === true, same,
              changed: writes - same, css: sheet.css};
    }""")
    assert got == {"patched": True, "same": 0, "changed": 1,
                   "css": ":host { width: 12px; }"}, got


def test_slider_drag_reaches_the_learner(live: dict[str, Any], shots: Path) -> None:
    """Drag the dashboard's ``kappa`` slider 16 times; time each change to its first use.

    ``kappa`` is the learning-rate control of SAME Gibbs LDA (``LDAGibbs`` has no
    ``lrate``): its moving-average step is rho_t = (tau0 + t)^-kappa. The delay runs from
    the browser's ``pointerup`` (``Date.now()``) to the start of the first minibatch whose
    record row carries the new option version (kernel ``time.time()``, same clock).
    """
    page, probe = live["page"], live["probe"]
    before = probe.eval(f"learner.opts.{OPTION}")
    n_applied = f"sum(a.name == {OPTION!r} for a in dash.controls.applied)"
    assert probe.eval(n_applied) == 0, "the delays below pair the i-th change with drag i"
    drags = []
    for i in range(N_DRAGS):
        drags.append(lp.drag_slider(page, OPTION, 24 if i % 2 == 0 else -24))
        lp.wait_ms(350)  # a few minibatches apart, as a person would drag
    # a drag that left the readout unchanged sent nothing: only the others map to changes
    stamps = [d["stamp"] for d in drags if d["after"] != d["before"]]
    assert len(stamps) >= N_DRAGS - 2, drags
    # every change reaches the kernel and is applied (a loaded machine may lag seconds)
    bh.wait_for(lambda: probe.eval(
        f"len(dash.controls.pending) == 0 and {n_applied} >= {len(stamps)}"), 30,
        f"all {len(stamps)} slider changes to reach the learner")
    got = lp.control_delays(probe, OPTION, stamps)
    page.screenshot(path=str(shots / "dashboard-after-drags.png"))
    delays = got["delays_s"]
    p50, p95 = lp.percentile(delays, 50), lp.percentile(delays, 95)
    print(f"\n{OPTION}: {got['changes']} changes from {len(stamps)} effective drags; browser "
          f"event -> first minibatch using it: p50 {p50 * 1e3:.0f} ms, p95 {p95 * 1e3:.0f} ms "
          f"(target p95 <= 150 ms), max {max(delays) * 1e3:.0f} ms")
    assert got["changes"] == len(stamps), f"{got['changes']} changes reached the kernel"
    assert len(delays) == len(stamps), got
    # the learner ends on the value the page shows (readout: 3 significant digits)
    assert got["value"] == pytest.approx(float(drags[-1]["after"]), rel=5e-3), drags[-1]
    assert {float(d["after"]) for d in drags} - {before}, "no drag moved the slider"
    widget = probe.eval(f"dash.controls.widgets[{OPTION!r}].value")
    assert got["value"] == pytest.approx(widget), "the learner and its slider disagree"
    # one machine, one clock: a minibatch cannot start long before the event caused it
    assert min(delays) > -0.05, delays
    assert p95 <= MAX_P95_S, delays


def test_bubble_click_heats_that_parameter(live: dict[str, Any], shots: Path) -> None:
    """Click topic 1's biggest bubble, then raise the temperature slider it enables."""
    page, probe = live["page"], live["probe"]
    topic = 1  # not topic 0: the notebook heats topic 0's top word itself
    for attempt in range(3):
        # the pixel is measured, then clicked: on a loaded machine the notebook's layout
        # can still shift in between and the click land beside the bubble, so a click
        # that selects nothing is repeated, as a user would (a lost selection still fails)
        hit = lp.click_bubble(page, lp.biggest_bubble(page, topic))
        assert int(hit["topic"]) == topic and hit["word"], hit
        try:
            # 20 s: a second click on a bubble the page already selected would toggle it
            # off, so a slow page-to-kernel message must not be mistaken for a missed click
            sel = bh.wait_for(lambda: probe.eval("bubbles.selected"), 20,
                              "a selection in the kernel")
            break
        except TimeoutError:
            if attempt == 2:
                raise
    assert sel[0] == topic, sel
    word = sel[1]
    assert probe.eval(f"bubbles.vocab[{word}]") == hit["word"], (sel, hit)
    assert probe.eval(f"float(learner.temperature[{topic}, {word}])") == 1.0
    target = lp.slider(page, "temperature").locator(".noUi-target")
    bh.wait_for(lambda: page.get_by_text("selected: topic").count()
                and target.get_attribute("disabled") is None, 15,
                "the selection shown and the temperature slider enabled")
    lp.drag_slider(page, "temperature", 60)
    value = bh.wait_for(
        lambda: (v := probe.eval(f"float(learner.temperature[{topic}, {word}])")) != 1.0
        and v, 15, "the clicked parameter's temperature to change in the kernel")
    assert value == pytest.approx(probe.eval("bubbles.temperature.value"))
    # the page marks the heated bubble (a red ring) at its next refresh
    ring = bh.wait_for(lambda: page.evaluate(f"""(w) => {{
      const s = {lp.find_source_js(lp.BUBBLES)};
      for (let i = 0; i < s.data.topic.length; i++)
        if (s.data.topic[i] === {topic} && s.data.word[i] === w && s.data.width[i] > 0)
          return [s.data.line[i], s.data.width[i]];
      return null;
    }}""", hit["word"]), 15, "the heated bubble to be ringed in the page")
    assert ring[0] == "#d62728", ring
    print(f"\nclicked topic {topic}, word {hit['word']!r}: temperature {value:.3g}")
    page.screenshot(path=str(shots / "bubble-heated.png"))


def page_diagnosis(live: dict[str, Any]) -> str:
    """What a failed chart check shows: points per BokehJS document, recent console errors,
    whether the kernel still holds the dashboard's widget and what its learner does."""
    counts = live["page"].evaluate(f"""() => Bokeh.documents.map(d => {{
      const s = d.get_model_by_name({lp.SCORES!r});
      return s ? s.data.step.length : null;
    }})""")
    try:
        kernel = live["probe"].eval(f"({KERNEL_HOLDS_DASHBOARD}, learner.state, learner.step)")
    except Exception as exc:  # the kernel may be gone: that is the finding
        kernel = f"not answering ({exc!r})"
    try:
        page_kernel = live["page"].evaluate("""() => window.jupyterapp.shell.currentWidget
            .sessionContext.session.kernel.id""")
    except Exception as exc:  # noqa: BLE001 - the page may have no session: say so
        page_kernel = f"none ({exc!r})"
    return (f"score points per page document: {counts}; kernel (dashboard widget held, "
            f"learner state, step): {kernel}; the page's kernel {page_kernel}, the "
            f"notebook's {live['probe'].kernel_id}; console: {live['errors'][-5:]}")


#: True while the kernel holds the dashboard's top widget (the page's views refer to it).
KERNEL_HOLDS_DASHBOARD = ("dash.widget.model_id in "
                          "__import__('ipywidgets').Widget.widgets")
MODEL_NOT_FOUND = "widget model not found"


def reload_page(live: dict[str, Any], before: float) -> int:
    """Reload the page until its chart shows steps after ``before``; return the reloads.

    One more reload is allowed only for JupyterLab's widget manager finishing its restore
    without models the kernel still holds (its console says "widget model not found"; seen
    once on a loaded CI machine, where its 4 s request for the kernel's widget states can
    time out). Any other failure, or the same one twice, fails the test.
    """
    page, probe = live["page"], live["probe"]
    for reloads in (1, 2):
        seen = len(live["errors"])
        page.reload()
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started")
        try:
            bh.wait_for(lambda: (lp.browser_steps(page) or [0.0])[-1] > before, 30,
                        "the reloaded chart to show points newer than those seen before")
            return reloads
        except TimeoutError as exc:
            lost = any(MODEL_NOT_FOUND in e for e in live["errors"][seen:])
            try:
                held = bool(probe.eval(KERNEL_HOLDS_DASHBOARD))
            except Exception:  # noqa: BLE001 - a kernel gone or restarted: no retry
                held = False
            if reloads == 1 and lost and held:
                print(f"\nreload 1: the page restored without the kernel's widgets ({exc}); "
                      "reloading once more")
                continue
            raise AssertionError(f"{exc}; {page_diagnosis(live)}") from exc
    raise AssertionError("unreachable")


def test_reload_shows_current_state(live: dict[str, Any], shots: Path) -> None:
    """Reload the page: the chart comes back with the kernel's points, none twice."""
    page, probe = live["page"], live["probe"]
    # the last step shown (not the count of points: that stops at ROLLOVER)
    before = (lp.browser_steps(page) or [0.0])[-1]
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    bh.wait_for(lambda: not page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.context.model.dirty"), 10,
        "the notebook to be saved")
    reloads = reload_page(live, before)
    probe.eval("learner.pause() or 0")
    bh.wait_for(lambda: probe.eval("learner.state") == "paused", 10, "the learner to pause")
    time.sleep(0.5)  # the pump's last row reaches the page
    kernel = probe.eval("(dash.points, len(dash.source.data['step']), "
                        "float(dash.source.data['step'][-1]))")
    deadline = time.monotonic() + 5
    while len(steps := lp.browser_steps(page) or []) != kernel[1]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    page.screenshot(path=str(shots / "after-reload.png"))
    assert steps, "no score chart in the page after the reload"
    assert len(steps) == kernel[1], (
        f"page {len(steps)} points ({len(steps) - len(set(steps))} repeated, steps "
        f"{steps[0]:.0f}..{steps[-1]:.0f}), kernel {kernel[1]} (steps ..{kernel[2]:.0f}); "
        f"{page_diagnosis(live)}")
    print(f"\nafter {reloads} reload(s): page {len(steps)} points, kernel {kernel[0]} streamed / "
          f"{kernel[1]} held, last step {steps[-1]:.0f} (kernel {kernel[2]:.0f})")
    rollover = probe.eval("__import__('bidlab.widgets._charts', fromlist=['_']).ROLLOVER")
    assert kernel[1] == min(kernel[0], rollover), \
        "the kernel holds a different number of points than it sent (after rollover)"
    assert steps == sorted(set(steps)), "repeated steps in the page after reload"
    assert steps[-1] == kernel[2]
    probe.eval("learner.resume() or 0")
