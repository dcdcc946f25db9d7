"""A real JupyterLab in a real browser, for tests and the dashboard benchmark.

Used by the browser tests (JupyterLab extension, live widgets) and by
``python -m bidlab.bench dashboard``; it lives in the package so that the benchmark needs
nothing outside it.

* :func:`start_lab` runs ``jupyter lab`` on 127.0.0.1 with a random token, every Jupyter
  config / runtime / settings / workspace / IPython folder in a temp dir (nothing of the
  user's is read or written), optional extra lab extensions put first on the path, and
  the news / update pop-ups silenced. It returns a :class:`LabServer`.
* :func:`start_browser` drives Debian's chromium (``/usr/bin/chromium``) through
  Playwright's Python package (never ``playwright install``: it downloads browsers).
* :func:`open_notebook` opens a notebook in a fresh workspace and waits for its kernel;
  :func:`run_all_cells`, :func:`wait_for` and :class:`KernelProbe` (ask the kernel
  directly, beside the browser) do the rest.

``skip_reason()`` says why a real browser cannot run here (no chromium, no playwright, no
jupyterlab). Playwright, Jupyter and nbformat are imported only when used, so this module
imports anywhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "LabServer", "Browser", "KernelProbe", "skip_reason",
           "start_lab", "start_browser", "open_notebook", "run_all_cells", "wait_for",
           "write_notebook"]

CHROMIUM = Path(os.environ.get("BIDLAB_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
INSTALL_HINT = "apt-get install -y chromium chromium-driver"

T = TypeVar("T")


def skip_reason() -> str | None:
    """Why real-browser tests cannot run here, or None when they can."""
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} not found: install Debian's chromium ({INSTALL_HINT})"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (pip install 'bidlab[test]')"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "jupyterlab is missing (pip install 'bidlab[viz]')"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Callable[[], T], timeout: float, what: str,
             interval: float = 0.1) -> T:
    """Poll ``predicate`` until it returns something truthy; return that value.

    Raises ``TimeoutError`` naming ``what`` and the last value (or exception) seen.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except Exception as exc:  # the page may be mid-navigation
            last = exc
        if time.monotonic() >= deadline:
            raise TimeoutError(f"waited {timeout:.1f} s for {what}; last seen: {last!r}")
        time.sleep(interval)


# --------------------------------------------------------------------------- the server
@dataclass
class LabServer:
    """A running ``jupyter lab`` (see :func:`start_lab`)."""

    root: Path
    port: int
    token: str
    process: subprocess.Popen
    log_path: Path
    env: dict[str, str] = field(repr=False, default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab") -> str:
        """Absolute URL of ``path`` (e.g. ``lab/tree/x.ipynb``) with the token."""
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET", body: Any = None) -> Any:
        """Call the REST API (``api/kernels`` ...) with the token; return the JSON reply."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base}/{path.lstrip('/')}", data=data,
                                     method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def log(self) -> str:
        """The server's output so far (for failure messages)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def shutdown_kernels(self) -> None:
        """Shut down every running kernel (frees CPU between tests)."""
        for session in self.api("api/sessions"):
            self.api(f"api/sessions/{session['id']}", method="DELETE")
        for kernel in self.api("api/kernels"):
            self.api(f"api/kernels/{kernel['id']}", method="DELETE")

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then kill after ``timeout`` seconds."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_lab(root: Path, workdir: Path, labextensions: dict[str, Path] | None = None,
              settings: dict[str, dict[str, Any]] | None = None,
              ipython_startup: list[str] | None = None, timeout: float = 90.0) -> LabServer:
    """Start JupyterLab on 127.0.0.1 serving ``root``; its private dirs go in ``workdir``.

    Parameters
    ----------
    labextensions
        ``{name: built extension dir}`` to load before installed ones (a
        checkout's fresh build wins over an older installed copy).
    settings
        ``{"@jupyterlab/plugin:id": {...}}`` user settings to write.
    ipython_startup
        Python snippets every kernel runs at start (IPython startup files).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    dirs = {name: workdir / name for name in
            ("config", "runtime", "data", "settings", "workspaces", "ipython", "path")}
    for d in dirs.values():
        d.mkdir(exist_ok=True)
    for name, src in (labextensions or {}).items():
        dest = dirs["path"] / "labextensions" / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        dest.symlink_to(Path(src).resolve(), target_is_directory=True)
    all_settings = {"@jupyterlab/apputils-extension:notification":
                    {"fetchNews": "false", "checkForUpdates": False}}
    all_settings.update(settings or {})
    for plugin, values in all_settings.items():
        package, _, plugin_name = plugin.partition(":")
        target = dirs["settings"] / package / f"{plugin_name}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    if ipython_startup:
        startup = dirs["ipython"] / "profile_default" / "startup"
        startup.mkdir(parents=True, exist_ok=True)
        for i, code in enumerate(ipython_startup):
            (startup / f"{i:02d}-harness.py").write_text(code)

    env = dict(os.environ)
    env.update({
        "JUPYTER_CONFIG_DIR": str(dirs["config"]),
        "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
        "JUPYTER_DATA_DIR": str(dirs["data"]),
        "JUPYTERLAB_SETTINGS_DIR": str(dirs["settings"]),
        "JUPYTERLAB_WORKSPACES_DIR": str(dirs["workspaces"]),
        "IPYTHONDIR": str(dirs["ipython"]),
        "JUPYTER_PATH": os.pathsep.join(
            [str(dirs["path"]), *filter(None, [os.environ.get("JUPYTER_PATH")])]),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    })
    port = free_port()
    token = uuid.uuid4().hex
    log_path = workdir / "jupyter-lab.log"
    env["JUPYTER_TOKEN"] = token  # never on the command line, which other users can read
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root}",
           "--LabApp.expose_app_in_browser=True", "--allow-root"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=root)
    server = LabServer(root=Path(root), port=port, token=token, process=process,
                       log_path=log_path, env=env)

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n"
                               f"{server.log()[-3000:]}")
        try:
            return server.api("api/status") is not None
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    try:
        wait_for(ready, timeout, "jupyter lab to answer /api/status", interval=0.25)
    except BaseException:
        server.stop()
        raise
    return server


# -------------------------------------------------------------------------- the browser
@dataclass
class Browser:
    """Playwright + a persistent chromium context (see :func:`start_browser`)."""

    playwright: Any
    context: Any

    def new_page(self) -> Any:
        page = self.context.new_page()
        page.set_default_timeout(30_000)
        return page

    def close(self) -> None:
        try:
            self.context.close()
        finally:
            self.playwright.stop()


def start_browser(profile_dir: Path, viewport: tuple[int, int] = (1400, 900)) -> Browser:
    """Launch headless Debian chromium with a fresh profile in ``profile_dir``."""
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        context = pw.chromium.launch_persistent_context(
            str(profile_dir), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": viewport[0], "height": viewport[1]})
    except BaseException:
        pw.stop()
        raise
    return Browser(pw, context)


# ------------------------------------------------------------------------ notebooks
def write_notebook(path: Path, cells: list[str]) -> Path:
    """Write a notebook of code cells (python3 kernel) to ``path``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


_KERNEL_STATUS_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return k ? k.status : null;
}"""


def kernel_status(page: Any) -> str | None:
    """Status of the current notebook's kernel as the page sees it (idle, busy ...)."""
    return page.evaluate(_KERNEL_STATUS_JS)


def open_notebook(page: Any, server: LabServer, relpath: str, timeout: float = 60.0) -> None:
    """Open ``relpath`` in a fresh workspace and wait until its kernel is idle."""
    workspace = f"w{uuid.uuid4().hex[:10]}"
    page.goto(server.url(f"lab/workspaces/{workspace}/tree/{relpath}"))
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started",
                           timeout=timeout * 1000)
    page.wait_for_selector(".jp-Notebook", timeout=timeout * 1000)
    wait_for(lambda: kernel_status(page) == "idle", timeout, f"the kernel of {relpath} to be "
             "idle", interval=0.2)


def run_all_cells(page: Any) -> None:
    """Run every cell of the current notebook (returns once they are queued)."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


# ------------------------------------------------------------------ asking the kernel
class KernelProbe:
    """A second client of a notebook's kernel, to check state in the kernel itself.

    Connects with the kernel's connection file from the server's runtime dir; the
    browser does not see its requests' outputs.
    """

    def __init__(self, server: LabServer, kernel_id: str) -> None:
        from jupyter_client import BlockingKernelClient

        self.kernel_id = kernel_id
        path = Path(server.env["JUPYTER_RUNTIME_DIR"]) / f"kernel-{kernel_id}.json"
        wait_for(path.is_file, 10, f"connection file {path}")
        self.client = BlockingKernelClient(connection_file=str(path))
        self.client.load_connection_file()
        # shell only: iopub is never read (see eval). Not ``wait_for_ready``: after the
        # kernel_info reply it drains iopub until 0.2 s pass without a message, which never
        # happens while a dashboard streams (the benchmark hung there for 15 minutes).
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False,
                                   control=False)
        deadline = time.monotonic() + 30
        while True:
            msg_id = self.client.kernel_info()
            try:
                reply = self.client.get_shell_msg(timeout=1.0)
            except queue.Empty:  # no reply within a second: ask again
                reply = None
            if reply is not None and reply["parent_header"].get("msg_id") == msg_id:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"kernel {kernel_id} did not answer kernel_info in 30 s")

    @classmethod
    def run_notebook(cls, server: LabServer, page: Any, relpath: str, ready: str,
                     timeout: float, what: str) -> KernelProbe:
        """Open ``relpath`` in ``page``, run all its cells and return a probe of its
        kernel once the expression ``ready`` is true there (``what`` names the wait in
        the timeout's message); the probe is closed if the wait fails."""
        open_notebook(page, server, relpath)
        run_all_cells(page)
        probe = cls.for_page(server, page)
        try:
            wait_for(lambda: probe.eval(ready), timeout, what)
        except BaseException:
            probe.close()
            raise
        return probe

    @classmethod
    def for_page(cls, server: LabServer, page: Any) -> KernelProbe:
        kernel_id = page.evaluate("""() => window.jupyterapp.shell.currentWidget
            .sessionContext.session.kernel.id""")
        return cls(server, kernel_id)

    def eval(self, expr: str, timeout: float = 10.0) -> Any:
        """Evaluate ``expr`` in the kernel and return its value (``repr`` parsed back with
        ``ast.literal_eval``, so ``expr`` must have a literal value: str, number, list...)."""
        import ast

        # The value comes back in the execute_reply on the shell channel: iopub is never
        # read (a kernel streaming widget updates fills it far faster than a probe would
        # drain it; ZMQ drops what overflows, which is harmless here).
        msg_id = self.client.execute("", silent=True, store_history=False,
                                     user_expressions={"v": f"repr({expr})"})
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply from the kernel to {expr!r} in {timeout} s")
            reply = self.client.get_shell_msg(timeout=left)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        value = reply["content"]["user_expressions"]["v"]
        if value["status"] != "ok":
            raise RuntimeError(f"the kernel could not evaluate {expr!r}: "
                               f"{value.get('ename')}: {value.get('evalue')}")
        return ast.literal_eval(ast.literal_eval(value["data"]["text/plain"]))

    def close(self) -> None:
        self.client.stop_channels()

    def stop_learner_and_close(self, name: str = "learner") -> None:
        """Ask the kernel's ``name`` learner to stop (without waiting; a kernel already
        gone is fine), then :meth:`close` -- a browser test's teardown."""
        try:
            self.eval(f"{name}.stop(wait=False) or 0")
        except Exception:  # noqa: BLE001 - the kernel may be gone; closing still runs
            pass
        self.close()


@contextlib.contextmanager
def live_notebook(server: LabServer, page: Any, relpath: str, ready: str, timeout: float,
                  what: str, failure_shot: Path) -> Iterator[KernelProbe]:
    """:meth:`KernelProbe.run_notebook` in a ``with`` block: a screenshot to
    ``failure_shot`` if the block (or the start) fails; on leaving, the notebook's learner
    stopped, the probe closed and the page closed."""
    probe = None
    try:
        probe = KernelProbe.run_notebook(server, page, relpath, ready, timeout, what)
        yield probe
    except BaseException:
        page.screenshot(path=str(failure_shot))
        raise
    finally:
        if probe is not None:
            probe.stop_learner_and_close()
        page.close()
