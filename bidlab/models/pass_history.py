"""A model's per-pass history (one float a pass) as checkpoint counters, exactly.

A learner's checkpoint keeps a model's :meth:`~bidlab.learn.Model.counters`, whole numbers
below ``2**62``; a float64 is kept as two of them (the high and the low 32 bits of its
bit pattern), so a resumed run reads back the very values, e.g. the errors a stopping rule
compares::

    def counters(self):
        return {"n_passes_done": self.n_passes_done} | history_counters("errors", self.errors)

    def set_counters(self, values):
        self.errors = history_from_counters("errors", values, self.errors)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["history_counters", "history_from_counters"]

_LOW = (1 << 32) - 1


def history_counters(name: str, values: Sequence[float]) -> dict[str, int]:
    """``values`` (floats) as counters: ``{name}_n`` and two counters per value.

    Examples
    --------
    >>> c = history_counters("rmse", [0.5, 2.0])
    >>> history_from_counters("rmse", c, [])
    [0.5, 2.0]
    """
    bits = np.asarray(values, np.float64).view(np.uint64)
    out = {f"{name}_n": int(bits.size)}
    for i, b in enumerate(bits.tolist()):
        out[f"{name}_{i}_hi"] = b >> 32
        out[f"{name}_{i}_lo"] = b & _LOW
    return out


def history_from_counters(name: str, values: Mapping[str, int],
                          default: Sequence[float]) -> list[float]:
    """The floats :func:`history_counters` wrote under ``name``; ``default`` (as a list)
    when ``values`` holds none of them (a checkpoint written before the history was kept).
    A history whose counters are not whole numbers of 32 bits raises ValueError."""
    n = values.get(f"{name}_n")
    if n is None:
        return list(default)
    try:
        parts = [(values[f"{name}_{i}_hi"], values[f"{name}_{i}_lo"]) for i in range(int(n))]
    except KeyError as exc:
        raise ValueError(f"the checkpoint's {name!r} history lacks counter {exc}: the file "
                         "is damaged; resume from another checkpoint") from None
    if any(not 0 <= int(v) <= _LOW for pair in parts for v in pair):
        raise ValueError(f"the checkpoint's {name!r} history holds a counter outside 0 .. "
                         f"2**32 - 1: the file is damaged; resume from another checkpoint")
    bits = np.array([(int(hi) << 32) | int(lo) for hi, lo in parts], np.uint64)
    return bits.view(np.float64).tolist()
