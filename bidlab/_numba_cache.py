"""Where numba keeps bidlab's compiled kernels, so they are compiled once per installation.

Every CPU kernel is declared ``cache=True``: the first process that needs a specialization
compiles it (seconds) and writes it to disk; later processes load it (milliseconds).
``bidlab warmup`` compiles everything the common first fits need ahead of time.

numba picks the folder per source file, in this order: ``NUMBA_CACHE_DIR`` when set, the
``__pycache__`` beside the source when it is writable (a user-owned environment or an
editable install), else ``numba/`` in the user cache folder (``$XDG_CACHE_HOME`` or
``~/.cache``), keyed by the package's path. That covers a read-only ``site-packages``.
When none of them is writable numba refuses to define a cached kernel, which would make
``import bidlab`` fail; :func:`configure` then sets ``NUMBA_CACHE_DIR`` to a per-user
folder in the temporary directory. An explicit ``NUMBA_CACHE_DIR`` is always respected
(numba passes over it when it cannot be written to; when nothing else can be either,
:func:`configure` raises an error that says so).
Importing this module (the second thing :mod:`bidlab` imports) runs :func:`configure`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

__all__ = ["KERNEL_DIRS", "configure", "cache_dir", "fallback_dir"]

_PACKAGE = Path(__file__).resolve().parent
#: the package folders whose modules define cached numba kernels
KERNEL_DIRS = (_PACKAGE / "kern", _PACKAGE / "learn")


def _writable(folder: Path) -> bool:
    """Whether ``folder`` exists or can be made, and a file can be written in it (numba's
    own test for a cache location)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _user_cache_root() -> Path:
    """numba's user-wide cache folder on this platform."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "numba" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "numba"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba"


def fallback_dir() -> Path:
    """The folder used when neither the package nor the user cache folder is writable."""
    uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"bidlab-numba-cache-{uid}"


def configure() -> str | None:
    """Make sure numba has a writable cache folder for bidlab's kernels.

    Returns the ``NUMBA_CACHE_DIR`` this call set, or None when it left numba's own choice
    (an explicit ``NUMBA_CACHE_DIR``, the package's ``__pycache__`` or the user cache
    folder). Must run before the kernel modules are imported. Raises RuntimeError when an
    explicit ``NUMBA_CACHE_DIR`` cannot be written to and neither can numba's other folders.
    """
    explicit = os.environ.get("NUMBA_CACHE_DIR")
    if explicit and _writable(Path(explicit)):
        return None
    if all(_writable(d / "__pycache__") for d in KERNEL_DIRS):
        return None
    try:
        if _writable(_user_cache_root()):
            return None
    except RuntimeError:  # no home folder to expand
        pass
    if explicit:  # numba would fail on the first kernel, naming no folder
        raise RuntimeError(
            f"bidlab: NUMBA_CACHE_DIR={explicit!r} is not a folder that can be written to "
            "(and neither is the package's __pycache__ nor the user cache folder), so numba "
            "cannot cache bidlab's kernels: point NUMBA_CACHE_DIR at a writable folder, or "
            "unset it to use a temporary one")
    folder = fallback_dir()
    if not _writable(folder):
        return None  # nothing writable: numba reports it when a kernel is defined
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    config = sys.modules.get("numba.core.config")
    if config is not None:  # numba already imported: make it read the variable now
        config.reload_config()
    return str(folder)


def cache_dir(dispatcher: object) -> str | None:
    """The folder numba caches a ``cache=True`` dispatcher's machine code in (None when it
    is not cached on disk)."""
    return getattr(getattr(dispatcher, "_cache", None), "cache_path", None)


configure()
