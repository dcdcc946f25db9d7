"""The classes whose objects :func:`bidlab.learn.persist.save_object` may save and rebuild.

A module of its own, importing nothing, so that :class:`bidlab.learn.options.Configurable`
can register every bidlab component as it is defined while :mod:`bidlab.learn.persist`
(which imports the options module to save options) is not needed for that.
"""

from __future__ import annotations

__all__ = ["PERSISTABLE", "persistable"]

#: ``module.qualname`` -> class, for every class a saved file may name.
PERSISTABLE: dict[str, type] = {}


def persistable(cls: type) -> type:
    """Class decorator: objects of ``cls`` may be saved and rebuilt by ``load_object``.

    Registered under ``module.qualname``; only bidlab's own classes should register.
    """
    PERSISTABLE[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls
