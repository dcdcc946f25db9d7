"""The training loop of :class:`~bidlab.learn.learner.Learner`: the run in the calling or the
background thread, the minibatch boundary (pause, stop, checkpoint requests, option
changes), the named sync points with the learner's communicator, and the checks for a
diverging model. A base of ``Learner``, not used on its own: its methods work on the
learner's parts (``source``, ``model``, ``updater``, ``mixins``, ``opts``, ``comm``, ...).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

from bidlab import backend
from bidlab.learn import learner_state, resume_position
from bidlab.learn.comm import check_combine, combine_models
from bidlab.learn.datasource import BlendedSource
from bidlab.learn.divergence import DivergedError, after, options_in_force
from bidlab.learn.observers import format_error
from bidlab.learn.record import ScoreSink
from bidlab.mat import caching
from bidlab.mat.cache import CACHE

__all__ = ["TrainingLoop"]

_ACTIVE = ("running", "paused")


class TrainingLoop:
    """The loop of :class:`~bidlab.learn.learner.Learner` (see the module doc)."""

    def _cache_scope(self) -> tuple[str, int]:
        """The result-cache scope of this learner's runs; what is cached under it is
        dropped once the learner is collected (its operands, the model's matrices, may
        live on in an estimator that makes a new learner for every run)."""
        scope = ("learner", id(self))
        held = getattr(self, "_scope_finalizer", None)
        if held is None or (held.peek() or (None,))[0] is not self:  # none yet, or a copy's
            self._scope_finalizer = weakref.finalize(self, CACHE.forget_scope, scope)
        return scope

    def _run(self) -> None:
        err: BaseException | None = None
        final = "done"
        self._finished = False  # set when the run completes its passes (or converges)
        if self.record.capacity != self.opts.record_size:  # set since the record was made
            self.record.resize(self.opts.record_size)
        try:
            with caching(scope=self._cache_scope()):  # every run's containers
                self._ensure_initialised()
                self._apply_changes()  # values set while it was not running
                self._seek_source()
                self._sync_start()
                final = self._loop()
        except KeyboardInterrupt as exc:  # Ctrl-C in fit(): stopped at a clean point
            err, final = exc, "stopped"
        except BaseException as exc:  # noqa: BLE001 - everything surfaces on join()
            err, final = exc, "failed"
            if self.comm.size > 1:
                self.comm.rank_failed(exc)  # the other ranks stop waiting for this one
        try:
            self.source.release()
            self._scores_flush()
            if self.model.initialised:  # deferred terms (and averaged iterates) land now
                prox = self.model.l1_prox
                if prox and self._finished:  # L1's strength for the landing model's step
                    for mx in self.mixins:  # (a run resumed with no step left takes none)
                        mx.hand_over()
                self.updater.end_run(err is None and self._finished)
                if err is None and self.comm.size > 1:  # the end sync point: one model
                    combine_models(self.comm, self.model.modelmats, self._combine)
                    if self._finished and self.model.l1_prox:  # a mean of sparse models is
                        for i in self.updater.mats:  # not: L1's proximal step, with rank 0's
                            self.updater.l1_shrink(i, self.model.modelmats[i].data)
                        self.comm.broadcast([m.data for m in self.model.modelmats])  # sizes
                    self.model.refresh()
                for i in prox or ():
                    prox[i] = None  # the next minibatch's mixin hands it over again
            self.model.run_ended(final, err)  # changes queued for a next minibatch
            if err is None and self.opts.checkpoint and self.model.initialised:
                self._save_now(self.opts.checkpoint)
        except BaseException as exc:  # noqa: BLE001
            if err is None:
                err, final = exc, "failed"
        if getattr(self, "_sink", None) is not None:
            self._score_buffer = self._sink.device_buffer
        self._sink = None  # its callback is this learner's method: no cycle left behind
        tb = format_error(err) if err is not None else None
        try:
            now = time.perf_counter()
            self._update_metrics(now, state=final)
            self._hub.final(self.metrics | {"state": final}, self.model, final, self.step, tb)
        finally:
            self._settle(final, err, tb)

    def _settle(self, final: str, err: BaseException | None, tb: str | None) -> None:
        """Set the end state and free what waits on the run: whatever the model's
        ``run_ended`` raises (a failure of its own, when the run had none), the saves
        waiting are answered, the guard is released and ``join()`` / ``fit()`` return."""
        try:
            with self._cond:
                self.opts.set_running(False)
                self._error = err
                self.traceback = tb
                self._state = final
                try:
                    self.model.run_ended(final, err)  # changes queued since: none waits
                except BaseException as exc:  # noqa: BLE001 - surfaces on join()
                    if err is None:
                        self._error, self.traceback = exc, format_error(exc)
                        self._state = "failed"
                finally:
                    for req in self._saves:  # served by the caller now that nothing runs
                        req.retry = True
                        req.done.set()
                    self._saves = []
                    if self.guard is not None:
                        self.guard.release(self)
                    self._cond.notify_all()
        finally:
            self._done.set()

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """Around a load, save or init done in the caller's thread to the idle learner (the
        caller set ``_busy``): ``start()``, ``fit()`` and the others wait until it ends."""
        try:
            yield
        finally:
            with self._cond:
                self._busy = None
                self._cond.notify_all()

    def _save_now(self, path: str) -> None:
        if not self.model.initialised:
            raise RuntimeError("nothing to save yet: the model has not been initialised (call "
                               "learner.init() or train first)")
        if threading.current_thread() is self._thread:
            self._scores_flush()  # scores of the minibatches up to here, into the record
        self.updater.sync()  # the saved matrices hold every deferred term
        self._check_finite("saving a checkpoint")  # the last finite checkpoint stays
        target = self.comm.checkpoint_file(path, write=True)
        if target is None:  # another rank writes the group's checkpoint
            return
        learner_state.write(target, self.name, self.opts, self.model,
                            self.updater, self.mixins,
                            {"pass": self._pos[0], "index": self._pos[1], "row": self._row,
                             "step": self.step, "samples": self.samples,
                             "elapsed": self._elapsed},
                            rows=self.comm.file_keeps_rows)

    def _restore(self, path: str) -> dict[str, Any]:
        """Load checkpoint ``path`` into the learner's parts (:func:`learner_state.restore`),
        its position checked against this source before anything is written; return its
        progress, with the row it resumes at (None: by minibatch index, for a file that
        kept none)."""
        target = self.comm.checkpoint_file(str(path), write=False)
        src = self.source
        while isinstance(src, BlendedSource):  # the row is one of its first source's
            src = src.a
        return learner_state.restore(
            target, self.opts, self.model, self.updater, self.source.batches_per_pass,
            self._ensure_initialised, rows=self.comm.file_keeps_rows,
            check_progress=lambda p: resume_position.check_row(target, p, src))

    def _seek_source(self) -> None:
        """Make the source's next minibatch the learner's (:attr:`DataSource.row` too)."""
        src, (pass_, index) = self.source, self._pos
        src.seek(pass_, index)
        if self._row is not None and (src.position, src.row) != (self._pos, self._row):
            src.seek(pass_, index, self._row)  # a row of another batch size
        self._pos, self._row = src.position, src.row

    def _warn_nothing_left(self) -> None:
        """Warn (a UserWarning) when an idle learner's next run would train nothing: its
        position has reached ``n_passes``, or its step count ``max_steps``."""
        if self._state in _ACTIVE:
            return  # start() refuses it with its own message
        n, max_steps = self.opts.n_passes, self.opts.max_steps
        made, steps = self._pos[0], self.step
        if made >= n:
            why, fix = (f"has made {made} passes (n_passes={n})",
                        "raise n_passes (which counts the passes already made) to continue: "
                        f"learner.set(n_passes={made + n}) trains {n} more")
        elif max_steps is not None and steps >= max_steps:
            why, fix = (f"has made {steps} minibatches (max_steps={max_steps})",
                        "raise max_steps (which counts the minibatches already made) or set "
                        f"it to None to continue: learner.set(max_steps={steps + max_steps})"
                        f" makes {max_steps} more")
        else:
            return
        warnings.warn(f"Learner {self.name!r} {why}, so start() trains nothing and it ends at "
                      f"once: {fix}, then start() again", UserWarning, stacklevel=3)

    def _sync_start(self) -> None:
        """The start sync point: every rank takes rank 0's model (a fresh run only)."""
        if self.comm.size == 1:
            return
        how = self.model.combine
        if how is None and self.model.full_batch:
            # its matrices change only at pass ends, from totals summed over the ranks (the
            # same on every rank): a step sync point exchanges none, the ranks still meet
            how = "local"
        self._combine = check_combine(how, len(self.model.modelmats),
                                      type(self.model).__name__)
        if self.step == 0:
            self.comm.broadcast([m.data for m in self.model.modelmats])
            self.model.refresh()

    def _boundary(self) -> bool:
        """Pause / stop / checkpoint requests / option changes; True means stop.

        While paused, every observer is sent one snapshot of the pause once its rate lets
        it (one subscribed meanwhile too), so none keeps showing the run as running."""
        announced = False
        tell_at = math.inf  # when the next observer not yet told of the pause is due
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
                    wait = tell_at - time.perf_counter()
                    if announced and wait > 0:
                        self._cond.wait(min(wait, 0.5))
                        continue
            for req in saves:
                try:
                    self._save_now(req.path)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    req.error = exc
                req.done.set()
            if not saves:
                now = time.perf_counter()
                if not announced:
                    announced = True
                    self._update_metrics(now, state="paused")
                tell_at = min(now + 0.5, self._hub.announce(now, self.metrics, self.model,
                                                            "paused", self.step))
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
        ck_every, ck_from = opts.checkpoint_every, now  # the interval, from the last save
        next_ckpt = now + ck_every if ck_every else math.inf
        hub = self._hub
        if self._pos[1] == 0 or stats.pass_ != self._pos[0]:
            stats.reset(self._pos[0])
        comm = self.comm
        together = comm.size > 1
        since_sync = 0
        pass_ended = False  # the last minibatch ended a pass: the ranks meet (convergence)
        meet_again = False  # the last meeting delivered commands: the ranks meet again
        carried: tuple[bool, bool] | None = None  # this boundary's meeting, held at the sync
        while True:
            stop = self._boundary()
            converged = model.converged
            if together:  # one meeting: commands, a stop or convergence on any rank
                if carried is not None:
                    stop, converged = carried
                    meet_again = False
                elif since_sync == 0 or pass_ended or meet_again:
                    stop, converged = comm.meet(self, stop)
                    meet_again = comm.delivered
                else:  # between sync points the ranks run free: a stop waits for the next
                    stop = converged = False
                carried = None
                pass_ended = False
            if stop:
                return "stopped"
            p, _ = src.position
            max_steps = opts.max_steps
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
                    if batch.last:  # the pass end may change what the ranks agree on
                        combine_models(comm, model.modelmats, self._combine)
                    else:  # the next boundary's meeting rides along with the sync
                        carried = comm.combine_and_meet(self, model.modelmats, self._combine,
                                                        self._stop_req)
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
            self._pos, self._row = src.position, src.row
            if watch.trained >= watch.next_check and not batch.last:
                watch.check(self, f"pass {batch.pass_ + 1}")
            if batch.last:
                pass_ended = True
                sink.flush()
                stats_ = upd.pass_statistics()
                if together and stats_:
                    comm.allreduce(stats_, "sum")
                    upd.statistics_combined()
                upd.end_pass(batch.pass_)
                model.end_pass(batch.pass_)
                self._check_finite(f"pass {batch.pass_ + 1}")
                if bpp != 1 or watch.trained >= watch.next_check:  # one-step passes: steps'
                    watch.check(self, f"end of pass {batch.pass_ + 1}")
                self._end_pass(batch.pass_)
                if opts.checkpoint:
                    self._save_now(opts.checkpoint)
                    ck_from = time.perf_counter()
                    next_ckpt = ck_from + ck_every if ck_every else math.inf
            if opts.checkpoint_every != ck_every:  # changed live: counted from the last save
                ck_every = opts.checkpoint_every
                next_ckpt = ck_from + ck_every if ck_every else math.inf
            if t1 >= next_ckpt and opts.checkpoint:
                self._save_now(opts.checkpoint)
                ck_from = t1
                next_ckpt = t1 + (ck_every or math.inf)
            if t1 >= next_metrics or hub.due(t1):
                sink.flush()
                self._update_metrics(t1)
                next_metrics = t1 + 0.25
                if self._tick is not None:
                    self._tick()
                if hub.due(t1):
                    hub.publish(t1, self.metrics, model, self._state, self.step)

    def _check_finite(self, when: str) -> None:
        """Raise :class:`DivergedError` when a model matrix holds NaN or inf."""
        for i, m in enumerate(self.model.modelmats):
            if m.dtype.kind == "f" and not backend.all_finite(m.data):
                raise DivergedError(self._diverged_text(i, when))

    def _diverged_text(self, i: int, when: str) -> str:
        return (f"the model diverged: {type(self.model).__name__}.modelmats[{i}] holds NaN or "
                f"inf at step {self.step} ({when}), with {options_in_force(self)}. {after(self)} "
                "NaN or inf in the data does this at any rate: check it with numpy.isfinite.")

