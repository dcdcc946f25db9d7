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
   bundle is refreshed from the live document whenever the frontend asks for full state.
"""

from __future__ import annotations

import threading
from typing import Any

from bokeh.core.serialization import Deserializer, Serialized
from bokeh.models import LayoutDOM
from jupyter_bokeh import BokehModel

__all__ = ["DOC_LOCK", "LiveBokeh", "load_bokehjs"]

#: The one lock around every bokeh document change (pump thread and shell thread alike).
DOC_LOCK = threading.RLock()

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
