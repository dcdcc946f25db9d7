"""LiveBokeh's patches keep every BokehJS view in step, even one created mid-patch.

A bokeh document patch reaches the page as several comm messages, which each view
reassembles with its own BokehJS ``Receiver``. A view created between two of them (a page
reload while the pump streams) starts out of step. These tests replay the kernel's real
messages into a port of that receiver (bokeh 3.9, ``protocol/receiver.ts``) from every
starting point: with stock jupyter_bokeh framing such a view never applies another patch
(the reloaded chart froze in CI); with LiveBokeh's padding it applies every patch from the
third on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import _bokeh, _compat_bokeh  # noqa: E402
from bokeh.models import ColumnDataSource  # noqa: E402
from bokeh.plotting import figure  # noqa: E402

Fragment = str | bytes


class PortedReceiver:
    """BokehJS 3.9 ``Receiver`` (header, metadata, content, then buffer header + payload
    pairs): a fragment of the wrong kind raises before the state changes."""

    def __init__(self) -> None:
        self.state = "header"
        self.fragments: list[str] = []
        self.header: dict[str, Any] = {}
        self.content: Any = None
        self.buffers = 0
        self.message: Any = None

    def consume(self, f: Fragment) -> None:
        if self.state == "payload":
            if not isinstance(f, bytes):
                raise TypeError("Expected binary fragment but received text fragment")
            if self.buffers >= (self.header.get("num_buffers") or 0):
                raise ValueError("too many buffers received")
            self.buffers += 1
            self._check_complete()
            return
        if not isinstance(f, str):
            raise TypeError("Expected text fragment but received binary fragment")
        if self.state == "header":
            self.message, self.fragments, self.state = None, [f], "metadata"
        elif self.state == "metadata":
            self.fragments.append(f)
            self.state = "content"
        elif self.state == "content":
            self.fragments.append(f)
            header, _meta, content = (json.loads(x) for x in self.fragments)
            self.header = header if isinstance(header, dict) else {}
            self.content, self.buffers = content, 0
            self._check_complete()
        else:  # buffer header
            self.state = "payload"

    def _check_complete(self) -> None:
        n = self.header.get("num_buffers")
        if n is None or self.buffers == n:
            self.message, self.state = self.content, "header"
        else:
            self.state = "buffer_header"


def view_applies(fragments: list[Fragment]) -> list[Any]:
    """What a view fed ``fragments`` applies: jupyter_bokeh's ``_consume_patch`` around the
    receiver (exceptions are lost; a message with content is applied; BokehJS applies only
    a real patch, one with ``events``)."""
    receiver, applied = PortedReceiver(), []
    for f in fragments:
        try:
            receiver.consume(f)
        except (TypeError, ValueError):
            continue
        msg = receiver.message
        if msg is not None and receiver.state == "header" and isinstance(msg, dict) and msg:
            if "events" in msg:
                applied.append(msg)
            receiver.message = None
    return applied


def recorded_patches(monkeypatch: pytest.MonkeyPatch) -> list[list[Fragment]]:
    """Six streamed rows, a whole-data resync and six more rows, as the kernel sends them:
    one list of fragments per patch."""
    source = ColumnDataSource({"step": [], "train": []}, name="scores")
    fig = figure(width=200, height=100)
    fig.line("step", "train", source=source)
    chart = _bokeh.LiveBokeh(fig)
    sent: list[Fragment] = []

    def send(content: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        assert content["msg"] == "patch"
        sent.append(content["payload"] if "payload" in content else bytes(buffers[0]))

    monkeypatch.setattr(chart, "send", send)
    patches: list[list[Fragment]] = []
    for step in range(13):
        before = len(sent)
        with _bokeh.DOC_LOCK:
            if step == 6:
                chart.resync()
            else:
                source.stream({"step": [step], "train": [1.0 / (step + 1)]})
        patches.append(sent[before:])
    chart.close()
    return patches


@pytest.mark.parametrize("n", range(8))
def test_aligning_pad_makes_buffer_count_one_mod_three(n: int) -> None:
    pad = _bokeh.aligning_pad(n)
    assert 0 <= pad < 3 and (n + pad) % 3 == 1


def test_a_view_in_step_applies_every_padded_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    patches = recorded_patches(monkeypatch)
    assert all(len(p) >= 5 and isinstance(p[-1], bytes) for p in patches), \
        "every patch carries at least one buffer"
    applied = view_applies([f for p in patches for f in p])
    assert applied == [json.loads(p[2]) for p in patches]


def test_a_view_created_mid_patch_is_in_step_after_two_whole_patches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    patches = recorded_patches(monkeypatch)
    starts = [0]  # fragment index at which each patch starts
    for p in patches:
        starts.append(starts[-1] + len(p))
    for start in range(1, starts[2]):  # every start inside the first two patches
        frags = [f for p in patches for f in p][start:]
        applied = view_applies(frags)
        first_whole = next(i for i, s in enumerate(starts) if s >= start)
        in_step = first_whole if start in starts else first_whole + 2
        wanted = [json.loads(p[2]) for p in patches[in_step:]]
        assert applied[-len(wanted):] == wanted, f"start at fragment {start}"
        # the resync (patch 6) reaches it whole: the view then holds the kernel's data
        assert any(e["kind"] == "ColumnDataChanged" for m in applied for e in m["events"])


def test_stock_framing_loses_a_view_created_mid_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure the padding fixes: unpadded, a view that starts one fragment late
    applies none of the later patches, the resync included."""
    monkeypatch.setattr(_bokeh, "aligning_pad", lambda n: 0)
    patches = recorded_patches(monkeypatch)
    assert all(len(p) == 3 for p in patches)
    frags = [f for p in patches for f in p]
    assert len(view_applies(frags)) == len(patches)
    assert view_applies(frags[1:]) == []
    assert view_applies(frags[2:]) == []


def test_numpy_columns_travel_inline_in_five_fragments(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrays are encoded inside the content (no binary buffer per column), so a patch is
    header, metadata, content and the one padding buffer, and it decodes to the values."""
    import numpy as np
    from bokeh.core.serialization import Deserializer

    source = ColumnDataSource({"step": np.zeros(0), "a": np.zeros(0), "b": np.zeros(0)})
    fig = figure(width=200, height=100)
    fig.line("step", "a", source=source)
    chart = _bokeh.LiveBokeh(fig)
    sent: list[Fragment] = []
    monkeypatch.setattr(chart, "send", lambda content, buffers=None: sent.append(
        content["payload"] if "payload" in content else bytes(buffers[0])))
    with _bokeh.DOC_LOCK:
        source.stream({"step": np.array([3.0]), "a": np.array([0.25]), "b": np.array([-1.5])})
    chart.close()
    assert len(sent) == 5 and json.loads(sent[0])["num_buffers"] == 1
    [event] = json.loads(sent[2])["events"]
    data = Deserializer().decode(event["data"])
    assert {k: list(v) for k, v in data.items()} == {"step": [3.0], "a": [0.25], "b": [-1.5]}
    assert view_applies(sent) == [json.loads(sent[2])]


def test_every_source_gets_the_page_side_echo_filter_once() -> None:
    source = ColumnDataSource({"x": [1.0]})
    other = ColumnDataSource({"y": [2.0]})
    fig = figure(width=200, height=100)
    fig.line("x", "x", source=source)
    fig.scatter("y", "y", source=other)
    _bokeh.quiet_echoes(fig)
    _bokeh.quiet_echoes(fig)  # a second call adds nothing
    for src in (source, other):
        cbs = src.js_property_callbacks
        assert set(cbs) == {"streaming", "patching", "change:data"}
        assert all(len(v) == 1 and "bidlab-quiet-echoes" in v[0].tags for v in cbs.values())
    # it lets through exactly what LiveBokeh.on_page_event keeps
    assert ('event.msg_type !== undefined || event.attr === "indices"'
            in _compat_bokeh.QUIET_ECHOES_JS)
    # and it carries the steady style sheets, ahead of the filter's early return
    assert all(v[0].code.startswith(_compat_bokeh.STEADY_STYLES_JS) for v in cbs.values())
