"""``python -m bidlab.bench <name> [--json] [args...]``: run one benchmark program by name.

Every argument after the name is passed through untouched to the benchmark's
``main(argv)``, whose return value becomes the exit status. An unknown name, or a benchmark
whose module is missing from this checkout or cannot be imported, exits with status 2 and a
message listing the valid names.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from bidlab.bench import BENCHMARKS


def _usage() -> str:
    width = max(len(name) for name in BENCHMARKS)
    lines = ["usage: python -m bidlab.bench <name> [--json] [args...]", "", "benchmarks:"]
    lines += [f"  {name:<{width}}  {what}" for name, what in BENCHMARKS.items()]
    lines += ["", "`python -m bidlab.bench <name> --help` lists a benchmark's own options."]
    return "\n".join(lines)


def load(name: str) -> Callable[[list[str] | None], int]:
    """The ``main`` of benchmark ``name``; a clear ``LookupError`` when it cannot be run."""
    valid = ", ".join(BENCHMARKS)
    if name not in BENCHMARKS:
        raise LookupError(f"unknown benchmark {name!r}; valid names: {valid}")
    module_name = f"bidlab.bench.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise LookupError(
                f"benchmark {name!r} is not available in this installation (no module "
                f"{module_name}); valid names: {valid}") from None
        raise LookupError(
            f"benchmark {name!r} cannot be imported: {exc} (a missing optional dependency? "
            "see pyproject.toml's extras)") from None
    entry = getattr(module, "main", None)
    if not callable(entry):
        raise LookupError(f"benchmark module {module_name} has no main(argv) entry point")
    return entry


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``argv`` (default ``sys.argv[1:]``) = ``[name, *args]`` to the benchmark."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    try:
        entry = load(args[0])
    except LookupError as exc:
        print(f"python -m bidlab.bench: {exc}", file=sys.stderr)
        return 2
    status = entry(args[1:])
    return int(status or 0)


if __name__ == "__main__":
    raise SystemExit(main())
