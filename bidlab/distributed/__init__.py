"""Data-parallel learners on MPI ranks, steered from a notebook through ipyparallel.

Every rank runs the same :class:`~bidlab.learn.Learner` on its share of the rows and
meets the others at the learner's sync points (:mod:`bidlab.learn.comm`); MPI (mpi4py)
carries the data, ipyparallel the commands from a notebook. Install with
``pip install 'bidlab[mpi]'`` (mpi4py, the mpich wheel, ipyparallel).

* :class:`MPIComm` (:mod:`bidlab.distributed.mpi_comm`): the communicator; modes
  ``"average"`` (optionally elastic), ``"butterfly"``, ``"sparse"``
  (:mod:`bidlab.distributed.combine`); :class:`NCCLComm`
  (:mod:`bidlab.distributed.nccl_comm`): the same with GPU models combined over NCCL;
* :func:`shard`, :func:`shard_range`, :func:`rank_batch_size`, :func:`read_rank_data`
  (:mod:`bidlab.distributed.sharding`): rows by rank, equal minibatches per pass;
* ``mpiexec -n N python -m bidlab.distributed.train MODEL --data PATH ...`` (or
  ``bidlab train MODEL --ranks N ...``): the shell command;
* :class:`RankedLearner` (:mod:`bidlab.distributed.notebook`): learners on ipyparallel MPI
  engines, started, paused, resumed, stopped and ``set`` from a notebook; its ``learner``
  is a :class:`ProxyLearner` (:mod:`bidlab.distributed.proxy`) for ``Dashboard`` and the
  JupyterLab Learners panel; :func:`start_engines` / :func:`stop_engines`.

Examples
--------
Under ``mpiexec -n 2 python script.py``::

    from bidlab.distributed import MPIComm, shard
    comm = MPIComm(mode="average")
    Xr, yr = shard(comm, X, y)
    GLM("logistic").learner(Xr, yr, comm=comm).fit()
"""

from __future__ import annotations

from typing import Any

__all__ = ["MPIComm", "NCCLComm", "shard", "shard_range", "rank_batch_size", "read_rank_data",
           "RankedLearner", "start_engines", "stop_engines", "ProxyLearner"]

_WHERE = {
    "MPIComm": "bidlab.distributed.mpi_comm",
    "NCCLComm": "bidlab.distributed.nccl_comm",
    "shard": "bidlab.distributed.sharding",
    "shard_range": "bidlab.distributed.sharding",
    "rank_batch_size": "bidlab.distributed.sharding",
    "read_rank_data": "bidlab.distributed.sharding",
    "RankedLearner": "bidlab.distributed.notebook",
    "start_engines": "bidlab.distributed.notebook",
    "stop_engines": "bidlab.distributed.notebook",
    "ProxyLearner": "bidlab.distributed.proxy",
}


def __getattr__(name: str) -> Any:  # imported on first use: mpi4py is an optional extra
    if name not in _WHERE:
        raise AttributeError(f"module 'bidlab.distributed' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_WHERE[name]), name)
