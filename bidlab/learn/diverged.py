"""What a learner says when training diverges: :class:`DivergedError` and its message."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["DivergedError", "diverged_text"]


class DivergedError(ArithmeticError):
    """Training produced NaN or inf model parameters."""


def diverged_text(model: Any, i: int, step: int, when: str, components: Iterable[Any],
                  options: dict[str, Any]) -> str:
    """The message for ``model.modelmats[i]`` holding NaN or inf at ``step``: the numeric
    options of the learner's ``components`` with their values, and what to do."""
    names = {spec.name for comp in components
             for spec in type(comp).option_table() if spec.type in (float, int)}
    values = ", ".join(f"{k}={_short(v)}" for k, v in options.items() if k in names)
    return (f"the model diverged: {type(model).__name__}.modelmats[{i}] holds NaN or "
            f"inf at step {step} ({when}), with {values}. The learner stopped "
            "(state 'failed'); the last checkpoint written stays as it was. Lower the "
            "learning rate (or raise the regularisation) and train again.")


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, tuple):
        return "[" + ", ".join(_short(x) for x in v[:4]) + (", ...]" if len(v) > 4 else "]")
    return repr(v)
