"""Bokeh inside JupyterLab without a server and without internet: :class:`LiveBokeh`.

``jupyter_bokeh.BokehModel`` (4.1) syncs a bokeh document over the widget channel, but it
and BokehJS have these traps when a background thread streams into it (see
../shared/recipes/JUPYTER.md):

1. BokehJS must already be in the page: :func:`load_bokehjs` loads it *inline* (no CDN).
2. The browser echoes every change back as a ``jsevent``; stock ``BokehModel`` applies the
   echo again, so a streamed point is held twice in Python. :class:`LiveBokeh` keeps only
   user events (``MessageSent`` bokeh events such as Tap) and selection (``indices``)
   changes, and applies a selection once (stock code ran its callbacks twice).
3. Bokeh documents are not thread-safe: every change goes through :data:`DOC_LOCK`.
4. A page reload rebuilds the view from the bundle captured at construction (stale): the
   bundle is refreshed from the live document whenever the frontend asks for full state,
   and since points streamed while the page rebuilds its view are dropped there, every
   data source is re-sent whole shortly afterwards (:data:`RESYNC_AFTER`).
5. Each document patch travels as several comm messages (header, metadata, content, then a
   header and a payload per binary buffer) that every view reassembles with its own BokehJS
   ``Receiver``. A view created between two of those messages (a page reload while the
   pump streams) starts mid-patch and stays misaligned for good: it then drops every later
   patch, resyncs included, and the reloaded chart freezes (seen in CI: the page kept 536
   of 544 points). :class:`LiveBokeh` pads every patch to a buffer count of 1 modulo 3,
   which a stock receiver in step reads as an ordinary unused buffer and which brings a
   receiver out of step back in step within two patches (see :func:`aligning_pad`).
6. Stock framing sends every numpy column as its own binary buffer, two comm messages each
   (a streamed score row of three columns took 3 + 2 x 3 = 9 messages, 11 once padded),
   and every message costs the kernel, the Jupyter server and the page a parse and a
   dispatch. :class:`LiveBokeh` encodes arrays inline (base64 inside the patch's content),
   so every patch is exactly five messages: header, metadata, content and the one padding
   buffer.
7. Trap 2's echoes are not only wasted in Python: the page serialises every change it
   applies (gzipping array columns in JavaScript), the Jupyter server forwards it and the
   kernel parses it, ~40 messages a second for a dashboard and a bubble chart. Measured in
   the browser, training ran at 23 minibatches/s with the echoes and 42-50 without. So the
   view also stops them in the page: :data:`QUIET_ECHOES_JS`, run by BokehJS when a data
   source first changes there, lets only what :meth:`LiveBokeh._sync_model` keeps (user
   events and selections) reach the view's change callback. Where that script cannot run
   (another BokehJS), the kernel-side filter still drops the echoes.
8. BokehJS 3.9 rewrites its views' inline style sheets (the plot's grid template, the
   canvas panel's) on every paint and layout, with the same text each time. Every rewrite
   makes chromium re-collect the page's active style sheets, and the next CSS variable a
   visual reads (each text, line and fill property reads one through
   ``getComputedStyle``) then forces a style recalculation of the page: on the JupyterLab
   page streaming a dashboard and a bubble chart at 10 Hz, ~100 recalculations a second
   and ~0.3 of the renderer's core. :data:`STEADY_STYLES_JS`, run with the echo filter,
   makes an inline style sheet skip a rewrite whose text is what it already holds (the
   page's styles are exactly the same either way).
9. BokehJS auto-ranging (``DataRange1d``, every score chart's default) fits the ranges to
   the data at the start of a paint, and each range it moves requests another paint: every
   streamed row painted the plot twice, the second time the same picture (measured: 20
   paints a second for 10 rows). :data:`SINGLE_PAINT_JS`, run with the echo filter, holds
   those requests during a paint's own range update, as BokehJS itself does around its
   ``match_aspect`` update; the paint under way draws the new ranges. One paint per row
   took the page's renderer from 0.17-0.19 to 0.15 of a core.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from bokeh.core.serialization import Buffer, Deserializer, Serialized, Serializer
from bokeh.core.types import ID
from bokeh.models import ColumnDataSource, CustomJS, LayoutDOM
from bokeh.protocol.messages.patch_doc import PatchJson, patch_doc
from jupyter_bokeh import BokehModel

__all__ = ["DOC_LOCK", "PAGE_JS", "QUIET_ECHOES_JS", "SINGLE_PAINT_JS", "STEADY_STYLES_JS",
           "LiveBokeh", "aligning_pad", "inline_patch", "load_bokehjs", "quiet_echoes"]

#: The one lock around every bokeh document change (pump thread and shell thread alike).
DOC_LOCK = threading.RLock()

#: Seconds after a reload's state request at which every data source is re-sent whole.
RESYNC_AFTER = (0.5, 2.0, 5.0)

_loaded = False

_PAD = b"\0"

#: BokehJS code (a ``CustomJS`` on every data source's ``streaming``, ``patching`` and
#: ``data`` changes) that wraps the document's change callbacks once, so that only UI
#: events (``MessageSent``: taps, ...) and selection changes go back to the kernel; the
#: echoes of the kernel's own patches, and range changes, stay in the page. It relies on
#: ``Document._callbacks`` (a Map of callback -> raw flag in BokehJS 3) and does nothing
#: when that is absent.
QUIET_ECHOES_JS = """
const doc = cb_obj.document;
if (doc == null || doc.__bidlab_quiet || !(doc._callbacks instanceof Map)) return;
doc.__bidlab_quiet = true;
for (const [callback, raw] of [...doc._callbacks]) {
  if (raw) continue;  // raw callbacks take whole batches: not the widget view's
  const quiet = (event) => {
    if (event.msg_type !== undefined || event.attr === "indices") callback(event);
  };
  doc._callbacks.delete(callback);
  doc._callbacks.set(quiet, raw);
}
"""

#: BokehJS code (run with :data:`QUIET_ECHOES_JS`, once per page) that makes BokehJS's inline
#: style sheets skip rewrites to the text they already hold (trap 8). It patches
#: ``core/dom``'s ``InlineStyleSheet._update`` and does nothing when BokehJS lacks it.
STEADY_STYLES_JS = """
const dom = typeof Bokeh !== "undefined" && Bokeh.require ? Bokeh.require("core/dom") : null;
const sheet = dom != null && dom.InlineStyleSheet != null ? dom.InlineStyleSheet.prototype
                                                           : null;
if (sheet != null && typeof sheet._update === "function" && !sheet.__bidlab_steady) {
  const update = sheet._update;
  sheet._update = function (css) {
    if (this.el == null || this.el.textContent !== css) update.call(this, css);
  };
  sheet.__bidlab_steady = true;
}
"""

#: BokehJS code (run with :data:`QUIET_ECHOES_JS`, once per page) that makes a plot's paint
#: fit its auto ranges without requesting a second paint of the same picture (trap 9). It
#: wraps ``PlotView._actual_paint`` and ``RangeManager.update_dataranges`` and does nothing
#: when BokehJS lacks them. Range changes from anywhere else (pan, zoom, reset, a linked
#: plot, the kernel) still repaint.
SINGLE_PAINT_JS = """
try {
  const canvas = Bokeh.require("models/plots/plot_canvas").PlotView.prototype;
  const manager = Bokeh.require("models/plots/range_manager").RangeManager.prototype;
  if (!canvas.__bidlab_single_paint && typeof canvas._actual_paint === "function" &&
      typeof canvas.pause === "function" && typeof manager.update_dataranges === "function") {
    const paint = canvas._actual_paint;
    canvas._actual_paint = function () {
      this.__bidlab_painting = (this.__bidlab_painting || 0) + 1;
      try { return paint.call(this); } finally { this.__bidlab_painting -= 1; }
    };
    const update = manager.update_dataranges;
    manager.update_dataranges = function () {
      const plot = this.parent;
      if (plot == null || !plot.__bidlab_painting) return update.call(this);
      plot.pause();  // the paint under way draws these ranges
      try { return update.call(this); } finally { plot.unpause(true); }
    };
    canvas.__bidlab_single_paint = true;
  }
} catch (error) {
  // another BokehJS without these modules: it paints as it always did
}
"""

#: The code of the one ``CustomJS`` each data source carries (see :func:`quiet_echoes`).
PAGE_JS = STEADY_STYLES_JS + SINGLE_PAINT_JS + QUIET_ECHOES_JS


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


def inline_patch(event: Any) -> patch_doc:
    """A ``PATCH-DOC`` message for one document event with every array inline.

    Same as bokeh's ``patch_doc.create`` except that the serializer is not deferred: numpy
    columns become base64 strings inside the content instead of separate binary buffers
    (BokehJS decodes both forms), so the message has no buffers of its own.
    """
    doc = event.document
    serializer = Serializer(references=doc.models.synced_references, deferred=False)
    content = PatchJson(events=serializer.encode([event]))
    doc.models.flush_synced(lambda model: not serializer.has_ref(model))
    return patch_doc(patch_doc.create_header(), {}, content)


def quiet_echoes(layout: LayoutDOM) -> None:
    """Make the page keep its echoes, its style sheets and one paint per update: attach
    :data:`PAGE_JS` to every data source of ``layout`` (once per source; the first change
    in the page installs the echo filter, the steady style sheets and the single paints)."""
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


class LiveBokeh(BokehModel):
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

    def _handle_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        if data.get("method") == "request_state":  # a (re)loaded view: give it today's doc
            with DOC_LOCK:
                self.render_bundle = self._model_to_traits(self._model)
        super()._handle_msg(msg)

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        """Widget state with a render bundle of the document as it is *now*.

        Why: a page reload restores every widget through ipywidgets' control comm
        (``request_states``), which reads ``get_state`` and never sends the per-widget
        ``request_state`` seen by :meth:`_handle_msg`; without this the reloaded chart
        showed the points of the first render and then only the newly streamed ones.
        """
        state = super().get_state(key, drop_defaults=drop_defaults)
        if "render_bundle" in state:
            with DOC_LOCK:
                bundle = self._model_to_traits(self._model)
            to_json = self.trait_metadata("render_bundle", "to_json")
            state["render_bundle"] = to_json(bundle, self) if to_json else bundle
            self._schedule_resync()
        return state

    def _schedule_resync(self) -> None:
        """Re-send every data source whole once the (re)loaded view exists.

        Why: the page builds the view from the state above, and stream messages that arrive
        before the view is ready are dropped by BokehJS, so a reloaded chart would miss the
        points of that window (measured: 2 of 581). A full replacement afterwards makes the
        page hold exactly the kernel's data again; it costs one message per source.
        """
        for delay in RESYNC_AFTER:
            timer = threading.Timer(delay, self.resync)
            timer.daemon = True
            timer.start()

    def resync(self) -> None:
        """Replace each data source's columns with a copy of themselves (a full re-send)."""
        with DOC_LOCK:
            doc = self._document
            if doc is None or self.comm is None:
                return
            for src in doc.select({"type": ColumnDataSource}):
                src.data = {name: list(values) for name, values in src.data.items()}

    def _document_patched(self, event: Any) -> None:
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

    def _sync_model(self, _model: Any, content: dict[str, Any], _buffers: list[Any]) -> None:
        if content.get("event", "") != "jsevent":
            return
        kind = content.get("kind")
        self.echo_counts[kind] = self.echo_counts.get(kind, 0) + 1
        if kind == "MessageSent":  # Tap and other UI events: run the Python callbacks
            with DOC_LOCK:
                super()._sync_model(_model, content, _buffers)
            return
        if kind != "ModelChanged" or content.get("attr") != "indices":
            return  # echoes of our own streams, patches and range changes
        with DOC_LOCK:
            doc = self._document
            if doc is None:
                return
            body = {k: v for k, v in content.items() if k != "event"}
            event = Deserializer(list(doc.models), setter=self).deserialize(
                Serialized(content=body, buffers=[]))
            model = event["model"]
            descriptor = model.lookup("indices")
            new = descriptor.property.prepare_value(model, "indices", event["new"])
            old = descriptor._get(model)
            if list(old) == list(new):
                return
            descriptor._set(model, old, new, setter=self)  # runs on_change callbacks once
