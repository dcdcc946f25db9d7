"""The Learner: a minibatch loop over a DataSource that trains a Model with an Updater.

Two ways to run the same loop::

    lr = Learner(LeastSquares(), (X, y), Grad(lrate=0.1), batch_size=500, n_passes=5)  # models.lsq
    lr.fit()                 # blocks; a progress bar and pass summary lines

    lr.start()               # returns at once; training runs in a background thread
    lr.opts.lrate = 0.02     # validated here, used from the next minibatch on
    lr.pause(); lr.resume(); lr.stop(); lr.join()

Per minibatch the loop: (1) at the boundary, honours pause / stop, serves checkpoint
requests and applies option changes queued by other threads; (2) takes the next batch
from the source (same containers every step); (3) every ``val_every``-th minibatch of a
pass is held out and only evaluated (on-the-fly validation, as BIDMach does), every other
one is trained on: ``model.update``, each mixin's ``gradient``, ``updater.update``;
(4) records step, pass, time, score and the option-set version in a ring buffer;
(5) at a pass end, lets the updater and model finish the pass, records a summary (``fit``
prints one every few seconds, and the last) and writes a checkpoint when ``checkpoint`` is
set; (6) publishes metrics and model views to observers at their rate. The thread runs
with ``bidlab.caching()`` on.

States: ``created`` -> ``running`` <-> ``paused`` -> ``stopped`` | ``done`` | ``failed``.
An exception in the training thread moves the learner to ``failed``; ``join()``
re-raises it (with its traceback) and observers receive the traceback text. NaN or inf in
the model, or a model growing by orders of magnitude, fails it with :class:`DivergedError`
(see :mod:`bidlab.learn.divergence`).
"""

from __future__ import annotations

import collections
import contextlib
import math
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from bidlab.learn import learner_exit, learner_state, registry, save_target
from bidlab.learn.comm import Communicator, SingleProcess
from bidlab.learn.datasource import DataSource, as_source
from bidlab.learn.divergence import DivergedError, DivergenceWatch
from bidlab.learn.hyper import n_groups
from bidlab.learn.learner_interrupt import stop_on_interrupt
from bidlab.learn.learner_loop import TrainingLoop
from bidlab.learn.learner_metrics import LearnerMetrics
from bidlab.learn.mixins import Mixin
from bidlab.learn.model import Model, hold_out_none
from bidlab.learn.observers import ObserverHub, Subscription, close_hub
from bidlab.learn.options import Configurable, Option, Options
from bidlab.learn.progress import PassLines, ended_early, format_summary, make_progress
from bidlab.learn.record import PassStats, RunRecord
from bidlab.learn.updaters.base import Updater
from bidlab.learn.updaters.per_matrix import as_updater

__all__ = ["Learner", "STATES", "DivergedError"]

STATES = ("created", "running", "paused", "stopped", "done", "failed")
SUMMARIES_KEPT = 10_000  #: per-pass summaries a learner keeps (the oldest go first)
_ACTIVE = ("running", "paused")
_OWN = "bidlab-learner-"  #: how the name of each training thread start() makes begins


class Learner(TrainingLoop, LearnerMetrics, Configurable):
    """Trains ``model`` on ``data`` with ``updater`` (default the model's) and ``mixins``.

    Parameters
    ----------
    model
        a :class:`~bidlab.learn.model.Model` (initialised from the data on start).
    data
        a :class:`~bidlab.learn.datasource.DataSource`, or a matrix / tuple of aligned
        matrices (samples as rows), wrapped in a ``MemorySource``.
    updater
        how the model moves: an Updater, or a mapping of model matrix (name or index) ->
        Updater to move each matrix its own way (default ``model.default_updater()``).
    mixins
        extra loss terms (``L1Regularizer``, ``L2Regularizer``, ...).
    name
        shown in progress output and the registry (made unique).
    batch_size
        rows per minibatch when ``data`` is not already a source.
    **options
        any option of the learner, model, updater or mixins (see ``learner.opts.what()``).
    """

    OPTIONS = (
        Option("n_passes", int, 10, "passes over the data", low=1, high=10**9),
        Option("max_steps", int, None, "stop after this many minibatches (None: no limit)",
               low=1, none_ok=True),
        Option("val_every", int, 11, "hold out every k-th minibatch of a pass for "
               "validation (0: none)", low=0),
        Option("checkpoint", "path", None, "checkpoint file, written at each pass end, "
               "periodically and on stop", none_ok=True),
        Option("checkpoint_every", float, 0.0, "seconds between periodic checkpoints (0: at "
               "pass ends only)", low=0.0),
        Option("record_size", int, 100_000, "minibatches kept in the per-minibatch record",
               low=1, live=False),
        Option("sync_every", int, 8, "training minibatches between combinations of the "
               "model across ranks (with a communicator of several; the ranks meet only "
               "there, so commands and stops take effect at the next one)", low=1),
    )

    def __init__(self, model: Model, data: Any,
                 updater: Updater | Mapping[str | int, Updater] | None = None,
                 mixins: list[Mixin] | tuple[Mixin, ...] = (), *, name: str | None = None,
                 batch_size: int = 1000, comm: Communicator | None = None,
                 **options: Any) -> None:
        super().__init__()
        if not isinstance(model, Model):
            raise TypeError(f"model must be a bidlab.learn.Model; got {type(model).__name__}")
        updater = as_updater(model.default_updater() if updater is None else updater)
        for mx in mixins:
            if not isinstance(mx, Mixin):
                raise TypeError(f"mixins must be bidlab.learn.Mixin objects; got "
                                f"{type(mx).__name__}")
        self.model = model
        #: the learner's peers (:mod:`bidlab.learn.comm`); alone by default
        self.comm: Communicator = SingleProcess() if comm is None else comm
        if not isinstance(self.comm, Communicator):
            raise TypeError(f"comm must be a bidlab.learn.comm.Communicator; got "
                            f"{type(self.comm).__name__}")
        self.source: DataSource = as_source(data, batch_size)
        if self.comm.size > 1:
            self.source.use_rank(self.comm.fold_seed)
        self.updater = updater
        self.mixins = list(mixins)
        merged = Options()
        for comp in (self, model, updater, *self.mixins):
            # each component's own table, with its current values: a model reused from an
            # earlier learner brings its own options, never that learner's (n_passes, ...)
            for spec in type(comp).option_table():
                merged.declare(spec, comp.opts.get(spec.name), has_value=True)
        for comp in (self, model, updater, *self.mixins):
            comp.attach(merged)
        if model.full_batch:  # every pass is one step over the whole data: none held out
            hold_out_none(model, merged, options)
        save_target.guard_path_option(merged, "checkpoint", self.comm.checkpoint_file)
        if options:
            merged.set(**options)
        self.name = registry.register(self, name or type(model).__name__.lower())
        model.bind(self)

        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._state = "created"
        self._stop_req = False
        self._pause_req = False
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._done.set()
        self._error: BaseException | None = None
        self.traceback: str | None = None
        self._saves: list[learner_state.SaveRequest] = []
        self._busy: str | None = None  # what a caller's thread does to the idle learner
        self._tick: Any = None  # fit()'s progress display, called from the loop
        self._combine: tuple[str, ...] = ()  # each model matrix's combination across ranks
        #: a :class:`~bidlab.learn.exclusive.FitGuard` shared with the estimator that made
        #: this learner (held while the loop runs), or None
        self.guard: Any = None

        self._watch = DivergenceWatch()  # growth by orders of magnitude is divergence too
        self._pos, self._row = (0, 0), 0  # (pass, index) of the next minibatch, its first row
        self.step = 0  # minibatches processed so far (train + validation)
        self.samples = 0  # rows processed so far
        self._elapsed = 0.0
        self._opts_version = self.opts.version
        self.record = RunRecord(self.opts.record_size)
        #: one dict per pass, the last SUMMARIES_KEPT passes
        self.summaries: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=SUMMARIES_KEPT)
        self._lines: collections.deque[dict[str, Any]] = collections.deque()  # unshown
        self._stats = PassStats()
        self._last_train = math.nan
        self._last_val = math.nan
        self._metrics: dict[str, Any] = {}
        self._metrics_lock = threading.Lock()
        self._hub = ObserverHub(self.name)
        # weakly: the hub's callbacks may refer to this learner
        weakref.finalize(self, close_hub, weakref.ref(self._hub))
        self._update_metrics(time.perf_counter())

    # ======================================================================= public API
    @property
    def state(self) -> str:
        """One of created, running, paused, stopped, done, failed."""
        return self._state

    @property
    def error(self) -> BaseException | None:
        """The exception that failed the run (None otherwise)."""
        return self._error

    def start(self) -> Learner:
        """Run the training loop in a background thread; return at once.

        Continues from where the last run (or a loaded checkpoint) stopped. Refused while
        the learner is running or paused; with its ``n_passes`` (or ``max_steps``) reached
        it ends at once, warning which option to raise (``learner.set(n_passes=...)``). At
        interpreter exit a run still going stops cleanly (:mod:`bidlab.learn.learner_exit`)."""
        self._warn_nothing_left()
        with self._cond:
            self._begin()
            self._thread = learner_exit.training_thread(self._run, f"{_OWN}{self.name}")
            self._thread.start()
        return self

    def _begin(self) -> None:
        """Move to ``running`` (caller holds the lock), once a load, save or init done in
        another thread has ended: the loop never runs beside it."""
        self._cond.wait_for(lambda: self._busy is None)
        if self._state in _ACTIVE:
            raise RuntimeError(
                f"Learner {self.name!r} is already {self._state}: a learner runs one "
                "training loop at a time. Call stop() (then start() to continue), "
                "resume() a paused one, or join() to wait for it.")
        prev = self._thread  # a finished training thread exiting; never a fit() caller's
        if prev not in (None, threading.current_thread()) and prev.name.startswith(_OWN):
            prev.join()
        if self.guard is not None:
            self.guard.claim(self)  # refused while the estimator trains its model elsewhere
        self._stop_req = self._pause_req = False
        self._error = None
        self.traceback = None
        self._state = "running"
        self._done.clear()
        self.opts.set_running(True)

    def pause(self, wait: bool = False, timeout: float | None = 10.0) -> None:
        """Ask the loop to pause at the next minibatch boundary (``wait``: until it has;
        not in the loop's own thread, e.g. a view, which pauses at that boundary)."""
        with self._cond:
            if self._state not in _ACTIVE:
                return
            self._pause_req = True
            self._cond.notify_all()
            if wait and self._thread is not threading.current_thread():
                self._cond.wait_for(lambda: self._state != "running", timeout)

    def resume(self) -> None:
        """Continue a paused loop."""
        with self._cond:
            self._pause_req = False
            self._cond.notify_all()

    def stop(self, wait: bool = True, timeout: float | None = None) -> str:
        """Finish the current minibatch, then end the loop (model stays consistent). Returns
        the state; with ``wait`` (default) after the thread has ended. Does not raise a
        training failure: :meth:`join` does."""
        with self._cond:
            self._stop_req = True
            self._cond.notify_all()
        if wait:
            self._wait_done(timeout)
        return self._state

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the loop to end; True when it has. Re-raises a training failure."""
        if not self._wait_done(timeout):
            return False
        if self._state == "failed" and self._error is not None:
            raise self._error
        return True

    def _wait_done(self, timeout: float | None) -> bool:
        """Wait for the running loop (in its own thread or in a caller's fit) to end."""
        with self._cond:
            thread = self._thread
        if thread is threading.current_thread():
            return True  # the loop's own thread: it has ended or is ending
        if thread is not None and thread.name.startswith(_OWN):
            thread.join(timeout)
            return not thread.is_alive()
        return self._done.wait(timeout)

    def fit(self, progress: str | None = "auto", file: Any = None,
            background: bool = False) -> Learner:
        """Train until ``n_passes`` (or ``max_steps``) are done, showing progress; blocks.

        The loop runs in the calling thread (what the estimators' ``fit`` does): it can be
        stopped from another thread or by Ctrl-C; ``background=True`` runs it in the
        training thread and waits, as ``start()`` + ``join()`` would. ``progress``:
        ``"auto"`` (tqdm.auto, else a text line), ``"text"``, ``"tqdm"``, ``"tqdm_postfix"``
        (the pass summaries in the bar's postfix), ``"lines"`` (a summary line per pass, no
        bar) or None; ``file``: the stream for all of it (default ``sys.stderr``; a stream
        that is not a terminal gets lines, no bar); a run whose model converges before
        ``n_passes`` ends its bar full, saying so. Ctrl-C (a kernel interrupt) stops it at
        the next minibatch boundary, cleanly (state ``stopped``, its checkpoint written),
        then raises KeyboardInterrupt; a second one interrupts at once
        (:mod:`bidlab.learn.learner_interrupt`). A training failure is re-raised here."""
        disp = make_progress(progress, self.name, file)
        lines = PassLines(every=0.0 if progress == "lines" else None)

        def tick(final: bool = False) -> None:
            self._drain_lines(disp, lines)
            if final:
                show_last()
            disp.update(self.progress, self._postfix())

        def show_last() -> None:
            if (last := lines.finish()) is not None:
                disp.write(format_summary(last))

        try:
            if background:
                self.start()
                try:
                    while not self._done.wait(0.1):
                        tick()
                except KeyboardInterrupt:
                    self.stop()
                    raise
            else:
                with self._cond:
                    self._begin()
                    self._thread = threading.current_thread()
                self._tick = tick
                try:
                    with stop_on_interrupt(self) as interrupted:  # Ctrl-C: a clean stop
                        self._run()
                finally:
                    self._tick = None
                    with self._cond:  # a start() since has a thread of its own
                        if self._thread is threading.current_thread():
                            self._thread = None
                if isinstance(self._error, KeyboardInterrupt) or interrupted():
                    raise self._error or KeyboardInterrupt()
            tick(final=True)
            disp.complete(ended_early(self))  # None (nothing to do): not an early end
        finally:
            show_last()  # when training failed or was interrupted
            disp.close()
        self.join()
        return self

    def observe(self, callback: Any, rate: float = 10.0,
                views: dict[str, Any] | None = None) -> Subscription:
        """Call ``callback(snapshot)`` at most ``rate`` times a second (in another thread).

        ``views`` asks for host copies of model views (see :mod:`bidlab.learn.observers`).
        Returns the :class:`Subscription` (``.cancel()`` to stop).
        """
        return self._hub.subscribe(callback, rate, views)

    @property
    def observers(self) -> ObserverHub:
        return self._hub

    def save(self, path: str | None = None, timeout: float = 120.0) -> str:
        """Write a checkpoint atomically to a new path or a regular file (a link, folder, FIFO
        or device is refused). While running, the training thread writes it; this waits (in
        that thread, e.g. a model's hook, it is written at once)."""
        path = str(path or self.opts.checkpoint or "")
        if not path:
            raise ValueError("save() needs a path (or set the 'checkpoint' option)")
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._busy is None)
                idle, req = self._state not in _ACTIVE, None
                if idle:
                    self._busy = "saving"
                elif self._thread is not threading.current_thread():  # else: from the loop
                    req = learner_state.SaveRequest(path)
                    self._saves.append(req)
                    self._cond.notify_all()
            if req is None:
                with self._held() if idle else contextlib.nullcontext():
                    self._save_now(path)
                return path
            if not req.done.wait(timeout):
                raise TimeoutError(f"the training thread did not write the checkpoint within "
                                   f"{timeout} s")
            if req.error is not None:
                raise req.error
            if not req.retry:  # else the run ended first: written here, unless one started
                return path

    def load(self, path: str) -> Learner:
        """Restore model matrices, updater state, options and progress from a checkpoint.

        Only while not running; a loaded learner is ``stopped``, whatever it was. Set options
        (e.g. a larger ``n_passes``) after loading; ``start()`` / ``fit()`` then continue where
        the checkpoint left off. All is checked first (:func:`bidlab.learn.learner_state.restore`).
        """
        with self._cond:
            self._cond.wait_for(lambda: self._busy is None)
            if self._state in _ACTIVE:
                raise RuntimeError(f"Learner {self.name!r} is {self._state}: stop() it "
                                   "before loading a checkpoint")
            self._busy = "loading"
        with self._held():
            self._load(path)
        return self

    def _load(self, path: str) -> None:
        progress = self._restore(path)  # the position checked against this source first
        self._pos, self._row = (progress["pass"], progress["index"]), progress["row"]
        self.step = progress["step"]
        self.samples, self._elapsed = progress["samples"], progress["elapsed"]
        self._state, self._error, self.traceback = "stopped", None, None  # a fresh start point
        self._watch.reset()  # the loaded model is the new reference
        self._seek_source()
        self._update_metrics(time.perf_counter())

    def init(self) -> Learner:
        """Initialise the model (and updater, mixins) from the data now, without training."""
        with self._cond:
            self._cond.wait_for(lambda: self._busy is None)
            if self._state in _ACTIVE:
                return self
            self._busy = "initialising"
        with self._held():
            self._ensure_initialised()
        return self

    def __repr__(self) -> str:
        return (f"Learner({self.name!r}, {type(self.model).__name__}, "
                f"{type(self.updater).__name__}, state={self._state}, step={self.step})")

    # ======================================================================= internals
    def _ensure_initialised(self, rebuild: bool = False) -> None:
        """Build the model, attach the updater and mixins (``rebuild``: again, as now set)."""
        model = self.model
        if rebuild or not model.initialised:
            model.init_from(self.source.info)
        for part in (self.updater, *self.mixins):
            if rebuild or part.model is not model:
                try:
                    part.init(model)
                except BaseException:  # a bad option: built again once it is set right
                    part.model = None
                    raise
        rows = {m.shape[0] for m in model.modelmats}
        lengths = {len(model.modelmats)} | (rows if len(rows) == 1 else set())
        if model.row_groups is not None and rows == {len(model.row_groups)}:
            lengths.add(n_groups(model.row_groups))
        self.opts.set_vector_lengths(lengths)
        self.opts.set_built(True)

    def _components(self) -> tuple[Any, ...]:
        return (self.model, self.updater, *self.mixins)

    def _apply_changes(self) -> None:
        version, changes = self.opts.take_changes()
        for comp in self._components() if changes else ():
            comp.apply_changes(changes)
        self.updater.apply_own_changes()  # those set on a PerMatrix's updaters themselves
        self._opts_version = version
