"""The classes whose objects :func:`bidlab.learn.persist.save_object` may save and rebuild.

A module of its own, importing nothing, so that :class:`bidlab.learn.options.Configurable`
can register every bidlab component as it is defined while :mod:`bidlab.learn.persist`
(which imports the options module to save options) is not needed for that.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PERSISTABLE", "ALIASES", "MOVED_MODULES", "UPGRADES", "persistable", "alias",
           "lookup", "upgrade"]

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


#: Modules whose classes moved, old -> new: a saved file names a class by the module it was
#: defined in when the file was written, so files written before a move still load.
MOVED_MODULES: dict[str, str] = {
    "bidlab.models.lda": "bidlab.models.lda.vb",
    "bidlab.models.lda_gibbs": "bidlab.models.lda.gibbs",
    "bidlab.models._lda_base": "bidlab.models.lda.estimator",
    "bidlab.models._lda_core": "bidlab.models.lda.core",
    "bidlab.models._lda_common": "bidlab.models.lda.common",
    "bidlab.models._lda_learn": "bidlab.models.lda.learner",
    "bidlab.models.glm": "bidlab.models.glm.estimator",
    "bidlab.models._glm_model": "bidlab.models.glm.model",
    "bidlab.models._glm_links": "bidlab.models.glm.links",
    "bidlab.models._glm_params": "bidlab.models.glm.params",
    "bidlab.models._glm_sweep": "bidlab.models.glm.sweep",
    "bidlab.models._glm_targets": "bidlab.models.glm.targets",
    "bidlab.models.kmeans": "bidlab.models.kmeans.estimator",
    "bidlab.models._kmeans_model": "bidlab.models.kmeans.model",
    "bidlab.models._kmeans_lloyd": "bidlab.models.kmeans.lloyd",
    "bidlab.models._kmeans_minibatch": "bidlab.models.kmeans.minibatch",
    "bidlab.models._kmeans_init": "bidlab.models.kmeans.seeding",
    "bidlab.models._kmeans_distances": "bidlab.models.kmeans.distances",
    "bidlab.models._kmeans_source": "bidlab.learn.blocks",
}


def alias(old_name: str, cls: type) -> None:
    """Let files that name the registered ``cls`` as ``old_name`` load it (a moved class)."""
    if PERSISTABLE.get(f"{cls.__module__}.{cls.__qualname__}") is not cls:
        raise ValueError(f"{cls.__qualname__} is not registered as persistable")
    ALIASES[old_name] = cls


def lookup(name: str) -> type | None:
    """The registered class a saved file names ``name`` (its current or an earlier name:
    a moved class, :data:`ALIASES`, or a class of a moved module, :data:`MOVED_MODULES`)."""
    cls = PERSISTABLE.get(name) or ALIASES.get(name)
    if cls is not None:
        return cls
    module, _, qualname = name.rpartition(".")
    while module:
        if module in MOVED_MODULES:
            return PERSISTABLE.get(f"{MOVED_MODULES[module]}.{qualname}")
        module, _, head = module.rpartition(".")
        qualname = f"{head}.{qualname}"
    return None


#: class -> ``f(cls, state)``: brings a state written by an earlier version of ``cls`` (or of
#: a subclass) up to date, in place, before it is checked and set; it may return a subclass
#: of ``cls`` to build instead (a class split in two), else None
UPGRADES: dict[type, Any] = {}


def upgrade(cls: type, state: Any) -> type:
    """Apply the :data:`UPGRADES` of ``cls`` and its bases (bases first) to ``state``;
    return the class to build (``cls`` unless an upgrade named a subclass of it)."""
    if not isinstance(state, dict):
        return cls
    built = cls
    for klass in reversed(cls.__mro__):
        fn = UPGRADES.get(klass)
        if fn is not None:
            other = fn(cls, state)
            if isinstance(other, type) and issubclass(other, cls):
                built = other
    return built
