"""One declared table of parameter rules per estimator, one message shape for every bad value.

A rule is ``(check, what)``: ``check(value) -> bool`` and ``what`` the phrase that completes
"The 'x' parameter of GLM must be ...". :func:`validate` raises::

    ValueError: The 'link' parameter of GLM must be one of ['linear', 'logistic', 'softmax',
    'svm']; got 'foo' instead.

GLM and KMeans both declare their table with these helpers, so every estimator in this
folder words its errors the same way.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

Rule = tuple[Callable[[Any], bool], str]


def _real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def int_at_least(lo: int) -> Rule:
    return (lambda x: _int(x) and x >= lo, f"an int >= {lo}")


def real_at_least(lo: float, *, strict: bool = False) -> Rule:
    if strict:
        return (lambda x: _real(x) and x > lo, f"a float > {lo}")
    return (lambda x: _real(x) and x >= lo, f"a float >= {lo}")


def one_of(options: Iterable[Any]) -> Rule:
    opts = list(options)
    return (lambda x: any(type(x) is type(o) and x == o for o in opts), f"one of {opts}")


def seed() -> Rule:
    return (
        lambda x: x is None or _int(x) or isinstance(x, np.random.Generator),
        "None, an int or a numpy.random.Generator",
    )


def real_or_vector(lo: float, *, strict: bool = False) -> Rule:
    """A number >= lo (> lo when strict), or a 1-D sequence of them (one per target)."""

    def ok(v: float) -> bool:
        return _real(v) and (v > lo if strict else v >= lo)

    def check(x: Any) -> bool:
        if _real(x):
            return ok(x)
        try:
            arr = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        return arr.ndim == 1 and arr.size >= 1 and all(ok(float(v)) for v in arr)

    sign = ">" if strict else ">="
    return (check, f"a float {sign} {lo} or a 1-D sequence of them (one per target)")


def validate(owner: str, table: Mapping[str, Rule], params: Mapping[str, Any]) -> None:
    """Check every parameter named in ``table``; raise on the first bad one."""
    for name, (check, what) in table.items():
        value = params[name]
        if not check(value):
            raise ValueError(
                f"The {name!r} parameter of {owner} must be {what}; got {value!r} instead."
            )
