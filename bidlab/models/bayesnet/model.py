"""The Bayesian-network engine on the Learner: one Gibbs sweep per full-batch pass.

The data are the rows of an int matrix of clamped values (rows = observations, -1 where a
value is missing; for inference, ``n_chains`` rows of -1). The one model matrix is every
table of the network as a 1 x P vector (:meth:`Network.flat_tables`).

* **Inference** (``learn=False``): each pass sweeps every chain once; after ``burn_in``
  sweeps (counted again from each change of evidence) every ``thin``-th sweep adds the
  Rao-Blackwellised marginals to the running sums. The tables are handed back unchanged.
  ``set_evidence`` takes effect at the next sweep.
* **Learning** (``learn=True``, Gibbs-EM with SAME): the missing entries are sampled in
  ``m`` replicas of each observation, ``m`` annealed from ``nsamps0`` to ``nsamps`` over
  ``anneal_passes`` (the schedules of :mod:`bidlab.models.lda.gibbs_params`; replica ``j``
  weighs ``clip(m - j, 0, 1)``, so a fractional ``m`` counts its last replica in part).
  At the pass's end the tables become the posterior mean of the weighted counts per
  replica under a Dirichlet(``alpha``) prior: ``(counts / m + alpha)``, each row
  normalised; :class:`~bidlab.learn.updaters.Batch` ("replace") installs them.
  Per-parameter temperatures (:mod:`bidlab.models.bayesnet.temperature`, as in
  ``LDAGibbs``) let a heated entry count fewer of the replicas.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import replace
from typing import Any

import numpy as np

from bidlab.kern import bn_gibbs
from bidlab.learn.datasource import DataInfo
from bidlab.learn.model import Model
from bidlab.learn.options import Option
from bidlab.learn.staging import Minibatch
from bidlab.learn.updaters import Batch, Updater
from bidlab.mat import Mat
from bidlab.models.bayesnet.network import Network, evidence_vector
from bidlab.models.bayesnet.sampler import GibbsChains
from bidlab.models.bayesnet.temperature import TableTemperatures, replica_weights
from bidlab.models.lda.gibbs_params import ANNEAL, ANNEAL_PASSES, NSAMPS, NSAMPS0, anneal_nsamps

__all__ = ["BayesNetModel"]

#: options that act only when learning tables (refused by an inference learner)
LEARNING_ONLY = ("nsamps", "nsamps0", "anneal", "anneal_passes", "alpha", "lrate")

#: kept sweeps before ``tol`` is checked: the chains' spread needs a few sweeps to mean
#: anything (a chain's first kept sweeps are close to its starting state)
MIN_KEPT_FOR_TOL = 20


def refuse_learning_options(names: list[str]) -> None:
    """A ValueError naming ``names`` (of :data:`LEARNING_ONLY`), if any, given to a learner
    that infers marginals."""
    if names:
        raise ValueError(f"{', '.join(names)}: learning options (BayesNet.fit), and this "
                         "learner infers marginals; set burn_in, thin or tol instead")


class BayesNetModel(TableTemperatures, Model):
    """Gibbs inference or SAME Gibbs-EM learning on a network (see the module doc).

    Parameters
    ----------
    network
        the :class:`Network` (its tables are the starting point when learning).
    learn
        False: estimate marginals with fixed tables; True: learn the tables.
    evidence
        ``{variable: state}`` clamped in every row (inference).
    seed
        the key of every random stream.
    device
        ``"cpu"`` or ``"gpu"`` (the sweeps' kernel; the same draws).

    Attributes
    ----------
    chains
        the :class:`GibbsChains`, after ``init``.
    network
        with the current tables.
    """

    OPTIONS = (
        Option("burn_in", int, 100, "sweeps discarded (again after each evidence change)",
               low=0),
        Option("thin", int, 1, "keep every thin-th sweep after burn-in", low=1),
        Option("tol", float, None, "inference stops once every marginal's Monte-Carlo "
               "standard error is at most tol (None: every pass)", low=0.0, low_open=True,
               none_ok=True),
        replace(NSAMPS, default=5.0, doc="SAME replicas of each observation (m) once "
                "annealed (learning)"),
        NSAMPS0, replace(ANNEAL, default="linear"), ANNEAL_PASSES,
        Option("alpha", float, 1.0, "Dirichlet prior: pseudo-count of every table entry",
               low=0.0),
        Option("init_tries", int, 1000, "rounds of ancestral draws before evidence is "
               "reported as having probability zero", low=1, live=False),
    )
    score_name = "log p(x)/row"
    CHECKPOINT_NONNEGATIVE = ("model/0",)  # tables (a checkpoint's: checkpoint_values)
    mat_names = ("tables",)
    full_batch = True
    #: on several ranks (each holding some rows) the M-step sums the replicas' counts over
    #: the ranks before it normalises them (:meth:`_m_step`), and inference hands back the
    #: tables unchanged: every rank ends the pass with the same tables, which the updater
    #: must not sum again
    totals_reduced = True
    #: called as ``end_hook(model, state, error)`` once when a run ends (how the
    #: estimator takes an inference run's marginals); not saved with the model
    end_hook: Any = None
    _ended_at: int | None = None  # the chains' sweeps when end_hook was last called

    def __init__(self, network: Network, *, learn: bool = False,
                 evidence: dict[str, Any] | None = None, seed: int = 0, device: str = "cpu",
                 **options: Any) -> None:
        super().__init__(**options)
        self.device = device
        self.network = network
        self.learn = bool(learn)
        self.seed = int(seed)
        self._evidence = evidence
        self.chains: GibbsChains | None = None
        self.n_passes_planned = 1
        self.init_temperatures()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["chains"] = None  # the sampler's state is scratch: a restart draws it again
        state.pop("_comm", None)  # the learner's, bound again by the next learner
        state.pop("end_hook", None)  # the owner's, bound again by its next run
        return self._temperature_state(state)

    def default_updater(self, **options: Any) -> Updater:
        return Batch(**options)

    def bind(self, learner: Any) -> None:
        self.n_passes_planned = int(getattr(learner.opts, "n_passes", 1) or 1)
        super().bind(learner)
        self.bind_temperatures(learner)
        if self.learn:  # the chains hold the replicas made at init: never sweep more
            learner.opts.add_validator(_replicas_fit(weakref.ref(self)))
        else:  # inference: the learning options change nothing, so refuse them
            opts = learner.opts
            kept = {k: opts.get(k) for k in LEARNING_ONLY if k in opts.specs}

            def check(values: dict[str, Any]) -> None:
                refuse_learning_options([k for k, v in kept.items()
                                         if values.get(k, v) != v])

            opts.add_validator(check)

    def m_at(self, pass_: int) -> float:
        """The SAME replica count m at pass ``pass_`` (1 for inference)."""
        if not self.learn:
            return 1.0
        o = self.opts
        span = o.anneal_passes or max(1, self.n_passes_planned - 1)
        return anneal_nsamps(o.anneal, pass_ / span, o.nsamps0, o.nsamps)

    # -- Model interface ------------------------------------------------------------------
    def init(self, info: DataInfo) -> None:
        net = self.network
        if info.n_features != net.n_vars:
            raise ValueError(f"BayesNet: the data have {info.n_features} columns but the "
                             f"network has {net.n_vars} variables: one column per variable")
        if not self.learn and info.n_samples and info.batch_size < info.n_samples:
            raise ValueError(f"BayesNet: inference sweeps all {info.n_samples} chains at "
                             f"every pass and keeps their marginals together; "
                             f"batch_size={info.batch_size} would split them (burn_in and "
                             "the kept sweeps would count minibatches, and the marginals "
                             "would miss chains): leave batch_size out of an inference "
                             "learner")
        flat, self._off = net.flat_tables()
        self.modelmats = [Mat(flat.reshape(1, -1).copy())]
        self.updatemats = [Mat(np.zeros((1, flat.size)))]
        m_max = max(1, math.ceil(max(self.opts.nsamps, self.opts.nsamps0))) if self.learn \
            else 1
        self.chains = GibbsChains(net, np.full((info.n_samples, net.n_vars), -1, np.int32),
                                  m_max=m_max, seed=self.seed,
                                  init_tries=self.opts.init_tries,
                                  device=getattr(self, "device", "cpu"))
        self.chains.set_evidence(self._evidence)
        self._counts = np.zeros(flat.size)
        self._seen = np.zeros(info.n_samples, bool)

    def set_evidence(self, evidence: dict[str, Any] | None) -> None:
        """Clamp ``evidence`` (``{variable: state}``; None clears) from the next sweep on.
        Evidence that names no variable or state, or has probability zero, raises
        :class:`~bidlab.models.bayesnet.network.BayesNetError` and changes nothing."""
        if self.chains is not None:
            self.chains.set_evidence(evidence)
        else:
            evidence_vector(self.network, evidence)
        self._evidence = None if evidence is None else dict(evidence)

    def update(self, batch: Minibatch) -> float | None:
        ch = self.chains
        lo, hi = batch.start, batch.start + batch.n
        self._where = {"pass": batch.pass_, "batch": batch.index}
        if self._pending:
            self.apply_pending(self._where)
        if not self._seen[lo:hi].all():
            ch.obs[lo:hi] = _clamps(batch.mats[0].data[: batch.n], self.network)
            self._seen[lo:hi] = True
        m = self.m_at(batch.pass_)
        m_active = max(1, math.ceil(m - 1e-9))
        ch.burn_in, ch.thin = self.opts.burn_in, self.opts.thin  # live options
        ch.sweep(m_active, record=None if not self.learn else False, lo=lo, hi=hi)
        if not batch.last:
            return None
        if not self.learn:  # the tables stay; no score (the marginals are the result)
            self.updatemats[0].data[...] = self.modelmats[0].data
            tol = self.opts.tol
            if tol is not None and ch.kept >= MIN_KEPT_FOR_TOL and ch.mcse() <= tol:
                self.converged = True
            return None
        score = ch.log_joint_mean(m_active)
        self.updatemats[0].data[...] = self._m_step(m, m_active)
        return score

    def _m_step(self, m: float, m_active: int) -> np.ndarray:
        ch, t = self.chains, self.chains.t
        w = np.clip(m - np.arange(m_active), 0.0, 1.0)
        c = self._counts
        c[...] = 0.0
        if self.temp_active:  # each replica's counts, weighed per entry by m / T
            ww = replica_weights(m, self.temp, m_active)
            one, cj = np.zeros(m_active), np.empty_like(c)
            for j in range(m_active):
                one[:] = 0.0
                one[j] = 1.0
                cj[...] = 0.0
                bn_gibbs.counts(ch.X.size, ch.X, ch.n_obs, one, c.size, t.off, t.card,
                                *t.parents, cj)
                c += ww[j] * cj
        else:
            bn_gibbs.counts(ch.X.size, ch.X, ch.n_obs, w, c.size, t.off, t.card, *t.parents,
                            c)
            c /= w.sum()
        if self._comm is not None:  # every rank's rows: the tables of one process
            self._comm.allreduce([c], "sum")
        c += self.opts.alpha
        for v in range(self.network.n_vars):
            tab = c[self._off[v]:self._off[v + 1]].reshape(-1, int(t.card[v]))
            s = tab.sum(axis=1, keepdims=True)
            empty = s[:, 0] <= 0
            tab[empty] = 1.0
            s[empty] = tab.shape[1]
            tab /= s
        return c.reshape(1, -1)

    def run_ended(self, state: str, error: BaseException | None) -> None:
        """Calls ``end_hook`` once per run end (the learner tells the model twice)."""
        super().run_ended(state, error)
        ch = self.chains
        if self.end_hook is None or ch is None or self._ended_at == ch.sweeps:
            return
        self._ended_at = ch.sweeps
        self.end_hook(self, state, error)

    def end_pass(self, pass_: int) -> None:
        if self.learn and self.modelmats:
            self._tables_to_network()

    def restored(self, earlier: dict[str, Any]) -> None:
        """A checkpoint's tables were written into the model matrix: the network (what a
        fitted estimator reports and saves) and the chains sample from them from here on,
        not from the tables the run started with."""
        super().restored(earlier)
        if self.modelmats:
            self._tables_to_network()

    def _tables_to_network(self) -> None:
        """``network`` and the chains' tables from the model matrix."""
        self.network = self.network.with_tables(self.modelmats[0].data)
        if self.chains is not None:
            self.chains.set_tables(self.network)

    def evaluate(self, batch: Minibatch) -> Any:
        return None

    def flops(self, batch: Minibatch) -> float:
        return float(batch.n * self.network.n_vars)

    # -- results --------------------------------------------------------------------------
    def marginals(self) -> list[np.ndarray]:
        """Each variable's estimated marginal (a list of arrays)."""
        m = self.chains.marginals()
        so = self.chains.t.state_off
        return [m[so[v]:so[v + 1]].copy() for v in range(self.network.n_vars)]


def _replicas_fit(ref: Any) -> Any:
    """A check of new ``nsamps`` / ``nsamps0`` values (a learner's option validator): a
    ValueError when they ask for more replicas of each row than the model's chains, made
    with the values at init, hold (their sweeps would write past the chains' rows)."""

    def check(values: dict[str, Any]) -> None:
        model = ref()
        ch = None if model is None else model.chains
        if ch is None:  # not built yet: init makes room for the values then
            return
        m0, m1 = values.get("nsamps0", model.opts.nsamps0), values.get("nsamps",
                                                                        model.opts.nsamps)
        need = max(1, math.ceil(max(m0, m1)))
        if need > ch.m_max:
            raise ValueError(
                f"nsamps={m1:g}, nsamps0={m0:g} need {need} replicas of each row, and this "
                f"learner's chains hold {ch.m_max} (made from nsamps and nsamps0 when the "
                f"model was built): keep both at most {ch.m_max}, or learn with a new learner "
                f"made with the larger value (BayesNet({'nsamps0' if m0 > m1 else 'nsamps'}="
                f"{max(m0, m1):g}).learner(X))")

    return check


def _clamps(block: Any, net: Network) -> np.ndarray:
    """A block of data rows as int32 clamped values (-1 for NaN or -1, the missing
    entries); any other value that is not a state index raises."""
    a = np.asarray(block, dtype=np.float64)
    missing = np.isnan(a) | (a == -1)
    bad = ~missing & (~np.isfinite(a) | (a < 0))
    if bad.any():
        r, v = map(int, np.argwhere(bad)[0])
        raise ValueError(f"BayesNet: row {r} gives {net.names[v]!r} the value {a[r, v]}: "
                         "entries are state indices (0, 1, ...), with -1 or NaN where missing")
    if np.any((np.floor(a) != a) & ~missing):
        raise ValueError("BayesNet: data entries must be state indices (integers), -1 or "
                         "NaN for missing")
    over = a >= net.cards[None, :]  # before the cast: no value beyond the states reaches it
    if over.any():
        r, v = map(int, np.argwhere(over)[0])
        raise ValueError(f"BayesNet: row {r} gives {net.names[v]!r} the state index "
                         f"{int(a[r, v])}, but it has {net.cards[v]} states "
                         f"(0..{net.cards[v] - 1})")
    return np.where(missing, -1, a).astype(np.int32)
