"""Minibatch learners: DataSource -> Learner -> Model + Mixins + Updater.

Samples are rows everywhere (features ``X`` is samples x features).

* :mod:`~bidlab.learn.datasource`, :mod:`~bidlab.learn.shards` -- streams of minibatches
  copied into reused containers (memory, ``.npz`` shards with prefetch, blends).
* :mod:`~bidlab.learn.model` -- the :class:`Model` base class models subclass.
* :mod:`~bidlab.learn.updaters` -- Batch, IncNorm, Grad, ADAGrad, IncMult, BatchMult, CG;
  PerMatrix (an updater per model matrix).
* :mod:`~bidlab.learn.mixins` -- L1 / L2 terms and their KPIs.
* :mod:`~bidlab.learn.learner` -- the :class:`Learner` (``fit``; ``start`` / ``pause`` /
  ``resume`` / ``stop`` / ``join`` in a background thread; live options; observers;
  checkpoints).
* :mod:`~bidlab.learn.registry` -- the live learners of this process.
* :mod:`~bidlab.learn.tensorboard_writer` -- a run as TensorBoard event files (an observer).
"""

from bidlab.learn import registry
from bidlab.learn.blocks import BlockSource
from bidlab.learn.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from bidlab.learn.comm import Communicator, SingleProcess, ThreadGroup
from bidlab.learn.datasource import (
    BlendedSource,
    DataInfo,
    DataSource,
    MemorySource,
    as_source,
)
from bidlab.learn.hyper import Component, Hyper
from bidlab.learn.learner import STATES, DivergedError, Learner
from bidlab.learn.mixins import L1Regularizer, L2Regularizer, Mixin
from bidlab.learn.model import MODELS, Model, register_model
from bidlab.learn.observers import Snapshot, Subscription
from bidlab.learn.options import Option, OptionError, Options
from bidlab.learn.rowstate import RowState
from bidlab.learn.shards import ShardError, ShardSource, read_manifest, write_shards
from bidlab.learn.staging import Minibatch
from bidlab.learn.tensorboard_writer import TensorBoardWriter, read_scalars
from bidlab.learn.updaters import (
    CG,
    UPDATERS,
    ADAGrad,
    Batch,
    BatchMult,
    Grad,
    IncMult,
    IncNorm,
    PerMatrix,
    RunningMean,
    Updater,
)

__all__ = [
    "TensorBoardWriter",
    "read_scalars",
    "Communicator",
    "RowState",
    "SingleProcess",
    "ThreadGroup",
    "ADAGrad",
    "Batch",
    "BatchMult",
    "BlendedSource",
    "CG",
    "Checkpoint",
    "CheckpointError",
    "Component",
    "DataInfo",
    "DataSource",
    "DivergedError",
    "Grad",
    "Hyper",
    "IncMult",
    "IncNorm",
    "L1Regularizer",
    "L2Regularizer",
    "Learner",
    "MODELS",
    "MemorySource",
    "Minibatch",
    "Mixin",
    "Model",
    "Option",
    "OptionError",
    "Options",
    "PerMatrix",
    "RunningMean",
    "BlockSource",
    "STATES",
    "ShardError",
    "ShardSource",
    "Snapshot",
    "Subscription",
    "UPDATERS",
    "Updater",
    "as_source",
    "load_checkpoint",
    "read_manifest",
    "register_model",
    "registry",
    "write_shards",
]
