"""The files ``bidlab train`` writes, checked before any data is read: ``--checkpoint`` and
``--save`` must each be a path a regular file can be written to, must not name one file
together, and must not name a file the command reads (``--data``, an estimator's
``--network``), which writing the checkpoint or the model would replace.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from bidlab.learn.save_target import SaveTargetError, check_outputs, same_file

__all__ = ["check_train_outputs"]

OUTPUTS = ("checkpoint", "save")  #: the command's flags that name a file it writes


def check_train_outputs(args: argparse.Namespace, inputs: dict[str, Any] | None = None
                        ) -> None:
    """Raise :class:`~bidlab.learn.save_target.SaveTargetError` (one line naming the flag,
    the path and the fix) when ``--checkpoint`` or ``--save`` cannot be written, name one
    file, or name one of the files read: ``--data`` and ``inputs`` (flag -> the path given
    there, such as ``{"--network": "asia.bif"}``; anything but a path is passed over)."""
    outputs = {f"--{f}": getattr(args, f, None) for f in OUTPUTS}
    check_outputs(outputs)
    read = {"--data": getattr(args, "data", None), **(inputs or {})}
    read = {flag: path for flag, path in read.items()
            if isinstance(path, str | os.PathLike) and os.path.isfile(path)}
    for out_flag, out in outputs.items():
        for in_flag, path in read.items() if out else ():
            if same_file(out, path):
                raise SaveTargetError(
                    f"{out_flag} {out} names the file that {in_flag} reads: writing it would "
                    f"replace that {in_flag[2:]} file; give {out_flag} a path of its own")
