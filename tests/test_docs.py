"""The documentation site builds without a warning, and the public docstrings' Examples run.

The site is the one ``bidlab docs`` builds (Sphinx, MyST-NB: the ``docs`` extra); the
Examples are those of every object the API reference documents, run as doctests.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

from bidlab.docsite.pages import API


def _objects() -> list[tuple[str, object]]:
    found = []
    for _, module_name, names in API.values():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # bidlab.widgets without the viz extra
            continue
        found += [(f"{module_name}.{n}", getattr(module, n)) for n in names
                  if hasattr(module, n)]
    for module_name in ("bidlab.docsite", "bidlab.widgets.static"):
        try:
            found.append((module_name, importlib.import_module(module_name)))
        except ImportError:
            pass
    return found


OBJECTS = _objects()


@pytest.mark.parametrize("name,obj", OBJECTS, ids=[n for n, _ in OBJECTS])
def test_docstring_examples_run(name, obj):
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(obj, name) if t.examples]
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"


def test_estimators_have_examples():
    from bidlab import models

    for name in ("LDA", "LDAGibbs", "GLM", "KMeans", "NMF", "PageRank"):
        doc = getattr(models, name).__doc__ or ""
        assert "Examples\n" in doc and ">>> " in doc, f"{name} has no Examples section"
        assert "Parameters\n" in doc, f"{name}'s docstring is not numpy style"


def test_site_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx", reason="the docs extra is not installed")
    pytest.importorskip("myst_nb", reason="the docs extra is not installed")
    from bidlab.docsite import build, sources_available

    if not sources_available():
        pytest.skip("not a source checkout: README.md and friends are absent")
    result = build(tmp_path / "site")
    assert result.warnings == [], "\n".join(result.warnings)
    html = (tmp_path / "site" / "api" / "models.html").read_text()
    assert "n_components" in html and "Examples" in html
    notebook = (tmp_path / "site" / "notebooks" / "02_lda_live.html").read_text()
    assert "held-out perplexity" in notebook  # the saved outputs are rendered
    kmeans = (tmp_path / "site" / "notebooks" / "04_kmeans.html").read_text()
    assert "<img" in kmeans  # the live views' pictures (widgets/static.py)
    assert (tmp_path / "site" / "ARCHITECTURE.html").is_file()
    assert (tmp_path / "site" / "BENCHMARKS.html").is_file()
    assert (tmp_path / "site" / "DEVELOPERS.html").is_file()
