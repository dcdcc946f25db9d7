"""``SFA``: alternating least squares by conjugate gradient, for ratings and for implicit
feedback.

A scikit-learn style face on one engine, :class:`~bidlab.models.sfa.model.SFAModel`,
trained by the :class:`bidlab.learn.Learner`. ``X`` is users x items: a CSR of the
observed entries (or dense with NaN where missing)::

    from bidlab.models import SFA
    sfa = SFA(32, feedback="explicit", l2=5.0, random_state=0).fit(ratings)
    sfa.predict([0, 0], [10, 20])              # predicted ratings of (user, item) pairs
    items, scores = sfa.recommend(0, n=10)     # not among user 0's rated items
    sfa.similar_items(10, n=5)                 # by the cosine of the item factors
    new_ids = sfa.partial_fit_users(new_rows)  # fold in new users, items fixed

``learner(X)`` returns a live learner on the same model (``l2``, ``alpha`` and ``n_cg``
settable while it runs).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator

from bidlab import backend
from bidlab.kern import als
from bidlab.learn import Learner, MemorySource, Option
from bidlab.learn.model import register_model
from bidlab.models.base import BidlabEstimator, FittedByModel
from bidlab.models.saved_state import SFASaved
from bidlab.models.sfa.inputs import check_counts, check_ids, ratings_csr
from bidlab.models.sfa.model import FEEDBACK, SFAModel
from bidlab.models.sfa.serve import ServeMixin
from bidlab.models.sk_params import N_JOBS, factor_rows
from bidlab.models.validation import drawn_seed, frame_dtype, unwrap

__all__ = ["AUTO_L2", "SFA"]


#: ``l2="auto"``: the L2 weight of each feedback (see ``SFA``'s ``l2``). Measured on
#: held-out MovieLens-small ratings (k = 10 / 32): l2 = 0.1 1.240 / 1.089, 3 0.935 /
#: 0.968, 10 0.859 / 0.853, 30 0.879 / 0.879; on generated ratings the settings were not
#: chosen on, 10 was within 0.02 of the best of 0.1-30 with 11 ratings a user and 188.
AUTO_L2 = {"explicit": 10.0, "implicit": 0.1}


def _l2_ok(value: Any) -> bool:
    """``"auto"`` or a finite number >= 0 (not a bool)."""
    if isinstance(value, str):
        return value == "auto"
    return (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            and bool(np.isfinite(value)) and value >= 0)


class SFA(SFASaved, FittedByModel, ServeMixin, BidlabEstimator, BaseEstimator):
    """Matrix factorisation of ratings or implicit feedback by ALS with conjugate gradient.

    Parameters
    ----------
    n_components
        k, the number of factors.
    feedback
        ``"explicit"`` (squared loss on the observed ratings, with a global
        mean, user and item biases and L2) or ``"implicit"`` (Hu-Koren-Volinsky: every
        user-item pair counts, with preference 1 and confidence ``1 + alpha r`` where
        the count ``r`` is stored and nonzero, preference 0 and confidence 1 elsewhere: a
        zero count, stored or in a dense ``X``, is no interaction).
    l2
        L2 penalty weight of the factors (and biases), or ``"auto"`` (the default):
        :data:`AUTO_L2` of the feedback, 10 for explicit ratings (each bias and
        factor held back as by ten ratings at the mean, the damping of Koren's
        baseline estimates; 0.1 left MovieLens-small's held-out RMSE at 1.24, worse
        than predicting the mean) and 0.1 for implicit feedback.
    alpha
        the implicit confidence slope.
    n_cg
        conjugate-gradient steps of each side per sweep, warm-started from the last
        sweep.
    max_iter
        sweeps (passes) of ``fit``.
    batch_size
        users per minibatch (None: all of them; a sweep's item step runs once,
        after its last minibatch, whatever the size).
    init_scale
        the standard deviation of the random initial item factors.
    random_state
        seed (None, an int, a numpy ``RandomState`` or ``Generator``).
    verbose
        print progress while fitting (0: silent).
    dtype
        float32 or float64; None follows the input.
    device
        ``"cpu"`` or ``"gpu"`` (CuPy; needs ``bidlab[gpu]``).
    n_jobs
        CPU threads of the kernels (None: leave the limits alone; -1: every core).

    Notes
    -----
    X is users x items: a sparse matrix of the observed entries (or a dense one with NaN
    where unobserved). A (user, item) pair stored twice is refused, in a COO matrix too;
    ``scipy.sparse.csr_matrix((r, (u, i)))`` sums such pairs before SFA sees them, so
    build X from (rating, (user, item)) triples with ``scipy.sparse.coo_matrix``.

    Learned: ``user_factors_`` (users x k), ``item_factors_`` (items x k),
    ``user_bias_``, ``item_bias_``, ``global_mean_`` (explicit; zeros and 0 for implicit),
    ``rmse_`` (training RMSE of each sweep over the stored entries; for implicit, of the
    preference 1 there), ``n_iter_``, ``n_users_``, ``n_items_``, ``model_``.

    scikit-learn's ``check_estimator`` does not apply: ``predict`` takes (user, item) id
    pairs rather than rows of ``X``, and ``fit`` refuses users with no observed entry
    (the checks' data have rows of zeros that a sparse input stores as nothing).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bidlab.models import SFA
    >>> R = sp.random(50, 40, density=0.2, random_state=0, format="csr")
    >>> R.data = np.ceil(R.data * 5)
    >>> sfa = SFA(4, max_iter=5, random_state=0).fit(R)
    >>> sfa.recommend(0, n=3)[0].shape
    (3,)
    """

    ROWS_ARE_SAMPLES = False  # rows are users
    TRANSIENT = (*BidlabEstimator.TRANSIENT, "_counts_of")  # (a cache of train_'s counts)
    PARAMS = (
        Option("n_components", int, 10, "number of factors k", low=1),
        Option("feedback", str, "explicit", "explicit ratings or implicit feedback",
               choices=FEEDBACK),
        Option("l2", float, "auto", "L2 penalty weight ('auto': 10 for explicit ratings, "
               "0.1 for implicit feedback)", test=_l2_ok, text="'auto' or a float >= 0"),
        Option("alpha", float, 1.0, "implicit confidence slope", low=0.0),
        Option("n_cg", int, 3, "conjugate-gradient steps per side per sweep", low=1),
        Option("max_iter", int, 15, "sweeps over the data", low=1),
        Option("batch_size", int, None, "users per minibatch (None: all)", low=1,
               none_ok=True),
        Option("init_scale", float, 0.01, "standard deviation of the initial item factors",
               low=0.0),
        *factor_rows("factors"),
        N_JOBS,
    )
    n_jobs = None  # (what an estimator saved before the parameter reads)

    def __init__(
        self,
        n_components: int = 10,
        *,
        feedback: str = "explicit",
        l2: float | str = "auto",
        alpha: float = 1.0,
        n_cg: int = 3,
        max_iter: int = 15,
        batch_size: int | None = None,
        init_scale: float = 0.01,
        random_state: Any = None,
        verbose: int = 0,
        dtype: Any = None,
        device: str = "cpu",
        n_jobs: int | None = None,
    ) -> None:
        self._keep_params(locals())

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = True
        tags.requires_fit = True
        return tags

    # -- input --------------------------------------------------------------------------------
    def _dtype(self, X: Any) -> np.dtype:
        if getattr(self, "model_", None) is not None:
            return self.model_.dtype
        if self.dtype is not None:
            return np.dtype(self.dtype)
        if hasattr(X, "user_ids") and sp.issparse(getattr(X, "X", None)):
            X = X.X  # a bidlab.datasets Ratings (load_movielens): its matrix's type
        X = unwrap(X)
        dt = getattr(X, "dtype", None)
        dt = frame_dtype(X) if dt is None else dt
        return np.dtype(np.float32) if dt == np.float32 else np.dtype(np.float64)

    def _ratings(self, X: Any, ranks: int = 1) -> sp.csr_matrix:
        """``X`` as CSR ratings, checked; ``ranks`` > 1: ``X`` is one rank's share of the
        users, and the other ranks hold the rest (only the items bound the factors)."""
        name = type(self).__name__
        S = ratings_csr(name, X, self._dtype(X), implicit=self.feedback == "implicit")
        k = int(self.n_components)
        most = S.shape[1] if ranks > 1 else min(S.shape)
        if k > most:
            raise ValueError(f"{name}: n_components={k} is larger than X allows "
                             f"({S.shape[0]} users x {S.shape[1]} items): use n_components "
                             f"<= {most}")
        check_counts(name, S, self.feedback)
        return S

    def _model(self, S: sp.csr_matrix) -> SFAModel:
        mu = float(S.data.mean()) if self.feedback == "explicit" and S.nnz else 0.0
        return SFAModel(mu=mu, mu_count=int(S.nnz), dtype=S.dtype,
                        k=int(self.n_components), feedback=self.feedback,
                        l2=AUTO_L2[self.feedback] if self.l2 == "auto" else float(self.l2),
                        alpha=float(self.alpha), n_cg=int(self.n_cg),
                        init_scale=float(self.init_scale),
                        random_state=drawn_seed(self.random_state))

    # the estimator's guard wraps the methods a class defines: these are ServeMixin's
    partial_fit_users = ServeMixin.partial_fit_users
    partial_fit_items = ServeMixin.partial_fit_items

    def _default_batch(self, S: Any) -> int:
        """Users per minibatch when ``batch_size`` is None: all of ``S``'s (a sweep is
        one minibatch), which ranks ask for too (:mod:`bidlab.distributed.sharding`)."""
        return int(S.shape[0])

    def _source(self, S: sp.csr_matrix, batch_size: int | None) -> MemorySource:
        X = S if self.device == "cpu" else backend.to_device(S)
        bs = batch_size or self.batch_size or self._default_batch(S)
        return MemorySource(X, batch_size=min(int(bs), S.shape[0]), shuffle=False,
                            names=("X",))

    # -- training -----------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> SFA:
        """Factorise ``X`` (users x items; ``y`` is ignored) with ``max_iter`` sweeps."""
        self._validate_params()
        S = self._ratings(X)
        model = self._model(S)
        src = self._source(S, None)
        lrn = Learner(model, src, model.default_updater(), name="sfa", n_passes=self.max_iter,
                      val_every=0, record_size=max(1, src.batches_per_pass * self.max_iter))
        f = model.width
        with self._threads(), als.blas_threads(max(S.shape) * f * f):
            lrn.fit(progress=self._progress())
        self._fitted(model, lrn, S)
        return self

    def _fitted(self, model: SFAModel, lrn: Learner, S: sp.csr_matrix) -> None:
        self.model_ = model
        self.updater_ = lrn.updater
        self.train_ = S
        self.n_users_, self.n_items_ = (int(n) for n in S.shape)

    def learner(self, X: Any, y: Any = None, **options: Any) -> Learner:
        """A live :class:`bidlab.learn.Learner` on ``X`` with this estimator's settings; its
        model becomes this estimator's (``user_factors_`` and the rest follow it live).
        ``options``: learner options (``n_passes``, default ``max_iter``; ``batch_size``;
        ``checkpoint``; ...)."""
        self._validate_params()
        S = self._ratings(X, ranks=getattr(options.get("comm"), "size", 1))
        model = self._model(S)
        src = self._source(S, options.pop("batch_size", None))
        options.setdefault("n_passes", self.max_iter)
        options.setdefault("val_every", 0)
        lrn = Learner(model, src, model.default_updater(), name=options.pop("name", "sfa"),
                      **options)
        lrn.init()
        self._fitted(model, lrn, S)
        return lrn

    @property
    def n_iter_(self) -> int:
        """Sweeps done (live while a learner trains)."""
        return int(self.model_.n_passes_done)

    @property
    def rmse_(self) -> list[float]:
        """Training RMSE of each sweep (before its user step)."""
        return list(self.model_.rmse)

    def _facts(self) -> list[tuple[str, Any]]:
        self._follow_model()
        return [("users x items", f"{self.n_users_} x {self.n_items_}"),
                ("sweeps", self.model_.n_passes_done),
                ("training RMSE", f"{self.model_.rmse[-1]:.4f}" if self.model_.rmse
                 else "-")]

    def gather_ranks(self, comm: Any) -> None:
        """After a run on ranks: every rank's users (factors, ratings) on every rank, so a
        recommender saved by one answers for them all (:mod:`bidlab.models.sfa.ranks`)."""
        from bidlab.models.sfa.ranks import gather_users

        gather_users(comm, self)

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the RMSE of the predictions at ``X``'s stored entries (users x items of
        the fitted shape): higher is better. Explicit ratings are compared with the
        ratings; implicit feedback with the preference, 1 at every nonzero count (what
        ``rmse_`` reports: a count's size is its confidence, not its target)."""
        self._follow_model()
        S = ratings_csr(type(self).__name__, X, self.model_.dtype, n_items=self.n_items_,
                        allow_empty_rows=True, implicit=not self.model_.bias)
        if S.shape[0] > self.n_users_:
            check_ids(type(self).__name__, "user", [S.shape[0] - 1], self.n_users_)
        users = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
        pred = self.predict(users, S.indices)
        target = S.data if self.model_.bias else 1.0
        return -float(np.sqrt(np.mean((pred - target) ** 2))) if S.nnz else 0.0


register_model("sfa", SFA)
