"""The intertopic map's screen geometry (widgets/_map_frame.py): fixed ranges that change
only when the centres leave them or shrink well inside them, radii by area, pixel moves."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import _map_frame as mf  # noqa: E402


def _inner(vp, x, y):
    h = vp.inner_half()
    return (np.abs(x - vp.cx) <= h + 1e-12).all() and (np.abs(y - vp.cy) <= h + 1e-12).all()


def test_viewport_holds_the_centres_and_their_largest_circles():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=12), 0.3 * rng.normal(size=12)
    vp = mf.fit_viewport(x, y)
    assert vp is not None and _inner(vp, x, y)
    lo, hi = vp.x_range
    r = mf.radii(np.ones_like(x), vp.width)  # every topic as large as the largest
    assert (x - r >= lo - 1e-12).all() and (x + r <= hi + 1e-12).all()
    assert vp.y_range[1] - vp.y_range[0] == pytest.approx(vp.width)  # square: isotropic


def test_viewport_stays_for_small_moves_and_changes_for_large_ones():
    x, y = np.array([0.0, 1.0, 0.5]), np.array([0.0, 0.2, 0.9])
    vp = mf.fit_viewport(x, y)
    assert mf.fit_viewport(x + 0.05, y - 0.05, vp) is None  # a frame's drift: same ranges
    far = mf.fit_viewport(x * 3.0, y, vp)  # the centres spread out of it: new ranges
    assert far is not None and _inner(far, x * 3.0, y)
    tight = mf.fit_viewport(x * 0.1, y * 0.1, vp)  # they gather in a corner: zoom in
    assert tight is not None and tight.width < 0.5 * vp.width


def test_radii_by_area_and_moves_in_pixels():
    share = np.array([0.5, 0.125, 0.0])
    r = mf.radii(share, 3.0)
    assert r[0] == pytest.approx(mf.MAX_RADIUS * 3.0) and r[2] == 0.0
    assert (r[1] / r[0]) ** 2 == pytest.approx(0.25)  # area ∝ share
    assert mf.moved_px(np.array([1.0, 2.0]), None, 100.0) == np.inf
    assert mf.moved_px(np.array([1.0, 2.0]), np.array([1.0, 2.0]), 100.0) == 0.0
    assert mf.moved_px(np.array([1.0, 2.0]), np.array([1.02, 2.0]), 100.0) == pytest.approx(2.0)
