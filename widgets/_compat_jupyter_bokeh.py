"""Every use of jupyter_bokeh's private API, in one place: :class:`HookedBokehModel`.

:class:`~._bokeh.LiveBokeh` changes how jupyter_bokeh's ``BokehModel`` sends document
changes and handles the page's messages. It relies on (jupyter_bokeh 4):

* ``_model`` (the shown layout), ``_document`` (its document) and the classmethod
  ``_model_to_traits(model)`` (its render bundle);
* ``_sync_model(model, content, buffers)``: registered with ``on_msg`` in ``__init__``,
  it applies one message from the page;
* ``_document_patched(event)``: called for every document change (the receiver bokeh's
  ``Document.on_change_dispatch_to`` registers), it sends the change to the page.

:class:`HookedBokehModel` routes these to named methods, so subclasses use no private name.
The ``viz`` extra pins jupyter_bokeh below its next major version; :func:`missing_hooks`
says what a newer release changed (the test suite runs it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from bokeh.document import Document
from jupyter_bokeh import BokehModel

__all__ = ["LIBRARY", "HookedBokehModel", "missing_hooks"]

LIBRARY = "jupyter_bokeh"


class HookedBokehModel(BokehModel):
    """jupyter_bokeh's ``BokehModel`` with its private hooks routed to named methods."""

    @property
    def bokeh_document(self) -> Document | None:
        """The shown layout's bokeh document."""
        return self._document

    def document_bundle(self) -> dict[str, Any]:
        """The render bundle of the shown layout's document as it is now."""
        return self._model_to_traits(self._model)

    def send_document_event(self, event: Any) -> None:
        """Send one change of the document to the page (stock: jupyter_bokeh's framing)."""
        BokehModel._document_patched(self, event)

    def on_page_event(self, content: dict[str, Any], apply: Callable[[], None]) -> None:
        """Handle one message from the page; ``apply()`` is jupyter_bokeh's own handling
        (stock: always applied)."""
        apply()

    def _document_patched(self, event: Any) -> None:
        self.send_document_event(event)

    def _sync_model(self, model: Any, content: dict[str, Any], buffers: list[Any]) -> None:
        self.on_page_event(content, lambda: BokehModel._sync_model(self, model, content,
                                                                   buffers))


def missing_hooks() -> list[str]:
    """What this module relies on that the installed jupyter_bokeh lacks or changed, one
    line each naming the library, its version and the hook (empty: all in place)."""
    from importlib.metadata import version

    where = f"{LIBRARY} {version(LIBRARY)}"
    problems = []
    for name, wanted in (("_sync_model", ["self", "_model", "content", "_buffers"]),
                         ("_document_patched", ["self", "event"]),
                         ("_model_to_traits", ["model"])):
        hook = getattr(BokehModel, name, None)
        try:
            found = list(inspect.signature(hook).parameters) if hook is not None else None
        except (TypeError, ValueError):
            found = None
        if found != wanted:
            problems.append(f"{where}: hook BokehModel.{name}({', '.join(wanted)}) changed: "
                            f"parameters {found}")
    if not isinstance(inspect.getattr_static(BokehModel, "_document", None), property):
        problems.append(f"{where}: hook BokehModel._document (a property) is gone")
    try:
        init = inspect.getsource(BokehModel.__init__)
    except (OSError, TypeError):
        init = ""
    if "self.on_msg(self._sync_model)" not in init:
        problems.append(f"{where}: hook BokehModel.__init__ no longer registers "
                        f"self._sync_model with on_msg")
    try:
        update = inspect.getsource(BokehModel.update_from_model)
    except (OSError, TypeError, AttributeError):
        update = ""
    if "self._model = model" not in update or "on_change_dispatch_to(self)" not in update:
        problems.append(f"{where}: hook BokehModel.update_from_model no longer sets _model "
                        f"and dispatches document changes to the widget")
    return problems
