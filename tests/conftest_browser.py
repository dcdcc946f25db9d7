"""Pytest fixtures for real-browser tests (a pytest plugin; the harness is bidlab.bench._browser).

Load it from a test module with ``pytest_plugins = ["conftest_browser"]`` or, once for
the whole suite, from tests/conftest.py. Fixtures:

* ``browser`` (module scope): headless Debian chromium through Playwright; skips the
  module with the reason when chromium or playwright is missing.
* ``page``: a fresh tab, closed after the test (a screenshot is saved on failure).
* ``artifacts_dir``: where screenshots go (``$BIDLAB_TEST_ARTIFACTS`` or
  ``<repo>/test-artifacts``, git-ignored).

A module starts its own JupyterLab with ``bh.start_lab`` in a module-scoped
fixture (one shared server per module).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bidlab.bench import _browser as bh

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    path = Path(os.environ.get("BIDLAB_TEST_ARTIFACTS", REPO / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bh.Browser]:
    reason = bh.skip_reason()
    if reason:
        pytest.skip(reason)
    b = bh.start_browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def page(browser: bh.Browser, request: pytest.FixtureRequest,
         artifacts_dir: Path) -> Iterator[Any]:
    p = browser.new_page()
    yield p
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        try:
            p.screenshot(path=str(artifacts_dir / f"FAILED-{request.node.name}.png"))
        except Exception:
            pass
    p.close()
