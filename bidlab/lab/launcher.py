"""``bidlab lab [notebook]``: JupyterLab on 127.0.0.1 with a token, opening a notebook.

The server binds to the loopback interface only and always asks for a token (a random
one unless given), so nothing else on the network can reach the kernels. The token never
appears on a command line (which every local user can read from ``ps`` or
``/proc/<pid>/cmdline``): the server gets it through its environment (``JUPYTER_TOKEN``),
which only its own user can read, and the URL with the token is printed to the launcher's
own terminal. The server runs as a child process; Ctrl-C and SIGTERM reach it, and
:func:`launch` returns its exit status.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from bidlab._source_checkout import CHECKOUT_DIR

__all__ = ["DEFAULT_NOTEBOOK", "launch", "lab_command", "lab_environment", "resolve_notebook",
           "add_arguments", "run"]

#: Opened when no notebook is named (looked up in the working directory, then the checkout).
DEFAULT_NOTEBOOK = "notebooks/02_lda_live.ipynb"

HOST = "127.0.0.1"


def resolve_notebook(notebook: str | os.PathLike | None) -> Path | None:
    """The notebook to open as an absolute path, or None to open JupyterLab without one.

    A named notebook must exist (FileNotFoundError otherwise). The default,
    ``notebooks/02_lda_live.ipynb``, is looked up in the working directory and then in
    the bidlab source checkout; when neither has it (an installed wheel), None.
    """
    if notebook is not None:
        path = Path(notebook).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"notebook {str(notebook)!r} not found (looked in {Path.cwd()}): pass the path "
                "of an existing .ipynb file, or no argument for the default demo")
        return path.resolve()
    for base in (Path.cwd(), CHECKOUT_DIR):
        path = base / DEFAULT_NOTEBOOK
        if path.is_file():
            return path.resolve()
    return None


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


def lab_command(notebook: Path | None, port: int, token: str, open_browser: bool,
                root_dir: Path | None = None) -> tuple[list[str], str]:
    """The ``jupyter lab`` command line (without the token) and the URL it will serve the
    notebook at (with it); run the command with :func:`lab_environment`.

    The server root is the working directory when the notebook lies below it, else the
    notebook's folder.
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
        path = "tree/" + notebook.relative_to(root).as_posix()
        cmd.append(str(notebook))
    cmd.append(f"--ServerApp.root_dir={root}")
    return cmd, f"http://{HOST}:{port}/lab/{path}?token={token}"


def lab_environment(token: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ``base`` (default: this process's) with the token in
    ``JUPYTER_TOKEN``, where jupyter_server reads it (``/proc/<pid>/environ`` is readable
    by the process's own user only, unlike its command line)."""
    env = dict(os.environ if base is None else base)
    env.pop("JUPYTER_TOKEN_FILE", None)
    env["JUPYTER_TOKEN"] = token
    return env


def launch(notebook: str | None = None, port: int | None = None, token: str | None = None,
           open_browser: bool = True) -> int:
    """Run JupyterLab on 127.0.0.1 with a token, opening ``notebook``; return its exit code.

    Args:
        notebook: the notebook to open (default ``notebooks/02_lda_live.ipynb`` when found).
        port: TCP port (default: the first free one from 8888).
        token: the access token (default: ``$JUPYTER_TOKEN`` when set, else a random
            48-hex-digit one).
        open_browser: open the notebook in the default web browser.
    """
    path = resolve_notebook(notebook)
    if path is None:
        print(f"bidlab lab: {DEFAULT_NOTEBOOK} not found here; opening JupyterLab in "
              f"{Path.cwd()}", file=sys.stderr)
    port = free_port() if port is None else int(port)
    token = token or os.environ.get("JUPYTER_TOKEN") or secrets.token_hex(24)
    cmd, url = lab_command(path, port, token, open_browser)
    print(f"bidlab lab: {url}", file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, env=lab_environment(token))
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``bidlab lab``'s arguments to ``parser``."""
    parser.add_argument("notebook", nargs="?", default=None,
                        help=f"notebook to open (default: {DEFAULT_NOTEBOOK})")
    parser.add_argument("--port", type=int, default=None,
                        help="TCP port on 127.0.0.1 (default: first free from 8888)")
    parser.add_argument("--token", default=None,
                        help="access token (default: $JUPYTER_TOKEN, else a random one, "
                        "printed with the URL); prefer JUPYTER_TOKEN: a command line is "
                        "visible to every local user")
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
    except FileNotFoundError as exc:
        print(f"bidlab lab: {exc}", file=sys.stderr)
        return 2
