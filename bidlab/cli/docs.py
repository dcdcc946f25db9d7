"""``bidlab docs [--out DIR]``: build the documentation site (HTML) with Sphinx.

Needs the ``docs`` extra (``pip install bidlab[docs]``) and a source checkout; see
:mod:`bidlab.docsite`. Exits with status 1 when Sphinx printed warnings (listed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``bidlab docs``'s arguments."""
    parser.add_argument("--out", type=Path, default=Path("bidlab-docs"),
                        help="folder for the HTML site (default: ./bidlab-docs)")


def run(args: argparse.Namespace) -> int:
    """Build the site; 0 when it built without warnings."""
    try:
        import myst_nb  # noqa: F401
        import sphinx  # noqa: F401

        from bidlab.docsite import build
    except ImportError as exc:
        print(f"bidlab docs: {exc.name} is not installed: pip install 'bidlab[docs]'",
              file=sys.stderr)
        return 2
    out = Path(args.out).expanduser()
    try:  # before the sources are written: a file or a folder that cannot be made there
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "it is not a folder" if out.exists() else (exc.strerror or str(exc))
        print(f"bidlab docs: cannot write the site into --out {out}: {why}; choose a folder "
              "(made when missing; files already there are kept, those of the site "
              "replaced)", file=sys.stderr)
        return 2
    try:
        result = build(out)
    except FileNotFoundError as exc:
        print(f"bidlab docs: {exc}", file=sys.stderr)
        return 2
    for line in result.warnings:
        print(line, file=sys.stderr)
    index = (result.out / "index.html").resolve()
    if result.warnings:
        print(f"bidlab docs: built {index} with {len(result.warnings)} warnings",
              file=sys.stderr)
        return 1
    print(f"bidlab docs: built {index}")
    return 0
