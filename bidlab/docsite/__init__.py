"""Build bidlab's documentation site with Sphinx: ``bidlab docs [--out DIR]``.

The site is made from one source per page: README, ARCHITECTURE, BENCHMARKS, DEVELOPERS (Markdown,
through MyST), the notebooks as saved with their outputs (MyST-NB, not executed again: the
static pictures of their live views show the trained results), and the API reference from
the docstrings (autodoc with napoleon for the numpy style). :func:`build` writes the page
sources into a scratch folder and runs Sphinx there, so nothing is written into the
checkout. Needs the ``docs`` extra and a source checkout (the Markdown pages are not in the
wheel).

Examples
--------
>>> from bidlab.docsite import sources_available
>>> isinstance(sources_available(), bool)
True
"""

from __future__ import annotations

import importlib
import inspect
import io
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bidlab._source_checkout import CHECKOUT_DIR
from bidlab.docsite.pages import API, GUIDE, NOTEBOOK_GLOB, api_page, index_page

__all__ = ["Result", "build", "sources_available", "write_sources"]

EXTENSIONS = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_nb"]


@dataclass
class Result:
    """What :func:`build` made: the HTML folder, and every warning Sphinx printed."""

    out: Path
    warnings: list[str] = field(default_factory=list)


def sources_available(checkout: Path = CHECKOUT_DIR) -> bool:
    """Whether ``checkout`` holds the guide's Markdown pages (a source checkout does)."""
    return all((checkout / name).is_file() for name, _ in GUIDE)


def _kinds(module_name: str, names: tuple[str, ...]) -> dict[str, str]:
    module = importlib.import_module(module_name)
    kinds = {}
    for name in names:
        obj = getattr(module, name, None)
        if obj is not None:
            kinds[name] = "class" if inspect.isclass(obj) else "function"
    return kinds


def write_sources(src: Path, checkout: Path = CHECKOUT_DIR) -> list[str]:
    """Write the site's page sources into folder ``src``; return the notebooks' pages."""
    if not sources_available(checkout):
        missing = [n for n, _ in GUIDE if not (checkout / n).is_file()]
        raise FileNotFoundError(
            f"bidlab docs needs a source checkout: {', '.join(missing)} not found in "
            f"{checkout} (clone the repository and run bidlab docs from it)")
    src.mkdir(parents=True, exist_ok=True)
    for name, _ in GUIDE:
        shutil.copyfile(checkout / name, src / name)
    notebooks = []
    (src / "notebooks").mkdir(exist_ok=True)
    for nb in sorted(checkout.glob(NOTEBOOK_GLOB)):
        shutil.copyfile(nb, src / "notebooks" / nb.name)
        notebooks.append(f"notebooks/{nb.stem}")
    (src / "api").mkdir(exist_ok=True)
    for page, (_, module, names) in API.items():
        (src / "api" / f"{page}.rst").write_text(api_page(page, _kinds(module, names)))
    guide = [Path(name).stem for name, _ in GUIDE]
    (src / "index.md").write_text(index_page(guide, notebooks))
    return notebooks


def build(out: Path, checkout: Path = CHECKOUT_DIR, builder: str = "html") -> Result:
    """Build the site into ``out`` (created); returns the warnings, which a clean build has
    none of."""
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    out = Path(out)
    warnings = io.StringIO()
    with tempfile.TemporaryDirectory(prefix="bidlab-docs-") as tmp:
        src = Path(tmp) / "src"
        write_sources(src, checkout)
        conf = {
            "project": "bidlab",
            "extensions": EXTENSIONS,
            "html_theme": "alabaster",
            "root_doc": "index",
            "exclude_patterns": ["_build"],
            "nb_execution_mode": "off",  # the notebooks are saved with their outputs
            "myst_heading_anchors": 3,
            "napoleon_numpy_docstring": True,
            "napoleon_google_docstring": False,
            "autodoc_member_order": "bysource",
            "autodoc_typehints": "description",
            "autodoc_inherit_docstrings": False,
            "suppress_warnings": ["mystnb.unknown_mime_type"],
        }
        with docutils_namespace():
            app = Sphinx(str(src), None, str(out), str(Path(tmp) / "doctrees"), builder,
                         confoverrides=conf, status=io.StringIO(), warning=warnings,
                         freshenv=True)
            app.build()
    return Result(out, [line for line in warnings.getvalue().splitlines() if line.strip()])
