"""Make a source checkout behave like the installed wheel.

The wheel ships the top-level ``widgets/`` folder as ``bidlab.widgets`` and ``kernels/`` as
``bidlab/_cuda``. In a source (or editable) checkout those folders sit beside ``bidlab/``;
this finder maps the one name ``bidlab.widgets`` onto ``<checkout>/widgets`` so that the
same import works in both places, without putting the checkout root on ``sys.path``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT_DIR = PACKAGE_DIR.parent


def cuda_source_dir() -> Path:
    """Folder holding the CUDA sources: bidlab/_cuda in a wheel, kernels/ in a checkout."""
    installed = PACKAGE_DIR / "_cuda"
    if installed.is_dir():
        return installed
    checkout = CHECKOUT_DIR / "kernels"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(
        f"CUDA kernel sources not found in {installed} or {checkout}: reinstall bidlab "
        "(pip install bidlab) or run from a complete source checkout"
    )


class _WidgetsFinder(importlib.abc.MetaPathFinder):
    """Finds ``bidlab.widgets`` (and its submodules) in ``<checkout>/widgets``."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: D401 - importlib API
        if fullname != "bidlab.widgets":
            return None
        src = CHECKOUT_DIR / "widgets"
        init = src / "__init__.py"
        if not init.is_file():
            return None
        return importlib.util.spec_from_file_location(
            fullname, init, submodule_search_locations=[str(src)]
        )


def install() -> None:
    """Register the finder when bidlab runs from a checkout without bundled widgets."""
    if (PACKAGE_DIR / "widgets").is_dir():
        return
    if not any(isinstance(f, _WidgetsFinder) for f in sys.meta_path):
        sys.meta_path.append(_WidgetsFinder())
