"""The estimators take their data in memory: a :class:`~bidlab.learn.DataSource` given to
``fit``, ``learner`` and the other training methods is refused with a message that names
what trains on one (the family's model under a :class:`~bidlab.learn.Learner`), instead of
failing deep inside the estimator's input conversion."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from bidlab.learn.datasource import DataSource
from bidlab.learn.model import Model

__all__ = ["family_models", "refuse_source_input", "refusing_sources"]


def family_models(cls: type) -> list[str]:
    """The model classes an estimator class trains (their qualified names): the concrete
    :class:`~bidlab.learn.Model` subclasses its own modules use.

    Examples
    --------
    >>> from bidlab.models import NMF
    >>> family_models(NMF)
    ['bidlab.models.nmf.model.NMFModel']
    """
    found: set[type] = set()
    for part in cls.__mro__:
        module = sys.modules.get(part.__module__)
        if module is None or not part.__module__.startswith("bidlab.models."):
            continue
        found.update(v for v in vars(module).values()
                     if inspect.isclass(v) and issubclass(v, Model) and v is not Model)
    leaves = [m for m in found if not any(o is not m and issubclass(o, m) for o in found)]
    return sorted(f"{m.__module__}.{m.__name__}" for m in leaves)


def _refuse(est: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for arg in (*args, *kwargs.values()):
        if isinstance(arg, DataSource):
            cls = type(est)
            models = family_models(cls)
            example = models[0].rsplit(".", 1)[1] if models else "a model"
            raise TypeError(
                f"{cls.__name__}.{name}() takes its data in memory (numpy arrays, scipy "
                f"sparse matrices), not a {type(arg).__name__}: read the data into memory, "
                f"or train the family's model on the source with a Learner: "
                f"Learner({example}(...), source)"
                + (f" ({' or '.join(models)})" if models else ""))


def refusing_sources(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` (an estimator's training method), refusing a DataSource argument first."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def passes(self: Any, *args: Any, **kwargs: Any) -> Any:
            _refuse(self, name, args, kwargs)
            yield from fn(self, *args, **kwargs)
        return passes

    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse(self, name, args, kwargs)
        return fn(self, *args, **kwargs)
    return call


def refuse_source_input(est: Any, X: Any) -> None:
    """Refuse a DataSource ``X`` where ``est`` reads its data in memory (``predict``,
    ``transform``, ``score``, ...), with a message naming what to pass, instead of a
    conversion error deep inside the input checks."""
    if isinstance(X, DataSource):
        raise TypeError(
            f"{type(est).__name__} reads X in memory (a numpy array, a scipy sparse matrix "
            f"or a pandas DataFrame), not a {type(X).__name__}: read the source's rows into "
            "memory and pass those (chunk by chunk for a large source)")
