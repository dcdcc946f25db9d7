"""Flat option values: one merged, validated, thread-safe set per learner.

A learner merges its components' :class:`~bidlab.learn.option_row.Option` tables (the
learner itself, its model, updater and mixins) into one flat :class:`Options` set, which
is what ``learner.opts`` is::

    learner.opts.lrate = 0.05          # validated here, in the caller's thread
    learner.set(lrate=0.05, l2=1e-4)   # same, several at once (all or nothing)
    print(learner.opts.what())         # one line per option: name, value, doc

Validation happens at once in the thread that sets the value, so a bad value raises
there (:class:`~bidlab.learn.option_row.OptionError`, the rows' one message shape).
A valid change is queued; the training thread takes the queued changes at the next
minibatch boundary (:meth:`Options.take_changes`) and the ``version`` counter tells which
set of values a minibatch used. :class:`Configurable` is the base of every component: it
declares ``OPTIONS`` and reads its values from the learner's set.

:class:`Option`, :class:`OptionError` and :func:`validate_params` (declared in
:mod:`bidlab.learn.option_row`) are importable from here too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bidlab.learn.option_attrs import mirror
from bidlab.learn.option_row import Option, OptionError, show_value, validate_params
from bidlab.learn.persistable import persistable

__all__ = ["Option", "Options", "OptionError", "Configurable", "validate_params"]


@dataclass
class Change:
    """One accepted ``set``: the new version number and the values it changed."""

    version: int
    values: dict[str, Any] = field(default_factory=dict)


def _same(a: Any, b: Any) -> bool:
    """Whether two option values are equal (vectors elementwise)."""
    if isinstance(a, tuple | list) or isinstance(b, tuple | list):
        return isinstance(a, tuple | list) and isinstance(b, tuple | list) and \
            list(a) == list(b)
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # an array's elementwise answer
        return False


class Options:
    """A flat, validated, thread-safe set of option values over one or more tables.

    Attribute access reads (``opts.lrate``) and writes (``opts.lrate = 0.1``); writing is
    :meth:`set` with one value. ``version`` grows by one per accepted :meth:`set` call.
    """

    def __init__(self, specs: Iterable[Option] = ()) -> None:
        object.__setattr__(self, "_specs", {})
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_pending", {})
        object.__setattr__(self, "_version", 0)
        object.__setattr__(self, "_running", False)
        object.__setattr__(self, "_built", False)
        object.__setattr__(self, "_vector_lengths", None)
        object.__setattr__(self, "_validators", [])
        object.__setattr__(self, "_history", [])
        object.__setattr__(self, "_base", {})  # values before the oldest kept change
        for spec in specs:
            self.declare(spec)

    # -- pickling -------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """Values, tables and history; not the lock nor cross-option validators (closures
        of the learner that added them; a new learner adds its own)."""
        state = {k: v for k, v in self.__dict__.items()
                 if k.startswith("_") and k not in ("_lock", "_validators")}
        state["_running"] = False
        state["_pending"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_validators", [])
        mirror(self, self._values)

    # -- declaring ------------------------------------------------------------------------
    def declare(self, spec: Option, value: Any = None, has_value: bool = False) -> None:
        """Add one option (its default, or ``value`` when ``has_value``)."""
        old = self._specs.get(spec.name)
        if old is not None and (old.type, old.vector) != (spec.type, spec.vector):
            raise OptionError(
                f"option {spec.name!r} is declared by both {old.owner} and {spec.owner} with "
                "different types: rename one of them"
            )
        self._specs[spec.name] = spec
        self._values[spec.name] = spec.check(value) if has_value else (
            spec.check(spec.default) if spec.default is not None or not spec.none_ok else None)
        self._base[spec.name] = self._values[spec.name]
        mirror(self, (spec.name,))  # read as an attribute from now on

    def add_validator(self, fn: Callable[[dict[str, Any]], None]) -> None:
        """Register a cross-option check, called with the would-be values after a set."""
        self._validators.append(fn)

    @property
    def specs(self) -> dict[str, Option]:
        """name -> :class:`Option` (read-only view; do not mutate)."""
        return self._specs

    @property
    def version(self) -> int:
        """How many accepted :meth:`set` calls so far."""
        return self._version

    # -- reading --------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(self._unknown(name))

    def get(self, name: str) -> Any:
        """The current value of ``name``."""
        return getattr(self, name)

    def as_dict(self) -> dict[str, Any]:
        """A copy of every value, by name."""
        with self._lock:
            return dict(self._values)

    def __contains__(self, name: str) -> bool:
        return name in self._specs

    def __iter__(self):
        return iter(list(self._specs))

    def _unknown(self, name: str) -> str:
        import difflib

        near = difflib.get_close_matches(name, list(self._specs), n=3)
        hint = f" Did you mean {', '.join(repr(n) for n in near)}?" if near else ""
        return (f"unknown option {name!r}.{hint} The options are listed by opts.what() "
                f"(known: {', '.join(sorted(self._specs))}).")

    # -- writing --------------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        self.set(**{name: value})

    def set(self, **values: Any) -> int:
        """Validate and set several options at once (all or nothing); return the new version.

        While the owning learner runs, only ``live`` options may change, and the change
        reaches the training thread at its next minibatch boundary. Once the model is
        built, the model's and its updater's other options keep their values (a new value
        is refused: the matrices, start or seed were made with the old one).
        """
        if not values:
            return self._version
        checked = self._checked(values)
        with self._lock:
            self._validate(checked)
            self._values.update(checked)
            mirror(self, checked)
            object.__setattr__(self, "_version", self._version + 1)
            self._pending.update(checked)
            self._history.append(Change(self._version, dict(checked)))
            if len(self._history) > 1000:
                self._base.update(self._history.pop(0).values)
            return self._version

    def check(self, **values: Any) -> dict[str, Any]:
        """What :meth:`set` would do with ``values`` short of doing it: raise the
        :class:`OptionError` (or validator's error) it would raise, else return the
        checked values. Nothing changes."""
        checked = self._checked(values)
        with self._lock:
            self._validate(checked)
        return checked

    def _validate(self, checked: dict[str, Any]) -> None:
        """The cross-option validators on the values with ``checked`` set (lock held)."""
        trial = dict(self._values)
        trial.update(checked)
        for fn in self._validators:
            fn(trial)

    def _checked(self, values: dict[str, Any]) -> dict[str, Any]:
        """Each value checked against its row and the learner's state."""
        checked = {}
        for name, value in values.items():
            spec = self._specs.get(name)
            if spec is None:
                raise OptionError(self._unknown(name))
            if self._running and not spec.live and spec.owner == "Learner":
                raise OptionError(
                    f"The {name!r} parameter of {spec.owner or 'this learner'} cannot change "
                    "while training runs (it is not live): stop() the learner, set it, and "
                    "start() again."
                )
            checked[name] = spec.check(value, self._vector_lengths if spec.vector else None)
            if (not spec.live and spec.owner != "Learner"
                    and (self._running or getattr(self, "_built", False))
                    and not _same(checked[name], self._values.get(name))):
                raise OptionError(
                    f"The {name!r} parameter of {spec.owner} is fixed once the model is "
                    f"built (it is {self._values.get(name)!r}; the model's matrices, start "
                    f"or seed were made with it): make a new learner with the new value "
                    "(for an estimator: set_params, then fit, or learner again)"
                )
        return checked

    def take_changes(self) -> tuple[int, dict[str, Any]]:
        """(version, values changed since the last call): the training thread's side."""
        with self._lock:
            changes = self._pending
            object.__setattr__(self, "_pending", {})
            return self._version, changes

    def history(self) -> list[Change]:
        """The last 1000 accepted changes, oldest first."""
        with self._lock:
            return list(self._history)

    def value_at(self, name: str, version: int) -> Any:
        """The value ``name`` had at option-set ``version`` (from the change history)."""
        with self._lock:
            if name not in self._specs:
                raise OptionError(self._unknown(name))
            value = self._base[name]
            for ch in self._history:
                if ch.version > version:
                    break
                if name in ch.values:
                    value = ch.values[name]
            return value

    def set_built(self, built: bool) -> None:
        """Called by the learner once its model is built: from then on the non-live
        options of the model and its updater refuse a new value (stopped or not)."""
        object.__setattr__(self, "_built", bool(built))

    def set_running(self, running: bool) -> None:
        """Called by the learner: while running, non-live options refuse changes."""
        object.__setattr__(self, "_running", bool(running))

    def set_vector_lengths(self, lengths: set[int] | None) -> None:
        """Called by the learner once the model has its shapes (for vector checks)."""
        object.__setattr__(self, "_vector_lengths", None if lengths is None else set(lengths))

    def restore(self, values: dict[str, Any]) -> None:
        """Set values read from a checkpoint (known names only; each is validated)."""
        known = {k: v for k, v in values.items() if k in self._specs}
        known = {k: (list(v) if isinstance(v, list) else v) for k, v in known.items()}
        running, built = self._running, getattr(self, "_built", False)
        object.__setattr__(self, "_running", False)
        object.__setattr__(self, "_built", False)
        try:
            self.set(**known)
        finally:
            object.__setattr__(self, "_running", running)
            object.__setattr__(self, "_built", built)

    # -- printing -------------------------------------------------------------------------
    def what(self) -> str:
        """Every option on one line: name, value, owner, live or fixed, and its doc."""
        width = max((len(n) for n in self._specs), default=0)
        lines = []
        for name, spec in self._specs.items():
            value = self._values[name]
            live = "live " if spec.live else "fixed"
            shown = show_value(value)
            lines.append(f"{name:<{width}} = {shown:<12} [{spec.owner}, {live}] {spec.doc}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={show_value(v)}" for k, v in self._values.items())
        return f"Options({inner})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(self.what())


class Configurable:
    """Base of every learner component: declares ``OPTIONS`` and takes their values.

    A subclass lists its options in the class attribute ``OPTIONS`` (a tuple of
    :class:`Option`); the options of its base classes are inherited. Keyword arguments
    to ``__init__`` set option values (validated at once). When the component joins a
    learner, ``self.opts`` becomes the learner's merged :class:`Options`, so the component
    always reads the live value with ``self.opts.<name>``.
    """

    OPTIONS: Sequence[Option] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """bidlab's own components may be saved with :func:`bidlab.learn.persist.save_object`."""
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("bidlab."):
            persistable(cls)

    def __init__(self, **options: Any) -> None:
        self.opts = Options(self.option_table())
        if options:
            self.opts.set(**options)
        self._given = dict(options)

    def set(self, **options: Any) -> int:
        """Validate and set options (all or nothing); return the option-set version."""
        return self.opts.set(**options)

    @classmethod
    def option_table(cls) -> list[Option]:
        """This class's options with their owner filled in, base classes' first."""
        seen: dict[str, Option] = {}
        for klass in reversed(cls.__mro__):
            for spec in klass.__dict__.get("OPTIONS", ()):
                seen[spec.name] = Option(**{**spec.__dict__, "owner": cls.__name__})
        return list(seen.values())

    def attach(self, opts: Options) -> None:
        """Read options from the learner's merged set from now on."""
        self.opts = opts

    def detach(self) -> None:
        """Keep an option set of this component's own options again (their current values).

        A learner attaches its components to its merged set; once training is over, a
        fitted estimator's model and updater keep only their own options, not the finished
        learner's (``checkpoint``, ``n_passes``, ``max_steps``): a new learner takes only
        those in any case.
        """
        own = Options()
        cur = self.opts
        for spec in self.option_table():
            own.declare(spec, cur.get(spec.name) if spec.name in cur else spec.default,
                        has_value=spec.name in cur)
        self.opts = own
