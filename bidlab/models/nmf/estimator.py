"""``NMF``: nonnegative matrix factorisation by coordinate descent or multiplicative updates,
with missing values.

A scikit-learn face on one engine, :class:`~bidlab.models.nmf.model.NMFModel`, trained by
the :class:`bidlab.learn.Learner`: ``X ~ W @ H`` (samples as rows: ``W`` is n_samples x
k, ``H = components_`` is k x n_features), both nonnegative, minimising the Frobenius or
the generalised Kullback-Leibler loss over the **observed** entries only: NaN entries of a
dense ``X``, and the entries a ``mask=`` (True = observed) marks missing, count neither in
the loss nor in the updates. ``method="batch"`` takes one step of ``H`` per pass:
scikit-learn's ``solver="cd"`` (the default for the Frobenius loss with every entry
observed) or ``solver="mu"`` (any loss, missing entries), the same iterates as scikit-learn's
from the same start;
``method="online"`` steps at every minibatch (``partial_fit`` always does)::

    from bidlab.models import NMF
    nmf = NMF(20, loss="kl", random_state=0).fit(X)          # X: n x d, dense or CSR
    W = nmf.transform(X_new); nmf.components_; nmf.reconstruction_err_
    NMF(5).fit(X_with_nans).inverse_transform(W)             # fills the missing entries
    nmf.score(X_test)            # minus the mean loss per observed entry (GridSearchCV)

``learner(X)`` returns a live learner on the same model (``components_`` follows it).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import validate_data

from bidlab import backend
from bidlab.kern.threads import one_blas_thread
from bidlab.learn import Learner, MemorySource, Option
from bidlab.learn.model import register_model
from bidlab.models.base import BidlabEstimator, FittedByModel
from bidlab.models.nmf.inputs import Prepared, prepare, ratings_input, unwrap
from bidlab.models.nmf.model import LOSSES, NMFModel
from bidlab.models.nmf.seeding import start
from bidlab.models.nmf.serve import NMFServe
from bidlab.models.saved_state import NMFSaved
from bidlab.models.sk_params import N_JOBS, factor_rows
from bidlab.models.validation import drawn_seed, frame_dtype

__all__ = ["NMF"]


def _valid_init(x: Any) -> bool:
    if isinstance(x, str):
        return x in ("random", "nndsvda", "custom")
    return len(np.shape(x)) == 2


def _valid_alpha_h(x: Any) -> bool:
    if isinstance(x, str):
        return x == "same"
    return (isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))
            and math.isfinite(float(x)) and float(x) >= 0)


class NMF(NMFSaved, NMFServe, FittedByModel, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
          BidlabEstimator):
    """Nonnegative matrix factorisation ``X ~ W @ H`` over the observed entries of ``X``.

    Parameters
    ----------
    n_components
        k, the number of components (None: n_features).
    init
        ``"random"`` (scikit-learn's: ``|normal|`` draws times ``sqrt(mean(X) / k)``,
        the same draws for the same ``random_state``), ``"nndsvda"`` (scikit-learn's
        SVD-based start; missing entries of a dense ``X`` at the observed mean, of a
        sparse one at zero), ``"custom"`` (``W`` and ``H`` given to ``fit``), or a
        k x n_features array of initial components (each row of ``W`` then starts at
        ``sqrt(mean(X) / k)``).
    loss
        ``"frobenius"`` (squared error) or ``"kl"`` (generalised Kullback-Leibler).
    solver
        ``"cd"``: coordinate descent (scikit-learn's default solver: each factor's
        columns, then the components' rows, minimised exactly one at a time;
        :class:`~bidlab.learn.updaters.BatchCD`) for the Frobenius loss with
        ``method="batch"`` and every entry observed; ``"mu"``: multiplicative updates
        (any loss, missing entries, ``"online"``); ``"auto"`` (default): ``"cd"`` where
        it applies, else ``"mu"``. On KOS at k = 20 scikit-learn's own ``cd`` reaches its
        ``mu``'s 100-iteration error in 13 iterations.
    method
        ``"batch"`` (one step of ``H`` per pass over the data, from the pass's
        summed statistics: scikit-learn's ``solver="mu"``) or ``"online"`` (a step per
        minibatch from decaying running averages of the steps' numerators and
        denominators, as scikit-learn's ``MiniBatchNMF``;
        :class:`~bidlab.learn.updaters.multiplicative.OnlineMult`).
    batch_size
        rows per minibatch.
    w_iters
        multiplicative steps of a minibatch's row factors each time it is visited
        (rows seen for the first time take at least 10); None: 1 for ``"batch"``
        (scikit-learn's iteration) and 5 for ``"online"`` (measured on a rank-3
        400 x 30 matrix, 30 passes: residual 144 with 1 step, 25 with 5).
    max_iter
        passes over the data (``fit``); the most ``W`` iterations of
        ``transform``.
    tol
        stop when the error fell by less than ``tol`` times the first error over the
        last 10 passes (checked every 10, as scikit-learn's ``mu`` solver does; the first
        error is the first pass's, not the initial one's; scikit-learn's ``cd`` stops by
        its own rule, so ``n_iter_`` can differ there); 0: run ``max_iter`` passes.
    alpha_W, alpha_H, l1_ratio
        scikit-learn's penalties: ``n_features * alpha_W``
        times ``l1_ratio |W| + (1 - l1_ratio) ||W||^2 / 2``, and ``n_samples * alpha_H``
        times the same of ``H`` (``alpha_H="same"``: ``alpha_W``); 0: none. The
        reported errors and scores leave them out, as scikit-learn's do.
    random_state
        seed (None, an int, a numpy ``RandomState`` or ``Generator``) of the
        random start and the online order.
    verbose
        print progress lines while fitting (0: silent).
    dtype
        float32 or float64; None (default) follows the input.
    device
        ``"cpu"`` or ``"gpu"`` (CuPy; needs ``bidlab[gpu]``).
    n_jobs
        CPU threads of the kernels (None: leave the limits alone; -1: every core).

    Notes
    -----

    Learned: ``components_`` (k x n_features), ``reconstruction_err_`` (scikit-learn's
    scale: the Frobenius norm of the residual, or ``sqrt(2 KL)``, over the observed
    entries), ``n_iter_`` (passes), ``n_components_``, ``n_features_in_``, ``model_``.
    ``n_iter_`` follows the model, live while a :meth:`learner` trains;
    ``reconstruction_err_`` is that of the final factors after ``fit`` and
    ``partial_fit``, and the last pass's after a learner's training.

    scikit-learn's estimator checks (``check_estimator``) pass except two, expected to
    fail: ``check_transformer_general`` and ``check_transformer_data_not_an_array`` want
    ``fit_transform(X)`` to agree with ``transform(X)`` within 0.01, but ``fit_transform``
    returns the row factors of the last multiplicative iteration while ``transform``
    solves them again from a constant start for the final components, and with
    ``n_components`` = n_features (the default on their 3-feature data) the factorisation
    is far from unique; scikit-learn's own ``NMF(solver="mu", init="random")`` fails the
    same two checks for the same reason.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.models import NMF
    >>> X = np.random.default_rng(0).random((40, 6))
    >>> nmf = NMF(n_components=2, max_iter=50, random_state=0).fit(X)
    >>> nmf.components_.shape
    (2, 6)
    >>> bool((nmf.transform(X) >= 0).all())
    True
    """

    PARAMS = (
        Option("n_components", int, None, "number of components k", low=1, none_ok=True),
        Option("init", str, "random", "initial factors", test=_valid_init,
               text="one of 'random', 'nndsvda', 'custom' or a k x n_features array of "
               "components"),
        Option("loss", str, "frobenius", "the loss over the observed entries",
               choices=LOSSES),
        Option("solver", str, "auto", "how the factors step: coordinate descent or "
               "multiplicative updates ('auto': 'cd' where it applies)",
               choices=("auto", "cd", "mu")),
        Option("method", str, "batch", "one step of the components per pass, or per "
               "minibatch", choices=("batch", "online")),
        Option("batch_size", int, 4096, "rows per minibatch", low=1),
        Option("w_iters", int, None, "multiplicative steps of a minibatch's row factors "
               "per visit (None: 1 for batch, 5 for online)", low=1, none_ok=True),
        Option("max_iter", int, 200, "passes over the data", low=1),
        Option("tol", float, 1e-4, "relative tolerance of the stopping rule", low=0.0),
        Option("alpha_W", float, 0.0, "penalty weight of W (times n_features)", low=0.0),
        Option("alpha_H", str, "same", "penalty weight of H (times n_samples)",
               test=_valid_alpha_h, text="'same' (alpha_W) or a float >= 0"),
        Option("l1_ratio", float, 0.0, "the L1 share of the penalties", low=0.0, high=1.0),
        *factor_rows("factors"),
        N_JOBS,
    )
    n_jobs = None  # (what an estimator saved before the parameter reads)

    def __init__(
        self,
        n_components: int | None = None,
        *,
        init: Any = "random",
        loss: str = "frobenius",
        solver: str = "auto",
        method: str = "batch",
        batch_size: int = 4096,
        w_iters: int | None = None,
        max_iter: int = 200,
        tol: float = 1e-4,
        alpha_W: float = 0.0,
        alpha_H: Any = "same",
        l1_ratio: float = 0.0,
        random_state: Any = None,
        verbose: int = 0,
        dtype: Any = None,
        device: str = "cpu",
        n_jobs: int | None = None,
    ) -> None:
        self._keep_params(locals())

    # -- fitted state -----------------------------------------------------------------------
    @property
    def components_(self) -> np.ndarray:
        """The k x n_features components ``H`` (a host copy of the live model matrix)."""
        return np.array(backend.to_host(self.model_.modelmats[0].data), copy=True)

    @property
    def n_iter_(self) -> int:
        """Passes over the data done (live while a learner trains)."""
        return int(self.model_.n_passes_done)

    @property
    def reconstruction_err_(self) -> float:
        """The error (scikit-learn's scale) of the final factors of ``fit`` or
        ``partial_fit``; after (or while) a learner trains, its last pass's error."""
        model = self.model_
        kept = self.__dict__.get("_reconstruction_err")
        if kept is not None and kept[0] == model.n_passes_done:
            return kept[1]
        if model.errors:
            return float(model.errors[-1])
        raise AttributeError("NMF: no reconstruction error yet: the model has not finished "
                             "a pass; fit it (or run its learner) first")

    @classmethod
    def _upgrade_state(cls, state: dict[str, Any]) -> None:
        super()._upgrade_state(state)
        state.pop("n_iter_", None)  # kept by files written before it followed the model
        err = state.pop("reconstruction_err_", None)
        model = state.get("model_")
        if err is not None and model is not None:
            state.setdefault("_reconstruction_err", (int(model.n_passes_done), float(err)))

    @property
    def n_components_(self) -> int:
        return int(self.model_.modelmats[0].shape[0])

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    # named in the class itself, so that scikit-learn's ``set_output`` wraps it (as it
    # wraps ``fit_transform``): it wraps only the methods a class defines
    transform = NMFServe.transform

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = True
        tags.input_tags.positive_only = True
        tags.requires_fit = True
        tags.transformer_tags.preserves_dtype = (
            ["float64", "float32"] if self.dtype is None else [np.dtype(self.dtype).name])
        return tags

    # -- input ------------------------------------------------------------------------------
    def _data(self, X: Any, mask: Any, reset: bool, columns: bool = True,
              need_rows: bool = True) -> Prepared:
        X, mask = ratings_input(unwrap(X), mask)
        self._check_structure(X)
        if backend.is_cupy_array(getattr(X, "data", X)):
            X = backend.to_host(X)
        fitted = getattr(self, "model_", None) is not None and not reset
        if fitted:
            want: Any = self.model_.dtype
        elif self.dtype is not None:
            want = np.dtype(self.dtype)
        elif frame_dtype(X) == np.float32:  # a sparse frame: validate_data would give float64
            want = np.dtype(np.float32)
        else:
            want = [np.float64, np.float32]
        X = validate_data(self, X, accept_sparse="csr", dtype=want, ensure_all_finite=False,
                          reset=reset)
        return prepare(type(self).__name__, X, mask, X.dtype, columns, need_rows, self.loss)

    def _k(self, shape: tuple[int, int], streaming: bool = False, ranks: int = 1) -> int:
        """k for data of ``shape``; ``streaming`` (``partial_fit``'s first minibatch): the
        components are bounded by the features only, as later minibatches add rows;
        ``ranks`` > 1 (a learner of one of several ranks, each holding a share of the
        rows): likewise, as the other ranks hold the rest of the rows."""
        n, d = shape
        k = d if self.n_components is None else int(self.n_components)
        nndsvda = isinstance(self.init, str) and self.init == "nndsvda"
        if streaming and k > n and nndsvda:
            raise ValueError(f"NMF: init='nndsvda' takes the SVD of the first minibatch, "
                             f"whose {n} rows give fewer than n_components={k} components: "
                             f"pass at least {k} rows to the first partial_fit, or use "
                             "init='random'")
        if ranks > 1 and k > n and nndsvda:
            raise ValueError(f"NMF: init='nndsvda' on {ranks} ranks takes the SVD of each "
                             f"rank's rows, and this rank's {n} rows give fewer than "
                             f"n_components={k} components: use init='random', fewer ranks "
                             f"or n_components <= {n}")
        if streaming or ranks > 1:
            if k > d:
                raise ValueError(f"NMF: n_components={k} is larger than the {d} features of "
                                 f"X: use n_components <= {d}")
            return k
        if k > min(n, d):
            given = (f"n_components={k}" if self.n_components is not None else
                     f"the default n_components (None: the {d} features)")
            raise ValueError(f"NMF: {given} is larger than X allows ({n} samples x {d} "
                             f"features): give n_components <= {min(n, d)}, e.g. "
                             f"NMF(n_components={min(20, n, d)}) (bidlab train: "
                             f"--n_components {min(20, n, d)})")
        return k

    def _on_device(self, a: Any) -> Any:
        return a if self.device == "cpu" else backend.to_device(a)

    def _start(self, data: Prepared, k: int, W: Any, H: Any) -> tuple[Any, Any]:
        """The initial (W, H) of ``init`` (:func:`~bidlab.models.nmf.seeding.start`)."""
        return start(self.init, data, k, W, H, self.random_state)

    def _solver(self, data: Prepared, method: str) -> str:
        """``solver`` resolved for this data and method ('auto': 'cd' where it applies)."""
        missing = data.kind in ("masked", "stored")
        fits = self.loss == "frobenius" and method == "batch" and not missing
        if self.solver == "auto":
            return "cd" if fits else "mu"
        if self.solver == "cd" and not fits:
            why = ("method='online' (and partial_fit) steps per minibatch"
                   if method == "online"
                   else "the data have missing entries" if missing
                   else f"loss={self.loss!r}")
            raise ValueError(f"NMF: solver='cd' needs the Frobenius loss, method='batch' and "
                             f"every entry observed, but {why}: use solver='mu' (or 'auto')")
        return self.solver

    def _model(self, data: Prepared, k: int, W: Any, H: Any, method: str) -> NMFModel:
        custom = isinstance(self.init, str) and self.init == "custom"
        if not custom and (W is not None or H is not None):
            warnings.warn(f"NMF: init={self.init if isinstance(self.init, str) else 'array'!r}"
                          " ignores the W and H given; set init='custom' to start from them",
                          RuntimeWarning, stacklevel=4)
        W0, H0 = self._start(data, k, W, H)
        w_iters = self.w_iters or (1 if method == "batch" else 5)
        return NMFModel(H0, W0=W0, w_start=math.sqrt(data.mean / k), dtype=data.mats[0].dtype,
                        k=k, loss=self.loss, method=method, tol=self.tol,
                        solver=self._solver(data, method),
                        random_state=drawn_seed(self.random_state), w_iters=w_iters,
                        w_iters_new=max(10, w_iters), alpha_W=float(self.alpha_W),
                        alpha_H=float(self.alpha_W if self.alpha_H == "same"
                                      else self.alpha_H),
                        l1_ratio=float(self.l1_ratio))

    def _source(self, data: Prepared, batch_size: int | None, shuffle: bool) -> MemorySource:
        names = ("X",) if len(data.mats) == 1 else ("X", "mask")
        mats = [self._on_device(m) for m in data.mats]
        seed = drawn_seed(self.random_state) if shuffle else 0
        return MemorySource(*mats, batch_size=min(batch_size or self.batch_size,
                                                  data.shape[0]),
                            shuffle=shuffle, seed=seed, names=names)

    # -- training ---------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None, W: Any = None, H: Any = None,
            mask: Any = None) -> NMF:
        """Factorise ``X`` (n x d, dense with NaN where missing, or CSR, or a
        ``bidlab.datasets`` Ratings, whose stored entries are the observed ones; ``mask``:
        True where observed); ``y`` is ignored; ``W`` and ``H``: the start of
        ``init="custom"``."""
        self._fit(X, W, H, mask)
        return self

    def fit_transform(self, X: Any, y: Any = None, W: Any = None, H: Any = None,
                      mask: Any = None) -> np.ndarray:
        """``fit`` and the row factors ``W`` (n x k) it found for ``X``'s rows."""
        return self._fit(X, W, H, mask)

    def _fit(self, X: Any, W: Any, H: Any, mask: Any) -> np.ndarray:
        self._validate_params()
        data = self._data(X, mask, reset=True)
        k = self._k(data.shape)
        model = self._model(data, k, W, H, self.method)
        src = self._source(data, None, shuffle=self.method == "online")
        lrn = self._build_learner(model, src, n_passes=self.max_iter, val_every=0)
        with self._threads(), one_blas_thread():
            lrn.fit(progress="text" if self.verbose else None)
            self.model_ = model
            self.updater_ = lrn.updater
            Wf = model.factors()
            self._reconstruction_err = (model.n_passes_done, self._error(data, Wf))
        return Wf

    def partial_fit(self, X: Any, y: Any = None, mask: Any = None, *, W: Any = None,
                    H: Any = None) -> NMF:
        """One pass over ``X``'s rows, continuing the components and the running
        statistics of earlier calls. A first call (no ``fit`` before) starts them from
        ``init`` on ``X`` and takes online steps (a step of ``components_`` per
        minibatch); after ``fit``, each call takes the fitted method's steps (with
        ``method="batch"``, one step of ``components_`` from the call's rows). ``W`` and
        ``H``: the start of ``init="custom"``, read by the first call only (as
        scikit-learn's ``MiniBatchNMF.partial_fit``: ``H`` starts the components, ``W``,
        checked, is not kept: the rows' factors start from the constant start)."""
        self._validate_params()
        first = getattr(self, "model_", None) is None
        data = self._data(X, mask, reset=first)
        if first:
            k = self._k(data.shape, streaming=True)
            if not data.mean > 0:
                raise ValueError("NMF: the first partial_fit's observed entries are all "
                                 "zero: the start of the row factors (and of random "
                                 "components) is sqrt(mean / k) of these entries, so it "
                                 "would be 0, which multiplicative updates never leave; "
                                 "pass rows with a nonzero entry to the first partial_fit")
            self.model_ = self._model(data, k, W, H, "online")
            self.model_.W0 = None  # the rows' factors start from w_start, not random
            self.updater_ = self.model_.default_updater()
        model = self.model_
        src = self._source(data, None, shuffle=True)
        if model.initialised:
            model.rebind(src.info)
        lrn = self._build_learner(model, src, self.updater_, n_passes=1, val_every=0)
        with self._threads(), one_blas_thread():
            lrn.fit(progress=None)
            self._reconstruction_err = (model.n_passes_done, self._error(data, model.factors()))
        return self

    def learner(self, X: Any, y: Any = None, mask: Any = None, **options: Any) -> Learner:
        """A live :class:`bidlab.learn.Learner` factorising ``X`` with this estimator's
        settings; its model becomes this estimator's model (``components_`` follows the
        training live). ``y`` is ignored; ``mask``: as in ``fit``; ``W``, ``H``: the start
        of ``init="custom"``; ``options``: learner options (``n_passes``, default
        ``max_iter``; ``batch_size``; ``comm``; ``checkpoint``; ...)."""
        self._validate_params()
        data = self._data(X, mask, reset=True)
        k = self._k(data.shape, ranks=getattr(options.get("comm"), "size", 1))
        model = self._model(data, k, options.pop("W", None), options.pop("H", None),
                            self.method)
        src = self._source(data, options.pop("batch_size", None),
                           shuffle=self.method == "online")
        options.setdefault("n_passes", self.max_iter)
        options.setdefault("val_every", 0)
        lrn = self._build_learner(model, src, live=True, **options)
        self.__dict__.pop("_reconstruction_err", None)
        self.model_ = model
        self.updater_ = lrn.updater
        return lrn


register_model("nmf", NMF)
