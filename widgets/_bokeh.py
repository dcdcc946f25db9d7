"""Bokeh inside JupyterLab without a server and without internet: :class:`LiveBokeh`.

``jupyter_bokeh.BokehModel`` (4.1) syncs a bokeh document over the widget channel, but has
four traps when a background thread streams into it (see ../shared/recipes/JUPYTER.md):

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
"""

from __future__ import annotations

import threading
from typing import Any

from bokeh.core.serialization import Deserializer, Serialized
from bokeh.models import ColumnDataSource, LayoutDOM
from jupyter_bokeh import BokehModel

__all__ = ["DOC_LOCK", "LiveBokeh", "load_bokehjs"]

#: The one lock around every bokeh document change (pump thread and shell thread alike).
DOC_LOCK = threading.RLock()

#: Seconds after a reload's state request at which every data source is re-sent whole.
RESYNC_AFTER = (0.5, 2.0)

_loaded = False


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
        load_bokehjs()
        with DOC_LOCK:
            super().__init__(model, **kwargs)

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

    def _sync_model(self, _model: Any, content: dict[str, Any], _buffers: list[Any]) -> None:
        if content.get("event", "") != "jsevent":
            return
        kind = content.get("kind")
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
