"""The other libraries' private hooks bidlab.widgets relies on are still there.

Each ``widgets/_compat_<library>.py`` holds every use of one library's private API and
says, in ``missing_hooks()``, what the installed release lacks or changed. These tests run
it (a failure names the library, its version and the hook), check that it notices a
changed hook, and that the ``viz`` extra pins each such library below its next major.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")

from bidlab.widgets import (  # noqa: E402
    _compat_bokeh,
    _compat_ipykernel,
    _compat_jupyter_bokeh,
)
from packaging.requirements import Requirement  # noqa: E402
from packaging.version import Version  # noqa: E402

COMPAT = [_compat_ipykernel, _compat_jupyter_bokeh, _compat_bokeh]
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


@pytest.mark.parametrize("compat", COMPAT, ids=lambda m: m.LIBRARY)
def test_the_patched_private_hooks_are_in_place(compat) -> None:
    problems = compat.missing_hooks()
    assert not problems, ("a private hook that bidlab.widgets patches changed; update "
                          f"widgets/{compat.__name__.rsplit('.', 1)[-1]}.py:\n  "
                          + "\n  ".join(problems))


@pytest.mark.parametrize("compat", COMPAT, ids=lambda m: m.LIBRARY)
def test_viz_extra_pins_each_patched_library_below_its_next_major(compat) -> None:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    extra = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["viz"]
    reqs = {Requirement(r).name.replace("-", "_").lower(): Requirement(r) for r in extra}
    req = reqs.get(compat.LIBRARY)
    assert req is not None, f"the viz extra does not list {compat.LIBRARY}"
    uppers = [Version(s.version) for s in req.specifier if s.operator == "<"]
    assert uppers, f"{req}: no upper bound on {compat.LIBRARY}, whose private API is patched"
    installed = Version(version(compat.LIBRARY))
    assert installed in req.specifier, f"{compat.LIBRARY} {installed} is outside {req}"
    assert min(uppers) <= Version(f"{installed.major + 1}"), \
        f"{req}: allows a {compat.LIBRARY} major version newer than the tested {installed}"


def _changed(*args, **kwargs) -> None:
    """A stand-in with another signature."""


def test_a_changed_ipykernel_hook_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipykernel.iostream import IOPubThread

    monkeypatch.setattr(IOPubThread, "schedule", _changed)
    problems = _compat_ipykernel.missing_hooks()
    assert problems == [f"ipykernel {version('ipykernel')}: hook IOPubThread.schedule(self, f) "
                        f"changed: parameters ['args', 'kwargs']"]


def test_a_changed_jupyter_bokeh_hook_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_bokeh import BokehModel

    monkeypatch.setattr(BokehModel, "_sync_model", _changed)
    monkeypatch.delattr(BokehModel, "_document")
    problems = _compat_jupyter_bokeh.missing_hooks()
    where = f"jupyter_bokeh {version('jupyter_bokeh')}"
    assert problems[0].startswith(f"{where}: hook BokehModel._sync_model(self, _model, "
                                  "content, _buffers) changed"), problems
    assert f"{where}: hook BokehModel._document (a property) is gone" in problems


def test_a_changed_bokeh_hook_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from bokeh.core.property.descriptors import PropertyDescriptor
    from bokeh.document.models import DocumentModelManager

    monkeypatch.setattr(PropertyDescriptor, "_get", _changed)
    monkeypatch.delattr(DocumentModelManager, "flush_synced")
    problems = _compat_bokeh.missing_hooks()
    where = f"bokeh {version('bokeh')}"
    assert problems == [
        f"{where}: hook PropertyDescriptor._get(self, obj) changed: parameters "
        "['args', 'kwargs']",
        f"{where}: hook DocumentModelManager.flush_synced is gone"], problems


def test_no_other_widgets_module_touches_their_private_api() -> None:
    """The hooks stay in the compat modules: the rest of widgets/ names none of them."""
    hooks = ("._model_to_traits", "._sync_model", "._document_patched", "._document",
             "_bidlab_stock_schedule", ".io_thread", "synced_references", "flush_synced",
             "._get(", "._set(", "._callbacks", "._update(")
    root = PYPROJECT.parent / "widgets"
    found = [f"{path.name}: {hook}" for path in sorted(root.glob("*.py"))
             if not path.name.startswith("_compat_")
             for hook in hooks if hook in path.read_text()]
    assert not found, found
