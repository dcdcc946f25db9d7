"""PerMatrix: each model matrix moved by an updater of its own.

``Learner(model, data, updater={"W": IncMult(), "H": CG(steps=3)})`` (or a model whose
``default_updater()`` returns such a mapping) trains through a :class:`PerMatrix`: a key is
a model matrix's name (``model.mat_names``) or index, and every model matrix needs exactly
one updater object. Each updater reads only its matrices' statistics (what its ``STATS``
declares) and keeps its own options, set on the object itself (``upd.set(lrate=0.1)``);
checkpoints hold each one's state and counters under the matrix's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bidlab.learn.updaters.base import Updater
from bidlab.mat import Mat

__all__ = ["PerMatrix", "as_updater"]


class PerMatrix(Updater):
    """One updater per model matrix (see the module doc)."""

    def __init__(self, updaters: Mapping[str | int, Updater]) -> None:
        super().__init__()
        if not isinstance(updaters, Mapping) or not updaters:
            raise TypeError("PerMatrix needs a non-empty mapping of model matrix (name or "
                            "index) -> Updater")
        seen: set[int] = set()
        for key, upd in updaters.items():
            if not isinstance(upd, Updater) or isinstance(upd, PerMatrix):
                raise TypeError(f"the updater of model matrix {key!r} must be a "
                                f"bidlab.learn.Updater; got {type(upd).__name__}")
            if id(upd) in seen:
                raise ValueError(f"one {type(upd).__name__} object is given for several model "
                                 "matrices: give each matrix an updater object of its own")
            seen.add(id(upd))
        self.updaters: dict[str | int, Updater] = dict(updaters)
        self.labels: dict[str | int, str] = {}

    def init(self, model: Any) -> None:
        n = len(model.modelmats)
        owner: dict[int, str | int] = {}
        for key in self.updaters:
            i = model.mat_index(key)
            if i in owner:
                raise ValueError(f"model matrix {model.mat_name(i)!r} is given two updaters "
                                 f"(keys {owner[i]!r} and {key!r})")
            owner[i] = key
        missing = [model.mat_name(i) for i in range(n) if i not in owner]
        if missing:
            raise ValueError(f"no updater for the model matrices {missing} of "
                             f"{type(model).__name__}: name every one of "
                             f"{[model.mat_name(i) for i in range(n)]} in updater={{...}}")
        self.model = model
        self.xp, self.dtype = model.modelmats[0].xp, model.modelmats[0].dtype
        self.shapes = [m.shape for m in model.modelmats]
        self.labels = {key: model.mat_name(i) for i, key in owner.items()}
        for i, key in sorted(owner.items()):
            upd = self.updaters[key]
            upd.own((i,))
            upd.init(model)
        self._new_scratch()

    def apply_own_changes(self) -> None:
        """Refill the hyperparameter columns of each updater whose own options changed
        (``upd.set(lrate=0.1)`` on it, in any thread): from the next minibatch on, as a
        learner's options."""
        for upd in self.updaters.values():
            _, changes = upd.opts.take_changes()
            if changes and upd.model is not None:
                upd.apply_changes(changes)

    def update(self, step: int) -> None:
        for upd in self.updaters.values():
            upd.update(step)
        self.t += 1

    def end_pass(self, pass_: int) -> None:
        for upd in self.updaters.values():
            upd.end_pass(pass_)

    def sync(self) -> None:
        for upd in self.updaters.values():
            upd.sync()

    def end_run(self, finished: bool) -> None:
        for upd in self.updaters.values():
            upd.end_run(finished)

    def _parts(self) -> list[tuple[str, Updater]]:
        return [(self.labels.get(key, str(key)), upd) for key, upd in self.updaters.items()]

    def state(self) -> dict[str, Mat]:
        return {f"{label}.{k}": m for label, upd in self._parts()
                for k, m in upd.state().items()}

    def load_state(self, mats: dict[str, Any]) -> None:
        for label, upd in self._parts():
            pre = f"{label}."
            upd.load_state({k[len(pre):]: a for k, a in mats.items() if k.startswith(pre)})

    def counters(self) -> dict[str, int]:
        out = super().counters()
        for label, upd in self._parts():
            out.update({f"{label}.{k}": v for k, v in upd.counters().items()})
        return out

    def set_counters(self, values: dict[str, int]) -> None:
        super().set_counters(values)
        for label, upd in self._parts():
            pre = f"{label}."
            upd.set_counters({k[len(pre):]: v for k, v in values.items()
                              if k.startswith(pre)})


def as_updater(spec: Updater | Mapping[str | int, Updater]) -> Updater:
    """An updater from ``spec``: an Updater itself, or a mapping of model matrix -> Updater
    (a :class:`PerMatrix`); TypeError for anything else."""
    if isinstance(spec, Updater):
        return spec
    if isinstance(spec, Mapping):
        return PerMatrix(spec)
    raise TypeError(f"updater must be a bidlab.learn.Updater or a mapping of model matrix -> "
                    f"Updater; got {type(spec).__name__}")
