"""Keeping ``bidlab lab``'s access token private to its user.

Whoever holds the token controls the server's kernels, so it never reaches a place another
local user can read:

* **The runtime folder.** jupyter_server writes the token into its runtime folder
  (``jpserver-<pid>.json`` and the ``jpserver-<pid>-open.html`` /
  ``jpserver-file-to-run-<pid>-open.html`` pages that open the browser). The launcher
  uses that folder only when it is private: a directory owned by this user with no
  permission for group or others (``0700``). A missing folder is created so; any other
  folder (``$JUPYTER_RUNTIME_DIR`` in the shared temporary folder, a folder of another user,
  one that is group- or world-readable or writable) is refused with a message saying how
  to fix it -- the launcher never changes the permissions of a folder it did not create.
* **The server's files.** The server runs with umask ``0o077``, so every file it creates
  (those pages, kernel connection files, and notebooks created from JupyterLab) is readable
  by this user only (``0600``).
* **The printed URL.** The URL with the token is printed only to a terminal. A stream that
  is not one (a log file, a pipe) gets the URL without the token and the private file that
  holds it (``jupyter server list`` shows it too).

Nothing here imports Jupyter at import time.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["RUNTIME_ENV", "SERVER_UMASK", "runtime_dir", "private_runtime_dir",
           "start_server", "token_file", "announce"]

#: The environment variable that names Jupyter's runtime folder.
RUNTIME_ENV = "JUPYTER_RUNTIME_DIR"

#: The server's umask: the files it creates are readable and writable by their owner only.
SERVER_UMASK = 0o077

_POSIX = os.name == "posix" and hasattr(os, "geteuid")


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """The folder the Jupyter server will write its runtime files to: ``$JUPYTER_RUNTIME_DIR``
    from ``env`` (default: this process's environment), else Jupyter's default (usually
    ``~/.local/share/jupyter/runtime``)."""
    env = os.environ if env is None else env
    if env.get(RUNTIME_ENV):
        return Path(env[RUNTIME_ENV]).expanduser()
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError as exc:
        raise ImportError("bidlab lab needs JupyterLab: pip install 'bidlab[viz]' (or "
                          "jupyterlab)") from exc
    return Path(jupyter_runtime_dir())


def _fix(path: Path) -> str:
    return (f"JupyterLab writes its access token there. Use a private folder: `chmod 700 "
            f"{path}` if it is yours alone, or set {RUNTIME_ENV} to a folder only you can "
            f"read (or unset it for Jupyter's default)")


def private_runtime_dir(path: str | os.PathLike) -> Path:
    """``path`` (symbolic links resolved) once it is a private folder; create it (``0700``)
    when it does not exist.

    Raises
    ------
    PermissionError
        the folder belongs to another user, or its group or others have
        any permission on it; the message names the problem and the fix.
    NotADirectoryError
        ``path`` is not a folder.
    """
    path = Path(path).expanduser()
    if not os.path.lexists(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
        if _POSIX and os.stat(path).st_uid == os.geteuid():
            os.chmod(path, 0o700)  # whatever this process's umask left
    real = Path(os.path.realpath(path))
    info = os.stat(real)
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(f"the Jupyter runtime folder {path} is not a folder: set "
                                 f"{RUNTIME_ENV} to a private folder (or unset it)")
    if not _POSIX:
        return real  # no POSIX owner and mode bits to check
    if info.st_uid != os.geteuid():
        raise PermissionError(f"the Jupyter runtime folder {real} belongs to another user "
                              f"(uid {info.st_uid}, you are {os.geteuid()}); " + _fix(real))
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        who = "writable" if mode & 0o022 else "readable"
        raise PermissionError(f"the Jupyter runtime folder {real} is {who} by other users "
                              f"(mode {mode:04o}); " + _fix(real))
    return real


def start_server(cmd: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen:
    """Start the server process with umask :data:`SERVER_UMASK` (on POSIX)."""
    return subprocess.Popen(list(cmd), env=dict(env),
                            umask=SERVER_UMASK if _POSIX else -1)


def token_file(folder: Path, pid: int, notebook: bool) -> Path:
    """The page (in the runtime folder) that opens the server of process ``pid`` with its
    token: on the notebook when one was named, else on JupyterLab."""
    name = f"jpserver-file-to-run-{pid}-open.html" if notebook else f"jpserver-{pid}-open.html"
    return folder / name


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or not a real stream
        return False


def announce(url: str, token: str, where: Path, stream: TextIO | None = None) -> str:
    """Print how to open JupyterLab on ``stream`` (default: stderr); return the line.

    Parameters
    ----------
    url
        the URL, ending in ``?token=<token>``.
    token
        the access token.
    where
        the private file that holds the token (see :func:`token_file`).
    stream
        where to print; the token is included only when it is a terminal.
    """
    stream = sys.stderr if stream is None else stream
    if _is_terminal(stream):
        line = f"bidlab lab: {url}"
    else:
        bare = url.split("?token=", 1)[0]
        if token in bare:  # never print it, even inside an odd notebook path
            bare = "JupyterLab"
        line = (f"bidlab lab: {bare} (the access token is shown on a terminal only: open "
                f"{where}, readable by you only, in a browser once the server is up, or run "
                f"`jupyter server list`)")
    print(line, file=stream, flush=True)
    return line
