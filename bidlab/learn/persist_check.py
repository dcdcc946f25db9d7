"""What a loaded object's state may hold, checked as a whole before the object is built.

:func:`bidlab.learn.persist.load_object` calls :func:`check_state` for every object of a
registered class with the state read from the file (its parts already rebuilt), before
any attribute is set. The rules are the same for every class; a class declares only what
is its own:

* **names** -- identifiers that shadow nothing the class defines except plain data: never a
  method, property or other descriptor, a nested class, a dunder or an ``UPPER_CASE``
  constant (``PARAMS``, ``TRANSIENT``, ...);
* **never loaded** -- a live :class:`~bidlab.learn.Learner` is not saved in files (its
  thread, locks and state are its own run's): a file naming one is refused, so a loaded
  learner never claims to be running (a learner reads a checkpoint with ``Learner.load``);
* **parameters** -- an estimator's constructor parameters, every one present, pass its
  ``PARAMS`` table (the checks ``fit`` makes); a component's option values pass its
  ``OPTIONS`` table (the checks ``learner.set`` makes), whatever tables the file carries;
* **option sets** -- a component's ``opts`` is an option set (or None);
* ``FLOAT_STATE`` -- attributes holding (lists of) bidlab matrices (``Mat`` / ``SMat``) that
  must be float32 or float64 (a model's ``modelmats`` and ``updatemats``);
* ``STATE_SHAPES`` -- ``{path: dims}``: the matrix (or list) at ``path`` (dotted attribute
  names, list indices and table keys, e.g. ``"model_.modelmats.0"``,
  ``"model_.updatemats.0.num"``) has ``len(dims)`` dimensions; a
  dim that is a number, or names a path holding a whole number (``"k"``, ``"opts.k"``),
  must equal it; any other name (a path that is missing or holds no whole number) must
  take the same size in every matrix that names it; a value of the wrong kind on the way
  (a number where ``model_`` holds an object, an array where a list goes) is refused;
* ``FINITE_STATE`` / ``NONNEGATIVE_STATE`` -- paths (as in ``STATE_SHAPES``) of matrices,
  arrays or lists of them whose numbers must be finite (a model's weights: NaN would load
  and predict nonsense), or finite and >= 0 (NMF's components, PageRank's scores);
* ``COUNT_STATE`` -- paths of counters (passes, iterations, users): when present, whole
  numbers from 0 to ``2**53 - 1`` (a count a float still holds exactly);
* ``FITTED_STATE`` -- paths a fitted estimator holds (present and not None whenever its
  ``model_`` is): the updater that goes on training, the data it filters by;
* ``STATE_KINDS`` -- ``{name: class}``: the attribute, when present and not None, is an
  instance of that class (an estimator's fitted ``model_`` is a bidlab ``Model``, not a
  number or a list a crafted file put there);
* ``REQUIRED_STATE`` -- attributes every saved object of the class holds (a model's
  ``modelmats``, empty before it is built): a file without one is refused;
* ``check_loaded`` -- a classmethod ``check_loaded(state)`` for the rules only the class
  knows (a Bayesian network's tables sum to 1 and its parents form no cycle): it raises a
  ``ValueError`` saying what is wrong, with the attribute at fault as its ``field`` when
  it knows it.

A failure raises :class:`StateError` (a ``ValueError``) naming the field;
``load_object`` reports it as a :class:`~bidlab.learn.checkpoint.CheckpointError`.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from bidlab.learn.options import Option, Options
from bidlab.mat import Mat, SMat

__all__ = ["StateError", "check_state", "NEVER_LOADED"]

#: classes (``module.qualname``) whose objects a file may not hold, and why
NEVER_LOADED = {
    "bidlab.learn.learner.Learner": "a live Learner is not saved in files (its thread, locks "
    "and run state belong to one process); restore a learner from its checkpoint with "
    "Learner.load(path)",
}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_MISSING = object()


class StateError(ValueError):
    """A loaded object's state contradicts its class or itself."""


def check_state(cls: type, state: Any, where: str) -> None:
    """Check ``state`` (what ``cls.__setstate__`` or ``__dict__`` would receive) against
    ``cls``; ``where`` names the object in messages (``LDA.model_``)."""
    for klass in cls.__mro__:
        why = NEVER_LOADED.get(f"{klass.__module__}.{klass.__qualname__}")
        if why is not None:
            raise StateError(f"{where or cls.__name__}: {why}")
    if not isinstance(state, dict):
        raise StateError(f"{where or cls.__name__}: the state of a {cls.__name__} must be a "
                         f"table of attributes, not {type(state).__name__}")
    at = f"{where}." if where else ""
    for name in state:
        _check_name(cls, name, at)
    _check_params(cls, state, at)
    _check_options(cls, state, at)
    for name in _declared(cls, "REQUIRED_STATE"):
        if name not in state:
            raise StateError(f"{at}{name}: missing; every saved {cls.__name__} holds it")
    for name, kind in _declared(cls, "STATE_KINDS"):
        value = state.get(name)
        if value is not None and not isinstance(value, kind):
            raise StateError(f"{at}{name}: a {type(value).__name__}, where a saved "
                             f"{cls.__name__} holds a {kind.__name__}")
    for name in _declared(cls, "FLOAT_STATE"):
        _check_floats(state.get(name), f"{at}{name}")
    _check_fitted(cls, state, at)
    _check_shapes(cls, state, at)
    _check_values(cls, state, at)
    if any(isinstance(vars(k).get("check_loaded"), classmethod) for k in cls.__mro__):
        try:
            cls.check_loaded(state)
        except ValueError as exc:
            field = getattr(exc, "field", None)
            name = f"{at}{field}" if isinstance(field, str) else where or cls.__name__
            raise StateError(f"{name}: {exc}") from None


def _declared(cls: type, attr: str) -> list[Any]:
    """A per-class declaration merged over the class's bases (base classes first)."""
    out: list[Any] = []
    for klass in reversed(cls.__mro__):
        decl = vars(klass).get(attr)
        if isinstance(decl, dict):
            out += list(decl.items())
        elif decl:
            out += list(decl)
    return out


def _check_name(cls: type, name: Any, at: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
        raise StateError(f"{at}{name!r:.60}: not an attribute name a {cls.__name__} has")
    for klass in cls.__mro__:
        attr = vars(klass).get(name, _MISSING)
        if attr is _MISSING:
            continue
        if name.isupper():
            what = "its class constant"
        elif isinstance(attr, (type, property)) or callable(attr) or hasattr(type(attr),
                                                                             "__get__"):
            what = "a method or property of the class"
        else:
            return  # a plain class-level default the instance may override
        raise StateError(f"{at}{name}: would shadow {what} {klass.__name__}.{name}; "
                         f"a saved {cls.__name__} never holds such an attribute")


def _check_params(cls: type, state: dict[str, Any], at: str) -> None:
    table = getattr(cls, "PARAMS", None)
    if not table:
        return
    for spec in table:
        if spec.name not in state:
            raise StateError(f"{at}{spec.name}: missing; every parameter of {cls.__name__} "
                             "is saved with it")
        named = Option(**{**spec.__dict__, "owner": cls.__name__})
        try:
            named.check(state[spec.name])
        except ValueError as exc:
            raise StateError(f"{at}{spec.name}: {exc}") from None


def _check_options(cls: type, state: dict[str, Any], at: str) -> None:
    table = getattr(cls, "option_table", None)
    opts = state.get("opts")
    if table is None or opts is None:
        return
    if not isinstance(opts, Options):
        raise StateError(f"{at}opts: a {type(opts).__name__}, not an option set")
    values = vars(opts).get("_values")
    if not isinstance(values, dict):
        raise StateError(f"{at}opts: an option set without values")
    for spec in table():
        if spec.name in values:
            try:
                spec.check(values[spec.name])
            except ValueError as exc:
                raise StateError(f"{at}opts.{spec.name}: {exc}") from None


def _check_floats(value: Any, field: str) -> None:
    if value is None:
        return
    items = list(enumerate(value)) if isinstance(value, (list, tuple)) else [(None, value)]
    for i, m in items:
        name = field if i is None else f"{field}[{i}]"
        if isinstance(m, dict):  # an update given as named statistics (Updater.STATS)
            for key, stat in m.items():
                _check_floats(stat, f"{name}.{key}")
            continue
        if not isinstance(m, (Mat, SMat)):
            raise StateError(f"{name}: a {type(m).__name__}, not a bidlab matrix (Mat)")
        dtype = m.dtype
        if np.dtype(dtype) not in _FLOATS:
            raise StateError(
                f"{name}: a matrix of dtype {np.dtype(dtype).name}; bidlab's model matrices "
                "are float32 or float64: convert them (e.g. m.astype(np.float32)) and save "
                "again")


def _resolve(state: dict[str, Any], path: str, at: str | None = None) -> Any:
    """The value at a dotted ``path`` (attribute names, list indices), or _MISSING.

    With ``at`` (the prefix naming the object in messages) a value of the wrong kind on
    the way -- a number where the path goes on to a list index or an attribute -- raises
    :class:`StateError` instead."""
    head, *rest = path.split(".")
    value = state.get(head, _MISSING)
    walked = head
    for part in rest:
        if value is _MISSING or value is None:
            return _MISSING
        if part.isdigit():
            i = int(part)
            ok = isinstance(value, (list, tuple))
            found = value[i] if ok and i < len(value) else _MISSING
        elif isinstance(value, Options):
            ok, found = True, vars(value).get("_values", {}).get(part, _MISSING)
        elif isinstance(value, dict):  # named statistics (an update's "num", "gram")
            ok, found = True, value.get(part, _MISSING)
        else:
            ok = hasattr(value, "__dict__") and not isinstance(value, (Mat, SMat))
            found = vars(value).get(part, _MISSING) if ok else _MISSING
        if not ok and at is not None:
            want = "a list" if part.isdigit() else "an object"
            raise StateError(f"{at}{walked}: a {type(value).__name__}, where {want} "
                             f"holding {path} belongs")
        value = found
        walked = f"{walked}.{part}"
    return value


def _shape(value: Any, field: str) -> tuple[int, ...]:
    shape = getattr(value, "shape", None)
    if shape is None and isinstance(value, (list, tuple)):
        shape = (len(value),)
    if shape is None:
        raise StateError(f"{field}: a {type(value).__name__}, not a matrix")
    return tuple(int(n) for n in shape)


def _check_shapes(cls: type, state: dict[str, Any], at: str) -> None:
    bound: dict[str, tuple[int, str]] = {}  # free dim name -> (size, the field that set it)
    for path, dims in _declared(cls, "STATE_SHAPES"):
        value = _resolve(state, path, at)
        if value is _MISSING or value is None:
            continue  # not fitted yet
        field = f"{at}{path}"
        shape = _shape(value, field)
        if len(shape) != len(dims):
            raise StateError(f"{field}: has shape {shape}, expected {len(dims)} dimensions "
                             f"({', '.join(map(str, dims))})")
        for size, dim in zip(shape, dims, strict=True):
            fixed = dim if isinstance(dim, int) else _resolve(state, dim)
            if isinstance(fixed, numbers.Integral) and not isinstance(fixed, bool):
                if size != fixed:
                    named = f"{at}{dim}" if isinstance(dim, str) else "it"
                    raise StateError(f"{field}: has shape {shape}, but {named} = {fixed}; "
                                     "the file contradicts itself")
            elif dim in bound and bound[dim][0] != size:
                raise StateError(f"{field}: has shape {shape}, but {bound[dim][1]} has "
                                 f"{dim} = {bound[dim][0]}; the file contradicts itself")
            else:
                bound.setdefault(dim, (size, field))


def _numbers(value: Any, field: str) -> np.ndarray:
    """The numbers a matrix or array holds (a sparse matrix's stored entries)."""
    if isinstance(value, (Mat, SMat)):
        value = value.numpy()
    if hasattr(value, "tocsr") and hasattr(value, "data"):
        value = value.data
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = np.asarray(value, dtype=np.float64)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        raise StateError(f"{field}: a {type(value).__name__}"
                         f"{' of dtype ' + str(value.dtype) if hasattr(value, 'dtype') else ''}"
                         ", where a matrix of numbers belongs")
    return value


def _check_fitted(cls: type, state: dict[str, Any], at: str) -> None:
    """``FITTED_STATE`` (once fitted) and ``COUNT_STATE``."""
    if state.get("model_") is not None:
        for path in _declared(cls, "FITTED_STATE"):
            value = _resolve(state, path, at)
            if value is _MISSING or value is None:
                raise StateError(f"{at}{path}: missing, which every fitted {cls.__name__} "
                                 "holds; the file is damaged: fit it again")
    for path in _declared(cls, "COUNT_STATE"):
        value = _resolve(state, path, at)
        if value is _MISSING:
            continue
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) \
                or not 0 <= value < 2**53:
            raise StateError(f"{at}{path}: {value!r:.40} where a count (a whole number "
                             f"from 0 to 2**53 - 1) belongs; the file is corrupt: fit it "
                             "again")


def _check_values(cls: type, state: dict[str, Any], at: str) -> None:
    for decl, nonneg in (("FINITE_STATE", False), ("NONNEGATIVE_STATE", True)):
        for path in _declared(cls, decl):
            value = _resolve(state, path, at)
            if value is _MISSING or value is None:
                continue  # not fitted yet
            items = (list(enumerate(value)) if isinstance(value, (list, tuple))
                     else [(None, value)])
            for i, m in items:
                field = f"{at}{path}" if i is None else f"{at}{path}[{i}]"
                a = _numbers(m, field)
                if a.dtype.kind == "f" and not np.isfinite(a).all():
                    raise StateError(f"{field}: holds NaN or infinity, which a fitted "
                                     f"{cls.__name__} never holds; the file is corrupt (or "
                                     "was saved from a diverged model): fit it again")
                if nonneg and a.size and a.min() < 0:
                    raise StateError(f"{field}: holds negative values (the least is "
                                     f"{a.min():.4g}), where a fitted {cls.__name__}'s are "
                                     ">= 0; the file is corrupt: fit it again")
