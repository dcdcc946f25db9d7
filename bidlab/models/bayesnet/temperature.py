"""Per-parameter temperatures of SAME Gibbs-EM on a Bayesian network, as in ``LDAGibbs``.

Every table entry (variable ``v``, parent configuration ``row``, state ``s``) has a
temperature ``T`` (default 1). Learning draws ``ceil(m)`` replicas of the missing values;
an entry with temperature ``T`` counts only the first ``m / T`` of them (replica ``j``
weighs ``clip(m / T - j, 0, 1)``) and divides by their total weight. Heating (``T > 1``)
keeps the mean of that entry's expected count and multiplies its variance by about ``T``,
as ``LDAGibbs``'s temperatures do; ``T = m`` uses one replica. A temperature below 1
counts every replica drawn (no more than ``ceil(m)`` exist).

:class:`TableTemperatures` is mixed into
:class:`~bidlab.models.bayesnet.model.BayesNetModel`. A change is queued, written by the
training thread at the start of its next sweep (or at once when no learner runs) and
logged in ``temperature_log`` with the pass and minibatch it took effect at (the last
``TEMPERATURE_LOG_KEPT`` changes; ``temperature_log_dropped`` counts older ones). The
names follow ``LDAGibbs``: ``set_temperature``, ``temperature()``, ``temperature_log``.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from typing import Any

import numpy as np

from bidlab.learn import Option
from bidlab.models.lda.temperature import TEMPERATURE, TEMPERATURE_LOG_KEPT, QueuedWhileTraining

__all__ = ["TableTemperatures", "replica_weights"]


def replica_weights(m: float, temp: np.ndarray, m_active: int) -> np.ndarray:
    """The m_active x P weight of replica ``j`` for each entry: ``clip(m / T - j, 0, 1)``,
    each column divided by its sum (so a column's weights sum to 1)."""
    eff = m / temp
    w = np.clip(eff[None, :] - np.arange(m_active)[:, None], 0.0, 1.0)
    w[0, w.sum(axis=0) <= 0] = 1.0  # m / T below the first replica: that replica alone
    w /= w.sum(axis=0, keepdims=True)
    return w


class TableTemperatures(QueuedWhileTraining):
    """Temperature changes of a Bayesian network's table entries (see the module doc).

    The host class provides ``network`` and ``learn``; :meth:`init_temperatures` makes the
    flat temperature vector ``temp`` (aligned with :meth:`Network.flat_tables`).

    Attributes
    ----------
    temperature_log
        the last ``TEMPERATURE_LOG_KEPT`` changes, oldest first, each a
        dict with the pass and minibatch it took effect at, variable, row, state, value.
    temperature_log_dropped
        how many older changes the log let go.
    """

    temperature_log_dropped: int = 0

    def init_temperatures(self) -> None:
        self._temp_lock = threading.Lock()
        self._pending: deque = deque()
        self._learner_ref: Any = None
        self.temperature_log: list[dict[str, Any]] = []
        _, self._temp_off = self.network.flat_tables()
        self.temp = np.ones(int(self._temp_off[-1]))
        self.temp_active = False
        self._where = {"pass": 0, "batch": 0}

    def _temperature_state(self, state: dict[str, Any]) -> dict[str, Any]:
        for name in ("_temp_lock", "_pending", "_learner_ref"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._temp_lock = threading.Lock()
        self._pending = deque()
        self._learner_ref = None

    def bind_temperatures(self, learner: Any) -> None:
        self._learner_ref = weakref.ref(learner)

    def temperature(self) -> list[np.ndarray]:
        """Each variable's temperatures, shaped like its table (configurations x states;
        host copies)."""
        self.apply_pending_if_idle()
        net, off = self.network, self._temp_off
        return [self.temp[off[v]:off[v + 1]].reshape(-1, int(net.cards[v])).copy()
                for v in range(net.n_vars)]

    def set_temperature(self, value: float, variable: Any = None, row: int | None = None,
                        state: Any = None, owner: str = "BayesNet") -> None:
        """Set the temperature of table entries: every entry (no ``variable``), one
        variable's table, one parent configuration ``row`` of it, one ``state`` column of
        it, or one entry (``row`` and ``state``).

        ``variable``: a name or index; ``state``: a state name or index; ``row``: the index
        of a parent configuration (0 .. configurations - 1, the table's row). ``value``
        must be > 0 (1 is the default; > 1 heats). Safe while a learner trains: the change
        takes effect at the next sweep and is logged in ``temperature_log``.
        """
        spec = Option(**{**TEMPERATURE.__dict__, "owner": owner})
        value = float(spec.check(value))
        net = self.network
        if variable is None:
            if row is not None or state is not None:
                raise ValueError(f"{owner}.set_temperature: row= and state= name entries of "
                                 "one variable's table: give variable= too")
            self._queue(None, None, None, value)
            return
        v = variable if isinstance(variable, (int, np.integer)) and not isinstance(
            variable, bool) else net.index(variable)
        if not 0 <= int(v) < net.n_vars:
            raise IndexError(f"{owner}.set_temperature: variable index {v} is outside "
                             f"0..{net.n_vars - 1}")
        v = int(v)
        n_rows = (self._temp_off[v + 1] - self._temp_off[v]) // int(net.cards[v])
        if row is not None:
            if isinstance(row, bool) or not isinstance(row, (int, np.integer)):
                raise TypeError(f"{owner}.set_temperature: row must be an int; got {row!r}")
            if not 0 <= int(row) < n_rows:
                raise IndexError(f"{owner}.set_temperature: {net.names[v]!r} has {n_rows} "
                                 f"parent configurations; row must be in 0..{n_rows - 1}, "
                                 f"got {row}")
            row = int(row)
        s = None if state is None else int(net.state_index(v, state))
        self._queue(v, row, s, value)

    def reset_temperature(self) -> None:
        """All temperatures back to 1 (logged like any other change)."""
        self.set_temperature(1.0)

    def _queue(self, v: int | None, row: int | None, s: int | None, value: float) -> None:
        self._pending.append((v, row, s, value))
        self.apply_pending_if_idle()

    def _position(self) -> dict[str, Any]:
        return self._where

    def apply_pending(self, where: dict[str, Any]) -> None:
        """Write queued changes into ``temp`` (training thread, or when idle), logging each
        with ``where``: the pass and minibatch it takes effect at."""
        if not self._pending:
            return
        net, off = self.network, self._temp_off
        with self._temp_lock:
            log = self.temperature_log
            while self._pending:
                v, row, s, value = self._pending.popleft()
                if v is None:
                    self.temp[:] = value
                else:
                    k = int(net.cards[v])
                    tab = self.temp[off[v]:off[v + 1]].reshape(-1, k)
                    tab[slice(None) if row is None else row,
                        slice(None) if s is None else s] = value
                log.append({**where, "variable": None if v is None else net.names[v],
                            "row": row, "state": None if s is None else net.states[v][s],
                            "value": value})
            self.temp_active = bool((self.temp != 1.0).any())
            extra = len(log) - TEMPERATURE_LOG_KEPT
            if extra > 0:  # the oldest go first
                del log[:extra]
                self.temperature_log_dropped += extra
