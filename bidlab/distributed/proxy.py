"""A learner on the notebook's side that stands for a :class:`RankedLearner`'s ranks.

:class:`ProxyLearner` offers what ``bidlab.widgets.Dashboard`` and the JupyterLab Learners
panel read from a :class:`bidlab.learn.Learner` -- ``name``, ``state``, ``progress``,
``metrics``, ``summary()``, ``opts`` (the option table, for the controls), ``set(...)``,
``record.last()`` / ``record.as_dict()``, ``observe(callback)``, ``start`` / ``pause`` /
``resume`` / ``stop`` / ``join`` -- and answers from the ranks:

* metrics are the ranks' merged (:func:`merge_metrics`: counts
  and rates summed over ranks, scores averaged); ``state`` is the group's (``failed`` when
  any rank failed, ``running`` while any runs, ``paused`` when all are paused);
* ``set(...)`` is checked on rank 0 against its option table (a bad value raises
  ``ValueError`` here, with the learner's message) and reaches every rank at the same
  step; it returns the option-set version rank 0's record will show from that step on;
* ``record`` is rank 0's per-minibatch record (the same steps as every rank's);
* ``observe(callback, rate)`` polls the ranks from one thread of this process (at most
  :data:`POLL_RATE` times a second, one round trip to every engine a poll) and hands each
  subscriber a :class:`bidlab.learn.Snapshot` of the merged metrics. Model views
  (``views=``) are not carried: views that draw model matrices (topic bubbles, k-means
  centres) do not work on a proxy; the dashboard's curves, controls and buttons do.

The proxy registers itself in :mod:`bidlab.learn.registry`, so the JupyterLab Learners
panel lists it and its pause / resume / stop reach every rank. The delay a control reports
("took effect ... ms after the change") compares this process's clock with rank 0's: both
are the machine's monotonic clock when the engines run on this machine, not otherwise.

Examples
--------
>>> ranked = RankedLearner(client, "glm", (X, y), options={"n_passes": 5})  # doctest: +SKIP
>>> learner = ranked.learner                  # a ProxyLearner           # doctest: +SKIP
>>> Dashboard(learner); learner.start()                                   # doctest: +SKIP
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from bidlab.learn.observers import Snapshot, call_keeping_errors

__all__ = ["ProxyLearner", "POLL_RATE", "group_state", "merge_metrics"]

#: Polls of the ranks a second, at most, while someone observes the proxy.
POLL_RATE = 4.0


def group_state(states: list[str]) -> str:
    """One state for a group of ranks' states.

    Examples
    --------
    >>> group_state(["running", "paused"]), group_state(["done", "failed"])
    ('running', 'failed')
    """
    for state in ("failed", "running"):
        if state in states:
            return state
    if "paused" in states:
        return "paused"
    if "stopped" in states:
        return "stopped"
    return states[0] if len(set(states)) == 1 else "stopped"


class _Model:
    """What the dashboard reads of a learner's model."""

    def __init__(self, score_name: str, name: str) -> None:
        self.score_name, self.name = score_name, name


class _Options:
    """Rank 0's option table as last polled: ``specs`` and ``get(name)``."""

    def __init__(self, specs: dict[str, Any], values: dict[str, Any]) -> None:
        self.specs, self.values = specs, values

    def get(self, name: str) -> Any:
        return self.values[name]

    @property
    def version(self) -> int:
        return int(self.values.get("__version__", 0))


class _Record:
    """Rank 0's per-minibatch record: the newest row as polled, the whole on request."""

    def __init__(self, proxy: ProxyLearner) -> None:
        self._proxy = proxy
        self.latest: dict[str, float] | None = None

    def last(self) -> dict[str, float] | None:
        return self.latest

    def as_dict(self) -> dict[str, Any]:
        return self._proxy.ranked.records()[0]


class _Subscription:
    def __init__(self, proxy: ProxyLearner, callback: Any, rate: float) -> None:
        self.proxy, self.callback = proxy, callback
        self.period = 1.0 / max(1e-3, min(float(rate), POLL_RATE))
        self.due = 0.0
        self.delivered = 0
        self.errors: list[BaseException] = []

    def cancel(self) -> None:
        self.proxy._unsubscribe(self)


class ProxyLearner:
    """The ranks of a :class:`RankedLearner` as one learner in this process (module doc).

    Parameters
    ----------
    ranked
        the :class:`bidlab.distributed.notebook.RankedLearner` it stands for.

    Examples
    --------
    >>> learner = ProxyLearner(ranked)   # doctest: +SKIP
    >>> learner.metrics["ranks"]         # doctest: +SKIP
    2
    """

    def __init__(self, ranked: Any) -> None:
        from bidlab.learn import registry

        self.ranked = ranked
        specs, values = ranked.option_table()
        self.opts = _Options(specs, values)
        self.record = _Record(self)
        self._subs: list[_Subscription] = []
        self._lock = threading.Lock()
        self._poller: threading.Thread | None = None
        self._last_poll = -math.inf
        self._closed = False
        self._state, self._metrics, self._error = "created", {}, None
        self.poll()
        self.model = _Model(str(self._metrics.get("score_name", "score")),
                            str(self._metrics.get("model", ranked.name)))
        self.name = registry.register(self, f"{ranked.name}x{ranked.size}")

    # -------------------------------------------------------------- reading the ranks
    def poll(self) -> dict[str, Any]:
        """Read every rank's state, metrics and newest record row now (one round trip)."""
        if self._closed:
            with self._lock:
                return dict(self._metrics)
        each = self.ranked.poll()
        states = [e["state"] for e in each]
        metrics = merge_metrics([e["metrics"] for e in each])
        state = group_state(states)
        metrics["state"] = state
        metrics["rank_states"] = states
        error = next((f"rank {r}: {e['error']}" for r, e in enumerate(each) if e["error"]),
                     None)
        with self._lock:
            self._state, self._metrics, self._error = state, metrics, error
            self.record.latest = each[0]["last"]
            self.opts.values = each[0]["options"]
            self._last_poll = time.monotonic()
        return metrics

    def _fresh(self) -> dict[str, Any]:
        if not self._closed and time.monotonic() - self._last_poll > 1.0 / POLL_RATE:
            return self.poll()
        with self._lock:
            return self._metrics

    @property
    def state(self) -> str:
        """The group's state (see :func:`group_state`)."""
        self._fresh()
        return self._state

    @property
    def metrics(self) -> dict[str, Any]:
        """The ranks' merged metrics (a copy), with ``rank_states``."""
        return dict(self._fresh())

    @property
    def progress(self) -> float:
        return float(self._fresh().get("progress", 0.0))

    @property
    def error(self) -> str | None:
        """The first failed rank's error and traceback (text), or None."""
        self._fresh()
        return self._error

    @property
    def traceback(self) -> str | None:
        """The first failed rank's traceback text (as ``error``), or None: what a
        dashboard shows for a learner that failed before it watched."""
        return self.error

    def summary(self) -> dict[str, Any]:
        """What the registry and the JupyterLab panel show."""
        m = self.metrics
        out = {k: m.get(k) for k in ("model", "state", "progress", "train_score", "val_score",
                                     "samples_per_s", "step", "pass")}
        out["name"] = self.name
        return out

    # -------------------------------------------------------------- steering
    def start(self) -> ProxyLearner:
        """Start training on every rank."""
        self.ranked.start()
        self.poll()
        return self

    def pause(self, wait: bool = False, timeout: float | None = 10.0) -> None:
        """Pause every rank at the same step (``wait``: until all are paused)."""
        self.ranked.pause()
        if wait:
            self._until(lambda: self.poll()["state"] != "running", timeout)

    def resume(self) -> None:
        """Continue every paused rank."""
        self.ranked.resume()
        self.poll()

    def stop(self, wait: bool = True, timeout: float | None = None) -> str:
        """Stop every rank at the same step; the group's state (after it ended: ``wait``)."""
        self.ranked._all("stop")
        if wait:
            self.join(timeout, raise_failure=False)
        return self.poll()["state"]

    def set(self, **options: Any) -> int:
        """Set live options on every rank from the same step on; the version rank 0's
        record shows from then on. A bad value raises ``ValueError`` (rank 0's message)."""
        version = self.ranked.set(**options)
        self.poll()
        return version

    def join(self, timeout: float | None = None, raise_failure: bool = True) -> bool:
        """Wait until no rank runs or is paused; True when so. A failed rank's error is
        raised as ``RuntimeError`` (with its traceback text)."""
        ended = self._until(lambda: self.poll()["state"] not in ("running", "paused"),
                            timeout)
        if ended and raise_failure and self._state == "failed":
            raise RuntimeError(f"a rank of {self.name} failed: {self._error}")
        return ended

    @staticmethod
    def _until(cond: Any, timeout: float | None) -> bool:
        end = math.inf if timeout is None else time.monotonic() + timeout
        while not cond():
            if time.monotonic() >= end:
                return False
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
        return True

    # -------------------------------------------------------------- observers
    def observe(self, callback: Any, rate: float = 10.0,
                views: dict[str, Any] | None = None) -> _Subscription:
        """Call ``callback(snapshot)`` with the merged metrics at most ``rate`` (and
        :data:`POLL_RATE`) times a second, from this proxy's poll thread. ``views`` must be
        empty: model matrices stay on the ranks."""
        if views:
            raise ValueError(f"a ProxyLearner carries no model views (asked for "
                             f"{sorted(views)}): use views that read metrics only, e.g. "
                             "Dashboard, or fetch the model with RankedLearner.estimator()")
        sub = _Subscription(self, callback, rate)
        with self._lock:
            self._subs.append(sub)
            if self._poller is None or not self._poller.is_alive():
                self._poller = threading.Thread(target=self._poll_loop, daemon=True,
                                                name=f"bidlab-proxy-{self.name}")
                self._poller.start()
        return sub

    def _unsubscribe(self, sub: _Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def close(self, states: list[str] | None = None) -> None:
        """Stop polling the ranks (before their engines stop): views keep the last
        values; ``states``: the ranks' final states, the group's state from then on."""
        self._closed = True
        if states is not None:
            with self._lock:
                self._state = group_state(list(states))
                self._metrics = {**self._metrics, "state": self._state,
                                 "rank_states": list(states)}
        with self._lock:
            self._subs.clear()
            poller = self._poller
        if poller is not None and poller is not threading.current_thread():
            poller.join(5.0)

    def _poll_loop(self) -> None:
        last_state = None
        while True:
            with self._lock:
                subs = list(self._subs)
            if not subs or self._closed:
                return
            try:
                metrics = self.poll()
            except Exception:  # the engines went away (cluster stopped): stop polling
                return
            state = metrics["state"]
            snap = Snapshot(metrics, {}, state, int(metrics.get("step", 0)), self._error)
            now = time.monotonic()
            for sub in subs:
                if now < sub.due and state == last_state:
                    continue
                sub.due = now + sub.period
                if call_keeping_errors(sub.errors, sub.callback, snap):
                    sub.delivered += 1
            last_state = state
            time.sleep(1.0 / POLL_RATE)

    def __repr__(self) -> str:
        return f"ProxyLearner({self.name!r}, ranks={self.ranked.size}, state={self._state!r})"


def merge_metrics(each: list[dict[str, Any]]) -> dict[str, Any]:
    """One metrics dict from each rank's: counts and rates summed, scores averaged, the
    rest from rank 0.

    Examples
    --------
    >>> merge_metrics([{"samples": 2, "score": 1.0}, {"samples": 3, "score": 3.0}])
    {'samples': 5, 'score': 2.0, 'ranks': 2}
    """
    out = dict(each[0])
    for key, value in each[0].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        values = [m.get(key, math.nan) for m in each]
        if key in ("samples", "samples_per_s", "rows_per_s", "bytes_per_s", "flops_per_s",
                   "gflops"):
            out[key] = type(value)(sum(values))
        elif "score" in key:
            out[key] = float(sum(values) / len(values))
    out["ranks"] = len(each)
    return out
