"""bidlab's own intertopic map as one self-contained HTML page: :func:`map_html` (inline SVG,
each topic's most relevant words in its tooltip; no server, no script)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from bidlab.learn.checkpoint import atomic_write_bytes

__all__ = ["map_html"]


def map_html(data: dict[str, Any], path: str | Path, title: str = "intertopic map",
             lam: float = 0.6) -> Path:
    """Write :func:`prepared_data`'s map as one self-contained HTML page (no server):
    circles placed by the map, area by topic size, each labelled by its model topic id
    (0..k-1, the ids the steering calls take) with its ten most relevant words at ``lam``
    (pyLDAvis's relevance ``lam * logprob + (1 - lam) * loglift``, default 0.6) in its
    tooltip."""
    if not 0.0 <= float(lam) <= 1.0:
        raise ValueError(f"map_html: lam must be in [0, 1]; got {lam}: pass e.g. lam=0.6")
    md = data["mdsDat"]
    x, y, freq = np.asarray(md["x"]), np.asarray(md["y"]), np.asarray(md["Freq"])
    span = max(float(np.ptp(x)) if x.size else 0.0, float(np.ptp(y)) if y.size else 0.0,
               1e-9)
    size, pad = 520, 60

    def px(v: np.ndarray, lo: float) -> np.ndarray:
        return pad + (v - lo) / span * (size - 2 * pad)

    cx, cy = px(x, float(x.min())), size - px(y, float(y.min()))
    radius = 4 + 40 * np.sqrt(freq / max(float(freq.max()), 1e-300))
    ti = data["tinfo"]
    ranked: dict[str, list[tuple[float, int, str]]] = {}
    for i, (term, cat, logp, lift) in enumerate(zip(ti["Term"], ti["Category"],
                                                    ti["logprob"], ti["loglift"],
                                                    strict=True)):
        if cat != "Default":
            rel = float(lam) * float(logp) + (1.0 - float(lam)) * float(lift)
            ranked.setdefault(cat, []).append((-rel, i, term))
    words = {cat: [term for _, _, term in sorted(rows)[:10]] for cat, rows in ranked.items()}
    ids = [int(t) - 1 for t in data.get("topic.order", range(1, len(x) + 1))]
    circles = []
    for t in range(len(x)):  # t: the map's position (by size); ids[t]: the model's topic
        tip = html.escape(f"topic {ids[t]} ({freq[t]:.1f}% of tokens): "
                          + ", ".join(words.get(f"Topic{t + 1}", [])))
        circles.append(f'<circle cx="{cx[t]:.1f}" cy="{cy[t]:.1f}" r="{radius[t]:.1f}" '
                       f'fill="#1f77b4" fill-opacity="0.45" stroke="#1f4e79"><title>{tip}'
                       f'</title></circle><text x="{cx[t]:.1f}" y="{cy[t]:.1f}" '
                       f'text-anchor="middle" font-size="12">{ids[t]}</text>')
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title></head><body><h3>{html.escape(title)}</h3><svg width='{size}' "
            f"height='{size}' style='border:1px solid #ccc'>{''.join(circles)}</svg>"
            "<p>Circles are labelled by model topic id. Hover a circle for the topic's "
            f"most relevant words (&#955; = {float(lam):g}).</p></body></html>")
    return atomic_write_bytes(path, lambda f: f.write(page.encode("utf-8")))
