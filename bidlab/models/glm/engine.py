"""The engine behind :class:`~bidlab.models.glm.GLM`: its model, updater and mixins made from
the estimator's parameters and the data, and the :class:`bidlab.learn.Learner` runs that
``fit`` and ``partial_fit`` make (averaging, the loss curve, the thread limit).

:class:`GLMEngine` is a mixin of the estimator; it reads the estimator's parameters.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from bidlab import backend
from bidlab.learn import UPDATERS, L1Regularizer, L2Regularizer, Learner, MemorySource
from bidlab.models.glm.auto_rate import RATE_GRID, _take, is_auto, pick_rates
from bidlab.models.glm.links import Layout
from bidlab.models.glm.model import GLMModel
from bidlab.models.glm.race import adopt, run_race, winning_rates
from bidlab.models.glm.stopping import HeldOut, split_rows
from bidlab.models.glm.targets import encode, resolve
from bidlab.models.validation import seed_from

#: ``batch_size="auto"``: rows per minibatch, or fewer on small data so that a pass
#: makes at least AUTO_STEPS steps (measured on 300 to 3,000 rows: one step a pass left
#: a 300-row threshold problem at 0.856 accuracy after 10 passes, 8 steps 0.956, 16
#: steps 0.981; held-out log loss with 8 / 16 / 32 steps: raw digits 0.212 / 0.178 /
#: 0.154, raw breast cancer 0.222 / 0.215 / 0.206, standardised 0.108 / 0.102 / 0.131;
#: 32 steps made a 3,600-row TF-IDF fit 30 % slower than 8, 16 is the compromise)
AUTO_BATCH = 500
AUTO_STEPS = 16

__all__ = ["GLMEngine", "UPDATER_CHOICES", "n_steps"]

#: the updaters GLM's ``updater`` parameter names (entries of bidlab.learn.UPDATERS)
UPDATER_CHOICES = ("adagrad", "grad")


def n_steps(n_rows: int, batch: int, n_passes: int) -> int:
    """Minibatch steps in ``n_passes`` over ``n_rows`` (the last minibatch may be short)."""
    return n_passes * -(-n_rows // batch)


def _shared_binary_labels(links: Any, classes: list[Any]) -> np.ndarray | None:
    """The two labels all targets share when every target is a binary classifier (a
    logistic, svm or 2-class softmax link): the GLM is then a multilabel classifier."""
    if any(lk == "linear" for lk in links) or any(c is None or len(c) != 2 for c in classes):
        return None
    first = classes[0]
    same = all(c.dtype == first.dtype and np.array_equal(c, first) for c in classes[1:])
    return first if same else None


def _linear_means(t: Any, layout: Layout, Y2: np.ndarray,
                  w: np.ndarray | None) -> np.ndarray | None:
    """The biases a fresh model starts from: each linear target's mean value (weighted by
    the row weights ``w``), 0 for the others; None when every bias starts at 0. With zero
    biases, a target whose values sit far from 0 spends its passes climbing there: ADAGrad
    moves a bias about ``lrate`` a step, so diabetes' targets (mean 152) fit 10 passes to
    a held-out R^2 of 0.05, 0.48 when started at the mean."""
    start = np.zeros(layout.T, dtype=np.float64)
    w = None if w is None else np.asarray(backend.to_host(w), np.float64).reshape(-1)
    if Y2.shape[0] == 0 or (w is not None and not w.sum() > 0):
        return None
    for k, (link, col) in enumerate(zip(t.links, t.data_col, strict=True)):
        if link == "linear":
            start[layout.columns(k)] = np.average(np.asarray(Y2[:, col], np.float64), weights=w)
    return start if np.any(start != 0.0) else None


def _weight_mean(w: Any, comm: Any = None) -> float | None:
    """The mean of the row weights ``w`` a run trains on (None: unweighted, or no weight
    above 0), which scales each weighted minibatch's gradient (``GLMModel.weight_mean``).
    On several ranks it is the mean over all the ranks' rows: with each rank's own, the
    ranks' averaged model settled at the mean of their separately weighted losses, not
    at the weighted optimum of all the rows (and a rank whose weights are all 0 counted
    as much as the others)."""
    if w is None:
        return None
    total = np.array([float(np.asarray(backend.to_host(w), np.float64).sum()), len(w)])
    if comm is not None and int(getattr(comm, "size", 1)) > 1:
        comm.allreduce([total], "sum")
        if total[0] <= 0:
            raise ValueError(f"sample_weight is 0 on every row of all {comm.size} ranks: "
                             "give at least one row a weight above 0")
    mean = total[0] / total[1] if total[1] else 0.0
    return mean if mean > 0 else None


def _drop_iterates(updater: Any) -> None:
    """Empty ``updater``'s running sum of iterates (kept by a stopped run)."""
    it = getattr(updater, "iterates", None)
    if it is not None and it.n:
        if it.sums is not None:
            for acc in it.sums:
                acc.fill(0)
        it.n = 0


class GLMEngine:
    """Builds and runs the GLM's engine (``model_``, ``updater_``, ``mixins_``)."""

    # the estimator's parameters and checks: link, targmap, lrate, l1, l2, updater,
    # batch_size, average, random_state, device, dtype_; _xp, _threads, _progress and
    # _build_learner (the estimator base's one way to make a learner)

    # -- what the engine trained (live while a learner trains) --------------------------------
    @property
    def n_iter_(self) -> int:
        """Passes over the data trained, adding up over warm-started fits, partial fits
        and learner runs (live while a learner trains)."""
        return int(self.model_.passes_done)

    @property
    def n_steps_(self) -> int:
        """Minibatch steps of the passes trained (``n_iter_``)."""
        return int(self.model_.steps_done)

    @property
    def loss_curve_(self) -> list[float]:
        """The mean training loss per row of each pass trained, summed over targets (none
        where no loss was computed: ``fit`` on a GPU)."""
        return list(self.model_.pass_losses)

    # -- building the engine ---------------------------------------------------------------
    def _per_target_values(self, name: str, K: int) -> Any:
        """A parameter as one number, or one value per model target (a list); ``lrate``
        is the chosen ``lrate_`` once the pilot ran (:meth:`_choose_rates`)."""
        value = getattr(self, name)
        if name == "lrate" and is_auto(value):
            value = getattr(self, "lrate_", RATE_GRID[2])
        v = np.asarray(value, dtype=np.float64).reshape(-1)
        if v.size == 1:
            return float(v[0])
        if v.size != K:
            raise ValueError(f"{name} has {v.size} values but the model has {K} targets: give "
                             f"one number or one value per target ({K})")
        return float(v[0]) if np.all(v == v[0]) else v.tolist()

    def _init_engine(self, X: Any, Y2: np.ndarray, y_1d: bool, classes: Any = None) -> None:
        """A fresh model, updater and mixins for data like (X, Y2)."""
        t = resolve(self.link, self.targmap, Y2, y_1d, "GLM", classes)
        layout = Layout(t.links, t.widths())
        rates = {n: self._per_target_values(n, t.K) for n in ("lrate", "l1", "l2")}
        self.targets_ = t
        self.layout_ = layout
        self._fit_link, self._fit_targmap = self._link_and_targmap()
        self.model_ = GLMModel(layout, t.enc_col)
        self.updater_ = UPDATERS[self.updater](lrate=rates["lrate"])
        self.mixins_ = [L1Regularizer(mats=[0], l1=rates["l1"]),
                        L2Regularizer(mats=[0], l2=rates["l2"])]
        self.n_targets_ = t.K
        self.validation_loss_curve_: list[float] = []
        self.scaling_ = None  # a fresh model takes the features as given (fit sets its map)
        self.target_scale_ = None  # and the targets (fit sets their scales)
        self.multilabel_ = False
        if t.K == 1:
            if t.classes[t.data_col[0]] is not None:
                self.classes_ = t.classes[t.data_col[0]]
            elif hasattr(self, "classes_"):
                del self.classes_
        else:
            per_target = [t.classes[c] for c in t.data_col]
            shared = _shared_binary_labels(t.links, per_target)
            self.multilabel_ = shared is not None
            self.classes_ = shared if shared is not None else per_target

    def _link_and_targmap(self) -> tuple[Any, list[int] | None]:
        """``link`` and ``targmap`` as comparable values (lists for sequences)."""
        link = self.link if isinstance(self.link, str) else list(self.link)
        tm = self.targmap
        return link, None if tm is None else [int(v) for v in np.asarray(tm).reshape(-1)]

    def _warm_rates(self) -> dict[str, Any] | None:
        """With ``warm_start`` on a fitted GLM, the ``lrate`` / ``l1`` / ``l2`` that its
        engine continues with: this GLM's, which ``set_params`` may have changed since
        (``lrate="auto"`` keeps the fitted ``lrate_``). None when ``fit`` starts over: not
        fitted, or built with other links, another target map or another updater, whose
        weights and updater state cannot start this model."""
        if not (self.warm_start and hasattr(self, "model_")):
            return None
        link, tm = self._link_and_targmap()
        if (self.__dict__.get("_fit_link", link) != link
                or self.__dict__.get("_fit_targmap", tm) != tm
                or type(self.updater_) is not UPDATERS[self.updater]):
            return None
        return {n: self._per_target_values(n, self.targets_.K) for n in ("lrate", "l1", "l2")}

    def _set_rates(self, rates: dict[str, Any]) -> None:
        """Train on with ``rates`` (:meth:`_warm_rates`): the updater's and mixins'."""
        for part, name in ((self.updater_, "lrate"), (self.mixins_[0], "l1"),
                           (self.mixins_[1], "l2")):
            part.opts.set(**{name: rates[name]})
            if getattr(part, "model", None) is not None:  # built: refill its per-row values
                part.apply_changes({name: rates[name]})
        self.lrate_ = rates["lrate"]

    def _known_classes(self) -> list[Any] | None:
        """Each data column's classes as resolved (for the pilot's and the race's engines,
        which need not infer them again); None when a column has none (a linear one)."""
        cls = self.targets_.classes
        return None if any(c is None for c in cls) else list(cls)

    def _choose_rates(self, X: Any, Y2: np.ndarray, w: np.ndarray | None,
                      comm: Any = None) -> None:
        """Set ``lrate_``: with ``lrate="auto"`` from the pilot on (X, Y2, w) (see
        :mod:`bidlab.models.glm.auto_rate`), and the updater to those rates; otherwise
        the given rates. With a communicator of several ranks, every rank takes rank 0's
        pick (each rank's pilot sees only its own rows; unweighted on a rank whose row
        weights are all 0)."""
        t = self.targets_
        if is_auto(self.lrate):
            if w is not None and not np.any(w > 0):  # a rank's shard: nothing to weigh
                w = None
            rates = pick_rates(self, X, Y2, w, t.data_col, t.links, self._seed())
            if comm is not None and int(getattr(comm, "size", 1)) > 1:
                shared = np.array(np.broadcast_to(np.asarray(rates, np.float64), (t.K,)))
                comm.broadcast([shared], root=0)
                rates = float(shared[0]) if np.all(shared == shared[0]) else shared.tolist()
            self.lrate_ = rates
            self.updater_ = UPDATERS[self.updater](lrate=self.lrate_)
        else:
            self.lrate_ = self._per_target_values("lrate", t.K)

    def _train_pilot(self, X: Any, Y2: np.ndarray, w: np.ndarray | None, owner: Any) -> None:
        """Train this (pilot) GLM one pass on validated (X, Y2, w) of ``owner``'s fit."""
        self.dtype_ = owner.dtype_
        self.n_features_in_ = X.shape[1]
        self._init_engine(X, Y2, y_1d=False, classes=owner._known_classes())
        self.lrate_ = self._per_target_values("lrate", self.targets_.K)
        self._run(X, Y2, w, shuffle=False, n_passes=1, average=False)

    def _seed(self) -> int:
        seed = seed_from(self.random_state)
        return int(check_random_state(None).randint(2**31 - 1)) if seed is None else seed

    def _make_learner(self, X: Any, Y2: np.ndarray, w: np.ndarray | None, *, shuffle: bool,
                      batch_size: int, **options: Any) -> Learner:
        """A Learner training ``model_`` on (X, Y2[, w]) with ``updater_`` and ``mixins_``
        (built by the estimator base's ``_build_learner``; ``options``: its options and
        ``live``)."""
        xp = self._xp()
        if not self.model_.initialised:  # a fresh model: where its biases start
            self.model_.bias_start = _linear_means(self.targets_, self.layout_, Y2, w)
        Ye = encode(self.targets_, Y2, self.dtype_)
        if shuffle:  # one seeded order for all passes; minibatches are then row ranges
            perm = np.random.default_rng(self._seed()).permutation(X.shape[0])
            X = _take(X, perm)
            Ye = Ye[perm]
            w = None if w is None else w[perm]
        mats = [X, xp.asarray(Ye)]
        self.model_.weight_mean = _weight_mean(w, options.get("comm"))
        if w is not None:
            mats.append(xp.asarray(np.asarray(w, dtype=self.dtype_).reshape(-1, 1)))
        source = MemorySource(*mats, batch_size=min(int(batch_size), X.shape[0]))
        if "updater" in options:
            raise ValueError(f"{type(self).__name__}.learner: the updater is the estimator's "
                             "own; choose it with GLM(updater='adagrad' or 'grad', lrate=...)")
        extra = list(options.pop("mixins", None) or ())  # the user's KPIs and terms, after
        return self._build_learner(self.model_, source, self.updater_,  # its L1 and L2
                                   [*self.mixins_, *extra], **options)

    def _batch_rows(self, n: int, batch_size: int | str | None = None,
                    steps: int = AUTO_STEPS) -> int:
        """Rows per minibatch over ``n`` rows for ``batch_size`` (default this GLM's):
        ``"auto"`` is :data:`AUTO_BATCH`, or ``n / steps`` rows when that is fewer, so a
        small data set still takes ``steps`` (:data:`AUTO_STEPS`) steps a pass; a number
        is kept (at most ``n``)."""
        b = self.batch_size if batch_size is None else batch_size
        if isinstance(b, str):  # "auto" (the parameter check allows nothing else)
            b = min(AUTO_BATCH, -(-int(n) // int(steps)))
        return max(1, min(int(b), int(n)))

    def _averaging(self, X: Any, batch_size: int, n_passes: int) -> dict[str, int]:
        """The updater's averaging options for a run of ``n_passes`` over ``X``: average
        the last ``average`` fraction of its updates, one in ``average_every_``.

        Adding an iterate is a pass over the model (features x weight columns, after the
        deferred L1 / L2 terms land); a step costs about its minibatch's nonzeros x weight
        columns, and per element the two cost about the same (BENCHMARKS.md, "design
        measurements"). One iterate in
        ``ceil(5 * features / nonzeros per minibatch)`` keeps averaging the last half of a
        run near a tenth of its time; narrow or dense data averages every step.
        """
        batch = min(int(batch_size), X.shape[0])
        steps = n_steps(X.shape[0], batch, n_passes)
        n_avg = math.ceil(float(self.average) * steps)
        nnz_row = X.nnz / max(X.shape[0], 1) if hasattr(X, "nnz") else X.shape[1]
        every = max(1, math.ceil(5.0 * X.shape[1] / max(batch * nnz_row, 1.0)))
        self.average_every_ = every
        return {"average_from": steps - n_avg if n_avg > 0 else -1, "average_every": every}

    def _hold_out(self, X: Any, Y2: np.ndarray, w: np.ndarray | None
                  ) -> tuple[Any, np.ndarray, np.ndarray | None, HeldOut | None]:
        """``fit``'s training rows and its held-out rows' stopping rule (see
        :mod:`bidlab.models.glm.stopping`); all rows and None when ``tol`` is None,
        ``n_passes`` under 3 or too few rows would be held out."""
        if self.tol is None or self.n_passes < 3:
            return X, Y2, w, None
        rows = split_rows(X.shape[0], self.validation_fraction, self._seed())
        if rows is None:
            return X, Y2, w, None
        tr, ho = rows
        held = HeldOut(self, _take(X, ho), Y2[ho], None if w is None else w[ho],
                       tol=self.tol, average=self.average, last_pass=self.n_passes)
        return _take(X, tr), Y2[tr], None if w is None else w[tr], held

    def _run(self, X: Any, Y2: np.ndarray, w: np.ndarray | None, *, shuffle: bool,
             n_passes: int, average: bool, train_loss: bool | None = None,
             race: tuple[Any, np.ndarray] | None = None, held: HeldOut | None = None) -> None:
        """Train in this thread: ``n_passes`` over the rows, every minibatch trains; with
        ``average``, the final model is the mean of the last iterates (see ``average``).
        ``race``: (the first-pass race, its winners) that this run continues: the model
        starts from the winners and averages as a run of ``n_passes + 1`` passes would.
        ``held``: the held-out stopping rule, which ends the run and picks its averaged
        model (every iterate of the run is summed; the rule takes the last ones' mean)."""
        batch = self._batch_rows(X.shape[0])
        avg = (self._averaging(X, batch, n_passes + (race is not None))
               if average else {"average_from": -1})
        if race is None and avg["average_from"] >= 0:  # a warm start's updater counts on
            avg["average_from"] += int(self.updater_.t)
        if not average:  # a stopped fit's sum of iterates would land over this run's model
            _drop_iterates(self.updater_)
        if held is not None:
            held.start(int(race is not None))
            start = int(race[0].updater_.t) if race is not None else 0
            avg["average_from"] = start if float(self.average) > 0 else -1
        on_cpu = self.device == "cpu"  # a GPU loss would wait for the device every step
        lrn = self._make_learner(X, Y2, w, shuffle=shuffle, batch_size=batch,
                                 n_passes=n_passes, val_every=0, max_steps=None,
                                 checkpoint=None, mixin_kpis=False,
                                 train_loss=on_cpu if train_loss is None else train_loss,
                                 **avg)
        if race is not None:
            lrn.init()
            adopt(self, *race)
        self.model_.converged = False
        self.model_.stopping = None if held is None else (held, lrn.updater)
        try:
            with self._threads():
                lrn.fit(progress=self._progress())
        finally:
            self.model_.stopping = None
            self.model_.converged = False
        if held is not None:
            held.finish(self.model_)
            self.validation_loss_curve_ = list(held.curve)

    def _fit_passes(self, X: Any, Y2: np.ndarray, w: np.ndarray | None,
                    held: HeldOut | None = None) -> None:
        """``fit``'s passes. Under ``lrate="auto"`` with more than one pass, the first pass
        races each target's candidate rates side by side and the winner trains the rest
        (:mod:`bidlab.models.glm.race`); otherwise every pass trains with ``lrate_``.
        ``held``: the held-out rows' stopping rule (None: all ``n_passes``)."""
        if not (is_auto(self.lrate) and self.n_passes > 1):
            self._run(X, Y2, w, shuffle=self.shuffle, n_passes=self.n_passes, average=True,
                      held=held)
            return
        race, chosen, loss = run_race(self, X, Y2, w)
        self.lrate_ = winning_rates(race, chosen)
        self.updater_ = UPDATERS[self.updater](lrate=self.lrate_)
        model = self.model_  # the race's pass counts as this model's first
        model.steps_done += race.n_steps_
        model.passes_done += 1
        if self.device == "cpu":
            model.pass_losses.append(loss)
        self._run(X, Y2, w, shuffle=self.shuffle, n_passes=self.n_passes - 1, average=True,
                  race=(race, chosen), held=held)
