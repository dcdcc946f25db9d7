"""The classes whose objects :func:`bidlab.learn.persist.save_object` may save and rebuild.

A module of its own, importing nothing, so that :class:`bidlab.learn.options.Configurable`
can register every bidlab component as it is defined while :mod:`bidlab.learn.persist`
(which imports the options module to save options) is not needed for that.
"""

from __future__ import annotations

__all__ = ["PERSISTABLE", "ALIASES", "persistable", "alias", "lookup"]

#: ``module.qualname`` -> class, for every class a saved file may name.
PERSISTABLE: dict[str, type] = {}

#: A class's earlier ``module.qualname`` (before a module moved) -> the class, so files
#: saved under the earlier name still load.
ALIASES: dict[str, type] = {}


def persistable(cls: type) -> type:
    """Class decorator: objects of ``cls`` may be saved and rebuilt by ``load_object``.

    Registered under ``module.qualname``; only bidlab's own classes should register.
    """
    PERSISTABLE[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


def alias(old_name: str, cls: type) -> None:
    """Let files that name the registered ``cls`` as ``old_name`` load it (a moved class)."""
    if PERSISTABLE.get(f"{cls.__module__}.{cls.__qualname__}") is not cls:
        raise ValueError(f"{cls.__qualname__} is not registered as persistable")
    ALIASES[old_name] = cls


def lookup(name: str) -> type | None:
    """The registered class a saved file names ``name`` (its current or an earlier name)."""
    return PERSISTABLE.get(name) or ALIASES.get(name)
