"""The intertopic map's screen geometry: the square part of the plane it shows, the
circles' radii in it, and how far (in pixels) a frame moved what the page shows.

Why a module of its own: what makes a live map cheap in the browser is sending only what
visibly changed, and that is decided here, on plain arrays. The map keeps fixed axis
ranges (a :class:`Viewport`) rather than bokeh's automatic ones: automatic ranges follow
every change of a circle's radius, and each change of a range re-lays out and repaints
the whole plot (axes, grid, title) in the page. A viewport changes only when the topics'
centres leave its inner part or fill less than :data:`SHRINK_BELOW` of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_RADIUS", "Viewport", "fit_viewport", "moved_px", "radii"]

#: the largest topic's circle radius, as a fraction of the viewport's width
MAX_RADIUS = 1.0 / 6.0
#: a new viewport is this much wider than the centres need (so small moves keep it)
SLACK = 1.25
#: a viewport whose inner part the centres span less of than this is replaced (zoom in)
SHRINK_BELOW = 0.45
#: the smallest viewport width (one topic, or topics placed on one spot)
MIN_WIDTH = 1e-3


@dataclass(frozen=True)
class Viewport:
    """A square of the plane: centre ``(cx, cy)`` and side ``width`` (data units).

    Examples
    --------
    >>> Viewport(0.0, 0.0, 2.0).x_range
    (-1.0, 1.0)
    """

    cx: float
    cy: float
    width: float

    @property
    def x_range(self) -> tuple[float, float]:
        return (self.cx - self.width / 2, self.cx + self.width / 2)

    @property
    def y_range(self) -> tuple[float, float]:
        return (self.cy - self.width / 2, self.cy + self.width / 2)

    def inner_half(self) -> float:
        """Half the side of the inner square that centres must stay in: the largest
        circle around a centre there is wholly inside the viewport."""
        return self.width * (0.5 - MAX_RADIUS)


def fit_viewport(x: np.ndarray, y: np.ndarray, current: Viewport | None = None
                 ) -> Viewport | None:
    """A new viewport for centres ``x``, ``y``, or None when ``current`` still fits them
    (every centre in its inner square, and their extent at least :data:`SHRINK_BELOW` of
    that square's side).

    Examples
    --------
    >>> vp = fit_viewport(np.array([0.0, 1.0]), np.array([0.0, 0.0]))
    >>> fit_viewport(np.array([0.1, 0.9]), np.array([0.0, 0.1]), vp) is None
    True
    >>> fit_viewport(np.array([0.0, 5.0]), np.array([0.0, 0.0]), vp) is None
    False
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if x.size == 0:
        return current if current is not None else Viewport(0.0, 0.0, 1.0)
    x0, x1, y0, y1 = float(x.min()), float(x.max()), float(y.min()), float(y.max())
    extent = max(x1 - x0, y1 - y0)
    if current is not None:
        h = current.inner_half()
        inside = (x0 >= current.cx - h and x1 <= current.cx + h
                  and y0 >= current.cy - h and y1 <= current.cy + h)
        if inside and (extent >= SHRINK_BELOW * 2 * h or current.width <= MIN_WIDTH):
            return None
    # the centres' box, grown by SLACK, is the inner square: width = that / (1 - 2 R)
    width = max(extent * SLACK / (1.0 - 2.0 * MAX_RADIUS), MIN_WIDTH)
    return Viewport((x0 + x1) / 2, (y0 + y1) / 2, width)


def radii(share: np.ndarray, width: float) -> np.ndarray:
    """Circle radii (data units) for the topics' shares: area proportional to the share,
    the largest topic's radius :data:`MAX_RADIUS` of the viewport's ``width``.

    Examples
    --------
    >>> radii(np.array([1.0, 0.25]), 6.0).tolist()
    [1.0, 0.5]
    """
    s = np.maximum(np.asarray(share, np.float64), 0.0)
    top = float(s.max()) if s.size else 0.0
    return MAX_RADIUS * width * np.sqrt(s / max(top, 1e-300))


def moved_px(new: np.ndarray, old: np.ndarray | None, px_per_unit: float) -> float:
    """The largest change between ``new`` and ``old`` (same shape, data units), in pixels;
    infinite when there is no ``old`` of that shape (everything must be sent).

    Examples
    --------
    >>> round(moved_px(np.array([1.0, 2.0]), np.array([1.0, 2.01]), 200.0), 6)
    2.0
    """
    if old is None or np.shape(old) != np.shape(new):
        return float("inf")
    if np.size(new) == 0:
        return 0.0
    return float(np.abs(np.asarray(new) - np.asarray(old)).max()) * px_per_unit
