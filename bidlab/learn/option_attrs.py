"""Option values as plain instance attributes of :class:`~bidlab.learn.options.Options`.

Why: ``opts.lrate`` used to reach the value through ``__getattr__``, which Python calls
only after the ordinary lookup has failed -- a microsecond or two per read, and a training
loop reads a dozen options a step. :func:`mirror` copies values into the instance's
``__dict__``, where the ordinary lookup finds them; ``__getattr__`` stays the fallback.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["mirror"]


def mirror(opts: Any, names: Iterable[str]) -> None:
    """Copy the values of ``names`` from ``opts._values`` into ``opts``'s attributes. A
    name that a method or property of its class holds (or a private one) is left to
    ``__getattr__``, never shadowed.

    Examples
    --------
    >>> from bidlab.learn.options import Option, Options
    >>> opts = Options([Option("rate", float, 0.1, "a rate")])
    >>> opts.set(rate=0.2)  # set() mirrors what it changed
    1
    >>> vars(opts)["rate"]
    0.2
    """
    attrs, values, cls = opts.__dict__, opts._values, type(opts)
    for name in names:
        if not name.startswith("_") and not hasattr(cls, name):
            attrs[name] = values[name]
