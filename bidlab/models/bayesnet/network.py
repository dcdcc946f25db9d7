"""A discrete Bayesian network: variables, states, parents and conditional probability tables.

:class:`Network` is the structure every other module of the family works on: the BIF
reader builds one (:mod:`bidlab.models.bayesnet.bif`), the sampler reads its tables as one
flat vector (:meth:`Network.flat_tables`), learning writes new tables into a copy.

A table ``cpts[v]`` has shape ``(n_configs, k_v)``: one row per configuration of ``v``'s
parents, in row-major order over ``parents[v]`` (the first parent varies slowest), one
column per state of ``v``. Each row must sum to 1 within :data:`ROW_SUM_TOL` (absolute);
rows within the tolerance are renormalised exactly.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from bidlab.learn.persistable import persistable

__all__ = ["Network", "ROW_SUM_TOL", "BayesNetError", "evidence_vector"]

#: a CPT row may differ from 1 by at most this much (absolute) before it is refused
ROW_SUM_TOL = 1e-3


class BayesNetError(ValueError):
    """A network, its evidence or its data is not valid (the message says how to fix it).

    ``field``: the network's field that is wrong (``"cpts[2]"``, ``"parents"``), or None.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@persistable
class Network:
    """A discrete Bayesian network (see the module doc).

    Parameters
    ----------
    names
        one name per variable.
    states
        per variable, the names of its states (at least 1).
    parents
        per variable, the indices of its parents (no cycle).
    cpts
        per variable, its table, shape ``(prod of the parents' state counts,
        number of states)``; rows sum to 1 within :data:`ROW_SUM_TOL`.
    name
        the network's name (BIF's ``network`` block).

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(["rain", "wet"], [["no", "yes"], ["no", "yes"]], [[], [0]],
    ...               [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    >>> net.order, net.cards.tolist()
    ([0, 1], [2, 2])
    """

    def __init__(self, names: list[str], states: list[list[str]], parents: list[list[int]],
                 cpts: list[Any], name: str = "unknown") -> None:
        self.name = str(name)
        self.names = [str(n) for n in names]
        self.states = [[str(s) for s in st] for st in states]
        self.parents = [[int(p) for p in ps] for ps in parents]
        self.cpts = [np.array(t, dtype=np.float64) for t in cpts]
        self.validate()

    # -- checks ---------------------------------------------------------------------------
    def validate(self) -> None:
        """Check the whole network; renormalise rows within the tolerance. Raises
        :class:`BayesNetError` naming the variable and what is wrong."""
        n = len(self.names)
        if n == 0:
            raise BayesNetError("the network has no variables: give at least one", "names")
        if not (len(self.states) == len(self.parents) == len(self.cpts) == n):
            raise BayesNetError(f"names, states, parents and cpts must have one entry per "
                                f"variable; got {n}, {len(self.states)}, {len(self.parents)}, "
                                f"{len(self.cpts)}", "names")
        seen: dict[str, int] = {}
        for i, nm in enumerate(self.names):
            if nm in seen:
                raise BayesNetError(f"variable {nm!r} is declared twice: rename one",
                                    f"names[{i}]")
            seen[nm] = i
        for v, st in enumerate(self.states):
            if len(st) == 0 or len(set(st)) != len(st):
                raise BayesNetError(f"variable {self.names[v]!r} needs at least one state and "
                                    f"distinct state names; got {st}", f"states[{v}]")
        for v, ps in enumerate(self.parents):
            if len(set(ps)) != len(ps) or any(p < 0 or p >= n or p == v for p in ps):
                raise BayesNetError(f"variable {self.names[v]!r} has invalid parents {ps}: "
                                    "each must be another variable, listed once",
                                    f"parents[{v}]")
        self._order = self._topological()
        for v in range(n):
            self.cpts[v] = self._checked_table(v, self.cpts[v])

    def _topological(self) -> list[int]:
        n = len(self.names)
        indeg = [len(ps) for ps in self.parents]
        kids: list[list[int]] = [[] for _ in range(n)]
        for v, ps in enumerate(self.parents):
            for p in ps:
                kids[p].append(v)
        ready = [v for v in range(n) if indeg[v] == 0]
        order: list[int] = []
        while ready:
            v = ready.pop(0)
            order.append(v)
            for c in kids[v]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(order) < n:
            cyc = [self.names[v] for v in range(n) if indeg[v] > 0]
            raise BayesNetError("the network has a cycle through the variables "
                                f"{', '.join(cyc[:8])}{' ...' if len(cyc) > 8 else ''}: a "
                                "Bayesian network must be acyclic; remove a parent link",
                                "parents")
        return order

    def _checked_table(self, v: int, t: np.ndarray) -> np.ndarray:
        k = len(self.states[v])
        rows = math.prod(len(self.states[p]) for p in self.parents[v])  # exact: no wrap
        nm = self.names[v]
        if t.size != rows * k:
            raise BayesNetError(f"the table of {nm!r} has {t.size} entries; it needs "
                                f"{rows} parent configurations x {k} states = {rows * k}",
                                f"cpts[{v}]")
        t = t.reshape(rows, k)
        if not np.all(np.isfinite(t)) or np.any(t < 0):
            raise BayesNetError(f"the table of {nm!r} holds negative, NaN or infinite "
                                "probabilities: every entry must be a number >= 0",
                                f"cpts[{v}]")
        s = t.sum(axis=1)
        bad = np.flatnonzero(np.abs(s - 1.0) > ROW_SUM_TOL)
        if bad.size:
            r = int(bad[0])
            raise BayesNetError(f"row {r} of the table of {nm!r} (parents "
                                f"{self.config_text(v, r)}) sums to {s[r]:.6g}, not 1 within "
                                f"the tolerance {ROW_SUM_TOL:g}: fix the probabilities",
                                f"cpts[{v}]")
        off = np.abs(s - 1.0) > 8 * np.finfo(np.float64).eps  # leave exact rows bit for bit
        t = t.copy()
        t[off] /= s[off, None]
        return t

    # -- structure ------------------------------------------------------------------------
    @property
    def n_vars(self) -> int:
        return len(self.names)

    @property
    def cards(self) -> np.ndarray:
        """The number of states of each variable (int64)."""
        return np.array([len(s) for s in self.states], dtype=np.int64)

    @property
    def order(self) -> list[int]:
        """The variables in a topological order (parents first)."""
        return list(self._order)

    def index(self, name: str) -> int:
        """The index of variable ``name``; :class:`BayesNetError` names the known ones."""
        try:
            return self.names.index(str(name))
        except ValueError:
            near = ", ".join(self.names[:10]) + (" ..." if self.n_vars > 10 else "")
            raise BayesNetError(f"unknown variable {name!r}: the network's variables are "
                                f"{near}") from None

    def state_index(self, v: int, state: Any) -> int:
        """The index of ``state`` (a name, or an int index) among variable ``v``'s states."""
        st = self.states[v]
        if isinstance(state, (int, np.integer)) and not isinstance(state, bool):
            named = st.index(str(int(state))) if str(int(state)) in st else None
            if named is not None and named != int(state):  # states named by numbers
                if not 0 <= int(state) < len(st):
                    return named  # no state has that index: the name it is
                raise BayesNetError(
                    f"state {int(state)} of {self.names[v]!r} is ambiguous: its states are "
                    f"named {', '.join(st)}, so {int(state)} is the state {st[int(state)]!r} "
                    f"as an index and the state {str(int(state))!r} as a name: give the "
                    f"state by its name, as a string ({self.names[v]}={str(int(state))!r} "
                    f"or {self.names[v]}={st[int(state)]!r})")
            if 0 <= int(state) < len(st):
                return int(state)
        elif str(state) in st:
            return st.index(str(state))
        raise BayesNetError(f"unknown state {state!r} of {self.names[v]!r}: its states are "
                            f"{', '.join(st)} (or their indices 0..{len(st) - 1})")

    def children(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in range(self.n_vars)]
        for v, ps in enumerate(self.parents):
            for p in ps:
                kids[p].append(v)
        return kids

    def config_states(self, v: int, r: int) -> list[str]:
        """Parent configuration ``r`` of ``v``: the state of each parent, in order."""
        vals = []
        for p in reversed(self.parents[v]):
            k = len(self.states[p])
            vals.append(self.states[p][r % k])
            r //= k
        return vals[::-1]

    def config_text(self, v: int, r: int) -> str:
        """Parent configuration ``r`` of ``v`` as ``(state, state)``."""
        return "(" + ", ".join(self.config_states(v, r)) + ")"

    def flat_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """All tables as one float64 vector and each variable's offset into it
        (``offsets[v]``; ``offsets[-1]`` is the total)."""
        sizes = [t.size for t in self.cpts]
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return np.concatenate([t.ravel() for t in self.cpts]), offsets

    def with_tables(self, flat: np.ndarray) -> Network:
        """A copy of this network with the tables read from a flat vector."""
        _, off = self.flat_tables()
        flat = np.asarray(flat, dtype=np.float64).ravel()
        tabs = [flat[off[v]:off[v + 1]].reshape(self.cpts[v].shape)
                for v in range(self.n_vars)]
        return Network(self.names, self.states, self.parents, tabs, self.name)

    def uniform(self) -> Network:
        """A copy of this network with every table row uniform (a start for learning)."""
        tabs = [np.full(t.shape, 1.0 / t.shape[1]) for t in self.cpts]
        return Network(self.names, self.states, self.parents, tabs, self.name)

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild from a saved state: every field is checked as the constructor checks
        it, and the topological order is computed again rather than read (raises
        :class:`BayesNetError` naming the field)."""
        try:
            self._restore(state)
        except BayesNetError as exc:
            if exc.field is None:
                raise
            raise BayesNetError(f"{exc.field}: {exc}", exc.field) from None

    def _restore(self, state: dict[str, Any]) -> None:
        self.__dict__.update(_saved_fields(state))
        self.validate()

    @classmethod
    def check_loaded(cls, state: dict[str, Any]) -> None:
        """Check a state read from a file before a network is built from it
        (:func:`bidlab.learn.persist_check.check_state`): the :class:`BayesNetError` has
        the field that is wrong as its ``field``."""
        cls.__new__(cls)._restore(state)

    def __repr__(self) -> str:
        arcs = sum(len(p) for p in self.parents)
        return (f"Network({self.name!r}: {self.n_vars} variables, {arcs} arcs, "
                f"{int(sum(t.size for t in self.cpts))} parameters)")


#: the fields of a saved network (``_order`` is derived: recomputed on load, never read)
_SAVED = ("name", "names", "states", "parents", "cpts")


def _saved_fields(state: Any) -> dict[str, Any]:
    """The fields of a saved network's ``state``, type-checked and copied; a
    :class:`BayesNetError` names the field that is missing or of the wrong kind."""
    if not isinstance(state, dict):
        raise BayesNetError(f"a saved network is a table of fields, not a "
                            f"{type(state).__name__}")
    extra = sorted(str(k) for k in state if k not in _SAVED and k != "_order")
    if extra:
        raise BayesNetError(f"not a field of a network (its fields are {', '.join(_SAVED)})",
                            extra[0])
    missing = [k for k in _SAVED if k not in state]
    if missing:
        raise BayesNetError("missing: every field of a network is saved with it", missing[0])

    def strings(x: Any, field: str) -> list[str]:
        if not isinstance(x, list) or not all(isinstance(e, str) for e in x):
            raise BayesNetError("must be a list of strings", field)
        return list(x)

    def index_list(x: Any, field: str) -> list[int]:
        if not isinstance(x, list) or not all(isinstance(e, numbers.Integral)
                                              and not isinstance(e, (bool, np.bool_))
                                              for e in x):
            raise BayesNetError("must be a list of variable indices", field)
        return [int(e) for e in x]

    if not isinstance(state["name"], str):
        raise BayesNetError("must be a string", "name")
    names = strings(state["names"], "names")
    for key in ("states", "parents", "cpts"):
        if not isinstance(state[key], list):
            raise BayesNetError("must be a list with one entry per variable", key)
    states = [strings(st, f"states[{v}]") for v, st in enumerate(state["states"])]
    parents = [index_list(ps, f"parents[{v}]") for v, ps in enumerate(state["parents"])]
    cpts = []
    for v, t in enumerate(state["cpts"]):
        if not isinstance(t, np.ndarray) or t.dtype.kind not in "biuf":
            raise BayesNetError("must be an array of numbers", f"cpts[{v}]")
        cpts.append(np.array(t, dtype=np.float64))
    return {"name": state["name"], "names": names, "states": states, "parents": parents,
            "cpts": cpts}


def evidence_vector(net: Network, evidence: dict[str, Any] | None) -> np.ndarray:
    """``{variable: state}`` (names or indices) as an int32 vector, -1 where free.

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(["a"], [["no", "yes"]], [[]], [np.array([[0.5, 0.5]])])
    >>> evidence_vector(net, {"a": "yes"}).tolist()
    [1]
    """
    ev = np.full(net.n_vars, -1, np.int32)
    if evidence is None:
        return ev
    if not isinstance(evidence, dict):
        raise BayesNetError(f"evidence must be a dict {{variable: state}}; got "
                            f"{type(evidence).__name__}")
    for name, state in evidence.items():
        v = name if isinstance(name, (int, np.integer)) and not isinstance(name, bool) else \
            net.index(name)
        if not 0 <= int(v) < net.n_vars:
            raise BayesNetError(f"unknown variable index {v}: the network has {net.n_vars}")
        if v is name and str(int(v)) in net.names and net.names[int(v)] != str(int(v)):
            raise BayesNetError(
                f"evidence key {int(v)} is ambiguous: variable {int(v)} is "
                f"{net.names[int(v)]!r}, while another variable is named '{int(v)}'; give "
                f"names as strings ({net.names[int(v)]!r} or '{int(v)}')")
        if ev[int(v)] >= 0:  # by its name and by its index
            raise BayesNetError(f"the evidence gives {net.names[int(v)]!r} twice (by name "
                                "and by index): give each variable once")
        ev[int(v)] = net.state_index(int(v), state)
    return ev
