"""Where the shared offline data sets live (``../shared/data`` beside a checkout)."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "BIDLAB_SHARED_DATA"
_CHECKOUT_DIR = Path(__file__).resolve().parent.parent.parent


def shared_data_dir() -> Path:
    """The folder holding the shared data sets (uci-kos/, libsvm-a9a/, ...).

    Looked up in order: ``$BIDLAB_SHARED_DATA``; ``shared/data`` beside the source checkout
    (``<checkout>/../shared/data``); ``shared/data`` in the working directory or one of its
    parents. Raises FileNotFoundError, saying how to point at it, when none exists.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"${ENV_VAR} is set to {env!r}, which is not a folder: point it at the folder "
                "that holds uci-kos/, libsvm-a9a/, ... or unset it"
            )
        return path
    candidates = [_CHECKOUT_DIR.parent / "shared" / "data"]
    cwd = Path.cwd()
    candidates += [d / "shared" / "data" for d in (cwd, *cwd.parents)]
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        "shared data sets not found (looked in "
        + ", ".join(str(p) for p in dict.fromkeys(candidates[:3]))
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
