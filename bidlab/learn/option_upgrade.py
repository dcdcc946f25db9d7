"""Options of a component loaded from an earlier version's file, rebuilt under today's
option table (renamed options carried over, new ones at their defaults).

Examples
--------
>>> from bidlab.learn import IncNorm
>>> up = IncNorm()
>>> rebuild_options(up, {})
>>> sorted(up.opts)[:2] == sorted(IncNorm().opts)[:2]
True
"""

from __future__ import annotations

from typing import Any

from bidlab.learn.options import Options

__all__ = ["rebuild_options"]


def rebuild_options(component: Any, renamed: dict[str, str]) -> None:
    """Give a component loaded from an earlier version's file its own option set again:
    the saved values under today's names (``renamed``: earlier name -> today's), each
    option added since at its default. The caller decides that the saved set is an
    earlier one (it holds a renamed name, or lacks an option of today's table)."""
    old = component.opts
    values = {renamed.get(name, name): old.get(name) for name in old}
    own = Options()
    for spec in component.option_table():
        own.declare(spec, values.get(spec.name), has_value=spec.name in values)
    component.opts = own
    given = component.__dict__.get("_given")
    if isinstance(given, dict):
        component._given = {renamed.get(k, k): v for k, v in given.items()}
