"""The intertopic map in a real JupyterLab and browser: merge and split from the map.

A notebook (written here) trains ``LDAGibbs`` on a small planted corpus in the background
with an :class:`~bidlab.widgets.IntertopicMap` on screen. In headless chromium the test
box-selects two topics with the mouse and presses *merge*, then clicks one topic and
presses *split*; the running learner's k and its topic-edit log (what the learner's
checkpoints and saved files carry) must change accordingly, and the page's map must
follow the new k. Pixels come from BokehJS's own scales (the plot's ``frame.x_scale``),
kernel state from a second kernel client (``KernelProbe``). Skips where chromium,
playwright or jupyterlab is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import browser_harness as bh
import numpy as np
import pytest

from bidlab.bench import _live_page as lp

pytest_plugins = ["conftest_browser"]
pytestmark = [pytest.mark.browser, pytest.mark.slow]

MAP = "bidlab-intertopic"  # IntertopicMap's ColumnDataSource (widgets/intertopic.py)
K = 6
CELLS = [
    f"""from bidlab.datasets.synthetic_corpus import block_diagonal_corpus
from bidlab.models import LDAGibbs
from bidlab.widgets import IntertopicMap

corpus = block_diagonal_corpus(k={K}, words_per_topic=12, n_docs=600, doc_len=40, seed=1)
learner = LDAGibbs(n_components={K}, random_state=0).learner(corpus, n_passes=100_000,
                                                            batch_size=50)
topic_map = IntertopicMap(learner, corpus.vocab)
topic_map""",
]  # the test starts the learner once it counts the map's changes in the page

# the map's circles in page pixels: centre and radius of each topic (BokehJS's scales)
_CIRCLES_JS = f"""() => {{
  const s = {lp.find_source_js(MAP)};
  if (!s || !s.data.x.length) return null;
  let view = null;
  for (const v of Bokeh.index.all_views())
    if (v.model && v.model.renderers && v.frame
        && v.model.renderers.some(r => r.data_source === s)) view = v;
  if (!view) return null;
  view.canvas_view.el.scrollIntoView({{block: 'center'}});
  const r = view.canvas_view.el.getBoundingClientRect();
  const xs = view.frame.x_scale, ys = view.frame.y_scale;
  return Array.from(s.data.x, (x, i) => {{
    const px = r.left + xs.compute(x), py = r.top + ys.compute(s.data.y[i]);
    return {{px, py, rad: Math.abs(xs.compute(x + s.data.radius[i]) - xs.compute(x))}};
  }});
}}"""


_SELECTED_JS = ("() => { const s = " + lp.find_source_js(MAP)
                + "; return s ? Array.from(s.selected.indices) : null; }")


def circles(page: Any) -> list[dict[str, float]]:
    """The map's circles as the page draws them now (waits for a drawn map)."""
    return bh.wait_for(lambda: page.evaluate(_CIRCLES_JS), 30, "the intertopic map drawn")


def box_pair(pts: list[dict[str, float]], margin: float = 6.0) -> tuple[int, int, tuple]:
    """Two topics whose centres' bounding box (grown by ``margin`` px) holds no other
    centre, the pair with the most room around that box first; and the box."""
    best = None
    for a, b in combinations(range(len(pts)), 2):
        x0, x1 = sorted((pts[a]["px"], pts[b]["px"]))
        y0, y1 = sorted((pts[a]["py"], pts[b]["py"]))
        room = min((max(x0 - p["px"], p["px"] - x1, y0 - p["py"], p["py"] - y1)
                    for i, p in enumerate(pts) if i not in (a, b)), default=1e9)
        if room > margin and (best is None or room > best[0]):
            best = (room, a, b, (x0 - margin, y0 - margin, x1 + margin, y1 + margin))
    if best is None:
        raise AssertionError(f"no two topics can be boxed alone on the map: {pts}")
    return best[1], best[2], best[3]


def lone_topic(pts: list[dict[str, float]]) -> int:
    """The topic whose centre lies deepest outside every other circle (a click there hits
    it alone)."""
    def clearance(i: int) -> float:
        p = pts[i]
        return min((((p["px"] - q["px"]) ** 2 + (p["py"] - q["py"]) ** 2) ** 0.5 - q["rad"]
                    for j, q in enumerate(pts) if j != i), default=1e9)
    return max(range(len(pts)), key=clearance)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, browser: bh.Browser,
         artifacts_dir: Path) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("lab-root")
    bh.write_notebook(root / "map.ipynb", CELLS)
    server = bh.start_lab(root, tmp_path_factory.mktemp("lab-dirs"))
    page = browser.new_page()
    try:
        with bh.live_notebook(
                server, page, "map.ipynb", "'topic_map' in globals()", 60,
                "the notebook's map to be made",
                artifacts_dir / "FAILED-intertopic-setup.png") as probe:
            yield {"page": page, "probe": probe, "shots": artifacts_dir}
    finally:
        server.stop()


def press(page: Any, name: str) -> None:
    page.get_by_role("button", name=name, exact=True).click()


# BokehJS turns a pointer held 300 ms without moving into a "press" (no drag follows); on a
# loaded machine the first move of Playwright's drag can come later than that
_PATIENT_GESTURES_JS = "() => { Bokeh.require('core/ui_gestures').UIGestures.press_threshold" \
                       " = 10000; }"


MIN_MAP_RATE = 5.0  # asserted floor of the map's frames in the kernel (the pump ticks at 10/s)


def page_radii(page: Any) -> list[float] | None:
    """The map's radius column as the page holds it."""
    return page.evaluate(f"() => {{ const s = {lp.find_source_js(MAP)};"
                         " return s ? Array.from(s.data.radius) : null; }")


def test_merge_then_split_from_the_map(live: dict[str, Any]) -> None:
    page, probe = live["page"], live["probe"]
    page.evaluate(_PATIENT_GESTURES_JS)
    # the map streams while the learner trains (the counter bench dashboard --map uses)
    # it draws a frame every tick and sends the page what moved by a pixel or more: counted
    # from the learner's start, while the fresh model's topics move (this toy converges in
    # a second or two, after which nothing moves by a pixel and nothing is sent)
    bh.wait_for(lambda: page.evaluate(f"() => !!{lp.find_source_js(MAP)}"), 30,
                "the map's data source in the page")
    lp.install_change_counter(page, MAP)
    start = page.evaluate("() => Date.now()")
    probe.eval("(learner.start(), 0)[1]")
    bh.wait_for(lambda: probe.eval("learner.state == 'running' and topic_map.frames > 2"),
                60, "the learner to train and its map to draw")
    f0, t0 = probe.eval("(topic_map.frames, __import__('time').monotonic())")
    lp.wait_ms(4000)
    f1, t1 = probe.eval("(topic_map.frames, __import__('time').monotonic())")
    rate = lp.change_rate(page, MAP, start, page.evaluate("() => Date.now()"))
    frames = (f1 - f0) / (t1 - t0)
    print(f"\nintertopic map: {frames:.2f} frames/s in the kernel; {rate['updates']} data "
          f"changes in the page in {rate['seconds']:.1f} s = {rate['rate']:.2f}/s")
    assert frames >= MIN_MAP_RATE, (f0, f1, t1 - t0)
    assert rate["updates"] > 0, rate  # the topics of a fresh model move visibly
    # the page holds the radii the kernel sent (as float32), whatever was left unsent
    bh.wait_for(lambda: (got := page_radii(page)) is not None and np.allclose(
        got, probe.eval("[float(r) for r in topic_map.source.data['radius']]"), rtol=1e-6),
        10, "the page's radii to equal the kernel's")
    # box-select two topics (the map's drag tool), then press "merge"
    tried: list[Any] = []
    for _attempt in range(3):  # the map may be re-placed under the mouse: select again
        a, b, (x0, y0, x1, y1) = box_pair(circles(page))
        page.mouse.move(x0, y0)
        page.mouse.down()
        page.mouse.move(x1, y1, steps=6)
        page.mouse.up()
        try:
            bh.wait_for(lambda a=a, b=b: probe.eval("topic_map.selected") == sorted((a, b)), 10,
                        f"the box selection of topics {a} and {b} in the kernel")
            break
        except TimeoutError:
            tried.append((a, b, (x0, y0, x1, y1), page.evaluate(_SELECTED_JS)))
    else:
        raise AssertionError(f"the box selection never reached the kernel: "
                             f"{probe.eval('topic_map.selected')}; tried (topics, box, page "
                             f"selection): {tried}")
    steps_before = probe.eval("learner.step")
    press(page, "merge")
    entry = bh.wait_for(lambda: probe.eval(
        "learner.topic_edit_log[-1] if learner.topic_edit_log else None"), 20,
        "the merge to be applied by the running learner")
    assert entry["kind"] == "merge" and entry["topics"] == sorted((a, b)), entry
    assert (entry["k_before"], entry["k_after"]) == (K, K - 1), entry
    assert entry["step"] >= steps_before, entry
    assert probe.eval("(learner.model.opts.n_components, learner.estimator.n_components, "
                      "learner.model.modelmats[0].shape[0])") == (K - 1,) * 3
    bh.wait_for(lambda: len(circles(page)) == K - 1, 20, f"{K - 1} topics on the page's map")
    page.screenshot(path=str(live["shots"] / "intertopic-merged.png"))

    # click one topic (the map's tap tool), then press "split"
    for _attempt in range(3):
        t = lone_topic(pts := circles(page))
        page.mouse.click(pts[t]["px"], pts[t]["py"])
        try:
            bh.wait_for(lambda t=t: probe.eval("topic_map.selected") == [t], 10,
                        f"the click on topic {t} in the kernel")
            break
        except TimeoutError:
            continue
    else:
        raise AssertionError(f"the click never selected one topic in the kernel: "
                             f"{probe.eval('topic_map.selected')}")
    bh.wait_for(lambda: page.get_by_text(f"topic {t} (λ").count() > 0, 10,
                "the selected topic's words on the page")
    press(page, "split")
    entry = bh.wait_for(lambda: probe.eval(
        "learner.topic_edit_log[-1] if len(learner.topic_edit_log) > 1 else None"), 20,
        "the split to be applied by the running learner")
    assert entry["kind"] == "split" and entry["topic"] == t, entry
    assert (entry["k_before"], entry["k_after"]) == (K - 1, K), entry
    assert probe.eval("[e['kind'] for e in learner.topic_edit_log]") == ["merge", "split"]
    assert probe.eval("learner.model.opts.n_components") == K
    bh.wait_for(lambda: len(circles(page)) == K, 20, f"{K} topics on the page's map again")
    assert probe.eval("learner.state") == "running"
    assert "split" in probe.eval("topic_map.status.value")
    page.screenshot(path=str(live["shots"] / "intertopic-split.png"))
