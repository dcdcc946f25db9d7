"""``bidlab lab [notebook]``: JupyterLab on 127.0.0.1 with a token, opening a notebook.

The server binds to the loopback interface only and always asks for a token (a random
one unless given), so nothing else on the network can reach the kernels. The token never
appears on a command line (which every local user can read from ``ps`` or
``/proc/<pid>/cmdline``): the server gets it through its environment (``JUPYTER_TOKEN``),
which only its own user can read. The URL with the token is printed only when stderr is a
terminal; the server's runtime folder must be private and the files it writes are
``0600`` (:mod:`bidlab.lab.access`). The server runs as a child process; Ctrl-C and
SIGTERM reach it, and :func:`launch` returns its exit status.

Without a notebook argument it opens the LDA demo: from the working directory's or the
source checkout's ``notebooks/``, else (an installed wheel) from a user folder,
``~/bidlab-demos`` (``$BIDLAB_DEMOS`` overrides), into which the demos shipped in the
package are copied; copies already there are never overwritten, so edits survive.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from urllib.parse import quote

from bidlab._source_checkout import CHECKOUT_DIR, PACKAGE_DIR
from bidlab.lab.access import (
    RUNTIME_ENV,
    announce,
    private_runtime_dir,
    runtime_dir,
    start_server,
    token_file,
)

__all__ = ["DEFAULT_NOTEBOOK", "DEMOS_ENV", "check_jupyterlab", "check_port",
           "check_port_free", "launch", "lab_command",
           "lab_environment", "resolve_notebook", "demos_dir", "install_demos", "add_arguments",
           "run"]

#: Opened when no notebook is named (looked up in the working directory, then the checkout,
#: then among the demos shipped in the package).
DEFAULT_NOTEBOOK = "notebooks/02_lda_live.ipynb"

#: The demo notebooks inside an installed wheel (absent in a source checkout).
SHIPPED_DEMOS = PACKAGE_DIR / "notebooks"

#: Environment variable naming the folder the shipped demos are copied into.
DEMOS_ENV = "BIDLAB_DEMOS"

HOST = "127.0.0.1"


def demos_dir() -> Path:
    """The user folder for the shipped demos: ``$BIDLAB_DEMOS``, else ``~/bidlab-demos``."""
    env = os.environ.get(DEMOS_ENV)
    return Path(env).expanduser() if env else Path.home() / "bidlab-demos"


def install_demos(dest: Path | None = None) -> tuple[Path, list[str]] | None:
    """Copy the demo notebooks shipped in the package into ``dest`` (default
    :func:`demos_dir`); return the folder and the names copied, or None when the package
    ships none (a source checkout).

    A notebook already in ``dest`` is left alone: it may hold the user's edits. OSError
    when ``dest`` cannot be written.
    """
    shipped = sorted(SHIPPED_DEMOS.glob("*.ipynb")) if SHIPPED_DEMOS.is_dir() else []
    if not shipped:
        return None
    dest = demos_dir() if dest is None else Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for src in shipped:
        target = dest / src.name
        try:
            out = open(target, "xb")  # exclusive: never replaces a file, even in a race
        except FileExistsError:
            continue
        try:
            with out, open(src, "rb") as inp:
                shutil.copyfileobj(inp, out)
        except BaseException:
            target.unlink(missing_ok=True)  # no half-written demo left behind
            raise
        copied.append(src.name)
    return dest, copied


def resolve_notebook(notebook: str | os.PathLike | None) -> Path | None:
    """The notebook to open as an absolute path, or None to open JupyterLab without one.

    A named notebook must exist (FileNotFoundError otherwise; IsADirectoryError for a
    folder). The default,
    ``notebooks/02_lda_live.ipynb``, is looked up in the working directory and then in
    the bidlab source checkout; when neither has it (an installed wheel), the demos
    shipped in the package are copied to :func:`demos_dir` (see :func:`install_demos`)
    and the copy there is opened. None when there is no demo to open or the folder cannot
    be written (a note on stderr says why).
    """
    if notebook is not None:
        path = Path(notebook).expanduser()
        if path.is_dir():
            raise IsADirectoryError(
                f"{str(notebook)!r} is a folder, not a notebook: pass the path of a .ipynb "
                "file in it")
        if not path.is_file():
            raise FileNotFoundError(
                f"notebook {str(notebook)!r} not found (looked in {Path.cwd()}): pass the path "
                "of an existing .ipynb file, or no argument for the default demo")
        return path.resolve()
    for base in (Path.cwd(), CHECKOUT_DIR):
        path = base / DEFAULT_NOTEBOOK
        if path.is_file():
            return path.resolve()
    try:
        installed = install_demos()
    except OSError as exc:
        print(f"bidlab lab: cannot copy the demo notebooks to {demos_dir()}: {exc} (set "
              f"${DEMOS_ENV} to a writable folder)", file=sys.stderr)
        return None
    if installed is None:
        return None
    folder, copied = installed
    if copied:
        print(f"bidlab lab: copied the demo notebooks {', '.join(copied)} to {folder}",
              file=sys.stderr)
    path = folder / Path(DEFAULT_NOTEBOOK).name
    return path.resolve() if path.is_file() else None


def free_port(start: int = 8888, tries: int = 50) -> int:
    """The first port from ``start`` that 127.0.0.1 can bind, else one the OS picks."""
    for port in [*range(start, start + tries), 0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError(f"no free TCP port on {HOST}")  # pragma: no cover - port 0 always binds


def check_port_free(port: int) -> int:
    """``port`` when 127.0.0.1 can listen on it now, else OSError naming the port and what to
    do: the server is started with no fallback port (it would print a URL that serves
    nothing), so a port in use is refused before anything starts."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if os.name == "posix":  # as the server binds: a port in TIME_WAIT is free
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as exc:
            raise OSError(f"port {port} on {HOST} is not available ({exc.strerror or exc}): "
                          "another server uses it; choose another --port, or leave --port "
                          "out for the first free one from 8888") from None
    return port


def check_jupyterlab() -> None:
    """ImportError saying how to install JupyterLab when ``python -m jupyterlab`` cannot
    run in this environment (the package, or its ``__main__`` module, is missing); the
    check imports nothing."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("jupyterlab")
    except (ImportError, ValueError):
        spec = None
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    if not any((Path(f) / "__main__.py").is_file() for f in folders):
        raise ImportError(f"JupyterLab is not installed for {sys.executable}: pip install "
                          "'bidlab[viz]' (or jupyterlab)")


def lab_command(notebook: Path | None, port: int, token: str, open_browser: bool,
                root_dir: Path | None = None) -> tuple[list[str], str]:
    """The ``jupyter lab`` command line (without the token) and the URL it will serve the
    notebook at (with it); run the command with :func:`lab_environment`.

    The server root is the working directory when the notebook lies below it, else the
    notebook's folder. The notebook's path and the token are percent-encoded in the URL:
    a ``#``, ``?``, ``%`` or space in a file name would otherwise end the path early (the
    browser then opens another page, and the token after a ``#`` never reaches the
    server).
    """
    root = (root_dir or Path.cwd()).resolve()
    cmd = [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.ip={HOST}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.open_browser={open_browser}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers often run as root; jupyter refuses otherwise
    path = ""
    if notebook is not None:
        if not notebook.is_relative_to(root):
            root = notebook.parent
        path = "tree/" + quote(notebook.relative_to(root).as_posix())
        cmd.append(str(notebook))
    cmd.append(f"--ServerApp.root_dir={root}")
    return cmd, f"http://{HOST}:{port}/lab/{path}?token={quote(token, safe='')}"


def lab_environment(token: str, base: dict[str, str] | None = None,
                    runtime: Path | None = None) -> dict[str, str]:
    """The server's environment: ``base`` (default: this process's) with the token in
    ``JUPYTER_TOKEN``, where jupyter_server reads it (``/proc/<pid>/environ`` is readable
    by the process's own user only, unlike its command line), and ``runtime`` (the
    checked private folder, see :func:`bidlab.lab.access.private_runtime_dir`) in
    ``JUPYTER_RUNTIME_DIR`` when given."""
    env = dict(os.environ if base is None else base)
    env.pop("JUPYTER_TOKEN_FILE", None)
    env["JUPYTER_TOKEN"] = token
    if runtime is not None:
        env[RUNTIME_ENV] = str(runtime)
    return env


def launch(notebook: str | None = None, port: int | None = None, token: str | None = None,
           open_browser: bool = True) -> int:
    """Run JupyterLab on 127.0.0.1 with a token, opening ``notebook``; return its exit code.

    Parameters
    ----------
    notebook
        the notebook to open (default: the LDA demo, see
        :func:`resolve_notebook`).
    port
        TCP port (default: the first free one from 8888).
    token
        the access token (default: ``$JUPYTER_TOKEN`` when set, else a random
        48-hex-digit one).
    open_browser
        open the notebook in the default web browser.

    Raises
    ------
    PermissionError
        the Jupyter runtime folder is not private (see
        :func:`bidlab.lab.access.private_runtime_dir`).
    ValueError
        ``port`` is not a TCP port number (1 to 65535).
    ImportError
        JupyterLab is not installed (:func:`check_jupyterlab`).
    OSError
        ``port`` is in use (:func:`check_port_free`).
    """
    if port is not None:
        check_port(port)
    check_jupyterlab()
    runtime = private_runtime_dir(runtime_dir())
    path = resolve_notebook(notebook)
    if path is None:
        print(f"bidlab lab: no demo notebook to open; opening JupyterLab in {Path.cwd()}",
              file=sys.stderr)
    port = free_port() if port is None else check_port_free(check_port(port))
    token = token or os.environ.get("JUPYTER_TOKEN") or secrets.token_hex(24)
    cmd, url = lab_command(path, port, token, open_browser)
    proc = start_server(cmd, lab_environment(token, runtime=runtime))
    announce(url, token, token_file(runtime, proc.pid, notebook=path is not None))
    in_main = threading.current_thread() is threading.main_thread()
    previous = {}
    if in_main:
        # Ctrl-C reaches the child through the terminal (it asks to confirm); forward
        # SIGTERM so that killing `bidlab lab` stops the server too.
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM,
                                                 lambda *_: proc.terminate())
    try:
        return proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def check_port(port: int) -> int:
    """``port`` when it is a TCP port number (1 to 65535), else ValueError saying so.

    Examples
    --------
    >>> check_port(8888)
    8888
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} is not a TCP port: give a number from 1 to 65535, "
                         "or none for the first free one from 8888")
    return port


def _port(text: str) -> int:
    try:
        return check_port(int(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc) if text.strip().lstrip("-").isdigit()
                                         else f"{text!r} is not a number") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``bidlab lab``'s arguments to ``parser``."""
    parser.add_argument("notebook", nargs="?", default=None,
                        help=f"notebook to open (default: the LDA demo, {DEFAULT_NOTEBOOK}; "
                        f"outside a source checkout, a copy in ~/bidlab-demos or "
                        f"${DEMOS_ENV})")
    parser.add_argument("--port", type=_port, default=None,
                        help="TCP port on 127.0.0.1, 1 to 65535 (default: first free from "
                        "8888)")
    parser.add_argument("--token", default=None,
                        help="access token (default: $JUPYTER_TOKEN, else a random one, "
                        "printed with the URL on a terminal); prefer JUPYTER_TOKEN: a "
                        "command line is visible to every local user")
    parser.add_argument("--no-browser", action="store_true",
                        help="do not open a web browser")


def run(args: argparse.Namespace) -> int:
    """Run ``bidlab lab`` with parsed arguments; return the exit code."""
    if args.token:
        print("bidlab lab: warning: --token is visible to every local user (ps, "
              "/proc/<pid>/cmdline); set the JUPYTER_TOKEN environment variable instead",
              file=sys.stderr)
    try:
        return launch(args.notebook, port=args.port, token=args.token,
                      open_browser=not args.no_browser)
    except (OSError, ImportError, ValueError) as exc:
        print(f"bidlab lab: {exc}", file=sys.stderr)
        return 2
