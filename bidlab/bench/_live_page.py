"""Measure a live bidlab dashboard in a real JupyterLab page (shared by a test and a bench).

Used by ``tests/test_widgets_browser.py`` and ``python -m bidlab.bench dashboard``; both
drive ``notebooks/02_lda_live.ipynb`` in headless chromium through Playwright with the
harness in :mod:`bidlab.bench._browser`. What is here is specific to the dashboard views
(the bokeh source names of :mod:`bidlab.widgets`, their sliders and bubbles), so it lives
beside the benchmark rather than in the generic harness.

* :func:`lab_notebook` writes a copy of 02_lda_live with its parameters overridden.
* :func:`install_update_counter` hooks BokehJS's ``streaming`` signal of a named
  ``ColumnDataSource`` in the page, so every chart update the page applies is counted
  with its ``Date.now()`` (polling would miss or merge updates); :func:`update_rate`
  reads the counts back.
* :func:`drag_slider` drags an ipywidgets slider's handle with the mouse and returns the
  browser's ``pointerup`` time stamp; :func:`control_delays` finds, in the learner's
  per-minibatch record read in the kernel, the first minibatch that ran with each change
  and returns its start minus the browser time stamp. The page and the kernel share one
  machine clock: ``Date.now()`` vs ``time.time()``; the record's ``perf_counter`` times
  are shifted by ``time.time() - time.perf_counter()`` sampled in the kernel.
* :func:`click_bubble` clicks one bubble of ``TopicBubbles`` at the pixel BokehJS's own
  scales give for it.

``page`` is a Playwright page; ``probe`` anything with ``eval(expr) -> literal`` (the
harness's ``KernelProbe``). No Playwright import here: the module stays importable anywhere.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["SCORES", "BUBBLES", "MAP", "lab_notebook", "find_source_js", "find_plot_js",
           "install_change_counter", "change_rate", "install_update_counter", "update_rate",
           "events_rate", "browser_steps",
           "drag_slider", "control_delays", "click_bubble", "biggest_bubble", "percentile"]

SCORES = "bidlab-scores"  # Dashboard's score-curve ColumnDataSource (widgets/dashboard.py)
BUBBLES = "bidlab-topic-bubbles"  # TopicBubbles' source (widgets/topics.py)
MAP = "bidlab-intertopic"  # IntertopicMap's source (widgets/intertopic.py)
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "02_lda_live.ipynb"


class Probe(Protocol):
    def eval(self, expr: str, timeout: float = 10.0) -> Any: ...


def lab_notebook(dest: Path, data: Path | None, overrides: str = "",
                 keep_cells: int | None = None, extra_cells: tuple[str, ...] = ()) -> Path:
    """Write 02_lda_live to ``dest`` with ``DATA`` (absolute) and ``overrides`` appended to
    its parameters cell; ``keep_cells`` keeps only that many leading cells, and
    ``extra_cells`` (code) go right after the ``TopicBubbles`` cell."""
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    if data is not None:
        cell.source += f"\nDATA = {str(data)!r}"
    if overrides:
        cell.source += "\n" + overrides
    if keep_cells is not None:
        nb.cells = nb.cells[:keep_cells]
    if extra_cells:
        at = next(i for i, c in enumerate(nb.cells) if "TopicBubbles(learner" in c.source) + 1
        nb.cells[at:at] = [nbformat.v4.new_code_cell(src) for src in extra_cells]
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dest))
    return dest


def find_source_js(name: str) -> str:
    """JS expression: the newest live ``ColumnDataSource`` named ``name`` in the page, or
    null (every LiveBokeh view holds its own BokehJS document; a re-render adds one)."""
    return f"""(() => {{
      if (!window.Bokeh || !Bokeh.documents) return null;
      for (let i = Bokeh.documents.length - 1; i >= 0; i--) {{
        const s = Bokeh.documents[i].get_model_by_name({name!r});
        if (s) return s;
      }}
      return null;
    }})()"""


def find_plot_js(name: str) -> str:
    """JS expression: the plot drawing source ``name`` (see :func:`find_source_js`), or
    null."""
    return f"""(() => {{
      const s = {find_source_js(name)};
      if (!s) return null;
      return [...s.document.all_models].find((m) => Array.isArray(m.renderers)
        && m.renderers.some((r) => r.data_source === s)) ?? null;
    }})()"""


def install_update_counter(page: Any, name: str = SCORES) -> None:
    """Count, in the page, every ``stream`` BokehJS applies to source ``name``.

    Each event stores ``[Date.now(), last step, number of points]`` in
    ``window.__bidlabUpdates``. Raises when the source is not in the page.
    """
    ok = page.evaluate(f"""() => {{
      const s = {find_source_js(name)};
      if (!s) return false;
      window.__bidlabUpdates = [];
      s.streaming.connect(() => {{
        const st = s.data.step;
        window.__bidlabUpdates.push([Date.now(), st[st.length - 1], st.length]);
      }});
      return true;
    }}""")
    if not ok:
        raise RuntimeError(f"no bokeh source named {name!r} in the page")


def install_change_counter(page: Any, name: str) -> None:
    """Count, in the page, every data change BokehJS applies to source ``name`` (a whole
    new ``.data``, a ``patch`` or a ``stream``: a view such as the intertopic map sends
    whichever fits the change), into ``window.__bidlabChanges[name]`` as ``[Date.now(),
    count, points]`` rows (the format :func:`events_rate` reads). Raises when the source
    is not in the page."""
    ok = page.evaluate(f"""() => {{
      const s = {find_source_js(name)};
      if (!s) return false;
      window.__bidlabChanges = window.__bidlabChanges || {{}};
      const rows = window.__bidlabChanges[{name!r}] = [];
      const count = () => {{
        const any = Object.values(s.data)[0];
        rows.push([Date.now(), rows.length, any ? any.length : 0]);
      }};
      s.properties.data.change.connect(count);
      s.patching.connect(count);
      s.streaming.connect(count);
      return true;
    }}""")
    if not ok:
        raise RuntimeError(f"no bokeh source named {name!r} in the page")


def change_rate(page: Any, name: str, since_ms: float, until_ms: float) -> dict[str, Any]:
    """Data changes per second of source ``name`` between two browser epoch-ms times
    (from :func:`install_change_counter`)."""
    events = page.evaluate(f"() => (window.__bidlabChanges || {{}})[{name!r}] || []")
    return events_rate(events, since_ms, until_ms)


def update_rate(page: Any, since_ms: float | None = None,
                until_ms: float | None = None) -> dict[str, Any]:
    """Updates per second the page applied (from :func:`install_update_counter`) between
    ``since_ms`` and ``until_ms`` (browser epoch ms; defaults: the first event, now).

    Returns ``{"updates", "seconds", "rate", "distinct_steps", "max_gap_s"}``.
    """
    events, now = page.evaluate("() => [window.__bidlabUpdates || [], Date.now()]")
    return events_rate(events, since_ms, now if until_ms is None else until_ms)


def events_rate(events: list[list[float]], since_ms: float | None,
                until_ms: float) -> dict[str, Any]:
    """The rate of ``events`` (``[epoch ms, step, points]`` rows) in ``[since_ms,
    until_ms]``: their count over the span's seconds, and the longest gap in the span."""
    lo = -np.inf if since_ms is None else since_ms
    events = [e for e in events if lo <= e[0] <= until_ms]
    if not events:
        return {"updates": 0, "seconds": 0.0, "rate": 0.0, "distinct_steps": 0,
                "max_gap_s": None}
    t0 = since_ms if since_ms is not None else events[0][0]
    seconds = (until_ms - t0) / 1000.0
    times = np.array([e[0] for e in events], dtype=np.float64)
    gaps = np.diff(np.concatenate([[t0], times, [until_ms]])) / 1000.0
    return {"updates": len(events), "seconds": seconds,
            "rate": len(events) / seconds if seconds > 0 else 0.0,
            "distinct_steps": len({e[1] for e in events}), "max_gap_s": float(gaps.max())}


def browser_steps(page: Any, name: str = SCORES) -> list[float] | None:
    """The ``step`` column of source ``name`` as the page holds it (None: not there)."""
    return page.evaluate(f"""() => {{
      const s = {find_source_js(name)};
      return s ? Array.from(s.data.step) : null;
    }}""")


_STAMP_JS = """() => {
  if (window.__bidlabPointerUps) return;
  window.__bidlabPointerUps = [];
  window.addEventListener('pointerup', () => window.__bidlabPointerUps.push(Date.now()),
                          true);
}"""


def slider(page: Any, description: str) -> Any:
    """Locator of the ipywidgets slider whose label is ``description`` (first match)."""
    return page.locator(".widget-slider", has=page.locator(
        f"label.widget-label:text-is('{description}')")).first


def drag_slider(page: Any, description: str, dx: float) -> dict[str, Any]:
    """Drag the slider's handle ``dx`` pixels with the mouse.

    Returns ``{"stamp": the browser's pointerup time (epoch ms), "before", "after"}``: the
    slider's readout text around the drag. The widget sends a value on pointerup only when
    the readout changed, so a drag with ``before == after`` produced no change.
    """
    page.evaluate(_STAMP_JS)
    box_el = slider(page, description)
    handle = box_el.locator(".noUi-handle")
    readout = box_el.locator(".widget-readout")
    handle.scroll_into_view_if_needed()
    box = handle.bounding_box()
    if box is None:
        raise RuntimeError(f"slider {description!r} is not visible")
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    before = readout.inner_text()
    count = page.evaluate("() => window.__bidlabPointerUps.length")
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + dx, y, steps=4)
    page.mouse.up()
    stamps = page.evaluate("() => window.__bidlabPointerUps")
    if len(stamps) <= count:
        raise RuntimeError("the page saw no pointerup for the drag")
    return {"stamp": float(stamps[-1]), "before": before, "after": readout.inner_text()}


def control_delays(probe: Probe, option: str, stamps_ms: list[float],
                   controls: str = "dash.controls", learner: str = "learner"
                   ) -> dict[str, Any]:
    """Delay from each browser event to the start of the first minibatch that used it.

    The ``i``-th accepted change of ``option`` in ``controls`` (the Dashboard's
    :class:`OptionControls`, read in the kernel) belongs to the ``i``-th stamp. A
    minibatch starts when the previous one ends (the record's ``time`` is each minibatch's
    end, in ``perf_counter`` seconds). Returns ``{"delays_s": [...], "changes": n,
    "pending": n, "value": the learner's value now}``.
    """
    expr = f"""(lambda c, rec, off: {{
        'changes': [(a.version, a.value) for a in
                    sorted(list(c.applied) + list(c.pending), key=lambda a: a.version)
                    if a.name == {option!r}],
        'pending': len(c.pending),
        'versions': rec['opts_version'].tolist(), 'times': (rec['time'] + off).tolist(),
        'value': {learner}.opts.get({option!r})}})(
        {controls}, {learner}.record.as_dict(),
        __import__('time').time() - __import__('time').perf_counter())"""
    got = probe.eval(expr, timeout=30)
    versions = np.asarray(got["versions"], dtype=np.int64)
    times = np.asarray(got["times"], dtype=np.float64)
    delays = []
    for (version, _value), stamp in zip(got["changes"], stamps_ms, strict=False):
        hit = np.nonzero(versions >= version)[0]
        if hit.size == 0 or hit[0] == 0:
            continue  # not applied yet, or the record no longer holds the minibatch before
        start = times[hit[0] - 1]
        delays.append(float(start - stamp / 1000.0))
    return {"delays_s": delays, "changes": len(got["changes"]), "pending": got["pending"],
            "value": got["value"]}


def click_bubble(page: Any, index: int, name: str = BUBBLES) -> dict[str, Any]:
    """Click the bubble at data index ``index`` of source ``name``; return its data
    (``topic``, ``row``, ``word``) and the pixel clicked.

    The pixel comes from the plot view's own scales (``frame.x_scale.compute``) plus the
    canvas's offset in the page, so the click lands where BokehJS drew the glyph. The
    bubble itself, not the plot, is scrolled to the middle of the panel that scrolls it: a
    plot taller than that panel, centred, has its top rows under the notebook's toolbar,
    which would take the click.
    """
    where = page.evaluate(f"""(i) => {{
      const s = {find_source_js(name)};
      if (!s) return null;
      let view = null;
      for (const v of Bokeh.index.all_views()) {{
        const m = v.model;
        if (m && m.renderers && v.frame && m.renderers.some(
              r => r.data_source === s)) view = v;
      }}
      if (!view) return null;
      const x = s.data.topic[i], y = s.data.row[i];
      const el = view.canvas_view.el;
      el.scrollIntoView({{block: 'center'}});
      let box = el;  // the nearest element that scrolls vertically (host nodes included)
      while (box) {{
        const o = getComputedStyle(box).overflowY;
        if ((o === 'auto' || o === 'scroll') && box.scrollHeight > box.clientHeight) break;
        box = box.parentElement || (box.getRootNode() && box.getRootNode().host) || null;
      }}
      if (box) {{
        const b = box.getBoundingClientRect();
        const at = el.getBoundingClientRect().top + view.frame.y_scale.compute(y);
        box.scrollTop += at - (b.top + b.height / 2);
      }}
      const r = el.getBoundingClientRect();
      return {{topic: x, row: y, word: s.data.word[i],
               px: r.left + view.frame.x_scale.compute(x),
               py: r.top + view.frame.y_scale.compute(y)}};
    }}""", index)
    if where is None:
        raise RuntimeError(f"no plot showing source {name!r} in the page")
    page.mouse.click(where["px"], where["py"])
    return where


def biggest_bubble(page: Any, topic: int, name: str = BUBBLES) -> int:
    """Data index of the largest bubble of ``topic`` (a big target: a click cannot miss)."""
    return page.evaluate(f"""(t) => {{
      const s = {find_source_js(name)};
      let best = -1;
      for (let i = 0; i < s.data.size.length; i++)
        if (s.data.topic[i] === t && (best < 0 || s.data.size[i] > s.data.size[best]))
          best = i;
      return best;
    }}""", topic)


def percentile(xs: list[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation); nan for no data."""
    return float(np.percentile(xs, q)) if xs else float("nan")


def wait_ms(ms: float) -> None:
    """Sleep ``ms`` milliseconds (a named pause between browser actions)."""
    time.sleep(ms / 1000.0)
