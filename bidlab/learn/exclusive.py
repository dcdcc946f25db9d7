"""One training at a time on one model: the guard an estimator shares with its learners.

An estimator's ``fit`` / ``partial_fit`` / ``learner()`` and the live learner that
``learner()`` returns all write the same model objects (model matrices, updater state,
staging containers). Two of them at once corrupt those objects: wrong shapes, or worse,
freed memory written by the other thread. A :class:`FitGuard` lets one holder in at a
time and refuses the others at once with a message that says what holds it and what to do:

* a **call**: a thread inside one of the estimator's training methods; the same thread may
  enter again (``fit_predict`` calling ``fit``), another thread is refused;
* a **learner**: a live :class:`~bidlab.learn.Learner` bound to the guard
  (``learner.guard``) holds it from ``start()`` / ``fit()`` until its loop ends (done,
  stopped or failed), paused included.

The guard is never pickled or saved (it belongs to the running process, not the model).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["FitGuard"]

_CLONE = "or train a copy made with sklearn.base.clone(est)"
_SUSPENDED = -1  # the holder of a non-reentrant entry (no thread has this ident)


class FitGuard:
    """Lets one training call or one running learner at a time at an estimator's model.

    Parameters
    ----------
    owner
        the estimator's class name, used in messages (e.g. ``"GLM"``).
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._lock = threading.Lock()
        self._thread: int | None = None  # ident of the thread inside a training call
        self._depth = 0
        self._what = ""  # the outermost call, e.g. "GLM.fit"
        self._learner: Any = None  # the learner running on the model
        self._estimator: weakref.ref[Any] | None = None  # the estimator owning the guard
        self._made: weakref.WeakSet[Any] = weakref.WeakSet()  # its learners of its model_
        self._newest: weakref.ref[Any] | None = None  # the learner it made last

    def enter(self, what: str, reentrant: bool = True) -> None:
        """Start training call ``what`` (e.g. ``"GLM.fit"``) in this thread, or raise
        :class:`RuntimeError` when another thread or a running learner holds the guard.

        ``reentrant=False`` (a generator such as ``fit_passes``, which holds the guard
        between its steps): no call may enter until :meth:`exit`, this thread's included.
        """
        me = threading.get_ident()
        with self._lock:
            lrn = self._learner
            if lrn is not None:
                raise RuntimeError(
                    f"{what} refused: this estimator's learner {lrn.name!r} is {lrn.state} "
                    "and trains the same model. Call learner.stop() and then learner.join() "
                    f"(or wait for it with learner.join()) before {what}, {_CLONE}.")
            if self._thread == _SUSPENDED:
                raise RuntimeError(
                    f"{what} refused: {self._what} is in progress on this estimator (a "
                    "generator between its steps). Exhaust it or close() it first, "
                    f"{_CLONE}.")
            if self._thread is not None and self._thread != me:
                raise RuntimeError(
                    f"{self._what} is already running in another thread on this estimator; "
                    f"{what} cannot run beside it (one estimator trains one model at a time). "
                    f"Wait for it to return, {_CLONE}.")
            if self._depth == 0:
                self._what = what
            self._thread = me if reentrant else _SUSPENDED
            self._depth += 1

    def exit(self) -> None:
        """End the training call that :meth:`enter` started in this thread."""
        with self._lock:
            self._depth -= 1
            if self._depth <= 0:
                self._depth = 0
                self._thread = None
                self._what = ""

    def bind(self, learner: Any, estimator: Any) -> None:
        """``learner``, just returned by ``estimator.learner()``, holds this guard while it
        runs, and may start only while ``estimator`` still holds its model (``model_``)."""
        learner.guard = self
        self._estimator = weakref.ref(estimator)
        if estimator.__dict__.get("model_") is getattr(learner, "model", None):
            self._made.add(learner)
        self._newest = weakref.ref(learner)

    def _stale(self, learner: Any) -> str | None:
        """Why ``learner`` must not start: its estimator has made a new model since (a
        newer ``learner()``, a ``fit``), so nothing the estimator shows would see its
        training; None when it still trains the estimator's model."""
        est = self._estimator() if self._estimator is not None else None
        if est is None or learner not in self._made:
            return None
        held = est.__dict__.get("model_")
        if held is None or held is learner.model:
            return None
        newer = self._newest() if self._newest is not None else None
        if newer is not None and newer is not learner and newer.model is held:
            by, fix = f"learner {newer.name!r}", f"Start {newer.name!r} instead, or call"
        else:
            by, fix = f"a later {self.owner}.fit / partial_fit", "Call"
        return (f"Learner {learner.name!r} cannot start: its {self.owner} has made a new "
                f"model since ({by}), so this learner would train a model the estimator no "
                f"longer holds (its predict, score and save would never show it). {fix} "
                f"{self.owner}.learner(...) again for a learner of the current model.")

    def claim(self, learner: Any) -> None:
        """``learner`` starts training (called as it moves to ``running``); raise
        :class:`RuntimeError` when a training call or another learner holds the guard, or
        when its estimator has made a new model since it made ``learner``."""
        with self._lock:
            other = self._learner
            if other is not None and other is not learner:
                raise RuntimeError(
                    f"Learner {learner.name!r} cannot start: learner {other.name!r} of the "
                    f"same {self.owner} is {other.state} and trains the same model. Call "
                    f"{other.name!r}.stop() and join() first.")
            if self._thread is not None:  # (a running fit is the first thing to say)
                raise RuntimeError(
                    f"Learner {learner.name!r} cannot start: {self._what} is running on its "
                    f"estimator and trains the same model. Wait for it to return, then "
                    "start() the learner (or make a new one with learner()).")
            stale = self._stale(learner)
            if stale is not None:
                raise RuntimeError(stale)
            self._learner = learner

    def release(self, learner: Any) -> None:
        """``learner``'s loop has ended (done, stopped or failed): the guard is free."""
        with self._lock:
            if self._learner is learner:
                self._learner = None

    @property
    def holder(self) -> str | None:
        """What holds the guard now (a call such as ``"GLM.fit"``, or ``"learner 'glm'"``),
        None when free."""
        with self._lock:
            if self._learner is not None:
                return f"learner {self._learner.name!r}"
            return self._what or None
