"""One declared option: its type, range, default and the one message shape for a bad value.

Every component of a learner (the learner itself, its model, updater and mixins) declares
its options as a tuple of :class:`Option` rows: name, type, range, default, whether it may
change while training runs (``live``) and a line of documentation. :class:`Option.check`
validates one value, :class:`Option.parse` reads one from command-line text, and a bad
value raises :class:`OptionError` with one message shape, e.g.::

    The 'lrate' parameter of Grad must be a float > 0 (or a per-row / per-model-matrix
    vector of such). Got -1 instead.

Estimators declare their constructor parameters with the same rows and check them in
``fit`` with :func:`validate_params`, so a bad value reads the same whether it was given to
``GLM(lrate=-1)`` or ``learner.set(lrate=-1)``. The values themselves live in a learner's
:class:`bidlab.learn.options.Options` set.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Option", "OptionError", "validate_params", "show_value"]


class OptionError(ValueError):
    """An option was unknown, of the wrong type, out of range or not changeable now."""


@dataclass(frozen=True)
class Option:
    """One declared option.

    Attributes
    ----------
    name
        the flat name (``lrate``); unique within a learner.
    type
        ``float``, ``int``, ``bool``, ``str`` or ``"path"`` (a str, kept as given,
        or an ``os.PathLike`` such as ``pathlib.Path``, kept as its str).
    default
        the value used when nobody sets it.
    doc
        one line shown by :meth:`bidlab.learn.options.Options.what` and
        ``bidlab train --help``.
    low, high
        inclusive bounds for numbers (None: unbounded).
    low_open, high_open
        make the matching bound exclusive (``> 0`` rather than ``>= 0``).
    choices
        the allowed values of a ``str`` option.
    live
        True when the option may change while training runs (taking effect at the
        next minibatch boundary); False means it is fixed once training has started.
    vector
        a float option that also takes a vector (one value per row of a model
        matrix, or one value per model matrix): a hyperparameter.
    none_ok
        None is an allowed value (e.g. "no checkpoint").
    test
        a custom check ``test(value) -> bool`` for values no type/range row can
        describe (e.g. "a link name or a list of link names"); with ``text``, the
        allowed values in words. The value is kept as given.
    text
        the allowed values in words for ``test`` (completes "must be ...").
    owner
        the component class that declared it (filled in by
        :class:`bidlab.learn.options.Configurable`).

    Examples
    --------
    >>> from bidlab.learn.option_row import Option
    >>> rate = Option("lrate", float, 0.1, "step size", low=0.0, low_open=True, owner="Grad")
    >>> rate.allowed()
    'a float > 0'
    >>> rate.check(1)
    1.0
    >>> rate.parse("0.5")
    0.5
    """

    name: str
    type: Any
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] | None = None
    live: bool = True
    vector: bool = False
    none_ok: bool = False
    test: Callable[[Any], bool] | None = None
    text: str | None = None
    owner: str = ""

    # -- description ---------------------------------------------------------------------
    def allowed(self) -> str:
        """The allowed values in words, e.g. ``a float > 0`` or ``an int in [1, 1000]``."""
        if self.text is not None:
            return self.text
        if self.choices is not None:
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif self.type is bool:
            text = "a bool (True or False)"
        elif self.type in ("path", str):
            text = "a string"
        else:
            art = "an" if self.type is int else "a"
            text = f"{art} {self.type.__name__}"
            lo, hi = self.low, self.high
            if lo is not None and hi is not None:
                text += f" in {'(' if self.low_open else '['}{_num(lo)}, {_num(hi)}"
                text += ")" if self.high_open else "]"
            elif lo is not None:
                text += f" {'>' if self.low_open else '>='} {_num(lo)}"
            elif hi is not None:
                text += f" {'<' if self.high_open else '<='} {_num(hi)}"
        if self.vector:
            text += " (or a per-row / per-model-matrix vector of such)"
        if self.none_ok:
            text += " or None"
        return text

    def error(self, value: Any, extra: str = "") -> OptionError:
        """The one message shape for a bad value (learner options and estimator
        parameters alike)."""
        owner = self.owner or "this learner"
        return OptionError(
            f"The {self.name!r} parameter of {owner} must be {self.allowed()}{extra}. "
            f"Got {show_value(value)} instead."
        )

    # -- checking -------------------------------------------------------------------------
    def check(self, value: Any, vector_lengths: set[int] | None = None) -> Any:
        """Return ``value`` normalised (ints to float, vectors to tuples) or raise."""
        if self.test is not None:
            if value is None and self.none_ok:
                return None
            try:
                ok = bool(self.test(value))
            except Exception:  # a check that cannot even look at the value: a bad value
                ok = False
            if not ok:
                raise self.error(value)
            return value
        if value is None:
            if self.none_ok:
                return None
            raise self.error(value)
        if self.vector and _is_sequence(value):
            items = list(np.asarray(value, dtype=object).reshape(-1)) if not isinstance(
                value, (list, tuple)) else list(value)
            if len(items) == 0:
                raise self.error(value)
            checked = tuple(self._check_one(v, value) for v in items)
            if len(checked) == 1:
                return checked[0]
            if vector_lengths is not None and len(checked) not in vector_lengths:
                lengths = ", ".join(str(n) for n in sorted(vector_lengths))
                raise self.error(value, f" with a vector length among {lengths} (rows of the "
                                 "model matrices, their row groups, or their number)")
            return checked
        return self._check_one(value, value)

    def _check_one(self, v: Any, whole: Any) -> Any:
        t = self.type
        if t is bool:
            if isinstance(v, (bool, np.bool_)):
                return bool(v)
            raise self.error(whole)
        if t in ("path", str):
            if t == "path" and isinstance(v, os.PathLike):
                v = os.fspath(v)
            if not isinstance(v, str):
                raise self.error(whole)
            if self.choices is not None and v not in self.choices:
                raise self.error(whole)
            return v
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise self.error(whole)
        if t is int:
            if not isinstance(v, numbers.Integral):
                if isinstance(v, float) and v.is_integer():
                    v = int(v)
                else:
                    raise self.error(whole)
            v = int(v)
        else:
            v = float(v)
            if not math.isfinite(v):
                raise self.error(whole)
        lo, hi = self.low, self.high
        if lo is not None and (v < lo or (self.low_open and v == lo)):
            raise self.error(whole)
        if hi is not None and (v > hi or (self.high_open and v == hi)):
            raise self.error(whole)
        return v

    def parse(self, text: str) -> Any:
        """Turn command-line text into a value of this option's type (then :meth:`check`)."""
        if text.lower() == "none" and self.none_ok:
            return self.check(None)
        if self.type is bool:
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise self.error(text)
        if self.type in ("path", str):
            return self.check(text)
        parts = text.split(",")
        conv = int if self.type is int else float
        try:
            vals = [conv(p) for p in parts]
        except ValueError:
            raise self.error(text) from None
        return self.check(vals if len(vals) > 1 else vals[0])


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def show_value(value: Any) -> str:
    """A value as messages and option listings show it: strings quoted, whole floats
    without ``.0``, long reprs cut at 80 characters.

    Examples
    --------
    >>> from bidlab.learn.option_row import show_value
    >>> show_value(2.0), show_value("gpu")
    ('2', "'gpu'")
    """
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else repr(value)
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def _is_sequence(v: Any) -> bool:
    if isinstance(v, (str, bytes)):
        return False
    return isinstance(v, (list, tuple)) or (hasattr(v, "shape") and getattr(v, "ndim", 0) > 0)


def validate_params(owner: str, table: Iterable[Option], params: dict[str, Any]) -> None:
    """Check an estimator's constructor parameters against its :class:`Option` table.

    Raises :class:`OptionError` (a ``ValueError``) on the first bad value, with the one
    message shape: ``The 'lrate' parameter of GLM must be a float > 0. Got -1 instead.``
    Values are only checked, never changed (scikit-learn's ``get_params`` contract).

    Examples
    --------
    >>> from bidlab.learn.option_row import Option, OptionError, validate_params
    >>> table = [Option("lrate", float, 0.1, "step size", low=0.0, low_open=True)]
    >>> try:
    ...     validate_params("GLM", table, {"lrate": -1})
    ... except OptionError as exc:
    ...     print(exc)
    The 'lrate' parameter of GLM must be a float > 0. Got -1 instead.
    """
    for spec in table:
        if spec.name not in params:
            continue
        named = spec if spec.owner == owner else Option(**{**spec.__dict__, "owner": owner})
        value = params[spec.name]
        named.check(value)
        if spec.type is int and isinstance(value, float | np.floating):
            # a learner option takes 3.0 as 3 (it stores what check returns); a parameter
            # is kept as given and used as is, so it must be an int already
            raise OptionError(f"The {spec.name!r} parameter of {owner} must be "
                              f"{named.allowed()}. Got the float {float(value)!r} instead: "
                              f"pass {int(value)}")
