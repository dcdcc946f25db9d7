"""The JupyterLab extension in a real browser: Learners panel, status bar, palette, restart.

One JupyterLab on 127.0.0.1 (token, temp config) per module, Debian chromium through
Playwright. Each test opens its own notebook (its own kernel) in a fresh workspace and
starts real :class:`bidlab.learn.Learner` objects training least squares in the
background at a modest rate (a 20 ms sleep per minibatch). Kernel state is checked with a
second kernel client (:class:`browser_harness.KernelProbe`), not through the page.

Screenshots go to ``test-artifacts/labextension/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import browser_harness as bh
import pytest

pytest_plugins = ["conftest_browser"]
pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
BUILT = REPO / "bidlab" / "labextension"  # `jlpm build` / `pip install` output
EXTENSION = json.loads((REPO / "labextension" / "package.json").read_text())["name"]

SETUP = '''\
import time
import numpy as np
import bidlab
from bidlab.learn import Learner
from bidlab.models.lsq import LeastSquares


class PacedLeastSquares(LeastSquares):
    """Least squares that sleeps 20 ms per minibatch: trains for minutes, gently."""

    def update(self, batch):
        time.sleep(0.02)
        return super().update(batch)


rng = np.random.default_rng(0)
X = rng.standard_normal((4000, 20)).astype(np.float32)
y = X @ rng.standard_normal((20, 1)).astype(np.float32)


def make(name):
    return Learner(PacedLeastSquares(), (X, y), batch_size=200, n_passes=10_000, name=name)
'''

PANEL = "#bidlab-learners"
STATUS = ".jp-bidlab-StatusItem"


# Records in the page when each learner's card first shows each state, as
# window.__bidlabSeen["<name>:<state>"] = epoch ms (the same clock as the kernel's time.time).
SEEN_JS = f"""() => {{
  window.__bidlabSeen = {{}};
  const panel = document.querySelector('{PANEL}');
  const look = () => panel.querySelectorAll('.jp-bidlab-Learner').forEach(el => {{
    window.__bidlabSeen[el.dataset.learnerId + ':' + el.dataset.state] ??= Date.now();
  }});
  new MutationObserver(look).observe(panel, {{childList: true, subtree: true,
                                              attributes: true}});
}}"""


def card(name: str) -> str:
    return f'{PANEL} .jp-bidlab-Learner[data-learner-id="{name}"]'


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bh.LabServer]:
    reason = bh.skip_reason()
    if reason:
        pytest.skip(reason)
    extensions = {}
    if (BUILT / "package.json").is_file():
        extensions[EXTENSION] = BUILT  # the checkout's build wins over an installed copy
    root = tmp_path_factory.mktemp("lab-root")
    server = bh.start_lab(root, tmp_path_factory.mktemp("lab-dirs"), labextensions=extensions)
    yield server
    server.stop()


@pytest.fixture
def shots(artifacts_dir: Path) -> Path:
    path = artifacts_dir / "labextension"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def notebook(lab: bh.LabServer, page, request: pytest.FixtureRequest) -> Iterator:
    """Open a notebook with the given cells; yield (page, probe); shut its kernel down."""
    probes = []

    def open_with(cells: list[str]) -> bh.KernelProbe:
        rel = f"{request.node.name}.ipynb"
        bh.write_notebook(lab.root / rel, [SETUP, *cells])
        bh.open_notebook(page, lab, rel)
        ext = page.evaluate(f"""() => window.jupyterapp.hasPlugin
            ? window.jupyterapp.hasPlugin('{EXTENSION}:plugin') : null""")
        assert ext, (f"the {EXTENSION} extension is not loaded: build it (pip install -e ., "
                     "or `jlpm build` in labextension/)")
        page.locator(f'.jp-SideBar [data-id="{PANEL[1:]}"]').click()  # open the panel
        page.wait_for_selector(f"{PANEL} .jp-bidlab-LearnersPanel-empty", state="visible")
        page.evaluate(SEEN_JS)
        bh.run_all_cells(page)
        probe = bh.KernelProbe.for_page(lab, page)
        probes.append(probe)
        bh.wait_for(lambda: probe.eval("'make' in globals()"), 30, "the setup cell to run")
        bridge = "__import__('sys').modules.get('bidlab.lab.bridge')"
        assert probe.eval(f"{bridge} is not None and {bridge}.current() is not None"), (
            "`import bidlab` in a kernel must start the learner bridge: bidlab/__init__.py "
            "should call bidlab.lab.bridge.install()")
        return probe

    yield open_with
    for probe in probes:
        probe.close()
    lab.shutdown_kernels()


def state_in_kernel(probe: bh.KernelProbe, var: str, want: str, timeout: float = 5.0) -> str:
    return bh.wait_for(lambda: probe.eval(f"{var}.state") == want and want, timeout,
                       f"{var}.state == {want!r} in the kernel")


def wait_for_card(page, name: str, timeout: float = 30.0) -> None:
    page.wait_for_selector(card(name), timeout=timeout * 1000, state="attached")


def test_panel_lists_learner_and_pause_resume(notebook, page, shots):
    probe = notebook([
        'lr = make("lsq-a"); t_start = time.time(); lr.start()',
        'print("\\n".join(f"line {i}" for i in range(150)))',
        'from IPython.display import HTML, display\n'
        'from bidlab.lab import dashboard_class\n'
        'display(HTML(f\'<div class="{dashboard_class(lr.name)}" '
        'style="height:60px;background:#dde">dashboard of {lr.name}</div>\'))',
    ])
    wait_for_card(page, "lsq-a")
    seen = bh.wait_for(lambda: page.evaluate("() => window.__bidlabSeen['lsq-a:running']"),
                       5, "the card to show 'running'") / 1000
    t_start = probe.eval("t_start")
    assert seen - t_start < 1.0, f"panel listed the learner {seen - t_start:.2f} s after start"
    print(f"\npanel showed the learner running {seen - t_start:.2f} s after lr.start()")

    row = page.locator(card("lsq-a"))
    assert row.locator(".jp-bidlab-Learner-name").inner_text() == "lsq-a"
    assert row.locator(".jp-bidlab-Learner-model").inner_text() == "PacedLeastSquares"
    bh.wait_for(lambda: row.get_attribute("data-state") == "running", 5, "state running")
    # live numbers arrive: samples/s and a validation score
    bh.wait_for(lambda: row.locator(".jp-bidlab-Learner-rate").inner_text() != "–", 10,
                "samples/s in the panel")
    bh.wait_for(lambda: row.locator(".jp-bidlab-Learner-val").inner_text() != "–", 10,
                "a validation score in the panel")
    status = page.locator(STATUS)
    # the item totals every kernel: a kernel of an earlier test may take a moment to go
    bh.wait_for(lambda: status.is_visible()
                and status.inner_text().startswith("bidlab: 1 running · "), 10,
                "the status item counting this one running learner")
    assert status.inner_text().endswith(" samples/s")
    page.screenshot(path=str(shots / "panel-running.png"))

    # Pause from the panel: the learner pauses in the kernel, the status item goes away.
    row.locator(".jp-bidlab-Learner-pause").click()
    state_in_kernel(probe, "lr", "paused")
    bh.wait_for(lambda: row.get_attribute("data-state") == "paused", 5, "panel shows paused")
    bh.wait_for(lambda: not status.is_visible(), 5, "status item hidden while nothing runs")
    assert row.locator(".jp-bidlab-Learner-pause").is_disabled()
    page.screenshot(path=str(shots / "panel-paused.png"))

    row.locator(".jp-bidlab-Learner-resume").click()
    state_in_kernel(probe, "lr", "running")
    bh.wait_for(lambda: status.is_visible(), 5, "status item back while running")

    # The dashboard link scrolls the notebook to the learner's dashboard.
    page.evaluate("""() => document.querySelectorAll('.jp-WindowedPanel-outer')
        .forEach(e => { e.scrollTop = 0; })""")
    dash = page.locator(".bidlab-dashboard-lsq-a")
    in_view = """el => { const r = el.getBoundingClientRect();
        return r.top >= 0 && r.bottom <= window.innerHeight; }"""
    bh.wait_for(lambda: not dash.evaluate(in_view), 5, "the dashboard scrolled out of view")
    link = row.locator(".jp-bidlab-Learner-dashboard")
    bh.wait_for(link.is_visible, 5, "the dashboard link")
    link.click()
    bh.wait_for(lambda: dash.evaluate(in_view), 5, "the dashboard scrolled into view")
    page.screenshot(path=str(shots / "dashboard-link.png"))


def test_status_bar_counts_and_palette_stops_all(notebook, page, shots):
    probe = notebook(['a = make("lsq-b1").start()\nb = make("lsq-b2").start()'])
    wait_for_card(page, "lsq-b1")
    wait_for_card(page, "lsq-b2")
    status = page.locator(STATUS)
    bh.wait_for(lambda: status.is_visible() and "2 running" in status.inner_text(), 10,
                "status item with 2 running")
    assert status.inner_text().startswith("bidlab: 2 running · ")
    page.screenshot(path=str(shots / "status-two-running.png"))

    # Stop one from the panel: one left.
    page.locator(card("lsq-b1")).locator(".jp-bidlab-Learner-stop").click()
    state_in_kernel(probe, "a", "stopped")
    bh.wait_for(lambda: "1 running" in status.inner_text(), 5, "status item with 1 running")

    # Stop all, through the command palette, as a user would.
    page.keyboard.press("Control+Shift+C")
    palette = page.locator(".lm-CommandPalette-input")
    palette.fill("bidlab: stop all")
    page.wait_for_selector(".lm-CommandPalette-item:has-text('bidlab: stop all learners')")
    page.screenshot(path=str(shots / "palette.png"))
    page.keyboard.press("Enter")
    state_in_kernel(probe, "b", "stopped")
    bh.wait_for(lambda: not status.is_visible(), 5, "status item hidden after stop all")
    states = [page.locator(card(n)).get_attribute("data-state") for n in ("lsq-b1", "lsq-b2")]
    assert states == ["stopped", "stopped"]
    page.screenshot(path=str(shots / "stopped-all.png"))


def test_pause_all_reload_and_kernel_restart_empties_panel(notebook, page, shots):
    probe = notebook(['c = make("lsq-c1").start()\nd = make("lsq-c2").start()'])
    wait_for_card(page, "lsq-c1")
    wait_for_card(page, "lsq-c2")
    page.evaluate("() => window.jupyterapp.commands.execute('bidlab:pause-all')")
    state_in_kernel(probe, "c", "paused")
    state_in_kernel(probe, "d", "paused")

    # Reload the page: nothing runs, so nothing is published; the extension finds the
    # kernel's open comm (comm_info), adopts it and asks for a snapshot.
    page.reload()
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started")
    bh.wait_for(lambda: bh.kernel_status(page) == "idle", 60, "the kernel after reload")
    page.evaluate("() => window.jupyterapp.commands.execute('bidlab:show-learners')")
    wait_for_card(page, "lsq-c1", timeout=10)
    assert page.locator(card("lsq-c2")).get_attribute("data-state") == "paused"
    page.screenshot(path=str(shots / "after-reload.png"))

    page.evaluate("""() => window.jupyterapp.shell.currentWidget.sessionContext
        .session.kernel.restart()""")
    bh.wait_for(lambda: page.locator(f"{PANEL} .jp-bidlab-Learner").count() == 0, 15,
                "an empty panel after the kernel restart")
    assert page.locator(f"{PANEL} .jp-bidlab-LearnersPanel-empty").is_visible()
    assert not page.locator(STATUS).is_visible()
    page.screenshot(path=str(shots / "after-restart.png"))
