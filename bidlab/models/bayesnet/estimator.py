"""``BayesNet``: a discrete Bayesian network's marginals by blocked Gibbs sampling, and its
tables learned from data with missing entries by SAME Gibbs-EM.

A scikit-learn-style face on one engine, :class:`~bidlab.models.bayesnet.model.
BayesNetModel`, trained by the :class:`bidlab.learn.Learner`::

    from bidlab.models import BayesNet
    bn = BayesNet.from_bif("alarm.bif.gz", n_chains=500, n_samples=1000)
    bn.infer({"HRBP": "HIGH"})            # posterior marginals given evidence
    bn.marginal("HYPOVOLEMIA"), bn.rhat_
    bn.fit(X)                              # tables from rows with -1 / NaN where missing
    bn.to_bif("learned.bif")
    bn.set_temperature(3.0, "HR")          # per-parameter temperatures, as in LDAGibbs
    lrn = bn.learner()                     # a live inference learner; lrn.model.set_evidence
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from bidlab.learn import Learner, Option
from bidlab.learn.blocks import BlockSource
from bidlab.learn.model import register_model
from bidlab.models.base import BidlabEstimator
from bidlab.models.bayesnet.bif import read_bif, write_bif
from bidlab.models.bayesnet.model import (
    LEARNING_ONLY,
    BayesNetModel,
    _clamps,
    refuse_learning_options,
)
from bidlab.models.bayesnet.network import Network
from bidlab.models.bayesnet.sampler import GibbsChains
from bidlab.models.bayesnet.support import (
    NEARLY_IMPOSSIBLE,
    check_evidence_support,
    evidence_support,
)
from bidlab.models.lda.gibbs_params import ANNEAL_SCHEDULES
from bidlab.models.saved_state import BayesNetSaved
from bidlab.models.sk_params import N_JOBS, VERBOSE
from bidlab.models.validation import SEED_TEXT, device_row, seed_from, seed_ok

__all__ = ["BayesNet"]


def _network_ok(x: Any) -> bool:
    return x is None or isinstance(x, (Network, str, os.PathLike))


class BayesNet(BayesNetSaved, BidlabEstimator):
    """A discrete Bayesian network: Gibbs marginals with evidence, SAME Gibbs-EM learning.

    Parameters
    ----------
    network
        a :class:`Network` or the path of a BIF file (plain or gzip).
    n_chains
        chains sampled at once for inference.
    burn_in
        sweeps discarded before marginals are kept (and after each evidence
        change).
    tol
        inference stops as soon as ``mcse_`` (below) is at most ``tol``, after at
        least 20 kept sweeps; ``n_samples`` is then a cap. None (default): every
        sweep of ``n_samples``. ``tol=0.004`` keeps the marginals within about 0.01.
    n_samples
        kept sweeps (inference; each adds every chain's Rao-Blackwellised
        marginals).
    thin
        keep every ``thin``-th sweep.
    n_passes
        Gibbs-EM passes when learning.
    nsamps, nsamps0, anneal
        SAME replicas ``m`` of each observation, annealed from
        ``nsamps0`` to ``nsamps`` by the schedule ``anneal``.
    alpha
        Dirichlet prior, a pseudo-count added to every table entry's expected count.
    random_state
        seed (None, an int or a numpy generator).
    init_tries
        rounds of ancestral draws that look for chain starts agreeing with the evidence
        (or a row's observed values); evidence fewer of them agree with starts from
        smoothed tables weighted back (:mod:`~bidlab.models.bayesnet.rare_start`), and
        only evidence none of those reach either is reported as having probability zero.
    n_jobs, verbose
        CPU threads; progress output.
    device
        ``"cpu"`` or ``"gpu"`` (the sweeps' kernel on the GPU, with CuPy: the same
        draws as on the CPU, so the same marginals and learned tables).

    Notes
    -----
    Per-parameter temperatures (learning, as in ``LDAGibbs``): :meth:`set_temperature`,
    :meth:`temperature`, ``temperature_log_``, :meth:`reset_temperature`; they are set on
    a learning run (during or after it; after ``infer`` they are refused) and carry over
    to the next ``fit`` or ``learner(X)``.

    Learned: ``network_`` (the network, with learned tables after ``fit``),
    ``marginals_`` (after ``infer``, or at the end of an inference learner's run: one
    array per variable; every new run, ``fit`` included, clears the results of the one
    before until its own end), ``rhat_`` (the largest
    R-hat over all states), ``mcse_`` (the largest Monte-Carlo standard error of a
    marginal, from the spread of the chains' means: the marginals are within about 2
    ``mcse_`` of the exact ones; raise ``n_chains`` or ``n_samples`` to shrink it),
    ``evidence_support_`` (the least probability, given its parents in the chains' last
    states, that the chains give a clamped variable's state at best: at most
    :data:`~bidlab.models.bayesnet.support.NEARLY_IMPOSSIBLE` means nearly impossible
    evidence or stuck chains, which R-hat and ``mcse_`` cannot show, and ``infer`` warns),
    ``model_`` (the engine of the last run).

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(["rain", "wet"], [["no", "yes"], ["no", "yes"]], [[], [0]],
    ...               [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]])])
    >>> bn = BayesNet(net, n_chains=200, n_samples=300, random_state=0)
    >>> m = bn.infer({"wet": "yes"})
    >>> round(float(m["rain"]["yes"]), 1)   # 0.16 / (0.16 + 0.08)
    0.7
    """

    PARAMS = (
        Option("network", str, None, "the network", test=_network_ok, none_ok=True,
               text="a Network or the path of a BIF file"),
        Option("n_chains", int, 200, "chains sampled at once (inference)", low=1),
        Option("burn_in", int, 100, "sweeps discarded", low=0),
        Option("n_samples", int, 500, "kept sweeps (inference)", low=1),
        Option("thin", int, 1, "keep every thin-th sweep", low=1),
        Option("tol", float, None, "inference stops once mcse_ <= tol (n_samples: a cap)",
               low=0.0, low_open=True, none_ok=True),
        Option("n_passes", int, 30, "Gibbs-EM passes (learning)", low=1),
        Option("nsamps", float, 5.0, "SAME replicas once annealed", low=0.0, low_open=True),
        Option("nsamps0", float, 1.0, "SAME replicas at the start", low=0.0, low_open=True),
        Option("anneal", str, "linear", "annealing schedule of m", choices=ANNEAL_SCHEDULES),
        Option("alpha", float, 1.0, "Dirichlet pseudo-count per table entry", low=0.0),
        Option("random_state", int, None, "seed", test=seed_ok, none_ok=True,
               text=SEED_TEXT),
        Option("init_tries", int, 1000, "rounds of ancestral draws before evidence is "
               "reported as having probability zero", low=1),
        N_JOBS, VERBOSE, device_row("cpu"),
    )

    init_tries = 1000  # (what an estimator saved before the parameter reads)

    def __init__(self, network: Any = None, *, n_chains: int = 200, burn_in: int = 100,
                 n_samples: int = 500, thin: int = 1, tol: float | None = None,
                 n_passes: int = 30,
                 nsamps: float = 5.0, nsamps0: float = 1.0, anneal: str = "linear",
                 alpha: float = 1.0, random_state: Any = None, init_tries: int = 1000,
                 n_jobs: int | None = None, verbose: int = 0, device: str = "cpu") -> None:
        self._keep_params(locals())

    @classmethod
    def from_bif(cls, path: str | os.PathLike, **params: Any) -> BayesNet:
        """An estimator on the network of a BIF file (its tables are ``network_``)."""
        bn = cls(read_bif(path), **params)
        bn._network = bn.network
        return bn

    # -- fitted state ---------------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return self.__dict__.get("_network") is not None

    @property
    def network_(self) -> Network:
        """The network: the tables being learned while a learning run goes on, the learned
        ones after it."""
        check_is_fitted(self)
        model = self.__dict__.get("model_")
        if model is not None and model.learn:
            return model.network
        return self._network

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        path = self.__dict__.get("network")
        if self.__dict__.get("_network") is None and isinstance(path, str | os.PathLike):
            self._path_from_file = os.fspath(path)  # named by the file: never opened

    def set_params(self, **params: Any) -> BayesNet:
        """scikit-learn's ``set_params``; a ``network`` given here may be a path again, and
        replaces the network of earlier runs (their tables, marginals and temperatures)."""
        super().set_params(**params)
        if "network" in params:
            for name in ("_path_from_file", "_network", "model_", "marginals_", "rhat_",
                         "mcse_", "evidence_support_"):
                self.__dict__.pop(name, None)
        return self

    def _net(self) -> Network:
        if self.__dict__.get("_network") is not None:
            return self.network_
        self._validate_params()
        if self.network is None:
            raise ValueError("BayesNet needs a network: BayesNet(network) with a Network or "
                             "a BIF path, or BayesNet.from_bif(path)")
        if "_path_from_file" in self.__dict__:
            raise ValueError(
                f"this BayesNet was loaded from a file or unpickled (as joblib does for its "
                f"worker processes) naming its network by a path ({self._path_from_file!r}); "
                "bidlab does not open paths read from files: give the network itself "
                "(BayesNet(read_bif(path)), BayesNet.from_bif(path)) or set_params(network=path)")
        net = self.network if isinstance(self.network, Network) else read_bif(self.network)
        self._network = net
        return net

    def _seed(self, random_state: Any = None) -> int:
        """The engine's seed from ``random_state`` (None: the estimator's
        ``random_state``; both None: a fresh one)."""
        rs = self.random_state if random_state is None else random_state
        if rs is not None and not seed_ok(rs):
            raise ValueError(f"BayesNet: random_state must be {SEED_TEXT}; got {rs!r}")
        s = seed_from(rs)
        return int(np.random.SeedSequence().entropy % (2**31)) if s is None else s

    def marginal(self, name: str) -> dict[str, float]:
        """The last :meth:`infer`'s marginal of variable ``name`` as ``{state: p}``."""
        if self.__dict__.get("marginals_") is None:
            raise NotFittedError("BayesNet has no marginals yet: call infer(evidence) "
                                 "first, then marginal(name)")
        net = self.network_
        v = net.index(name)
        return dict(zip(net.states[v], map(float, self.marginals_[v]), strict=True))

    # -- inference ------------------------------------------------------------------------
    def learner(self, X: Any = None, y: Any = None, *, evidence: dict[str, Any] | None = None,
                **options: Any) -> Learner:
        """A live learner: inference over ``n_chains`` chains when ``X`` is None (set
        evidence while it runs with ``learner.model.set_evidence``), else Gibbs-EM
        learning from ``X``. ``options``: learner options (``n_passes``, ...). An
        inference run's end sets ``marginals_``, ``rhat_`` and ``mcse_``, as ``infer`` does."""
        return self._learner(X, evidence, dict(options))

    def _learner(self, X: Any, evidence: dict[str, Any] | None,
                 options: dict[str, Any], warn_at_end: bool = True) -> Learner:
        net = self._net()
        self._network = net  # a learning run's tables stay the network after a new run
        learn = X is not None
        if learn:
            data = _rows(X, net)
            _clamps(data, net)  # bad entries fail here, before any learner exists
            passes = self.n_passes
        else:
            refuse_learning_options([k for k in options if k in LEARNING_ONLY])
            data = np.full((self.n_chains, net.n_vars), -1.0)
            passes = self.burn_in + self.n_samples * self.thin
        model = BayesNetModel(net, learn=learn, evidence=evidence, seed=self._seed(),
                              burn_in=self.burn_in, thin=self.thin, tol=self.tol,
                              nsamps=self.nsamps,
                              nsamps0=self.nsamps0, anneal=self.anneal, alpha=self.alpha,
                              init_tries=self.init_tries, device=self.device)
        old = self.__dict__.get("model_")
        if old is not None and old.temp.shape == model.temp.shape:  # temperatures carry over
            old.apply_pending_if_idle()
            model.temp[:] = old.temp
            model.temp_active = old.temp_active
            model.temperature_log = old.temperature_log
        src = BlockSource(data, batch_size=options.pop("batch_size", None) or data.shape[0],
                          names=("X",))
        options.setdefault("n_passes", passes)
        options.setdefault("record_size", max(1, min(100_000, options["n_passes"])))
        lrn = Learner(model, src, name=options.pop("name", "bayesnet"), **options)
        lrn.init()
        if not learn:
            model.chains.activate(1)  # impossible evidence fails now, not in the thread
        for name in ("marginals_", "rhat_", "mcse_", "evidence_support_"):
            self.__dict__.pop(name, None)  # the last run's: this run's come at its end
        self.model_ = model
        ref = weakref.ref(self)

        def ended(m: BayesNetModel, state: str, error: BaseException | None) -> None:
            est = ref()
            if est is not None:
                est._run_ended(m, state, warn_at_end)

        model.end_hook = ended
        return lrn

    def _run_ended(self, model: BayesNetModel, state: str, warn: bool) -> None:
        """The end of a run on ``model``: an inference run that did not fail gives the
        estimator its results (``marginals_``, ``rhat_``, ``mcse_``,
        ``evidence_support_``), as ``infer`` does; ``warn``: warn here about nearly
        impossible evidence (``infer`` warns itself, where it was called)."""
        if self.__dict__.get("model_") is not model or model.learn or state == "failed":
            return
        ch = model.chains
        X, ev = ch.X[: ch.n_obs], ch.ev
        support = (check_evidence_support(ch.net, X, ev, stacklevel=4) if warn
                   else evidence_support(ch.net, X, ev)[0])
        self.marginals_, self.rhat_, self.mcse_ = model.marginals(), ch.rhat(), ch.mcse()
        self.evidence_support_ = support

    def infer(self, evidence: dict[str, Any] | None = None) -> dict[str, dict[str, float]]:
        """Posterior marginals of every variable given ``evidence`` ({variable: state},
        names or indices), as ``{variable: {state: p}}``; also sets ``marginals_`` and
        ``rhat_``."""
        lrn = self._learner(None, evidence, {}, warn_at_end=False)
        with self._threads():
            lrn.fit(progress=self._progress())
        if self.evidence_support_ <= NEARLY_IMPOSSIBLE:  # the warning, with its details
            ch = lrn.model.chains
            check_evidence_support(ch.net, ch.X[: ch.n_obs], ch.ev, stacklevel=3)
        net = self.network_
        return {net.names[v]: dict(zip(net.states[v], map(float, m), strict=True))
                for v, m in enumerate(self.marginals_)}

    # -- per-parameter temperatures -------------------------------------------------------
    def _temp_model(self, to_set: bool = False) -> BayesNetModel:
        model = self.__dict__.get("model_")
        if model is None:
            raise RuntimeError("BayesNet has no learning run to set temperatures on: call "
                               "fit(X) or learner(X) first (temperatures carry over to the "
                               "next fit)")
        if to_set and not model.learn:
            raise RuntimeError(
                "BayesNet has no learning run to set temperatures on: its last run inferred "
                "marginals (infer, or learner() without X), and temperatures act on learning "
                "only. Make the learning learner first and set them on it: lrn = "
                "bn.learner(X); bn.set_temperature(...); lrn.fit() (temperatures set on a "
                "learning run carry over to the next fit)")
        return model

    def set_temperature(self, value: float, variable: Any = None, row: int | None = None,
                        state: Any = None) -> None:
        """Set the temperature of table entries (all, one variable's table, one parent
        configuration ``row``, one ``state`` column, or one entry): see
        :meth:`TableTemperatures.set_temperature
        <bidlab.models.bayesnet.temperature.TableTemperatures.set_temperature>`. Safe while
        a learner trains (takes effect at the next sweep). Refused after an inference run
        (``infer``): temperatures act on learning runs."""
        self._temp_model(to_set=True).set_temperature(value, variable, row, state)

    def temperature(self) -> list[np.ndarray]:
        """Each variable's temperatures, shaped like its table."""
        return self._temp_model().temperature()

    @property
    def temperature_log_(self) -> list[dict[str, Any]]:
        """The temperature changes with the pass and minibatch each took effect at
        (AttributeError before a learning run, as for every fitted attribute)."""
        if self.__dict__.get("model_") is None:
            raise AttributeError("BayesNet has no temperature_log_ before a learning run: "
                                 "call fit(X) or learner(X) first")
        return self._temp_model().temperature_log

    def reset_temperature(self) -> None:
        """All temperatures back to 1 (logged like any other change)."""
        self.set_temperature(1.0)

    # -- learning -------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> BayesNet:
        """Learn the tables from ``X`` (rows = observations, one column per variable of
        ``network``: state indices, -1 or NaN where missing; a scipy sparse matrix is read
        densely, its unstored entries state 0), starting from the network's tables; ``y`` is
        ignored."""
        self.__dict__.pop("_network", None)
        lrn = self._learner(X, None, {})
        with self._threads():
            lrn.fit(progress=self._progress())
        return self

    def log_likelihood(self, X: Any) -> float:
        """Mean log-likelihood per row of complete rows ``X`` under ``network_``."""
        net = self._net()
        obs = _clamps(_rows(X, net), net)
        if (obs < 0).any():
            raise ValueError("BayesNet.log_likelihood needs complete rows (no -1 / NaN)")
        ch = GibbsChains(net, obs, seed=0)
        ch.X[...] = obs
        return float(ch._log_joint(np.arange(obs.shape[0], dtype=np.int64)).mean())

    def sample(self, n: int, random_state: Any = None) -> np.ndarray:
        """``n`` rows drawn from ``network_`` (ancestral sampling), int32 state indices.

        ``random_state``: None uses the estimator's ``random_state`` (fresh draws each call
        when that is None too); an int gives the same rows every time."""
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"BayesNet.sample(n): n must be an int >= 0 (rows to draw); "
                             f"got {n!r}")
        net = self._net()
        if n == 0:
            return np.zeros((0, net.n_vars), np.int32)
        ch = GibbsChains(net, np.full((int(n), net.n_vars), -1, np.int32),
                         seed=self._seed(random_state))
        ch.activate(1)
        return ch.X.copy()

    def to_bif(self, path: str | os.PathLike) -> Path:
        """Write ``network_`` (learned tables after ``fit``) as a BIF file."""
        return write_bif(self._net(), path)

    def _facts(self) -> list[tuple[str, Any]]:
        net = self.network_
        out: list[tuple[str, Any]] = [("network", repr(net))]
        if getattr(self, "rhat_", None) is not None:
            out.append(("max R-hat", float(self.rhat_)))
        if getattr(self, "mcse_", None) is not None:
            out.append(("max Monte-Carlo standard error", float(self.mcse_)))
        return out


def _rows(X: Any, net: Network) -> np.ndarray:
    """Data rows as a float64 (n, n_vars) array, one column per variable in the network's
    order: a DataFrame whose columns are named by strings has them matched to the
    variables by name (in any order); other input is read column by column. A scipy sparse
    matrix (or array) is read as the dense table it stands for: an entry it does not store
    is state 0, not a missing one (store -1 or NaN there)."""
    if sp.issparse(X):  # a state-index table: np.asarray would wrap it in a 0-d object
        X = X.toarray()
    cols = getattr(X, "columns", None)
    if cols is not None and len(cols) and all(isinstance(c, str) for c in cols):
        names = [str(c) for c in cols]
        unknown = [c for c in names if c not in net.names]
        missing = [v for v in net.names if v not in names]
        if unknown or missing or len(set(names)) != len(names):
            raise ValueError(f"BayesNet: X's columns must be the network's variables, "
                             f"each once (in any order); unknown: {unknown[:5]}, missing: "
                             f"{missing[:5]}: rename the columns, or pass X.to_numpy() "
                             "with the columns in the network's order")
        X = X[net.names]
    to_numpy = getattr(X, "to_numpy", None)
    if cols is not None and callable(to_numpy):
        try:  # pandas' nullable columns (Int64, Float64): pd.NA is a missing entry
            X = to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            pass  # entries that are not numbers: the message below
    try:
        data = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("BayesNet: X must hold state indices (0, 1, ...), with -1 or NaN "
                         "where missing; it holds entries that are not numbers: map state "
                         "names to indices with network_.states[v].index(name)") from None
    if data.ndim != 2 or data.shape[1] != net.n_vars:
        raise ValueError(f"BayesNet: X must be 2-D with one column per variable "
                         f"({net.n_vars}); got shape {data.shape}")
    if data.shape[0] == 0:
        raise ValueError("BayesNet: X has no rows: give at least one observation")
    return data


register_model("bayesnet", BayesNet)
