"""Static pictures of the live views, for notebooks read without a kernel.

A saved notebook keeps no live widget (its state is large and would be stale), so a code
host or nbviewer would show only a placeholder where a chart was. These helpers draw each
live view's bokeh charts as they are *now* (the trained state, at the end of a run) with
matplotlib, and put the picture beside the placeholder as ``image/png``: JupyterLab shows
the live view when the cell runs again, everything else shows the picture.

Two halves, one per process:

* in the kernel, :func:`snapshots` renders every displayed widget that holds a
  :class:`~bidlab.widgets.LiveBokeh` chart and returns ``{model_id: base64 PNG}``;
* in the process that executes the notebook, :func:`snapshot_cell` is appended as the last
  cell before running it, and :func:`attach_snapshots` removes that cell again and adds
  each picture to the output that displayed its widget.

Only the glyphs the views use are drawn (line, vertical and horizontal bar, scatter,
circle, text); others are skipped. Needs matplotlib.

Examples
--------
>>> import nbformat
>>> from bidlab.widgets.static import attach_snapshots, snapshot_cell
>>> nb = nbformat.v4.new_notebook()
>>> nb.cells.append(snapshot_cell())    # run the notebook, then:
>>> attach_snapshots(nb)                # the cell had no output: nothing to attach
0
>>> len(nb.cells)
0
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["SNAPSHOT_TAG", "attach_snapshots", "render_png", "snapshot_cell", "snapshots"]

#: tag of the helper cell :func:`snapshot_cell` makes (removed by :func:`attach_snapshots`)
SNAPSHOT_TAG = "bidlab-static-snapshots"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
_DPI = 100


# ----------------------------------------------------------------------------- drawing


def _figures(model: Any) -> Iterator[Any]:
    """The bokeh plots of a layout (a figure, row, column or grid), in reading order."""
    from bokeh.models import Plot

    if isinstance(model, Plot):
        yield model
        return
    for child in getattr(model, "children", None) or []:
        yield from _figures(child[0] if isinstance(child, tuple) else child)


def _column(spec: Any, data: dict[str, Any], n: int) -> Any:
    """A glyph property's values: a data column, or its one value repeated."""
    if isinstance(spec, dict):
        spec = spec.get("field", spec.get("value"))
    if isinstance(spec, str) and spec in data:
        return list(data[spec])
    return [spec] * n


def _plain(text: Any) -> str:
    """``text`` as matplotlib should print it: each ``$`` escaped, so a word such as
    ``$\\w$`` or ``$5 to $10`` is printed as it is, not parsed as math text (which
    raises on an unknown symbol such as ``\\w`` and sets the rest in italics)."""
    return str(text).replace("$", r"\$")


def _color(c: Any) -> Any:
    if c is None or (isinstance(c, str) and c.startswith("#") and len(c) == 9 and
                     c.endswith("00")):
        return "none"
    return c


def _draw(ax: Any, fig: Any) -> None:
    from bokeh.models import FactorRange, GlyphRenderer

    factors = list(fig.x_range.factors) if isinstance(fig.x_range, FactorRange) else None
    labelled = False
    for r in fig.renderers:
        if not isinstance(r, GlyphRenderer):
            continue
        g, data = r.glyph, dict(r.data_source.data)
        n = len(next(iter(data.values()), []))
        kind = type(g).__name__
        x = _column(getattr(g, "x", None), data, n)
        if factors is not None:
            x = [factors.index(v) if v in factors else np.nan for v in x]
        if kind == "Line":
            ax.plot(np.asarray(x, float), np.asarray(_column(g.y, data, n), float),
                    color=_color(g.line_color), lw=1.5, label=_plain(r.name or ""))
            labelled |= bool(r.name)
        elif kind == "VBar":
            ax.bar(x, np.asarray(_column(g.top, data, n), float), width=0.8,
                   color=[_color(c) for c in _column(g.fill_color, data, n)])
        elif kind == "HBar":
            y = np.asarray(_column(g.y, data, n), float)
            left = np.asarray(_column(g.left, data, n), float)
            ax.barh(y, np.asarray(_column(g.right, data, n), float) - left, left=left,
                    height=0.8, color=[_color(c) for c in _column(g.fill_color, data, n)])
        elif kind in ("Scatter", "Circle") and "size" in g.properties():  # screen units
            size = np.asarray(_column(g.size, data, n), float)
            ax.scatter(x, np.asarray(_column(g.y, data, n), float), s=(0.8 * size) ** 2,
                       c=[_color(c) for c in _column(g.fill_color, data, n)], alpha=0.6,
                       edgecolors=[_color(c) for c in _column(g.line_color, data, n)])
        elif kind == "Circle":  # a radius in data units: one patch per circle
            from matplotlib.patches import Circle

            y = np.asarray(_column(g.y, data, n), float)
            radius = np.asarray(_column(g.radius, data, n), float)
            fills = [_color(c) for c in _column(g.fill_color, data, n)]
            for xi, yi, ri, fc in zip(np.asarray(x, float), y, radius, fills, strict=False):
                ax.add_patch(Circle((xi, yi), ri, facecolor=fc, alpha=0.6, edgecolor="#444444"))
            ax.autoscale_view()
        elif kind == "Text":
            y = _column(g.y, data, n)
            for xi, yi, t in zip(x, y, _column(g.text, data, n), strict=False):
                ax.text(xi, yi, _plain(t), ha="right", va="center", fontsize=8, color="#444444")
    if factors is not None:
        ax.set_xticks(range(len(factors)), [_plain(f) for f in factors])
    labels = fig.yaxis[0].major_label_overrides if fig.yaxis else None
    if labels and fig.yaxis[0].visible:  # bars named by their ticks (a bar per state)
        ticks = sorted(k for k in labels if isinstance(k, (int, float)))
        ax.set_yticks(ticks, [_plain(labels[k]) for k in ticks])
    for rng, setter in ((fig.x_range, ax.set_xlim), (fig.y_range, ax.set_ylim)):
        start, end = getattr(rng, "start", None), getattr(rng, "end", None)
        if (isinstance(start, (int, float)) and isinstance(end, (int, float))
                and np.isfinite([start, end]).all() and start != end and factors is None):
            setter(start, end)
    title = getattr(fig.title, "text", "") or ""
    ax.set_title(_plain(title), fontsize=9)
    for axis, setter in ((fig.xaxis, ax.set_xlabel), (fig.yaxis, ax.set_ylabel)):
        if axis and axis[0].axis_label and axis[0].visible:
            setter(_plain(axis[0].axis_label), fontsize=8)
    if fig.xaxis and not fig.xaxis[0].visible:
        ax.set_xticks([])
    if fig.yaxis and not fig.yaxis[0].visible:
        ax.set_yticks([])
    ax.tick_params(labelsize=7)
    if labelled and len(ax.lines) > 1:
        ax.legend(fontsize=7, loc="best")


def render_png(model: Any) -> bytes:
    """A PNG of bokeh layout ``model`` (its plots side by side) as its data are now.

    Examples
    --------
    >>> from bokeh.plotting import figure
    >>> fig = figure(title="loss")
    >>> _ = fig.line([0, 1, 2], [3.0, 2.0, 1.5])
    >>> render_png(fig)[:4]
    b'\\x89PNG'
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    figs = list(_figures(model))
    widths = [max(getattr(f, "width", None) or 400, 200) for f in figs] or [400]
    height = max([getattr(f, "height", None) or 300 for f in figs] or [300])
    canvas = Figure(figsize=(sum(widths) / _DPI, height / _DPI), dpi=_DPI)
    axes = canvas.subplots(1, max(len(figs), 1), squeeze=False,
                           gridspec_kw={"width_ratios": widths})[0]
    for ax, fig in zip(axes, figs, strict=False):
        _draw(ax, fig)
    canvas.tight_layout()
    buf = io.BytesIO()
    canvas.savefig(buf, format="png", dpi=_DPI)
    return buf.getvalue()


# ----------------------------------------------------------------------------- kernel side


def _charts(widget: Any) -> Iterator[Any]:
    """The LiveBokeh charts inside an ipywidgets tree."""
    from ._bokeh import LiveBokeh

    if isinstance(widget, LiveBokeh):
        yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from _charts(child)


def snapshots() -> dict[str, str]:
    """``{model_id: base64 PNG}`` for every live widget holding bokeh charts.

    Each picture shows the widget's charts side by side (one PNG per chart, stacked, when
    it holds several). Call it in the kernel once training is done.
    """
    from ipywidgets.widgets.widget import _instances

    from ._bokeh import DOC_LOCK

    out: dict[str, str] = {}
    drawn: dict[int, bytes] = {}
    for model_id, widget in list(_instances.items()):
        pngs = []
        for chart in _charts(widget):
            if id(chart) not in drawn:
                with DOC_LOCK:
                    drawn[id(chart)] = render_png(chart._model)
            pngs.append(drawn[id(chart)])
        if pngs:
            out[model_id] = base64.b64encode(pngs[0] if len(pngs) == 1 else _stack(pngs)
                                             ).decode()
    return out


def _stack(pngs: list[bytes]) -> bytes:
    """Several PNGs one above the other, as one PNG."""
    import matplotlib.image as mpimg
    from matplotlib.figure import Figure

    images = [mpimg.imread(io.BytesIO(p), format="png") for p in pngs]
    width = max(i.shape[1] for i in images)
    height = sum(i.shape[0] for i in images)
    canvas = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
    top = 1.0
    for img in images:
        h = img.shape[0] / height
        ax = canvas.add_axes((0, top - h, img.shape[1] / width, h))
        ax.imshow(img)
        ax.axis("off")
        top -= h
    buf = io.BytesIO()
    canvas.savefig(buf, format="png", dpi=_DPI)
    return buf.getvalue()


# ----------------------------------------------------------------------------- notebook side


def snapshot_cell() -> Any:
    """The code cell to append before executing a notebook: it prints :func:`snapshots`
    as JSON; :func:`attach_snapshots` reads and removes it."""
    import nbformat

    cell = nbformat.v4.new_code_cell(
        "import json\nfrom bidlab.widgets.static import snapshots\n"
        "print(json.dumps(snapshots()))")
    cell.metadata["tags"] = [SNAPSHOT_TAG]
    cell["id"] = "static-snapshots"
    return cell


def attach_snapshots(nb: Any) -> int:
    """Remove the :func:`snapshot_cell` of executed notebook ``nb`` and add its pictures as
    ``image/png`` beside the widget outputs they show. Returns how many were attached."""
    shots: dict[str, str] = {}
    kept = []
    for cell in nb.cells:
        if SNAPSHOT_TAG in cell.get("metadata", {}).get("tags", []):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stdout":
                    shots.update(json.loads(out["text"].strip().splitlines()[-1]))
            continue
        kept.append(cell)
    nb.cells = kept
    attached = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_MIME)
            if view and view.get("model_id") in shots:
                out["data"]["image/png"] = shots[view["model_id"]]
                attached += 1
    return attached
