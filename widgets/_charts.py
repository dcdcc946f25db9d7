"""Small bokeh chart builders shared by the views (figures only; no threads, no widgets).

Every data source gets a ``name`` so a browser test can find it with
``Bokeh.documents[i].get_model_by_name(name)``. Curves grow by ``stream(rows, rollover)``
(only the new rows travel to the browser), never by replacing ``.data``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

__all__ = ["ROLLOVER", "score_figure", "stream_row", "palette", "legend_html"]

ROLLOVER = 2000  # points kept per curve in the browser and in Python


def palette(n: int) -> list[str]:
    """``n`` distinct colours (Category10, repeated)."""
    return [Category10_10[i % 10] for i in range(n)]


def score_figure(title: str, y_label: str, series: Sequence[str], name: str,
                 width: int = 520, height: int = 260, labels: Sequence[str] | None = None
                 ) -> tuple[Any, ColumnDataSource]:
    """A line chart of ``series`` against ``step``; one source with a column per series.

    ``labels`` (default: the series names) name the curves in the hover tool and each line
    renderer's ``name``. There is no bokeh legend: show :func:`legend_html` beside the
    chart. Why: BokehJS rebuilds a legend's items on every paint, a large share of the
    page's work for a chart streamed 10 times a second.
    """
    labels = list(series) if labels is None else list(labels)
    if len(labels) != len(series):
        raise ValueError(f"score_figure: got {len(labels)} labels for {len(series)} series")
    data: dict[str, Any] = {"step": np.zeros(0, np.float64)}
    for s in series:
        data[s] = np.zeros(0, np.float64)
    source = ColumnDataSource(data=data, name=name)
    fig = figure(title=title, width=width, height=height, x_axis_label="minibatch",
                 y_axis_label=y_label, tools="pan,wheel_zoom,box_zoom,reset,save",
                 output_backend="canvas")
    for s, lab, color in zip(series, labels, palette(len(series)), strict=True):
        fig.line("step", s, source=source, color=color, line_width=2, name=lab)
    fig.add_tools(HoverTool(tooltips=[("step", "@step"),
                                      *[(lab, f"@{{{s}}}")
                                        for s, lab in zip(series, labels, strict=True)]],
                            mode="vline"))
    return fig, source


def legend_html(series: Sequence[str], prefix: str = "") -> str:
    """A static legend (coloured line and name per series, colours as in
    :func:`score_figure`) for an ipywidgets ``HTML`` beside a chart made without one."""
    items = "".join(
        f"<span style='margin-right:1em;white-space:nowrap'><span style='display:inline-block;"
        f"width:1.6em;height:0;border-top:3px solid {color};vertical-align:middle'></span> "
        f"{html.escape(s)}</span>" for s, color in zip(series, palette(len(series)), strict=False))
    return f"<div style='font-size:90%'>{html.escape(prefix)}{items}</div>"


def stream_row(source: ColumnDataSource, row: dict[str, float],
               rollover: int = ROLLOVER) -> None:
    """Append one row (as one-element lists: plain JSON, nothing to encode or gunzip)."""
    source.stream({k: [float(v)] for k, v in row.items()}, rollover=rollover)
