"""The running sum of a model's iterates behind Polyak-Ruppert averaging.

Grad and ADAGrad (:mod:`bidlab.learn.updaters`) own one :class:`IterateSum`: they add the
model to it after the updates their ``average_from`` / ``average_every`` options pick and,
when a run finishes its passes, put the mean in the model. The sum is allocated on the
first add and kept (emptied, not freed) after the mean lands, so a later run averaging
again allocates nothing; an empty sum is neither checkpointed nor pickled, and a partial
one is both, so a resumed run continues the same average.
"""

from __future__ import annotations

from typing import Any

from bidlab import backend
from bidlab.learn.persistable import persistable
from bidlab.mat import Mat

__all__ = ["IterateSum"]

_KEY = "average_sum"


@persistable  # held by an updater: saved with a fitted estimator
class IterateSum:
    """Sums of a model's matrices over the iterates added so far, and their count."""

    def __init__(self) -> None:
        self.sums: list[Any] | None = None
        self.n = 0

    def add(self, modelmats: list[Mat], xp: Any) -> None:
        """Add the model's current matrices (the caller lands deferred terms first)."""
        if self.sums is None:
            self.sums = [backend.zeros_as(m.data) for m in modelmats]
        for acc, m in zip(self.sums, modelmats, strict=True):
            xp.add(acc, m.data, out=acc)
        self.n += 1

    def land(self, modelmats: list[Mat], xp: Any) -> None:
        """Put the mean in the model and empty the sum (nothing when nothing was added)."""
        if self.n == 0 or self.sums is None:
            return
        for acc, m in zip(self.sums, modelmats, strict=True):
            xp.multiply(acc, 1.0 / self.n, out=m.data)
            acc.fill(0)
        self.n = 0

    def state(self) -> dict[str, Mat]:
        """The partial sums to checkpoint (none when empty)."""
        if self.sums is None or self.n == 0:
            return {}
        return {f"{_KEY}{i}": Mat(a) for i, a in enumerate(self.sums)}

    @staticmethod
    def owns(name: str) -> bool:
        """Whether a checkpointed updater matrix is one of these sums."""
        return name.startswith(_KEY)

    def load(self, mats: dict[str, Any], modelmats: list[Mat], xp: Any) -> None:
        """Restore checkpointed sums (host arrays named as :meth:`state` names them)."""
        if not any(self.owns(k) for k in mats):
            return
        if self.sums is None:
            self.sums = [backend.zeros_as(m.data) for m in modelmats]
        for i, acc in enumerate(self.sums):
            if f"{_KEY}{i}" in mats:
                acc[...] = xp.asarray(mats[f"{_KEY}{i}"])

    def __getstate__(self) -> dict[str, Any]:
        """Picklable anywhere (device arrays as host copies); an empty sum is dropped and
        re-made when averaging next starts."""
        state = backend.portable_state(self.__dict__)
        if not self.n:
            state["sums"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(backend.restore_state(state))
