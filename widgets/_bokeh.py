"""Bokeh inside JupyterLab without a server and without internet: :class:`LiveBokeh`.

``jupyter_bokeh.BokehModel`` syncs a bokeh document over the widget channel; streaming into
it from a background thread needs these fixes:

1. BokehJS is loaded inline (:func:`load_bokehjs`), so no CDN is needed.
2. The browser echoes every change back; :class:`LiveBokeh` keeps only user events and
   selection changes (else each streamed point is held twice), and the page drops the
   echoes before sending them (``QUIET_ECHOES_JS``), which saves the kernel the work.
3. Bokeh documents are not thread-safe: every change goes through :data:`DOC_LOCK`.
4. A page reload gets the live document, and every data source is re-sent whole shortly
   afterwards (:data:`RESYNC_AFTER`) because points streamed during the rebuild are lost.
5. A view created in the middle of a multi-message patch stays out of step with the
   stream; every patch is padded so that such a view recovers (:func:`aligning_pad`).
6. Arrays travel inline in the patch (:func:`inline_patch`): five comm messages a patch
   instead of two per column.
7. A page-side script keeps BokehJS from rewriting an unchanged inline style sheet
   (``STEADY_STYLES_JS``).

Every use of bokeh's and jupyter_bokeh's private API (the page scripts included) is in
:mod:`._compat_bokeh` and :mod:`._compat_jupyter_bokeh`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from bokeh.core.serialization import Buffer, Deserializer, Serialized
from bokeh.core.types import ID
from bokeh.models import ColumnDataSource, CustomJS, LayoutDOM

from ._compat_bokeh import PAGE_JS, inline_patch, set_from_page
from ._compat_jupyter_bokeh import HookedBokehModel

__all__ = ["DOC_LOCK", "LiveBokeh", "aligning_pad", "load_bokehjs", "quiet_echoes"]

#: The one lock around every bokeh document change (pump thread and shell thread alike).
DOC_LOCK = threading.RLock()

#: Seconds after a reload's state request at which every data source is re-sent whole.
RESYNC_AFTER = (0.5, 2.0, 5.0)

_loaded = False

_PAD = b"\0"

def aligning_pad(n_buffers: int) -> int:
    """How many one-byte buffers to add to a patch of ``n_buffers`` buffers.

    Why 1 modulo 3: a receiver in step reads a patch's text fragments (header, metadata,
    content, one header per buffer) and binary payloads in order. A receiver out of step
    reads text fragments three at a time as junk messages (BokehJS applies one only when
    its third fragment happens to be a real patch's content), and a binary payload
    arriving where it expects text raises before changing its state, so each patch moves
    it ``3 + n_buffers`` text fragments along its cycle of three. With ``n_buffers`` = 1
    (mod 3) a receiver one or two fragments out of step is in step after at most two
    patches; one in step stays in step.
    """
    return (1 - n_buffers) % 3


def quiet_echoes(layout: LayoutDOM) -> None:
    """Make the page keep its echoes and its style sheets: attach the page scripts
    (``PAGE_JS``) to every data source of ``layout`` (once per source; the first change in
    the page installs the echo filter and the steady style sheets)."""
    code = CustomJS(code=PAGE_JS, tags=["bidlab-quiet-echoes"])
    for source in layout.select({"type": ColumnDataSource}):
        known = source.js_property_callbacks
        if any("bidlab-quiet-echoes" in getattr(cb, "tags", ())
               for cbs in known.values() for cb in cbs):
            continue
        for event in ("streaming", "patching", "change:data"):
            source.js_on_change(event, code)


def load_bokehjs(force: bool = False) -> None:
    """Put BokehJS into the notebook page, inline (works offline); once per kernel.

    Why inline: the CDN is unreachable on many machines, and a chart whose JS never loads
    shows nothing and says nothing.
    """
    global _loaded
    if _loaded and not force:
        return
    from bokeh.io import output_notebook
    from bokeh.resources import INLINE

    output_notebook(INLINE, hide_banner=True)
    _loaded = True


class LiveBokeh(HookedBokehModel):
    """A ``BokehModel`` safe to stream into from one pump thread (see the module doc)."""

    def __init__(self, model: LayoutDOM, **kwargs: Any) -> None:
        if not isinstance(model, LayoutDOM):
            self._bidlab_closed = True  # nothing to close when __del__ runs
            raise TypeError(f"LiveBokeh shows a bokeh layout (a figure, row, column, ...); "
                            f"got {type(model).__name__}: wrap plots in bokeh.layouts.row()")
        load_bokehjs()
        #: browser events received, by kind (echoes of our own patches included)
        self.echo_counts: dict[str, int] = {}
        quiet_echoes(model)
        with DOC_LOCK:
            super().__init__(model, **kwargs)

    def close(self) -> None:
        """Close once (stock ``close`` raises KeyError when ``__del__`` closes again)."""
        if getattr(self, "_bidlab_closed", False):
            return
        self._bidlab_closed = True
        with DOC_LOCK:
            super().close()

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        """Widget state with a render bundle of the document as it is *now*.

        Why: a page reload restores every widget from ``get_state`` (through ipywidgets'
        control comm, ``request_states``, or a view's own ``request_state``); without this
        the reloaded chart showed the points of the first render and then only the newly
        streamed ones.
        """
        state = super().get_state(key, drop_defaults=drop_defaults)
        if "render_bundle" in state:
            with DOC_LOCK:
                bundle = self.document_bundle()
            to_json = self.trait_metadata("render_bundle", "to_json")
            state["render_bundle"] = to_json(bundle, self) if to_json else bundle
            self._schedule_resync()
        return state

    def _schedule_resync(self) -> None:
        """Re-send every data source whole once the (re)loaded view exists.

        Why: the page builds the view from the state above, and stream messages that arrive
        before the view is ready are dropped by BokehJS, so a reloaded chart would miss the
        points of that window. A full replacement afterwards makes the
        page hold exactly the kernel's data again; it costs one message per source.
        """
        for delay in RESYNC_AFTER:
            timer = threading.Timer(delay, self.resync)
            timer.daemon = True
            timer.start()

    def resync(self) -> None:
        """Replace each data source's columns with a copy of themselves (a full re-send)."""
        with DOC_LOCK:
            doc = self.bokeh_document
            if doc is None or self.comm is None:
                return
            for src in doc.select({"type": ColumnDataSource}):
                src.data = {name: list(values) for name, values in src.data.items()}

    def send_document_event(self, event: Any) -> None:
        """Send one document change to the views, padded so no view stays out of step."""
        if event.setter is self:
            return
        msg = inline_patch(event)
        for i in range(aligning_pad(len(msg.buffers))):
            msg.add_buffer(Buffer(ID(f"bidlab-pad-{i}"), _PAD))
        self.send({"msg": "patch", "payload": msg.header_json})
        self.send({"msg": "patch", "payload": msg.metadata_json})
        self.send({"msg": "patch", "payload": msg.content_json})
        for buffer in msg.buffers:
            self.send({"msg": "patch", "payload": json.dumps(buffer.ref)})
            self.send({"msg": "patch"}, [buffer.to_bytes()])

    def on_page_event(self, content: dict[str, Any], apply: Callable[[], None]) -> None:
        """Keep the page's UI events and selection changes; drop the echoes."""
        if content.get("event", "") != "jsevent":
            return
        kind = content.get("kind")
        self.echo_counts[kind] = self.echo_counts.get(kind, 0) + 1
        if kind == "MessageSent":  # Tap and other UI events: run the Python callbacks
            with DOC_LOCK:
                apply()
            return
        if kind != "ModelChanged" or content.get("attr") != "indices":
            return  # echoes of our own streams, patches and range changes
        with DOC_LOCK:
            doc = self.bokeh_document
            if doc is None:
                return
            body = {k: v for k, v in content.items() if k != "event"}
            event = Deserializer(list(doc.models), setter=self).deserialize(
                Serialized(content=body, buffers=[]))
            set_from_page(event["model"], "indices", event["new"], setter=self)
