"""Change the set of topics of a trained LDA model in place: every matrix with a topic
axis is remapped by one :class:`TopicPlan`.

A plan lists, for each topic of the new model, where it comes from: the sum of some old
topics (a merge, or an old topic kept as it is), a share of one old topic (a split: a
weight per word for the topic-word matrices, a fraction for the documents' weights), or
new seed counts (an added topic). :func:`reshape_model` applies a plan to the model's
topic-word counts (variational LDA: lambda minus the prior; SAME Gibbs: the counts a * NT),
its per-parameter temperatures, each document's kept topic weights (the warm starts, a
:class:`bidlab.learn.RowState`), the learner's updater state, and the
``n_components`` option; derived matrices are rebuilt and the per-minibatch scratch is
made anew on the next minibatch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import bidlab as bl
from bidlab import backend
from bidlab.learn.rowstate import RowState

__all__ = ["TopicPlan", "reshape_model", "topic_counts", "is_gibbs"]


@dataclass
class TopicPlan:
    """Where each new topic comes from (see the module doc).

    Attributes
    ----------
    sources
        one entry per new topic: ``("sum", [old topics])``, ``("part", old topic,
        word weights (V,), document fraction)`` or ``("new", seed counts (V,))``.
    kept
        the share of its counts each old topic keeps in the model (a new topic's seed
        taken from them; an updater's statistics keep all of theirs).
    """

    sources: list[tuple[Any, ...]] = field(default_factory=list)
    kept: float = 1.0

    @property
    def k(self) -> int:
        return len(self.sources)

    def first_source(self, j: int) -> int | None:
        """The old topic new topic ``j`` mostly continues (None for a new one)."""
        src = self.sources[j]
        if src[0] == "sum":
            return int(src[1][0])
        if src[0] == "part":
            return int(src[1])
        return None

    def apply_words(self, C: np.ndarray, additive: bool = True, fill: float = 1.0,
                    seeded: bool = True) -> np.ndarray:
        """The V x k_new host matrix made from the V x k_old host matrix ``C``: counts
        (``additive``; a new topic gets its seed counts, or zeros when not ``seeded``: an
        updater's state, which a new topic has none of yet) or values copied from the
        first source (temperatures; ``fill`` for a new topic). Seeded counts are the
        model's: the old topics' scaled by ``kept``."""
        V = C.shape[0]
        if additive and seeded and self.kept != 1.0:
            C = C * self.kept
        out = np.empty((V, self.k), C.dtype)
        for j, src in enumerate(self.sources):
            if src[0] == "sum":
                out[:, j] = C[:, src[1]].sum(axis=1) if additive else C[:, src[1][0]]
            elif src[0] == "part":
                out[:, j] = C[:, src[1]] * src[2] if additive else C[:, src[1]]
            elif additive:
                out[:, j] = src[1] if seeded else 0.0
            else:
                out[:, j] = fill
        return out

    def apply_docs(self, T: np.ndarray) -> np.ndarray:
        """The n x k_new host matrix of documents' topic weights made from ``T``."""
        n = T.shape[0]
        out = np.empty((n, self.k), T.dtype)
        low = T.min(axis=1) if T.shape[1] else np.zeros(n, T.dtype)
        for j, src in enumerate(self.sources):
            if src[0] == "sum":
                out[:, j] = T[:, src[1]].sum(axis=1)
            elif src[0] == "part":
                out[:, j] = T[:, src[1]] * src[3]
            else:
                out[:, j] = low
        return out


def is_gibbs(model: Any) -> bool:
    """True for the SAME Gibbs model (its counts are NT), False for variational LDA."""
    return "NT" in model.__dict__


def topic_counts(model: Any) -> np.ndarray:
    """The topic-word counts, vocabulary x k host float64 (variational LDA: lambda minus
    the prior beta, floored at 0; SAME Gibbs: the counts a * NT)."""
    if is_gibbs(model):
        C = np.asarray(backend.to_host(model.NT.data), np.float64) * float(model.scale)
    else:
        C = np.asarray(backend.to_host(model.lamT.data), np.float64) - float(model.opts.beta)
    return np.maximum(C, 0.0)


def _device(model: Any, host: np.ndarray, dtype: Any) -> bl.Mat:
    arr = backend.empty(host.shape, dtype, model.xp)
    arr[...] = host if model.xp is np else model.xp.asarray(host)
    return bl.Mat(arr)


def _host(m: Any) -> np.ndarray:
    return np.asarray(backend.to_host(m.data if isinstance(m, bl.Mat) else m))


def write_counts(model: Any, C: np.ndarray) -> None:
    """Make the model's topic-word matrices from the V x k counts ``C`` (any k) and
    rebuild what derives from them."""
    V, k = C.shape
    dt, xp, dev = model.dtype, model.xp, model.device
    if is_gibbs(model):
        model.NT = _device(model, C.astype(dt), dt)
        model._a = 1.0
        model._colsum = backend.empty((k,), np.float64, xp)
        model._invden = backend.empty((k,), dt, xp)
        model._den = backend.empty((k,), np.float64, xp)
        model.phiT = bl.zeros((V, k), dt, dev)
        model._phi_stale = True
        model.phi_hat = bl.zeros((V, k), dt, dev)
        model._rows_touched = None
        model.link()
        model._count_columns()
    else:
        model.lamT = _device(model, (C + float(model.opts.beta)).astype(dt), dt)
        model.ebT = bl.Mat(backend.empty((V, k), dt, xp))
        model.upd = bl.zeros((V, k), dt, dev)
        model.link()
        model._stale = True
        model.sync()


def reshape_model(model: Any, plan: TopicPlan, learner: Any = None,
                  updaters: tuple[Any, ...] = ()) -> None:
    """Apply ``plan`` to ``model`` (and the state of ``updaters``, the ``n_components``
    option of ``learner`` or the model); see the module doc."""
    if is_gibbs(model):
        model._fold_scale()
    C = topic_counts(model)
    temp = _host(model.temp) if is_gibbs(model) else None
    ups = []
    for up in dict.fromkeys(u for u in updaters if u is not None and u.model is model):
        # a new topic's seed is the model's counts, not statistics the updater gathered
        # (a batch pass's sums would keep the seed on top of the pass's counts)
        state = {name: plan.apply_words(_host(m).T, seeded=False).T
                 for name, m in up.state().items()}
        ups.append((up, up.counters(), state))
    write_counts(model, plan.apply_words(C))
    if temp is not None:
        model.temp = _device(model, plan.apply_words(temp, additive=False), model.dtype)
        model._temp_active = bool((model.temp.data != 1.0).any())
        model.link()
        model.refresh()
    store = model._store
    if store is not None:
        new = RowState(store.n_rows, plan.k, model.dtype, model.xp)
        new.values.data[...] = _fit(model, plan.apply_docs(_host(store.values)))
        new.seen.data[...] = store.seen.data
        model._store = new
    model._scratch = None
    opts = learner.opts if learner is not None else model.opts
    opts.restore({"n_components": plan.k})
    if learner is not None:
        learner._opts_version = opts.version  # this minibatch trains with the new k
        learner.opts.set_vector_lengths({len(model.modelmats), plan.k})
    for up, counters, state in ups:
        up.init(model)
        up.set_counters(counters)
        up.load_state(state)


def _fit(model: Any, host: np.ndarray) -> Any:
    arr = host.astype(model.dtype)
    return arr if model.xp is np else model.xp.asarray(arr)
