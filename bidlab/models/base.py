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
  (an ``.npz`` of numbers plus JSON; loading runs no code from the file);
* one training at a time: ``fit``, ``partial_fit``, ``fit_passes`` and ``learner`` of every
  subclass run under the estimator's :class:`~bidlab.learn.exclusive.FitGuard`, so a second
  thread calling one of them, or calling ``fit`` while the estimator's learner runs, gets a
  clear ``RuntimeError`` at once instead of two trainings corrupting one model.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from sklearn.base import BaseEstimator

from bidlab import backend
from bidlab.learn.checkpoint import CheckpointError
from bidlab.learn.exclusive import FitGuard
from bidlab.learn.options import Option, validate_params
from bidlab.learn.persist import load_object, persistable, save_object
from bidlab.mat import validate_csr

__all__ = ["BidlabEstimator", "load"]

#: the methods that train the estimator's model, run one at a time (see FitGuard)
GUARDED = ("fit", "partial_fit", "fit_passes", "learner")
_GUARD_MADE = threading.Lock()  # makes each estimator's guard exactly once


class BidlabEstimator(BaseEstimator):
    """Parameter table, pickling and safe save/load for bidlab's estimators.

    Subclasses set ``PARAMS`` (one :class:`Option` per constructor parameter) and list in
    ``TRANSIENT`` the attributes that must not be pickled or saved (e.g. a live learner).
    """

    PARAMS: ClassVar[tuple[Option, ...]] = ()
    TRANSIENT: ClassVar[tuple[str, ...]] = ("_learner", "_fit_guard")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("bidlab."):
            persistable(cls)
        for name in GUARDED:
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "_fit_guarded", False):
                setattr(cls, name, _guarded(fn, name))

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
        super().__setstate__(backend.restore_state(state))

    # -- safe files -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write this estimator (parameters and fitted state) to ``path`` atomically, in the
        pickle-free format; :meth:`load` (or :func:`bidlab.models.load`) reads it back."""
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
                out.guard = guard
            return out
        wrapper = call
    wrapper._fit_guarded = True  # type: ignore[attr-defined]
    return wrapper


def load(path: str | os.PathLike) -> BidlabEstimator:
    """Read any estimator written by ``save(path)``."""
    return BidlabEstimator.load(path)
