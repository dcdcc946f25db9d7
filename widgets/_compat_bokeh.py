"""Every use of bokeh's private API (Python and BokehJS), in one place.

Relied on (bokeh 3):

* ``patch_doc.create``'s way of serializing events: ``Serializer(references=...,
  deferred=...)`` with ``doc.models.synced_references`` and ``doc.models.flush_synced``
  (:func:`inline_patch` does the same with arrays inline);
* ``PropertyDescriptor._get(obj)`` and ``_set(obj, old, value, setter=...)``
  (:func:`set_from_page`);
* ``DocumentPatchedEvent.dispatch`` calling ``receiver._document_patched(event)`` (the hook
  :class:`._compat_jupyter_bokeh.HookedBokehModel` routes);
* BokehJS: ``Document._callbacks`` (a Map of callback -> raw flag;
  :data:`QUIET_ECHOES_JS`) and ``core/dom``'s ``InlineStyleSheet._update``
  (:data:`STEADY_STYLES_JS`). Both scripts do nothing when BokehJS lacks these.

The ``viz`` extra pins bokeh below its next major version; :func:`missing_hooks` says what
a newer release changed (the test suite runs it).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from bokeh.core.serialization import Serializer
from bokeh.protocol.messages.patch_doc import PatchJson, patch_doc

__all__ = ["LIBRARY", "PAGE_JS", "QUIET_ECHOES_JS", "STEADY_STYLES_JS", "inline_patch",
           "missing_hooks", "set_from_page"]

LIBRARY = "bokeh"

#: BokehJS code (a ``CustomJS`` on every data source's ``streaming``, ``patching`` and
#: ``data`` changes) that wraps the document's change callbacks once, so that only UI
#: events (``MessageSent``: taps, ...) and selection changes go back to the kernel; the
#: echoes of the kernel's own patches, and range changes, stay in the page.
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

#: BokehJS code (run with :data:`QUIET_ECHOES_JS`, once per page) that makes BokehJS's
#: inline style sheets skip rewrites to the text they already hold.
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

#: The code of the one ``CustomJS`` each data source carries: the steady style sheets
#: first (the echo filter returns early once installed).
PAGE_JS = STEADY_STYLES_JS + QUIET_ECHOES_JS


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


def set_from_page(model: Any, attr: str, value: Any, setter: Any) -> bool:
    """Set ``model.attr`` to ``value`` (as the page sent it) on behalf of ``setter``: the
    ``on_change`` callbacks run once and the change is not sent back to ``setter``.
    Returns False (and sets nothing) when the value is unchanged."""
    descriptor = model.lookup(attr)
    new = descriptor.property.prepare_value(model, attr, value)
    old = descriptor._get(model)
    try:
        if old == new:
            return False
    except ValueError:  # an array compared element-wise: treat as changed
        pass
    descriptor._set(model, old, new, setter=setter)
    return True


def _params(func: Any) -> list[str] | None:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


def _source(func: Any) -> str:
    try:
        return inspect.getsource(func)
    except (OSError, TypeError):
        return ""


def missing_hooks() -> list[str]:
    """What this module relies on that the installed bokeh lacks or changed, one line each
    naming the library, its version and the hook (empty: everything is in place)."""
    import bokeh
    from bokeh.core.property.descriptors import PropertyDescriptor
    from bokeh.document.events import DocumentPatchedEvent
    from bokeh.document.models import DocumentModelManager

    where = f"{LIBRARY} {bokeh.__version__}"
    problems = []
    for name, wanted in (("_get", ["self", "obj"]),
                         ("_set", ["self", "obj", "old", "value", "hint", "setter"])):
        found = _params(getattr(PropertyDescriptor, name, None))
        if found != wanted:
            problems.append(f"{where}: hook PropertyDescriptor.{name}({', '.join(wanted)}) "
                            f"changed: parameters {found}")
    for name in ("synced_references", "flush_synced"):
        if not hasattr(DocumentModelManager, name):
            problems.append(f"{where}: hook DocumentModelManager.{name} is gone")
    create = _source(patch_doc.create)
    if not all(s in create for s in ("synced_references", "flush_synced", "Serializer(")):
        problems.append(f"{where}: hook patch_doc.create no longer serializes with "
                        f"doc.models.synced_references / flush_synced")
    if not {"references", "deferred"} <= set(_params(Serializer.__init__) or []):
        problems.append(f"{where}: hook Serializer(references=, deferred=) changed: "
                        f"parameters {_params(Serializer.__init__)}")
    if "._document_patched(self)" not in _source(DocumentPatchedEvent.dispatch):
        problems.append(f"{where}: hook DocumentPatchedEvent.dispatch no longer calls "
                        f"receiver._document_patched(event)")
    js = Path(bokeh.__file__).parent / "server" / "static" / "js" / "bokeh.js"
    text = js.read_text(encoding="utf-8") if js.is_file() else ""
    for hook, needle in (("BokehJS Document._callbacks (a Map)", "this._callbacks = new Map()"),
                         ("BokehJS InlineStyleSheet._update(css)", "_update(css) {")):
        if needle not in text:
            problems.append(f"{where}: hook {hook} not found in {js.name}")
    return problems
