"""Kernels usable before they are compiled: array-level stand-ins while numba compiles.

Why: every CPU kernel is compiled by numba on first use, per specialization (dtypes,
layouts), and the ``parallel=True`` ones take seconds each; a fresh installation's first
fit of a model family used to spend 1-50 s compiling before it computed anything.

How: :func:`stand_in` gives a cached numba kernel (a dispatcher or an
:class:`~bidlab.kern.adaptive.AdaptiveKernel`) an array-level implementation (numpy /
scipy, the same results to float tolerance, writing the same outputs). When the kernel is
called with argument types it has no machine code for -- the moment numba would start
compiling -- this module steps in:

1. if numba's disk cache holds the specialization, it is loaded (milliseconds) and run;
2. otherwise the specialization is sent to the background compiler
   (:mod:`bidlab.kern.compile_worker`: one low-priority process, so compiling holds
   neither this interpreter's GIL nor its cores' priority) and the stand-in runs instead;
3. once the worker has written the cache entry, the next call loads it; from then on the
   kernel's calls go straight to numba's machine code, with no Python in between (a
   kernel is switched between two of its calls; the models call their kernels per
   minibatch).

The worker is started before it is needed when it can be: importing a module whose kernels
numba's disk cache does not hold (a fresh installation, a family not used before) starts
it (:func:`prestart`), and it imports numba and sets up its compiler while the program
imports the rest and loads its data; a worker no job reaches within
:data:`PRESTART_IDLE_S` is closed.

Calls with types already compiled never reach this module: numba's own dispatcher sends
them to the machine code, so warm speed is unchanged. Kernels without a stand-in compile
in the calling process as before.

On by default. Off: ``BIDLAB_BACKGROUND_COMPILE=0`` in the environment, or
:func:`set_enabled` (False) / the :func:`enabled` context manager; then every kernel
compiles in the calling process on first use, as numba does. :func:`status` lists what
ran as a stand-in and what the worker compiled; :func:`wait` waits for the worker.

Forked children: once numba has started its GNU OpenMP threads, a child made by
``os.fork()`` (``multiprocessing``'s "fork", Linux's default up to Python 3.13) would be
ended by SIGTERM at its first parallel kernel (:mod:`bidlab.kern.forked`). Such a child
runs every ``parallel=True`` kernel's stand-in for good, stand-ins on or off (its serial
kernels keep their machine code; nothing is compiled or sent to the parent's worker): the
same results to float tolerance, the parallel kernels at numpy's speed on one core.
"spawn" and "forkserver" children start their own threads and run the compiled kernels.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from bidlab.kern import forked as _forked_mod
from bidlab.kern.compile_worker import Worker

try:  # numba's C-level type fingerprint (what its own dispatcher caches typings by)
    from numba._dispatcher import compute_fingerprint as _fingerprint
except ImportError:  # pragma: no cover - another numba: type every call in full
    def _fingerprint(value: Any) -> bytes:
        raise TypeError("no fingerprints")

__all__ = ["stand_in", "set_enabled", "is_enabled", "enabled", "forced", "ready", "status",
           "wait", "runs", "prestart", "ENV", "PRESTART_IDLE_S"]

#: the environment variable that switches the mechanism off ("0", "false", "off", "no")
ENV = "BIDLAB_BACKGROUND_COMPILE"


def _initial() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


_enabled = _initial()
_lock = threading.RLock()
_worker: Worker | None = None
_worker_pid = 0  # the process that started _worker (a forked child starts its own)
_jobs: dict[int, tuple[_Hook, tuple[Any, ...]]] = {}
_hooks: list[_Hook] = []
_forced = False
_pinned = False  # a forked child: the parallel kernels run their stand-ins for good
_runs = 0  # stand-in calls so far (the adaptive timings leave them out)
_checked = False  # whether a registered kernel was found missing from the disk cache
_prestarted = 0  # how many jobs there were when prestart() started the worker

#: a worker :func:`prestart` started is closed when no job was sent to it in this many s
PRESTART_IDLE_S = 120.0


def set_enabled(on: bool) -> None:
    """Switch stand-ins and background compiling on or off for this process."""
    global _enabled
    _enabled = bool(on)


def is_enabled() -> bool:
    """Whether a kernel's first use runs its stand-in while it compiles in the background."""
    return _enabled


@contextlib.contextmanager
def enabled(on: bool) -> Iterator[None]:
    """:func:`set_enabled` inside the ``with`` block, then the previous setting."""
    old = _enabled
    set_enabled(on)
    try:
        yield
    finally:
        set_enabled(old)


def runs() -> int:
    """How many stand-in calls this process has made."""
    return _runs


def _index(disp: Any) -> dict[Any, Any]:
    """numba's disk-cache index of ``disp`` (empty when none, or one of an older source)."""
    return disp._cache._cache_file._load_index()


def _in_disk_cache(disp: Any, sig: tuple[Any, ...]) -> bool:
    """Whether numba's disk cache holds ``disp``'s machine code for ``sig``."""
    return disp._cache._index_key(sig, disp.targetctx.codegen()) in _index(disp)


class _Hook:
    """Takes the place of a dispatcher's ``_compile_for_args`` (what numba calls when no
    compiled specialization fits the arguments); returns what the call runs."""

    def __init__(self, disp: Any, name: str, fallback: Callable[..., Any],
                 priority: int = 0) -> None:
        self.disp = disp
        self.priority = priority
        self.module = disp.py_func.__module__
        self.name = name
        self.fallback = fallback
        self.compile_here = disp._compile_for_args
        self.state: dict[tuple[Any, ...], str] = {}  # "pending", "done", "failed"
        self.seconds: dict[tuple[Any, ...], float] = {}  # the worker's compile times
        self.sigs: dict[tuple[bytes, ...], tuple[Any, ...]] = {}  # fingerprints -> types
        self.pinned = False  # runs the stand-in for good (a parallel kernel, forked child)

    def signature(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The numba types of ``args``, remembered by their fingerprints: typing every
        argument again on each stand-in call costs more than a small kernel's run."""
        try:
            key = tuple(_fingerprint(a) for a in args)
        except Exception:  # a type numba's fingerprint does not cover
            return tuple(self.disp.typeof_pyval(a) for a in args)
        sig = self.sigs.get(key)
        if sig is None:
            sig = self.sigs[key] = tuple(self.disp.typeof_pyval(a) for a in args)
        return sig

    def _run_fallback(self, *args: Any) -> Any:
        global _runs
        _runs += 1
        return self.fallback(*args)

    def __call__(self, *args: Any, **kws: Any) -> Any:
        if _forced or self.pinned:
            return self._run_fallback
        if kws or not _enabled:
            return self.compile_here(*args, **kws)
        try:
            sig = self.signature(args)
            with _lock:
                state = self.state.get(sig)
                if state in (None, "done") and _in_disk_cache(self.disp, sig):
                    return self.disp.compile(sig)  # loads the machine code
                if state is None and _submit(self, sig):
                    self.state[sig] = state = "pending"
        except Exception:  # numba's internals moved, or no worker: compile here
            return self._compile(args)
        if state == "pending":
            return self._run_fallback
        return self._compile(args)  # the worker failed or could not write the cache

    def _compile(self, args: tuple[Any, ...]) -> Any:
        """numba's own compile for ``args``, in this process. When the machine code cannot
        be written to the disk cache (a full disk, a folder made read-only since), it is
        used all the same: numba has added it to the dispatcher before it tried to save."""
        try:
            return self.compile_here(*args)
        except OSError:
            cres = self.disp.overloads.get(self.signature(args))
            if cres is None:
                raise
            return cres.entry_point

    def ready(self, args: tuple[Any, ...]) -> bool:
        """Whether a call with ``args`` would run machine code (compiled or in the disk
        cache: loaded now); if not, its specialization goes to the worker."""
        try:
            sig = self.signature(args)
            if sig in self.disp.overloads:
                return True
            with _lock:
                state = self.state.get(sig)
                if state in (None, "done") and _in_disk_cache(self.disp, sig):
                    self.disp.compile(sig)
                    return True
                if state is None and _submit(self, sig):
                    self.state[sig] = state = "pending"
        except Exception:  # numba's internals moved, or no worker: the call compiles
            return True
        return state != "pending"

    def done(self, sig: tuple[Any, ...], ok: bool, seconds: float | None) -> None:
        with _lock:
            self.state[sig] = "done" if ok else "failed"
            if seconds is not None:
                self.seconds[sig] = seconds


def _on_result(job_id: int, ok: bool, seconds: float | None) -> None:
    with _lock:
        hook, sig = _jobs[job_id]
    hook.done(sig, ok, seconds)


def _submit(hook: _Hook, sig: tuple[Any, ...]) -> bool:
    """Send ``hook``'s kernel at ``sig`` to the worker (started on first use)."""
    global _worker, _worker_pid
    if _worker is None or _worker_pid != os.getpid() or not _worker.alive():
        _worker, _worker_pid = Worker(_on_result), os.getpid()
    job_id = len(_jobs)
    _jobs[job_id] = (hook, sig)
    return _worker.submit(job_id, hook.module, hook.name, sig, hook.priority)


def prestart(idle_s: float | None = None) -> bool:
    """Start the background compiler now, before any kernel asks for it: it imports numba
    and sets up its compiler (1-2 s) while the user's program goes on, so a fit's first
    kernels start compiling the moment they are sent. A worker that has been sent no job
    ``idle_s`` seconds later (default :data:`PRESTART_IDLE_S`) is closed. Does nothing
    (False) when stand-ins are off or a worker is running already.

    Importing a module with stand-ins calls it when one of its kernels is not in numba's
    disk cache (a fresh installation, or a family not used before on this machine).
    """
    global _worker, _worker_pid, _prestarted
    if not _enabled or _forced:
        return False
    with _lock:
        if _worker is not None and _worker_pid == os.getpid() and _worker.alive():
            return False
        try:
            worker = Worker(_on_result)
        except OSError:  # no process can be started here: kernels compile in-process
            return False
        _worker, _worker_pid, _prestarted = worker, os.getpid(), len(_jobs)
    timer = threading.Timer(PRESTART_IDLE_S if idle_s is None else idle_s, _close_if_unused,
                            (worker,))
    timer.daemon = True
    timer.start()
    return True


_disowned: list[Worker] = []  # a forked child's handles on its parent's workers (kept)


def _after_fork_in_child() -> None:
    """A forked child lets its parent's worker go (:meth:`Worker.disown`: else the worker
    would not see its input end while the child lives, and the parent's :func:`wait`
    would wait for the child) and forgets the jobs that worker reports to the parent only,
    so its next calls find them in the disk cache or send them to a worker of its own."""
    global _lock, _worker
    _lock = threading.RLock()  # another of the parent's threads may have held it
    if _worker is not None:
        _worker.disown()
        _disowned.append(_worker)
        _worker = None
    for hook in _hooks:
        hook.state = {sig: s for sig, s in hook.state.items() if s != "pending"}
    if not _pinned and _forked_mod.unsafe():
        _pin_parallel()


def _pin_parallel() -> None:
    """Run every parallel kernel's stand-in from now on (a forked child of a process that
    started GNU OpenMP: module doc); the child has one thread when this runs."""
    global _pinned
    _pinned = True
    for hook in _hooks:
        if _forked_mod.is_parallel(hook.disp):
            hook.pinned = True
            hook.disp._reset_overloads()  # calls reach the hook, which runs the stand-in


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_if_unused(worker: Worker) -> None:
    """Close a prestarted ``worker`` that no job was sent to (its process exits)."""
    global _worker
    with _lock:
        if _worker is not worker or len(_jobs) != _prestarted:
            return
        _worker = None
    worker.close(timeout=30.0)


def _cold(hook: _Hook) -> bool:
    """Whether numba's disk cache holds nothing of ``hook``'s kernel (or only entries of
    an older source, which numba ignores)."""
    try:
        return not _index(hook.disp)
    except Exception:  # numba's internals moved: no guess
        return False


def stand_in(kernel: Any, priority: int = 0) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the array-level stand-in of a cached numba ``kernel``.

    The decorated function takes the kernel's arguments (an adaptive kernel's, without
    the work size) and writes the same outputs. It is returned unchanged, so a test can
    call it directly. Of the specializations waiting for the background compiler, those
    of kernels with a lower ``priority`` compile first (-1: a kernel whose stand-in
    carries most of its model's work, slower than the others' by more).

    Examples
    --------
    :mod:`bidlab.kern.cpu_elementwise` gives its column sums their numpy form with
    ``stand_in(_csr_col_sums)(arrays.csr_col_sums)``; the form is an ordinary function:

    >>> import numpy as np
    >>> from bidlab.kern import arrays
    >>> out = np.empty(3)
    >>> arrays.csr_col_sums(np.array([0, 2, 2]), np.array([1.0, 2.0, 3.0]), 3, out)
    >>> out.tolist()
    [1.0, 0.0, 5.0]
    """
    disp = getattr(kernel, "parallel", kernel)
    name = kernel.name.rsplit(".", 1)[-1] if hasattr(kernel, "parallel") else \
        disp.py_func.__name__

    def register(fallback: Callable[..., Any]) -> Callable[..., Any]:
        if getattr(disp, "_cache", None) is None or disp._cache.cache_path is None:
            return fallback  # not disk-cached: nothing a worker could hand over
        global _checked
        hook = _Hook(disp, name, fallback, priority)
        hook.pinned = _pinned and _forked_mod.is_parallel(disp)
        disp._compile_for_args = hook
        _hooks.append(hook)
        if not _checked and _enabled and _cold(hook):
            _checked = True  # once a process: the worker it starts serves every kernel
            prestart()
        return fallback

    return register


def ready(kernel: Any, *args: Any) -> bool:
    """Whether calling ``kernel`` (a dispatcher with a stand-in) with ``args`` now runs its
    machine code. False while its specialization is being compiled in the background (it
    is sent there by this call if it was not yet): a caller with another way to do the
    work (a serial kernel that is compiled already) can take it meanwhile. Always True
    when stand-ins are switched off (the call compiles in this process) or forced.

    Examples
    --------
    >>> import numpy as np
    >>> from bidlab.kern import cpu_elementwise
    >>> out = np.empty(3)
    >>> args = (np.array([0, 2, 2]), np.array([1.0, 2.0, 3.0]), 3, out)
    >>> with enabled(False):
    ...     ready(cpu_elementwise._csr_col_sums, *args)
    True
    """
    disp = getattr(kernel, "parallel", kernel)
    hook = disp.__dict__.get("_compile_for_args")
    if not isinstance(hook, _Hook) or not _enabled or _forced:
        return not (isinstance(hook, _Hook) and hook.pinned)
    return False if hook.pinned else hook.ready(args)


@contextlib.contextmanager
def forced() -> Iterator[None]:
    """Inside the ``with`` block every kernel that has a stand-in runs it, compiled or not
    (nothing is compiled or sent to the worker); after it, the machine code loaded before
    is used again. For comparing the two paths (the tests do) and for telling whether a
    wrong result comes from a numba kernel; not for use while other threads train.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from bidlab import kern
    >>> S = sp.random(40, 30, density=0.2, format="csr", random_state=0)
    >>> B = np.ones((30, 3))
    >>> with forced():
    ...     arrays_result = kern.sparse_dense(S, B)
    >>> bool(np.allclose(arrays_result, kern.sparse_dense(S, B)))
    True
    """
    global _forced
    with _lock:
        saved = [(h, list(h.disp.overloads.values())) for h in _hooks]
        for h, _ in saved:
            h.disp._reset_overloads()
        _forced = True
    try:
        yield
    finally:
        with _lock:
            _forced = False
            for h, compiled in saved:
                h.disp._reset_overloads()
                for cres in compiled:
                    h.disp.add_overload(cres)


def status() -> dict[str, Any]:
    """What this process ran as stand-ins and sent to the worker: ``runs``, and per job
    the kernel, its state and the worker's seconds."""
    with _lock:
        jobs = [{"kernel": f"{h.module}.{h.name}", "state": h.state.get(sig, "pending"),
                 "seconds": h.seconds.get(sig)} for h, sig in _jobs.values()]
    return {"enabled": _enabled, "runs": _runs, "jobs": jobs, "fork_stand_ins": _pinned,
            "worker_pid": _worker.pid if _worker is not None else None}


def wait(timeout: float | None = None) -> bool:
    """Let the worker finish the jobs it has (no new ones are sent to it) and exit.

    True when it did within ``timeout`` seconds (None: no limit) or there was none. The
    next job starts a new worker.
    """
    global _worker
    with _lock:
        worker = _worker
    if worker is None:
        return True
    finished = worker.close(timeout)
    with _lock:  # closed, finished or not: it takes no more jobs, the next starts another
        if _worker is worker:
            _worker = None
    return finished
