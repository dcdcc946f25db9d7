"""The base class of bidlab's scikit-learn estimators.

Every estimator (``LDA``, ``LDAGibbs``, ``GLM``, ``KMeans``, ...) is a thin scikit-learn
face on one :class:`bidlab.learn.Model` trained by the :class:`bidlab.learn.Learner`. What
they share lives here:

* ``PARAMS``: the constructor parameters as :class:`bidlab.learn.Option` rows, the same
  table style as learner options; :meth:`_validate_params` (called in ``fit``, never in
  ``__init__``) raises ``The 'lrate' parameter of GLM must be a float > 0. Got -1 instead.``
* pickling that works anywhere: a live learner's thread is not part of the state, array
  modules and device arrays are saved as numpy (a GPU-trained model unpickles without CuPy);
* :meth:`save` / :meth:`load`: the pickle-free safe format of :mod:`bidlab.learn.persist`
  (an ``.npz`` of numbers plus JSON; loading runs no code from the file). Files and pickles
  of earlier versions load: :meth:`_upgrade_state` maps old parameter names to today's, and
  a parameter added since takes its default;
* scikit-learn's shared parameters (:mod:`bidlab.models.sk_params`): ``n_jobs`` applied
  around training and prediction by :meth:`_threads`, ``verbose`` turned into the learner's
  progress by :meth:`_progress`; and :meth:`summary`, a short text about the estimator.
* one way to build the learner: :meth:`_build_learner` makes the
  :class:`~bidlab.learn.Learner` of every ``fit``, ``partial_fit`` and ``learner`` (its
  name, record size and, for ``learner``, the model made before it is returned);
* one training at a time: ``fit``, ``partial_fit``, ``fit_passes`` and ``learner`` of every
  subclass run under the estimator's :class:`~bidlab.learn.exclusive.FitGuard`, so a second
  thread calling one of them, or calling ``fit`` while the estimator's learner runs, gets a
  clear ``RuntimeError`` at once instead of two trainings corrupting one model.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from bidlab import _forksafe, backend
from bidlab.learn.checkpoint import CheckpointError
from bidlab.learn.datasource import as_source
from bidlab.learn.exclusive import FitGuard
from bidlab.learn.learner import Learner
from bidlab.learn.model import Model
from bidlab.learn.options import Configurable, Option, validate_params
from bidlab.learn.persist import load_object, persistable, save_object
from bidlab.learn.persistable import UPGRADES
from bidlab.mat import validate_csr
from bidlab.models.in_memory import refusing_sources
from bidlab.models.sk_params import progress_mode, thread_limit

__all__ = ["BidlabEstimator", "FittedByModel", "load", "param_row"]

#: the most minibatches a run's record keeps by default (one record per minibatch)
RECORDS = 100_000
#: the methods that train or reshape the estimator's model, run one at a time (see
#: FitGuard): a fold-in of new rows is refused while a learner of the model runs
GUARDED = ("fit", "partial_fit", "fit_passes", "learner", "partial_fit_users",
           "partial_fit_items")
_PARAM_NAMES: dict[type, tuple[str, ...]] = {}  # scikit-learn's parameter names, per class


@functools.cache
def _init_parameters(init: Callable[..., Any]) -> tuple[tuple[str, Any], ...]:
    """``(name, default)`` of each parameter of the constructor ``init`` (its signature
    read once)."""
    sig = inspect.signature(init)
    return tuple((n, p.default) for n, p in sig.parameters.items()
                 if n != "self" and p.kind is not p.VAR_KEYWORD)
_GUARD_MADE = _forksafe.lock(__name__, "_GUARD_MADE")  # makes each estimator's guard exactly once


def param_row(component: Any, name: str, **changes: Any) -> Option:
    """The option row ``name`` of a learner component (a Model, Updater, Mixin or the
    Learner) as an estimator parameter: its bounds, type and checks, with ``changes``
    (the estimator's ``default``, ``doc``, ``text``, ...), so a ``PARAMS`` table derives
    its rows from the components' ``OPTIONS`` instead of declaring them again.

    Examples
    --------
    >>> from bidlab.learn import Grad
    >>> row = param_row(Grad, "lrate", default=0.3)
    >>> row.default, row.allowed()
    (0.3, 'a float > 0 (or a per-row / per-model-matrix vector of such)')
    """
    for spec in component.option_table():
        if spec.name == name:
            return dataclasses.replace(spec, owner="", **changes)
    raise KeyError(f"{component.__name__} has no option {name!r}: its options are "
                   f"{[s.name for s in component.option_table()]}")


class BidlabEstimator(BaseEstimator):
    """Parameter table, pickling and safe save/load for bidlab's estimators.

    Subclasses set ``PARAMS`` (one :class:`Option` per constructor parameter) and list in
    ``TRANSIENT`` the attributes that must not be pickled or saved (e.g. a live learner).
    """

    PARAMS: ClassVar[tuple[Option, ...]] = ()
    TRANSIENT: ClassVar[tuple[str, ...]] = ("_learner", "_fit_guard")
    #: parameters only ``fit`` uses (a held-out stopping rule, restarts), not a learner:
    #: ``bidlab train``, which trains the learner, refuses them
    FIT_ONLY: ClassVar[tuple[str, ...]] = ()
    #: whether the data's rows are samples that can be held out for a score (not a graph's
    #: vertices or the users a factor model learns factors for): ``bidlab train --holdout``
    ROWS_ARE_SAMPLES: ClassVar[bool] = True
    #: a loaded estimator's fitted model is a spine model (bidlab.learn.persist_check)
    STATE_KINDS: ClassVar[dict[str, type]] = {"model_": Model}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("bidlab."):
            persistable(cls)
        init = cls.__dict__.get("__init__")
        if callable(init) and not getattr(init, "_names_aliases", False):
            cls.__init__ = _naming_aliases(init)  # type: ignore[method-assign]
        for name in GUARDED:
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "_fit_guarded", False):
                setattr(cls, name, _guarded(refusing_sources(fn, name), name))

    def _training_guard(self) -> FitGuard:
        """This estimator's guard (made on first use; never pickled, never cloned)."""
        guard = self.__dict__.get("_fit_guard")
        if guard is None:
            with _GUARD_MADE:
                guard = self.__dict__.get("_fit_guard")
                if guard is None:
                    guard = self.__dict__["_fit_guard"] = FitGuard(type(self).__name__)
        return guard

    def _validate_params(self) -> None:
        """Check every constructor parameter against ``PARAMS`` (one message shape)."""
        validate_params(type(self).__name__, self.PARAMS, self.get_params(deep=False))

    def gather_ranks(self, comm: Any) -> None:
        """After a run on the ranks of ``comm`` (every rank calls it): put together what
        each rank holds of its own rows, where a model saved by one rank needs them all
        (SFA's users). Nothing by default."""

    def _build_learner(self, model: Any, data: Any, updater: Any = None,
                       mixins: Sequence[Any] = (), *, learner_class: type = Learner,
                       batch_size: int | None = None, live: bool = False,
                       **options: Any) -> Learner:
        """The one way an estimator makes the :class:`~bidlab.learn.Learner` that trains
        its model (``fit``, ``partial_fit`` and ``learner`` all call it).

        Parameters
        ----------
        model
            the estimator's :class:`~bidlab.learn.Model`.
        data
            a :class:`~bidlab.learn.DataSource`, or the matrices (samples as rows)
            served ``batch_size`` rows at a time.
        updater
            an Updater or a mapping per model matrix; None: the model's
            ``default_updater()``.
        mixins
            extra loss terms (L1, L2, ...).
        learner_class
            a Learner subclass (LDA's reaches the Gibbs temperatures).
        live
            return it initialised (the model made from the data), as ``learner()``
            does, so options, observers and views can be set before ``start()``.
        **options
            the learner's, model's and updater's options; ``name`` defaults to
            the estimator's class name in lower case; ``record_size``, for a run that
            is not live, to one record per minibatch of its ``n_passes`` (at most
            :data:`RECORDS`; a live learner may be run on, so it keeps the learner's
            default).

        Examples
        --------
        >>> import numpy as np
        >>> from bidlab.models import LeastSquares, NMF
        >>> est = NMF(2)
        >>> lrn = est._build_learner(LeastSquares(), (np.ones((8, 3)), np.ones((8, 1))),
        ...                          batch_size=4, n_passes=3)
        >>> lrn.name.startswith("nmf"), lrn.opts.record_size
        (True, 6)
        """
        source = as_source(data, batch_size or 1000)
        options.setdefault("name", type(self).__name__.lower())
        if "record_size" not in options and not live:
            passes = options.get("n_passes") or next(
                s.default for s in Learner.option_table() if s.name == "n_passes")
            per_pass = source.batches_per_pass or 1
            options["record_size"] = max(1, min(RECORDS, per_pass * int(passes)))
        lrn = learner_class(model, source, updater, list(mixins), **options)
        return lrn.init() if live else lrn

    def _check_structure(self, X: Any) -> None:
        """Refuse a CSR / CSC matrix with broken structure (column index out of range,
        decreasing indptr, ...) before scikit-learn or scipy touch it: their C++ loops
        read out of bounds on such input."""
        if backend.is_sparse(X) and getattr(X, "format", None) in ("csr", "csc"):
            validate_csr(X if X.format == "csr" else X.T, f"{type(self).__name__}: X")

    # -- pickling -------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in self.TRANSIENT:
            state.pop(name, None)
        return backend.portable_state(state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(backend.restore_state(state))
        self.upgraded(state)
        super().__setstate__(state)

    def _keep_params(self, values: dict[str, Any]) -> None:
        """Store each constructor argument in ``values`` (the caller's ``locals()``) as the
        attribute of its name, as scikit-learn's ``__init__`` must, and nothing else."""
        for name in self._defaults():
            setattr(self, name, values[name])

    def _detach_run_options(self) -> None:
        """After a fit, the fitted components keep only their own options, not the
        finished learner's run options (``checkpoint``, ``n_passes``, ``max_steps``)."""
        parts = [self.__dict__.get("model_"), self.__dict__.get("updater_"),
                 *(self.__dict__.get("mixins_") or ())]
        for part in parts:
            if isinstance(part, Configurable):
                part.detach()

    @classmethod
    def upgraded(cls, state: dict[str, Any]) -> None:
        """Bring, in place, a state written by an earlier version up to date: parameters
        renamed (:meth:`_upgrade_state`) and those added since set to their defaults. Runs
        before a loaded state is checked (:mod:`bidlab.learn.persist_check`) and on unpickling."""
        cls._upgrade_state(state)
        for name, default in cls._defaults().items():
            state.setdefault(name, default)  # a parameter added since the file was written

    @classmethod
    def _upgrade_state(cls, state: dict[str, Any]) -> None:
        """Rename, in place, the parameters of a state written by an earlier version."""

    @classmethod
    def _defaults(cls) -> dict[str, Any]:
        """The constructor's parameters and their defaults."""
        return dict(_init_parameters(cls.__init__))

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """scikit-learn's list of the constructor's parameters, read from its signature
        once per class (every construction, ``get_params`` and fit asks for it)."""
        names = _PARAM_NAMES.get(cls)
        if names is None:
            names = _PARAM_NAMES[cls] = tuple(super()._get_param_names())
        return list(names)

    # -- scikit-learn's shared parameters ---------------------------------------------------
    def _threads(self) -> Any:
        """A context in which the kernels use ``n_jobs`` threads (None: unchanged)."""
        return thread_limit(getattr(self, "n_jobs", None))

    def _progress(self) -> str | None:
        """The learner's progress mode for ``verbose`` (None: silent)."""
        return progress_mode(getattr(self, "verbose", 0))

    def _facts(self) -> list[tuple[str, Any]]:
        """(name, value) lines about the fitted state, for :meth:`summary`."""
        return []

    def summary(self) -> str:
        """A short text: the parameters that differ from their defaults, and once fitted
        the fitted shapes, the passes done and the final scores."""
        name = type(self).__name__
        changed = [f"{k}={_short(v)}" for k, v in self.get_params(deep=False).items()
                   if not _same(v, self._defaults().get(k, inspect.Parameter.empty))]
        lines = [f"{name}({', '.join(changed)})"]
        try:
            check_is_fitted(self)
            fitted = True
        except NotFittedError:
            fitted = False
        if not fitted:
            lines.append("  not fitted")
            return "\n".join(lines)
        facts = self._facts()
        width = max((len(k) for k, _ in facts), default=0)
        lines += [f"  {k:<{width}}  {v if isinstance(v, str) else _short(v)}"
                  for k, v in facts]
        return "\n".join(lines)

    # -- safe files -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write this estimator (parameters and fitted state) to ``path`` atomically, in the
        pickle-free format; :meth:`load` (or :func:`bidlab.models.load`) reads it back.

        ``path`` must be a new path or an existing regular file (which is replaced). A
        directory, FIFO, socket or device there raises
        :class:`~bidlab.learn.save_target.SaveTargetError` (a ``ValueError``) and is left
        untouched; so does a symbolic link, which is refused rather than followed: save to
        the file it points to instead.
        """
        return save_object(path, self, meta={"estimator": type(self).__name__})

    @classmethod
    def load(cls, path: str | os.PathLike) -> BidlabEstimator:
        """Read an estimator written by :meth:`save`; it must be a ``cls``."""
        obj = load_object(path)
        if not isinstance(obj, cls):
            raise CheckpointError(f"{path} holds a {type(obj).__name__}, not a {cls.__name__}: "
                                  f"load it with {type(obj).__name__}.load or "
                                  "bidlab.models.load")
        return obj


class FittedByModel:
    """An estimator that is fitted once it holds a model (``model_``), for scikit-learn's
    ``check_is_fitted``.

    Examples
    --------
    >>> from bidlab.models import NMF
    >>> NMF(2).__sklearn_is_fitted__()
    False
    """

    def __sklearn_is_fitted__(self) -> bool:
        return getattr(self, "model_", None) is not None


def _same(a: Any, b: Any) -> bool:
    """Whether a parameter value equals its default (arrays, dtypes and types too)."""
    try:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return bool(np.array_equal(a, b))
        if a is not None and b is not None and (isinstance(a, (type, np.dtype))
                                                 or isinstance(b, (type, np.dtype))):
            return np.dtype(a) == np.dtype(b)
        return bool(a == b) and type(a) is type(b) or a is b
    except (TypeError, ValueError):
        return a is b


def _short(v: Any) -> str:
    """A value in a few characters, for :meth:`BidlabEstimator.summary`."""
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if isinstance(v, np.ndarray):
        return f"array{v.shape}" if v.size > 6 else np.array2string(v, precision=4)
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


#: other libraries' spellings of a concept bidlab names otherwise (scikit-learn, gensim,
#: implicit, tomotopy): an estimator given one is told its own name for it
ALIASES: dict[str, tuple[str, ...]] = {
    "max_iter": ("n_passes",), "n_passes": ("max_iter",), "n_iter": ("n_passes", "max_iter"),
    "passes": ("n_passes", "max_iter"), "iterations": ("max_iter", "n_passes"),
    "n_topics": ("n_components",), "num_topics": ("n_components",), "k": (
        "n_components", "n_clusters"), "factors": ("n_components",),
    "n_components": ("n_clusters",), "n_clusters": ("n_components",),
    "seed": ("random_state",), "learning_rate": ("lrate",), "eta0": ("lrate",),
    "regularization": ("l2",), "n_threads": ("n_jobs",), "num_threads": ("n_jobs",),
    "workers": ("n_jobs",), "eta": ("beta",), "doc_topic_prior": ("alpha",),
    "topic_word_prior": ("beta",), "learning_method": ("method",), "learning_decay": (
        "kappa",), "learning_offset": ("tau0",), "total_samples": ("total_docs",),
    "alpha": ("l2",), "loss": ("link",), "penalty": ("l1", "l2"),
}


def _naming_aliases(init: Callable[..., Any]) -> Callable[..., Any]:
    """``init`` whose "unexpected keyword argument" TypeError names the estimator's own
    spelling of the concept (``LDA(max_iter=5)``: use ``n_passes``) and its parameters.
    scikit-learn reads the parameters through ``__wrapped__``, so nothing else changes."""

    @functools.wraps(init)
    def __init__(self: BidlabEstimator, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except TypeError as exc:
            params = [p for p in inspect.signature(init).parameters if p != "self"]
            bad = [k for k in kwargs if k not in params]
            if not bad or "unexpected keyword" not in str(exc):
                raise
            name = type(self).__name__
            hints = [f"{k!r} is {a!r} here" for k in bad
                     for a in ALIASES.get(k, ()) if a in params]
            hint = f" ({'; '.join(hints)})" if hints else ""
            raise TypeError(f"{name} has no parameter {', '.join(map(repr, bad))}{hint}. Its "
                            f"parameters: {', '.join(params)}") from None

    __init__._names_aliases = True  # type: ignore[attr-defined]
    return __init__


def _guarded(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` run under the estimator's guard; a learner it returns is bound to the guard
    (it holds it while it runs); a generator (``fit_passes``) holds it until exhausted or
    closed."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def passes(self: BidlabEstimator, *args: Any, **kwargs: Any) -> Iterator[Any]:
            guard = self._training_guard()
            guard.enter(f"{type(self).__name__}.{name}", reentrant=False)
            try:
                yield from fn(self, *args, **kwargs)
            finally:
                guard.exit()
        wrapper = passes
    else:
        @functools.wraps(fn)
        def call(self: BidlabEstimator, *args: Any, **kwargs: Any) -> Any:
            guard = self._training_guard()
            guard.enter(f"{type(self).__name__}.{name}")
            try:
                out = fn(self, *args, **kwargs)
            finally:
                guard.exit()
            if hasattr(out, "guard") and hasattr(out, "start"):  # a live learner
                guard.bind(out, self)
            elif name in ("fit", "partial_fit"):
                self._detach_run_options()
            return out
        wrapper = call
    wrapper._fit_guarded = True  # type: ignore[attr-defined]
    return wrapper


def load(path: str | os.PathLike) -> BidlabEstimator:
    """Read any estimator written by ``save(path)``.

    Examples
    --------
    >>> import tempfile, os
    >>> import numpy as np
    >>> from bidlab.models import KMeans, load
    >>> X = np.random.default_rng(0).random((60, 3))
    >>> km = KMeans(n_clusters=2, random_state=0).fit(X)
    >>> path = os.path.join(tempfile.mkdtemp(), "km")
    >>> _ = km.save(path)
    >>> bool((load(path).predict(X) == km.predict(X)).all())
    True
    """
    return BidlabEstimator.load(path)


UPGRADES[BidlabEstimator] = lambda cls, state: cls.upgraded(state)
