"""Where the shared offline data sets live (``../shared/data`` beside a checkout)."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "BIDLAB_SHARED_DATA"
_CHECKOUT_DIR = Path(__file__).resolve().parent.parent.parent


def shared_data_candidates() -> list[Path]:
    """The folders that may hold the shared data sets, in the order they are tried.

    ``$BIDLAB_SHARED_DATA`` when set (then only that); else ``shared/data`` beside the
    source checkout (``<checkout>/../shared/data``), then ``shared/data`` in the working
    directory or one of its parents.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return [Path(env).expanduser()]
    cwd = Path.cwd()
    found = [_CHECKOUT_DIR.parent / "shared" / "data"]
    found += [d / "shared" / "data" for d in (cwd, *cwd.parents)]
    return list(dict.fromkeys(found))


def find_shared_data_dir() -> Path | None:
    """The first of :func:`shared_data_candidates` that is a folder, or None."""
    return next((p for p in shared_data_candidates() if p.is_dir()), None)


def shared_data_dir() -> Path:
    """The folder holding the shared data sets (uci-kos/, libsvm-a9a/, ...).

    Looked up as :func:`shared_data_candidates` says. Raises FileNotFoundError, saying how
    to point at it, when none exists.
    """
    found = find_shared_data_dir()
    if found is not None:
        return found
    env = os.environ.get(ENV_VAR)
    if env:
        raise FileNotFoundError(
            f"${ENV_VAR} is set to {env!r}, which is not a folder: point it at the folder "
            "that holds uci-kos/, libsvm-a9a/, ... or unset it"
        )
    raise FileNotFoundError(
        "shared data sets not found (looked in "
        + ", ".join(str(p) for p in shared_data_candidates()[:3])
        + f", ...): set ${ENV_VAR} to the folder that holds uci-kos/, libsvm-a9a/, "
        "20newsgroups-bydate/, or pass the path to the loader"
    )


def resolve_shared(shared: str | os.PathLike | None, subfolder: str) -> Path:
    """``<shared>/<subfolder>`` (``shared`` defaults to :func:`shared_data_dir`), checked."""
    base = shared_data_dir() if shared is None else Path(shared)
    folder = base / subfolder
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder} not found: expected the {subfolder!r} data set inside the shared data "
            f"folder {base} (set ${ENV_VAR} or pass the folder that holds {subfolder}/)"
        )
    return folder
