"""Learners on MPI ranks, driven from a notebook through ipyparallel.

:func:`start_engines` starts ``n`` ipyparallel engines that are the ranks of one MPI job
(``ipp.Cluster(engines="mpi")`` by default: local; any ipyparallel engine launcher, e.g.
``"slurm"``, by name). :class:`RankedLearner` builds the same estimator's learner on every
engine, each on its share of the rows, and steers them together:

* ``start()`` / ``resume()`` reach every rank directly; ``stop()`` too (the ranks' stop
  check is collective, so all stop at the same minibatch);
* ``pause()`` and ``set(...)`` go to rank 0, which hands them to every rank at the next
  minibatch boundary at which the ranks meet (:meth:`MPIComm.steer`): all ranks pause at,
  and take a new value from, the same step;
* ``metrics()`` merges the ranks' metrics (rows and samples per second summed, scores
  averaged); ``metrics(per_rank=True)`` gives each rank's; ``records()`` each rank's
  per-minibatch record;
* ``learner`` is a :class:`~bidlab.distributed.proxy.ProxyLearner`: the ranks as one
  learner of this process, for ``Dashboard(...)`` and the JupyterLab Learners panel;
  ``estimator()`` is rank 0's trained estimator, copied here.

Examples
--------
>>> cluster, client = start_engines(2)                                   # doctest: +SKIP
>>> lrn = RankedLearner(client, "glm", (X, y), params={"link": "logistic"})  # doctest: +SKIP
>>> lrn.start(); lrn.set(lrate=0.05); lrn.metrics()                     # doctest: +SKIP
>>> lrn.stop(); cluster.stop_cluster_sync()                              # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from bidlab.distributed.proxy import merge_metrics

__all__ = ["start_engines", "stop_engines", "RankedLearner"]

_LEARNERS: dict[str, Any] = {}  # on each engine: name -> (learner, comm, estimator)
_NAMES = itertools.count()


def start_engines(n: int = 2, engines: str = "mpi", timeout: float = 120.0,
                  **cluster_options: Any) -> tuple[Any, Any]:
    """Start an ipyparallel cluster of ``n`` engines (MPI ranks with ``engines="mpi"``);
    return ``(cluster, client)``. Stop it with ``cluster.stop_cluster_sync()``.

    Examples
    --------
    >>> cluster, client = start_engines(2)   # doctest: +SKIP
    """
    try:
        import ipyparallel as ipp
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("start_engines needs ipyparallel: pip install 'bidlab[mpi]'") from exc
    if engines == "mpi":  # ipyparallel runs `mpiexec`: the one beside this Python first
        import os

        from bidlab.distributed.launch import mpiexec_path

        where = os.path.dirname(mpiexec_path())
        if where not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = where + os.pathsep + os.environ.get("PATH", "")
    quiet = ["--log-level=WARN"]  # warnings only: no log line per request in the cells
    cluster_options.setdefault("log_level", 40)  # errors: not the engines' exit output
    if "config" not in cluster_options:
        from traitlets.config import Config

        config = Config()
        config.EngineLauncher.engine_args = quiet
        cluster_options["config"] = config
    cluster = ipp.Cluster(engines=engines, n=int(n), **cluster_options)
    cluster.start_cluster_sync()
    client = cluster.connect_client_sync()
    # no progress widget: a saved notebook would keep a dead one
    client.wait_for_engines(int(n), timeout=timeout, interactive=False)
    # the engines import the models while this process loads its data (not waited for:
    # the first RankedLearner's build queues behind it)
    client[:].execute("import bidlab.models", block=False)
    return cluster, client


def stop_engines(cluster: Any, client: Any, *learners: Any, timeout: float = 30.0) -> None:
    """Close ``learners`` (:class:`RankedLearner`: their proxies stop polling), shut the
    engines down together (every MPI rank finalises at once, so none waits on another)
    and stop the cluster.

    Examples
    --------
    >>> stop_engines(cluster, client, lrn)   # doctest: +SKIP
    """
    for lrn in learners:
        try:
            lrn.close()
        except Exception:  # its engines already gone: the cluster is stopped all the same
            pass
    try:
        client.shutdown(targets="all", block=True)
    except Exception:  # engines already gone: the cluster's stop ends what is left
        pass
    client.close()
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cluster.stop_cluster_sync()  # (the launcher prints the engines' last log lines)


class RankedLearner:
    """An estimator's learner on every engine of ``client``, steered as one.

    Parameters
    ----------
    client
        an ``ipyparallel.Client`` whose engines are the ranks of one MPI job.
    model
        a registered model name (``bidlab.learn.MODELS``: ``"glm"``, ``"lda"``,
        ``"kmeans"``, ...).
    data
        a path every engine reads its rows of (:func:`read_rank_data`), or a tuple of
        aligned matrices sent to every engine and cut there (``(X,)`` or ``(X, y)``).
    params
        the estimator's parameters; ``options``: the learner's (``n_passes``,
        ``sync_every``, ``batch_size``: the rows per minibatch on the largest rank).
    mode, elastic, nest
        how models are combined (:class:`MPIComm`).

    Examples
    --------
    >>> lrn = RankedLearner(client, "lda", "docword.kos.txt.gz",           # doctest: +SKIP
    ...                     params={"n_components": 20}, options={"n_passes": 5})
    """

    def __init__(self, client: Any, model: str, data: Any, params: dict | None = None,
                 options: dict | None = None, mode: str = "average",
                 elastic: float = 0.0, nest: Any = None) -> None:
        self.client, self.view = client, client[:]
        self.name = f"{model}-{next(_NAMES)}"
        self._lock = threading.RLock()  # one caller of the client at a time (it is not
        # thread-safe; the proxy polls from its own thread)
        self._proxy: Any = None
        self._closed = False
        self._resumes = 0  # resumes sent: a pause carries it, so a later resume voids it
        ranks = self.view.apply_sync(_build, self.name, model, data, dict(params or {}),
                                     dict(options or {}), mode, elastic,
                                     None if nest is None else list(nest))
        self.engine_of_rank = {r: e for e, r in zip(self.view.targets, ranks, strict=True)}
        self.size = len(ranks)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"RankedLearner {self.name!r} is closed (its learners are gone "
                               "from the engines): make a new RankedLearner to train again")

    def _all(self, verb: str, *args: Any) -> list[Any]:
        if verb != "close":
            self._check_open()
        with self._lock:
            out = self.view.apply_sync(_call, self.name, verb, *args)
        by_rank = self.engine_of_rank
        order = {e: i for i, e in enumerate(self.view.targets)}
        return [out[order[by_rank[r]]] for r in range(self.size)]

    def _rank0(self, verb: str, *args: Any) -> Any:
        self._check_open()
        with self._lock:
            return self.client[self.engine_of_rank[0]].apply_sync(_call, self.name, verb,
                                                                  *args)

    @property
    def learner(self) -> Any:
        """The ranks as one learner of this process (a
        :class:`~bidlab.distributed.proxy.ProxyLearner`, made on first use): what
        ``Dashboard(...)`` and the JupyterLab Learners panel take."""
        if self._proxy is None:
            from bidlab.distributed.proxy import ProxyLearner

            self._proxy = ProxyLearner(self)
        return self._proxy

    def poll(self) -> list[dict[str, Any]]:
        """Each rank's state, metrics, newest record row, error text (None) and, from
        rank 0, its option values (``__version__``: the option-set version)."""
        return self._all("poll")

    def option_table(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Rank 0's option specs and values (custom checks left on the rank)."""
        return self._rank0("options")

    def estimator(self) -> Any:
        """Rank 0's estimator, copied to this process (its model as trained so far: the
        ranks' models agree after each sync)."""
        return self._rank0("estimator")

    def start(self) -> RankedLearner:
        """Start training on every rank (in each engine's background thread)."""
        self._all("start")
        return self

    def pause(self) -> None:
        """Pause every rank at the same minibatch boundary (the next at which they meet).
        Asking again while paused, or before the ranks met, changes nothing."""
        with self._lock:
            self._rank0("request", "pause", {"after": self._resumes})

    def resume(self) -> None:
        """Continue every paused rank; a pause asked for before and not yet taken is
        dropped (as on one learner)."""
        with self._lock:
            self._resumes += 1
            self._all("resume", self._resumes)

    def stop(self, timeout: float = 60.0) -> list[str]:
        """Stop every rank (at the same minibatch); each rank's final state."""
        self._all("stop")
        return self.join(timeout)

    def set(self, **options: Any) -> int:
        """Set learner options on every rank, from the same step on; the option-set
        version rank 0's record shows from that step on. Values are checked on rank 0
        first: a bad one raises ``ValueError`` with the learner's message."""
        with self._lock:  # (the ranks' states, then the set: no start in between)
            idle = all(s not in ("running", "paused") for s in self._all("state"))
            ok, answer = self._rank0("set", options, not idle)
            if not ok:
                raise ValueError(answer)
            if idle:  # no meeting will deliver it soon: every rank sets it now
                return int(self._all("set_now", options)[0])
        return int(answer)

    def join(self, timeout: float = 60.0) -> list[str]:
        """Wait for every rank's run to end; each rank's state."""
        end = time.monotonic() + timeout
        while True:
            states = self._all("state")
            if all(s not in ("running", "paused") for s in states) or time.monotonic() > end:
                return states

    @property
    def states(self) -> list[str]:
        """Each rank's learner state."""
        return self._all("state")

    def metrics(self, per_rank: bool = False) -> Any:
        """The ranks' metrics merged (rows, samples and throughput summed, scores and
        options from rank 0 and averaged), or a list of each rank's."""
        each = self._all("metrics")
        return each if per_rank else merge_metrics(each)

    def records(self) -> list[dict[str, Any]]:
        """Each rank's per-minibatch record (``step``, ``opts_version``, ``score``, ...)."""
        return self._all("record")

    def option(self, name: str) -> list[Any]:
        """Each rank's current value of learner option ``name``."""
        return self._all("option", name)

    def close(self) -> None:
        """Stop and forget the learner on every engine (its proxy stops polling and shows
        the ranks' final state). Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._proxy is not None:
            self._proxy.close()
        states = self._all("close")
        if self._proxy is not None:
            self._proxy.close(states)


# ================================================================ on each engine
def _build(name: str, model: str, data: Any, params: dict, options: dict, mode: str,
           elastic: float, nest: Any = None) -> int:
    import bidlab.models  # noqa: F401  (registers the models)
    from bidlab.distributed.mpi_comm import MPIComm, world
    from bidlab.distributed.sharding import (
        chosen_batch_size,
        rank_batch_size,
        read_rank_data,
        shard,
    )
    from bidlab.learn.model import MODELS

    # a communicator of its own: learners on the same engines may train at the same time
    # without their collectives meeting each other's
    comm = MPIComm(world().Dup(), mode=mode, elastic=elastic, nest=nest)
    est = MODELS[model](**params)
    if isinstance(data, str):
        loaded, n = read_rank_data(comm, data)
        mats = [loaded.X, loaded.y]
    else:
        data = tuple(data)
        mats, n = list(shard(comm, *data)), data[0].shape[0]
    bs = chosen_batch_size(est, options.pop("batch_size", None), n, comm.size, rows=mats[0],
                           comm=comm)
    bs = rank_batch_size(n, comm.rank, comm.size, bs)
    mats = [m for m in mats if m is not None]
    lrn = est.learner(*mats, comm=comm, batch_size=bs, **options)
    _LEARNERS[name] = (lrn, comm, est)
    return comm.rank


def _checked_set(lrn: Any, comm: Any, values: dict, queue: bool = True
                 ) -> tuple[bool, Any]:
    """Check ``values`` against rank 0's options, then (``queue``) queue them for every
    rank; (True, the version they will make) or (False, the learner's message)."""
    specs = lrn.opts.specs
    try:
        for key in values:
            if key in specs and not specs[key].live:
                raise ValueError(f"the {key!r} option is not live: the ranks apply changes "
                                 "while they train, so give it when the ranked learner is "
                                 f"made (RankedLearner(..., options={{{key!r}: ...}}))")
        lrn.opts.check(**values)  # every check set() makes (vector lengths, validators)
    except ValueError as exc:
        return False, str(exc)
    if not queue:
        return True, None
    with comm._lock:
        queued = sum(1 for verb, v in comm._commands if verb == "set" and v)
    comm.request("set", **values)
    return True, lrn.opts.version + queued + 1


def _set_now(lrn: Any, comm: Any, values: dict) -> int:
    """Set ``values`` on this rank's idle learner now (every rank does, so they agree);
    rank 0's queued sets of the same options, which the next run would deliver after
    this one, are dropped. The new option-set version."""
    with comm._lock:
        kept = [(verb, {k: x for k, x in v.items() if k not in values} if verb == "set"
                 else v) for verb, v in comm._commands]
        comm._commands = [(verb, v) for verb, v in kept if verb != "set" or v]
    return lrn.set(**values)


def _call(name: str, verb: str, *args: Any) -> Any:
    lrn, comm, est = _LEARNERS[name]
    if verb == "start":
        with comm._lock:  # a pause the last run ended before taking is not this run's
            comm._commands = [(v, a) for v, a in comm._commands if v != "pause"]
        lrn.start()
    elif verb == "resume":
        comm.resumed(args[0])
        lrn.resume()
    elif verb == "stop":
        lrn.stop(wait=False)
    elif verb == "request":
        if args[0] != "pause" or lrn.state in ("running", "paused"):
            comm.request(args[0], **args[1])  # (as on one learner: no pause before a run)
    elif verb == "state":
        return lrn.state
    elif verb == "metrics":
        return dict(lrn.metrics)
    elif verb == "record":
        return {k: v.copy() for k, v in lrn.record.as_dict().items()}
    elif verb == "option":
        return lrn.opts.get(args[0])
    elif verb == "poll":
        last = lrn.record.last()
        opts = {**lrn.opts.as_dict(), "__version__": lrn.opts.version} if comm.rank == 0 \
            else {}
        error = None
        if lrn.state == "failed":
            error = getattr(lrn, "traceback", None) or repr(lrn.error)
        return {"state": lrn.state, "metrics": dict(lrn.metrics), "last": last,
                "options": opts, "error": error}
    elif verb == "options":
        import dataclasses

        specs = {n: dataclasses.replace(s, test=None) for n, s in lrn.opts.specs.items()}
        return specs, {**lrn.opts.as_dict(), "__version__": lrn.opts.version}
    elif verb == "set":
        return _checked_set(lrn, comm, *args)
    elif verb == "set_now":
        return _set_now(lrn, comm, args[0])
    elif verb == "estimator":
        return est
    elif verb == "close":
        lrn.stop(wait=True, timeout=30)
        del _LEARNERS[name]
        if lrn.state not in ("running", "paused"):  # its thread has ended: nothing uses comm
            comm.free()
        return lrn.state
    return None
