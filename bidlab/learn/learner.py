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
import math
import os
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.learn import learner_state, registry
from bidlab.learn.comm import Communicator, SingleProcess, check_combine, combine_models
from bidlab.learn.datasource import DataSource, as_source
from bidlab.learn.divergence import AFTER, DivergedError, DivergenceWatch, options_in_force
from bidlab.learn.hyper import n_groups
from bidlab.learn.mixins import Mixin
from bidlab.learn.model import Model, hold_out_none
from bidlab.learn.observers import ObserverHub, Subscription, format_error
from bidlab.learn.options import Configurable, Option, Options
from bidlab.learn.progress import PassLines, format_scores, format_summary, make_progress
from bidlab.learn.record import PassStats, RunRecord, ScoreSink
from bidlab.learn.updaters.base import Updater
from bidlab.learn.updaters.per_matrix import as_updater
from bidlab.mat import cache_stats, caching

__all__ = ["Learner", "STATES", "DivergedError"]

STATES = ("created", "running", "paused", "stopped", "done", "failed")
SUMMARIES_KEPT = 10_000  #: per-pass summaries a learner keeps (the oldest go first)
_ACTIVE = ("running", "paused")


class _SaveRequest:
    def __init__(self, path: str) -> None:
        self.path = path
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.retry = False


class Learner(Configurable):
    """Trains ``model`` on ``data`` with ``updater`` (default the model's) and ``mixins``.

    Args:
        model: a :class:`~bidlab.learn.model.Model` (initialised from the data on start).
        data: a :class:`~bidlab.learn.datasource.DataSource`, or a matrix / tuple of
            aligned matrices (samples as rows), wrapped in a ``MemorySource``.
        updater: how the model moves: an Updater, or a mapping of model matrix (name or
            index) -> Updater to move each matrix its own way (default
            ``model.default_updater()``).
        mixins: extra loss terms (``L1Regularizer``, ``L2Regularizer``, ...).
        name: shown in progress output and the registry (made unique).
        batch_size: rows per minibatch when ``data`` is not already a source.
        **options: any option of the learner, model, updater or mixins (see
            ``learner.opts.what()``).
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
        Option("sync_every", int, 1, "training minibatches between combinations of the "
               "model across ranks (with a communicator of several)", low=1),
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
        if options:
            merged.set(**options)
        self.name = registry.register(self, name or type(model).__name__.lower())

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
        self._saves: list[_SaveRequest] = []
        self._tick: Any = None  # fit()'s progress display, called from the loop
        self._combine: tuple[str, ...] = ()  # each model matrix's combination across ranks
        #: a :class:`~bidlab.learn.exclusive.FitGuard` shared with the estimator that made
        #: this learner (held while the loop runs), or None
        self.guard: Any = None

        self._watch = DivergenceWatch()  # growth by orders of magnitude is divergence too
        self._pos = (0, 0)  # (pass, index) of the next minibatch
        self.step = 0  # minibatches processed so far (train + validation)
        self.samples = 0  # rows processed so far
        self._elapsed = 0.0
        self._opts_version = self.opts.version
        self.record = RunRecord(self.opts.record_size)
        #: one dict per pass, the last SUMMARIES_KEPT passes
        self.summaries: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=SUMMARIES_KEPT)
        self._lines: collections.deque[str] = collections.deque()
        self._stats = PassStats()
        self._last_train = math.nan
        self._last_val = math.nan
        self._metrics: dict[str, Any] = {}
        self._metrics_lock = threading.Lock()
        self._hub = ObserverHub(self.name)
        weakref.finalize(self, self._hub.close)
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

    def set(self, **options: Any) -> int:
        """Validate and set options (all or nothing); return the option-set version."""
        return self.opts.set(**options)

    def start(self) -> Learner:
        """Run the training loop in a background thread; return at once.

        Continues from where the last run (or a loaded checkpoint) stopped. Refused while
        the learner is running or paused.
        """
        with self._cond:
            self._begin()
            self._thread = threading.Thread(target=self._run, name=f"bidlab-learner-{self.name}",
                                            daemon=True)
            self._thread.start()
        return self

    def _begin(self) -> None:
        """Move to ``running`` (caller holds the lock)."""
        if self._state in _ACTIVE:
            raise RuntimeError(
                f"Learner {self.name!r} is already {self._state}: a learner runs one "
                "training loop at a time. Call stop() (then start() to continue), "
                "resume() a paused one, or join() to wait for it.")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()  # a finished thread that is exiting
        if self.guard is not None:
            self.guard.claim(self)  # refused while the estimator trains its model elsewhere
        self._stop_req = self._pause_req = False
        self._error = None
        self.traceback = None
        self._state = "running"
        self._done.clear()
        self.opts.set_running(True)

    def pause(self, wait: bool = False, timeout: float | None = 10.0) -> None:
        """Ask the loop to pause at the next minibatch boundary (``wait``: until it has)."""
        with self._cond:
            if self._state not in _ACTIVE:
                return
            self._pause_req = True
            self._cond.notify_all()
            if wait:
                self._cond.wait_for(lambda: self._state != "running", timeout)

    def resume(self) -> None:
        """Continue a paused loop."""
        with self._cond:
            self._pause_req = False
            self._cond.notify_all()

    def stop(self, wait: bool = True, timeout: float | None = None) -> str:
        """Finish the current minibatch, then end the loop (model stays consistent).

        Returns the state; with ``wait`` (default) after the thread has ended. Does not
        raise a training failure: :meth:`join` does.
        """
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
        if thread is not None and thread.name.startswith("bidlab-learner-"):
            thread.join(timeout)
            return not thread.is_alive()
        return self._done.wait(timeout)

    def fit(self, progress: str | None = "auto", file: Any = None,
            background: bool = False) -> Learner:
        """Train until ``n_passes`` (or ``max_steps``) are done, showing progress; blocks.

        The loop runs in the calling thread (what the estimators' ``fit`` does), so no
        thread is involved and the learner can be stopped from another thread or by
        Ctrl-C; ``background=True`` runs it in the training thread and waits, as
        ``start()`` + ``join()`` would. ``progress``: ``"auto"`` (tqdm.auto, else a text
        line), ``"text"``, ``"tqdm"``, ``"tqdm_postfix"`` (the pass summaries in the bar's
        postfix), ``"lines"`` (a summary line per pass, no bar) or None; ``file``: the
        stream for all of it (default ``sys.stderr``; a stream that is not a terminal gets
        lines, no bar). Interrupting (Ctrl-C / kernel interrupt) stops the learner cleanly
        (state ``stopped``, model consistent) and re-raises. A training failure is
        re-raised here.
        """
        disp = make_progress(progress, self.name, file)
        lines = PassLines(every=0.0 if progress == "lines" else None)

        def tick(final: bool = False) -> None:
            self._drain_lines(disp, lines)
            if final:
                show_last()
            disp.update(self.progress, self._postfix())

        def show_last() -> None:
            last = lines.finish()
            if last is not None:
                disp.write(last)

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
                    self._run()
                finally:
                    self._tick = None
                    with self._cond:
                        self._thread = None
                if isinstance(self._error, KeyboardInterrupt):
                    raise self._error
            tick(final=True)
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

    @property
    def progress(self) -> float:
        """Fraction done (0..1) by passes, or by ``max_steps`` when that comes first."""
        p, i = self._pos
        bpp = self.source.batches_per_pass
        frac = (p + (i / bpp if bpp else 0.0)) / self.opts.n_passes
        if self.opts.max_steps:
            frac = max(frac, self.step / self.opts.max_steps)
        return float(min(1.0, frac))

    @property
    def metrics(self) -> dict[str, Any]:
        """The latest metrics (a copy): state, step, pass, scores, speeds, cache, KPIs."""
        with self._metrics_lock:
            out = dict(self._metrics)
        out["state"] = self._state
        return out

    def summary(self) -> dict[str, Any]:
        """What the registry shows for this learner."""
        m = self.metrics
        return {k: m.get(k) for k in ("name", "model", "state", "progress", "train_score",
                                      "val_score", "samples_per_s", "step", "pass")}

    def option_used(self, name: str, step: int) -> Any:
        """The value option ``name`` had when minibatch ``step`` ran (from the record)."""
        rec = self.record.as_dict()
        hit = np.nonzero(rec["step"] == step)[0]
        if hit.size == 0:
            raise KeyError(f"step {step} is not in the record (it keeps the last "
                           f"{self.record.capacity} minibatches)")
        return self.opts.value_at(name, int(rec["opts_version"][hit[0]]))

    def history(self, as_frame: bool = False) -> Any:
        """The per-minibatch record, oldest first: numpy columns by name, or with
        ``as_frame`` a pandas DataFrame (pandas must be installed)."""
        return self.record.as_frame() if as_frame else self.record.as_dict()

    def to_csv(self, path: str | os.PathLike) -> Path:
        """Write :meth:`history` to ``path`` as CSV (a header row; no pandas needed)."""
        return self.record.to_csv(path)

    # -- checkpoints ----------------------------------------------------------------------
    def save(self, path: str | None = None, timeout: float = 120.0) -> str:
        """Write a checkpoint atomically to a new path or a regular file (a link, folder, FIFO
        or device is refused). While running, the training thread writes it; this waits."""
        path = path or self.opts.checkpoint
        if not path:
            raise ValueError("save() needs a path (or set the 'checkpoint' option)")
        with self._cond:
            active = self._state in _ACTIVE
            if active:
                req = _SaveRequest(str(path))
                self._saves.append(req)
                self._cond.notify_all()
        if active:
            if not req.done.wait(timeout):
                raise TimeoutError(f"the training thread did not write the checkpoint within "
                                   f"{timeout} s")
            if req.error is not None:
                raise req.error
            if not req.retry:
                return str(path)
        self._save_now(str(path))
        return str(path)

    def load(self, path: str) -> Learner:
        """Restore model matrices, updater state, options and progress from a checkpoint.

        Only while not running; a loaded learner is ``stopped``, whatever it was. Set options
        (e.g. a larger ``n_passes``) after loading; ``start()`` / ``fit()`` then continue where
        the checkpoint left off. All is checked first (:func:`bidlab.learn.learner_state.restore`).
        """
        with self._cond:
            if self._state in _ACTIVE:
                raise RuntimeError(f"Learner {self.name!r} is {self._state}: stop() it "
                                   "before loading a checkpoint")
        progress = learner_state.restore(
            path, self.opts, self.model, self.updater, self.source.batches_per_pass,
            self._ensure_initialised)
        self._pos = (progress["pass"], progress["index"])
        self.step = progress["step"]
        self.samples, self._elapsed = progress["samples"], progress["elapsed"]
        self._state, self._error, self.traceback = "stopped", None, None  # a fresh start point
        self._watch.reset()  # the loaded model is the new reference
        self.source.seek(*self._pos)
        self._update_metrics(time.perf_counter())
        return self

    def init(self) -> Learner:
        """Initialise the model (and updater, mixins) from the data now, without training."""
        with self._cond:
            if self._state in _ACTIVE:
                return self
        self._ensure_initialised()
        return self

    def __repr__(self) -> str:
        return (f"Learner({self.name!r}, {type(self.model).__name__}, "
                f"{type(self.updater).__name__}, state={self._state}, step={self.step})")

    # ======================================================================= internals
    def _ensure_initialised(self) -> None:
        model = self.model
        if not model.initialised:
            model.init_from(self.source.info)
        if self.updater.model is not model:
            self.updater.init(model)
        for mx in self.mixins:
            if mx.model is not model:
                mx.init(model)
        rows = {m.shape[0] for m in model.modelmats}
        lengths = {len(model.modelmats)} | (rows if len(rows) == 1 else set())
        if model.row_groups is not None and rows == {len(model.row_groups)}:
            lengths.add(n_groups(model.row_groups))
        self.opts.set_vector_lengths(lengths)

    def _components(self) -> tuple[Any, ...]:
        return (self.model, self.updater, *self.mixins)

    def _apply_changes(self) -> None:
        version, changes = self.opts.take_changes()
        if changes:
            for comp in self._components():
                comp.apply_changes(changes)
        self._opts_version = version

    def _run(self) -> None:
        err: BaseException | None = None
        final = "done"
        self._finished = False  # set when the run completes its passes (or converges)
        try:
            with caching():
                self._ensure_initialised()
                self._apply_changes()  # values set while it was not running
                self.source.seek(*self._pos)
                self._sync_start()
                final = self._loop()
        except KeyboardInterrupt as exc:  # Ctrl-C in fit(): stopped at a clean point
            err, final = exc, "stopped"
        except BaseException as exc:  # noqa: BLE001 - everything surfaces on join()
            err, final = exc, "failed"
        try:
            self.source.release()
            self._scores_flush()
            if self.model.initialised:  # deferred terms (and averaged iterates) land now
                self.updater.end_run(err is None and self._finished)
                if err is None and self.comm.size > 1:  # the end sync point: one model
                    combine_models(self.comm, self.model.modelmats, self._combine)
                    self.model.refresh()
            if err is None and self.opts.checkpoint and self.model.initialised:
                self._save_now(self.opts.checkpoint)
        except BaseException as exc:  # noqa: BLE001
            if err is None:
                err, final = exc, "failed"
        if getattr(self, "_sink", None) is not None:
            self._score_buffer = self._sink.device_buffer
        self._sink = None  # its callback is this learner's method: no cycle left behind
        tb = format_error(err) if err is not None else None
        now = time.perf_counter()
        self._update_metrics(now, state=final)
        self._hub.final(self.metrics | {"state": final}, self.model, final, self.step, tb)
        with self._cond:
            self.opts.set_running(False)
            self._error = err
            self.traceback = tb
            self._state = final
            for req in self._saves:  # served by the caller now that nothing runs
                req.retry = True
                req.done.set()
            self._saves = []
            if self.guard is not None:
                self.guard.release(self)
            self._cond.notify_all()
        self._done.set()

    def _sync_start(self) -> None:
        """The start sync point: every rank takes rank 0's model (a fresh run only)."""
        if self.comm.size == 1:
            return
        self._combine = check_combine(self.model.combine, len(self.model.modelmats),
                                      type(self.model).__name__)
        if self.step == 0:
            self.comm.broadcast([m.data for m in self.model.modelmats])
            self.model.refresh()

    def _boundary(self) -> bool:
        """Pause / stop / checkpoint requests / option changes; True means stop."""
        announced = False
        while True:
            with self._cond:
                saves, self._saves = self._saves, []
                if not saves:
                    if self._stop_req:
                        return True
                    if not self._pause_req:
                        if self._state != "running":
                            self._state = "running"
                            self._cond.notify_all()
                        break
                    if self._state != "paused":
                        self._state = "paused"
                        self._cond.notify_all()
                    if announced:
                        self._cond.wait(0.5)
                        continue
            for req in saves:
                try:
                    self._save_now(req.path)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    req.error = exc
                req.done.set()
            if not saves and not announced:
                announced = True
                now = time.perf_counter()
                self._update_metrics(now, state="paused")
                self._hub.publish(now, self.metrics, self.model, "paused", self.step)
        self._apply_changes()
        return False

    def _on_score(self, meta: tuple, value: float) -> None:
        slot, step, is_val, n = meta
        self.record.set_score(slot, step, value)
        if value != value:
            return
        st = self._stats
        if is_val:
            st.val_sum += value * n
            st.val_n += n
            self._last_val = value
        else:
            st.train_sum += value * n
            st.train_n += n
            self._last_train = value

    def _scores_flush(self) -> None:
        sink = getattr(self, "_sink", None)
        if sink is not None:
            sink.flush()

    def _loop(self) -> str:
        src, model, upd, mixins = self.source, self.model, self.updater, self.mixins
        watch = self._watch
        record, stats = self.record, self._stats
        self._sink = sink = ScoreSink(self._on_score, getattr(self, "_score_buffer", None))
        opts = self.opts
        bpp = src.batches_per_pass
        now = time.perf_counter()
        next_metrics = now
        next_ckpt = now + opts.checkpoint_every if opts.checkpoint_every else math.inf
        hub = self._hub
        if self._pos[1] == 0 or stats.pass_ != self._pos[0]:
            stats.reset(self._pos[0])
        comm = self.comm
        together = comm.size > 1
        since_sync = 0
        while True:
            stop = self._boundary()
            if together:
                stop = comm.any_of(stop)
            if stop:
                return "stopped"
            p, _ = src.position
            max_steps = opts.max_steps
            converged = comm.any_of(model.converged) if together else model.converged
            if p >= opts.n_passes or converged:
                self._finished = True
                return "done"
            if max_steps is not None and self.step >= max_steps:
                return "done"  # a step budget: training may go on from here
            t0 = time.perf_counter()
            batch = src.next()
            if batch is None:
                self._finished = True
                return "done"
            if batch.index == 0:
                stats.reset(batch.pass_)
                model.start_pass(batch.pass_)
            k = opts.val_every
            is_val = k > 0 and (bpp is None or bpp > 1) and batch.index % k == k - 1
            if is_val:
                score = model.evaluate(batch)
            else:
                score = model.update(batch)
                for mx in mixins:
                    mx.gradient()
                upd.update(self.step)
                stats.flops += model.flops(batch)
                since_sync += 1
                if together and since_sync >= opts.sync_every:
                    combine_models(comm, model.modelmats, self._combine)
                    model.refresh()
                    since_sync = 0
                watch.trained += 1
            t1 = time.perf_counter()
            slot = record.append(self.step, batch.pass_, batch.index, t1, batch.n, is_val,
                                 math.nan, self._opts_version)
            sink.push(score, (slot, self.step, is_val, batch.n))
            stats.seconds += t1 - t0
            stats.samples += batch.n
            stats.nbytes += batch.nbytes
            self._elapsed += t1 - t0
            self.step += 1
            self.samples += batch.n
            self._pos = src.position
            if watch.trained >= watch.next_check and not batch.last:
                watch.check(self, f"pass {batch.pass_ + 1}")
            if batch.last:
                sink.flush()
                stats_ = upd.pass_statistics()
                if together and stats_:
                    comm.allreduce(stats_, "sum")
                    upd.statistics_combined()
                upd.end_pass(batch.pass_)
                model.end_pass(batch.pass_)
                self._check_finite(f"pass {batch.pass_ + 1}")
                watch.check(self, f"end of pass {batch.pass_ + 1}")
                self._end_pass(batch.pass_)
                if opts.checkpoint:
                    self._save_now(opts.checkpoint)
                    next_ckpt = (time.perf_counter() + opts.checkpoint_every
                                 if opts.checkpoint_every else math.inf)
            if t1 >= next_ckpt and opts.checkpoint:
                self._save_now(opts.checkpoint)
                next_ckpt = t1 + (opts.checkpoint_every or math.inf)
            if t1 >= next_metrics or hub.due(t1):
                sink.flush()
                self._update_metrics(t1)
                next_metrics = t1 + 0.25
                if self._tick is not None:
                    self._tick()
                if hub.due(t1):
                    hub.publish(t1, self.metrics, model, self._state, self.step)

    def _end_pass(self, pass_: int) -> None:
        st = self._stats
        secs = max(st.seconds, 1e-12)
        summary = {
            "pass": pass_,
            "n_passes": self.opts.n_passes,
            "progress": self.progress,
            "train_score": st.train,
            "val_score": st.val,
            "seconds": st.seconds,
            "samples_per_s": st.samples / secs,
            "gflops": st.flops / secs / 1e9,
            "mb_per_s": st.nbytes / secs / 1e6,
            "cache_bytes": int(cache_stats()["bytes_held"] or 0),
            "gpu_free": self._gpu_free(),
            "score_name": self.model.score_name,
        }
        self.summaries.append(summary)
        self._lines.append(format_summary(summary))
        while len(self._lines) > 1000:
            self._lines.popleft()

    def _gpu_free(self) -> int | None:
        if self.source.info.device != "gpu":
            return None
        try:
            return int(backend.cupy().cuda.runtime.memGetInfo()[0])
        except Exception:  # pragma: no cover - GPU only
            return None

    def _update_metrics(self, now: float, state: str | None = None) -> None:
        st = self._stats
        secs = max(st.seconds, 1e-12)
        kpis = {}
        if self.model.initialised:
            for mx in self.mixins:
                if mx.model is not None:
                    try:
                        kpis[mx.kpi] = mx.score()
                    except Exception:  # a KPI must never break training
                        kpis[mx.kpi] = math.nan
        pass_, index = self._pos
        m = {
            "name": self.name,
            "model": type(self.model).__name__,
            "state": state or self._state,
            "step": self.step,
            "pass": pass_,
            "index": index,
            "n_passes": self.opts.n_passes,
            "progress": self.progress,
            "samples": self.samples,
            "train_score": self._last_train,
            "val_score": self._last_val,
            "pass_train_score": st.train,
            "pass_val_score": st.val,
            "samples_per_s": st.samples / secs if st.samples else math.nan,
            "gflops": st.flops / secs / 1e9 if st.samples else math.nan,
            "mb_per_s": st.nbytes / secs / 1e6 if st.samples else math.nan,
            "elapsed": self._elapsed,
            "cache_bytes": int(cache_stats()["bytes_held"] or 0),
            "gpu_free": self._gpu_free() if self.model.initialised else None,
            "opts_version": self._opts_version,
            "score_name": self.model.score_name,
            **{f"kpi_{k}": v for k, v in kpis.items()},
        }
        with self._metrics_lock:
            self._metrics = m

    def _postfix(self) -> str:
        m = self.metrics
        return format_scores(m["train_score"], m["val_score"])

    def _drain_lines(self, disp: Any, lines: PassLines) -> None:
        """Show the pass summaries that came since the last call, at a readable rate."""
        while self._lines:
            line = lines.offer(self._lines.popleft())
            if line is not None:
                disp.write(line)

    def _check_finite(self, when: str) -> None:
        """Raise :class:`DivergedError` when a model matrix holds NaN or inf."""
        for i, m in enumerate(self.model.modelmats):
            if m.dtype.kind == "f" and not backend.all_finite(m.data):
                raise DivergedError(self._diverged_text(i, when))

    def _diverged_text(self, i: int, when: str) -> str:
        return (f"the model diverged: {type(self.model).__name__}.modelmats[{i}] holds NaN or "
                f"inf at step {self.step} ({when}), with {options_in_force(self)}. {AFTER}")

    def _save_now(self, path: str) -> None:
        if not self.model.initialised:
            raise RuntimeError("nothing to save yet: the model has not been initialised (call "
                               "learner.init() or train first)")
        if threading.current_thread() is self._thread:
            self._scores_flush()  # scores of the minibatches up to here, into the record
        self.updater.sync()  # the saved matrices hold every deferred term
        self._check_finite("saving a checkpoint")  # the last finite checkpoint stays
        learner_state.write(path, self.name, self.opts, self.model, self.updater, self.mixins,
                            {"pass": self._pos[0], "index": self._pos[1], "step": self.step,
                             "samples": self.samples, "elapsed": self._elapsed})
