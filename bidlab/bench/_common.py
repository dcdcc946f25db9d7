"""What every benchmark program shares: the machine it ran on, progress on stderr, targets
as measured, and the one JSON document or readable report on stdout.

A program builds one result dict and hands it to :func:`emit`::

    result = {"benchmark": "cache", "machine": machine(), ...,
              "targets": [target("cached / uncached time", ratio, 0.8, at_most=True)]}
    return emit(result, args.json, print_report)

Every target is ``{"name", "value", "target", "direction", "met"}`` (plus any details),
so a reader of any program's JSON finds the same fields.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["emit", "format_target", "log", "machine", "print_targets", "target"]


def machine(**extra: Any) -> dict[str, Any]:
    """Where the figures were measured: CPU model and count, platform, library versions.

    ``extra`` adds program-specific entries (e.g. the kernel thread count)."""
    import numpy as np
    import scipy

    info: dict[str, Any] = {"cpu": _cpu_model(), "cpus": os.cpu_count(),
                            "platform": platform.platform(),
                            "python": platform.python_version(), "numpy": np.__version__,
                            "scipy": scipy.__version__}
    try:
        import numba

        info["numba"] = numba.__version__
    except ImportError:  # pragma: no cover - numba is a dependency
        pass
    info.update(extra)
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bench_parser(name: str, doc: str | None, quick: str) -> argparse.ArgumentParser:
    """The argument parser of ``python -m bidlab.bench <name>`` with the two options every
    benchmark takes: ``--json`` and ``--quick`` (``quick`` says what it shortens).

    Examples
    --------
    >>> bench_parser("demo", None, quick="fewer rounds").parse_args(["--quick"])
    Namespace(json=False, quick=True)
    """
    parser = argparse.ArgumentParser(prog=f"python -m bidlab.bench {name}", description=doc)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quick", action="store_true", help=quick)
    return parser


def ran(rows: Iterable[dict[str, Any]], label: Callable[[dict[str, Any]], str] = lambda r: ""
        ) -> Iterator[dict[str, Any]]:
    """The result rows that ran; each skipped one (a ``"skipped"`` key, the reason) is
    printed instead as ``  <label(row)>skipped: <reason>``.

    Examples
    --------
    >>> [r["n"] for r in ran([{"n": 1}, {"skipped": "no peer"}])]
      skipped: no peer
    [1]
    """
    for r in rows:
        if "skipped" in r:
            print(f"  {label(r)}skipped: {r['skipped']}")
        else:
            yield r


def require_gpu(parser: argparse.ArgumentParser, wanted: bool) -> None:
    """Stop with ``parser.error`` (exit status 2) when ``--gpu`` was asked for and no CUDA
    device is usable, saying what it needs."""
    from bidlab import backend

    if wanted and not backend.gpu_available():
        parser.error("--gpu needs CuPy and a CUDA device "
                     "(pip install 'bidlab[gpu]' on a machine with an NVIDIA GPU)")


def available(module: str) -> Any:
    """The module, or None when it is not installed (or blocked in ``sys.modules``): a peer
    that is absent is left out of a comparison, with a message."""
    try:
        return __import__(module)
    except ImportError:
        return None


def log(msg: str) -> None:
    """A progress line on stderr (stdout stays clean for ``--json``)."""
    print(msg, file=sys.stderr, flush=True)


def target(name: str, value: float | None, limit: float, at_most: bool = False,
           **details: Any) -> dict[str, Any]:
    """One target as measured: met when ``value >= limit`` (or ``<=`` with ``at_most``).

    A ``value`` of None (not reached, not measured) or NaN does not meet the target.
    ``details`` are kept beside the figures (e.g. the peer's time)."""
    measured = value is not None and not (isinstance(value, float) and math.isnan(value))
    met = measured and (value <= limit if at_most else value >= limit)
    return {"name": name, "value": value, "target": limit,
            "direction": "at most" if at_most else "at least", "met": bool(met), **details}


def format_target(t: dict[str, Any]) -> str:
    """``MET    name: 0.97 (target >= 0.95)`` for one :func:`target` entry."""
    flag = "MET   " if t["met"] else "MISSED"
    value = "not reached" if t["value"] is None else f"{t['value']:.4g}"
    sign = "<=" if t.get("direction") == "at most" else ">="
    return f"{flag} {t['name']}: {value} (target {sign} {t['target']:g})"


def print_targets(targets: Iterable[dict[str, Any]], indent: str = "  ") -> None:
    """Print each target on its own line (see :func:`format_target`)."""
    for t in targets:
        print(indent + format_target(t))


def print_corpora(corpora: Iterable[dict[str, Any]], header: Callable[[dict[str, Any]], str],
                  rows: str, row: Callable[[dict[str, Any]], str]) -> None:
    """Print per-corpus results: a corpus skipped, or its ``header`` line, one ``row``
    line per entry of its ``rows`` list, then its targets."""
    for c in corpora:
        if "skipped" in c:
            print(f"{c['corpus']}: skipped ({c['skipped']})")
            continue
        print(f"\n{c['corpus']}: {header(c)}")
        for r in c[rows]:
            print(row(r))
        print_targets(c["targets"])


def _plain(x: Any) -> Any:
    """JSON for numpy scalars and arrays and anything else (as text)."""
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        return x.item()
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def emit(result: dict[str, Any], as_json: bool,
         report: Callable[[dict[str, Any]], None]) -> int:
    """Print ``result`` as one JSON document (``--json``) or through ``report``; return 0."""
    if as_json:
        print(json.dumps(result, indent=1, default=_plain))
    else:
        report(result)
    return 0
