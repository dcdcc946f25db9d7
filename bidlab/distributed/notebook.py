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
  per-minibatch record.

Examples
--------
>>> cluster, client = start_engines(2)                                   # doctest: +SKIP
>>> lrn = RankedLearner(client, "glm", (X, y), params={"link": "logistic"})  # doctest: +SKIP
>>> lrn.start(); lrn.set(lrate=0.05); lrn.metrics()                     # doctest: +SKIP
>>> lrn.stop(); cluster.stop_cluster_sync()                              # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

__all__ = ["start_engines", "RankedLearner"]

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
    cluster = ipp.Cluster(engines=engines, n=int(n), **cluster_options)
    client = cluster.start_and_connect_sync()
    client.wait_for_engines(int(n), timeout=timeout)
    return cluster, client


class RankedLearner:
    """An estimator's learner on every engine of ``client``, steered as one.

    Args:
        client: an ``ipyparallel.Client`` whose engines are the ranks of one MPI job.
        model: a registered model name (``bidlab.learn.MODELS``: ``"glm"``, ``"lda"``,
            ``"kmeans"``, ...).
        data: a path every engine reads its rows of (:func:`read_rank_data`), or a tuple of
            aligned matrices sent to every engine and cut there (``(X,)`` or ``(X, y)``).
        params: the estimator's parameters; ``options``: the learner's (``n_passes``,
            ``sync_every``, ``batch_size``: the rows per minibatch on the largest rank).
        mode, elastic: how models are combined (:class:`MPIComm`).

    Examples
    --------
    >>> lrn = RankedLearner(client, "lda", "kos.docword.txt.gz",           # doctest: +SKIP
    ...                     params={"n_components": 20}, options={"n_passes": 5})
    """

    def __init__(self, client: Any, model: str, data: Any, params: dict | None = None,
                 options: dict | None = None, mode: str = "average",
                 elastic: float = 0.0) -> None:
        self.client, self.view = client, client[:]
        self.name = f"{model}-{next(_NAMES)}"
        ranks = self.view.apply_sync(_build, self.name, model, data, dict(params or {}),
                                     dict(options or {}), mode, elastic)
        self.engine_of_rank = {r: e for e, r in zip(self.view.targets, ranks, strict=True)}
        self.size = len(ranks)

    def _all(self, verb: str, *args: Any) -> list[Any]:
        out = self.view.apply_sync(_call, self.name, verb, *args)
        by_rank = self.engine_of_rank
        order = {e: i for i, e in enumerate(self.view.targets)}
        return [out[order[by_rank[r]]] for r in range(self.size)]

    def _rank0(self, verb: str, *args: Any) -> Any:
        return self.client[self.engine_of_rank[0]].apply_sync(_call, self.name, verb, *args)

    def start(self) -> RankedLearner:
        """Start training on every rank (in each engine's background thread)."""
        self._all("start")
        return self

    def pause(self) -> None:
        """Pause every rank at the same minibatch boundary (the next at which they meet)."""
        self._rank0("request", "pause", {})

    def resume(self) -> None:
        """Continue every paused rank."""
        self._all("resume")

    def stop(self, timeout: float = 60.0) -> list[str]:
        """Stop every rank (at the same minibatch); each rank's final state."""
        self._all("stop")
        return self.join(timeout)

    def set(self, **options: Any) -> None:
        """Set learner options on every rank, from the same step on."""
        self._rank0("request", "set", options)

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
        """Stop and forget the learner on every engine."""
        self._all("close")


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


# ================================================================ on each engine
def _build(name: str, model: str, data: Any, params: dict, options: dict, mode: str,
           elastic: float) -> int:
    import bidlab.models  # noqa: F401  (registers the models)
    from bidlab.distributed.mpi_comm import MPIComm
    from bidlab.distributed.sharding import rank_batch_size, read_rank_data, shard
    from bidlab.learn.model import MODELS

    comm = MPIComm(mode=mode, elastic=elastic)
    est = MODELS[model](**params)
    if isinstance(data, str):
        loaded, n = read_rank_data(comm, data)
        mats = [loaded.X, loaded.y]
    else:
        data = tuple(data)
        mats, n = list(shard(comm, *data)), data[0].shape[0]
    bs = options.pop("batch_size", None) or getattr(est, "batch_size", None) or 1000
    bs = rank_batch_size(n, comm.rank, comm.size, bs)
    mats = [m for m in mats if m is not None]
    lrn = est.learner(*mats, comm=comm, batch_size=bs, **options)
    _LEARNERS[name] = (lrn, comm, est)
    return comm.rank


def _call(name: str, verb: str, *args: Any) -> Any:
    lrn, comm, _ = _LEARNERS[name]
    if verb == "start":
        lrn.start()
    elif verb == "resume":
        lrn.resume()
    elif verb == "stop":
        lrn.stop(wait=False)
    elif verb == "request":
        comm.request(args[0], **args[1])
    elif verb == "state":
        return lrn.state
    elif verb == "metrics":
        return dict(lrn.metrics)
    elif verb == "record":
        return {k: v.copy() for k, v in lrn.record.as_dict().items()}
    elif verb == "option":
        return lrn.opts.get(args[0])
    elif verb == "close":
        lrn.stop(wait=True, timeout=30)
        del _LEARNERS[name]
    return None
