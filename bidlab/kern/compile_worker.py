"""The background compiler: one low-priority process that fills numba's disk cache.

Why a process and not a thread: numba compiles under the interpreter's lock (the GIL) and
its own compiler lock, so a compiling thread would stall the training it is meant to hide.
A separate process compiles on another core, at the lowest scheduling priority (``nice``
19, for its session's scheduling group as well where Linux has one), and writes each
specialization to numba's on-disk cache, where the training process loads it in
milliseconds (:mod:`bidlab.kern.standin` decides when).

Protocol: :class:`Worker` starts a Python running :data:`BOOT` with the same
environment (so the same ``NUMBA_CACHE_DIR``), sends one JSON line per job -- the kernel's
module and name and its argument types (numba types, pickled) -- and a reader thread
collects one JSON line per finished job (``ok``, seconds, or the error). Of the jobs
waiting, the one with the lowest priority number compiles first (a kernel whose stand-in
carries most of a fit's work can ask for that), then the earliest; the worker imports numba
and the kernels' modules before it chooses its first job, so the jobs of a fit's first
minibatch are all there to choose from; a worker woken from idle by a job waits
:data:`GATHER_S` for the others sent with it. When the training process ends, the worker's
input closes; it finishes the jobs it was given (so the next process finds them cached) and
exits.

Several processes (a parallel search's workers, a script run again while the last run's
workers still compile) send the same specializations to their own workers: a worker holds
a lock file per specialization in numba's cache folder while it compiles one, so the others
compile other jobs meanwhile, and then load that one from the disk cache instead of
compiling it again (:func:`compile_job`'s ``loaded``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock files, each worker compiles
    fcntl = None  # type: ignore[assignment]

__all__ = ["Worker", "compile_job", "main", "BOOT", "GATHER_S"]

#: how long an idle worker, woken by a job, waits for more before it chooses one (s)
GATHER_S = 0.05


def _dispatcher(module: str, name: str) -> Any:
    """The numba dispatcher ``module.name`` (an adaptive kernel's parallel dispatcher)."""
    obj = getattr(importlib.import_module(module), name)
    return getattr(obj, "parallel", obj)


def _lock_file(disp: Any, job: dict[str, Any]) -> Any:
    """The open lock file of ``job``'s specialization, in ``disp``'s numba cache folder
    (None where files cannot be locked: then every worker compiles its own jobs)."""
    if fcntl is None:
        return None
    key = hashlib.sha1(f"{job['module']}.{job['name']}:{job['sig']}".encode()).hexdigest()
    name = f"{disp.py_func.__name__}-{key[:20]}.compiling"
    try:
        return open(os.path.join(disp._cache.cache_path, name), "a")  # noqa: SIM115
    except (OSError, AttributeError, TypeError):
        return None


def _in_disk_cache(disp: Any, sig: Any) -> bool:
    """Whether numba's disk cache holds ``disp``'s machine code for ``sig`` already."""
    try:
        key = disp._cache._index_key(sig, disp.targetctx.codegen())
        return key in disp._cache._cache_file._load_index()
    except Exception:  # numba's internals moved: it compiles or loads as it sees fit
        return False


def compile_job(job: dict[str, Any], wait: bool = True) -> dict[str, Any] | None:
    """Compile one job (a line of the protocol, decoded) into numba's disk cache.

    The job's lock file is held meanwhile, so no other process's worker compiles the same
    specialization at the same time: one that comes second waits for the lock (``wait``;
    otherwise None is returned at once, for the caller to take another job first) and
    then loads the machine code from the disk cache (``loaded`` True in the result).
    """
    lock = None
    try:
        disp = _dispatcher(job["module"], job["name"])
        sig = pickle.loads(base64.b64decode(job["sig"]))
        lock = _lock_file(disp, job)
        if lock is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                return None
            except OSError:  # a file system without locks: compile all the same
                pass
        t0 = time.perf_counter()  # the compile's (or load's) time, not the wait's
        loaded = _in_disk_cache(disp, sig)
        disp.compile(sig)  # numba loads it from the disk cache when it is there
    except Exception as exc:  # reported to the training process, which compiles itself
        return {"id": job.get("id"), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        if lock is not None:
            lock.close()  # releases the lock
    return {"id": job["id"], "ok": True, "seconds": time.perf_counter() - t0,
            "loaded": loaded}


def _warm_up() -> None:
    """Compile one small function (not cached): numba sets up its compiler, typing and
    code generator on the first compile of a process (half a second or more), so a worker
    started before its first job has that done when the job comes."""
    import numba
    import numpy as np

    @numba.njit(nogil=True)
    def first(a, s):  # pragma: no cover - compiled
        t = 0.0
        for i in range(a.shape[0]):
            s = (s ^ (s >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            t += a[i] * float(s >> np.uint64(11))
        return t

    first(np.ones(2), np.uint64(1))


#: what the worker's interpreter runs: its priority lowered first, before it imports numba and
#: bidlab (a second of work that would otherwise take a core's share from the program that
#: started it), then :func:`main`. Lowest priority: nice 19, for the process and, on Linux
#: with autogrouping, for its session's group (the worker runs in a session of its own, so
#: a Ctrl-C in the terminal does not reach it, and the scheduler shares the CPU between
#: sessions' groups by the group's nice value, not the processes').
BOOT = """
import contextlib, os
if hasattr(os, "nice"):
    with contextlib.suppress(OSError):
        os.nice(19)
with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as group:
    group.write("19")
from bidlab.kern.compile_worker import main
raise SystemExit(main())
"""


def main() -> int:
    """Run the worker: compile each job read from stdin, report it on stdout."""
    queued: list[dict[str, Any]] = []
    more = threading.Condition()
    ended = False

    def read() -> None:  # jobs arrive while one compiles: the next is chosen among all
        nonlocal ended
        for line in sys.stdin:
            if line.strip():
                with more:
                    queued.append(json.loads(line))
                    more.notify()
        with more:
            ended = True
            more.notify()

    threading.Thread(target=read, name="bidlab-compile-jobs", daemon=True).start()
    # numba, the kernels' common imports and numba's compiler set up first (a second or
    # more): meanwhile the jobs of a fit's first minibatch arrive, so the first to compile
    # is chosen by priority among them, not just the first sent
    with contextlib.suppress(Exception):
        importlib.import_module("bidlab.kern.cpu")
        _warm_up()
    reporting = True
    while True:
        with more:
            if not queued and not ended:
                while not queued and not ended:
                    more.wait()
                # woken from idle by a job: the others a fit sends with it come within
                # milliseconds; wait for them, so the first compiled is chosen among all
                until = time.monotonic() + GATHER_S
                while not ended and (left := until - time.monotonic()) > 0:
                    more.wait(left)
            if not queued:
                break
            order = sorted(queued, key=lambda j: (j.get("priority", 0), j.get("id", 0)))
        # the first job no other process's worker is compiling now; when all are, the first
        # (it is loaded from the disk cache once the other worker has written it)
        result = None
        for job in order:
            result = compile_job(job, wait=False)
            if result is not None:
                break
        if result is None:
            job = order[0]
            result = compile_job(job)
        with more:
            queued.remove(job)
        if reporting:
            try:
                print(json.dumps(result), flush=True)
            except OSError:  # the training process is gone: keep compiling, stop reporting
                reporting = False
    return 0


class Worker:
    """The training process's handle on one background compile process.

    ``on_result(job_id, ok, seconds)`` is called from a reader thread as jobs finish. When
    the worker's output ends (it exited, crashed or was killed) every job it had not
    reported is reported failed, so no kernel waits for ever for a compile that will not
    come (its caller compiles it itself).
    """

    def __init__(self, on_result: Callable[[int, bool, float | None], None]) -> None:
        env = dict(os.environ, BIDLAB_BACKGROUND_COMPILE="0")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", BOOT], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1, start_new_session=True)
        self._on_result = on_result
        self._lock = threading.Lock()
        self._unreported: set[int] = set()  # jobs sent, no result read back yet
        self._reader = threading.Thread(target=self._read, name="bidlab-compile-reader",
                                        daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The worker process's id."""
        return self._proc.pid

    def submit(self, job_id: int, module: str, name: str, sig: tuple[Any, ...],
               priority: int = 0) -> bool:
        """Send a job (of those waiting, the lowest ``priority`` compiles first, then the
        earliest); False when the worker cannot take it (it has exited)."""
        line = json.dumps({"id": job_id, "module": module, "name": name, "priority": priority,
                           "sig": base64.b64encode(pickle.dumps(sig)).decode("ascii")})
        with self._lock:
            if self._proc.stdin is None or self._proc.stdin.closed:
                return False
            self._unreported.add(job_id)
            try:
                self._proc.stdin.write(line + "\n")
                self._proc.stdin.flush()
            except OSError:
                self._unreported.discard(job_id)
                return False
        return True

    def _read(self) -> None:
        assert self._proc.stdout is not None
        try:
            for line in self._proc.stdout:
                try:
                    result = json.loads(line)
                    job_id = int(result["id"])
                except (ValueError, KeyError, TypeError):
                    continue
                with self._lock:
                    self._unreported.discard(job_id)
                self._on_result(job_id, bool(result.get("ok")), result.get("seconds"))
        except (OSError, ValueError):  # the pipe broke: as if the output ended
            pass
        with self._lock:  # the worker is gone: what it did not report, it will not
            lost, self._unreported = sorted(self._unreported), set()
        for job_id in lost:
            self._on_result(job_id, False, None)

    def close(self, timeout: float | None = None) -> bool:
        """No more jobs; wait up to ``timeout`` s (None: for ever) for the queued ones.

        True when the worker has finished them all and exited.
        """
        with self._lock:
            if self._proc.stdin is not None and not self._proc.stdin.closed:
                try:
                    self._proc.stdin.close()
                except OSError:
                    pass
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        self._reader.join(timeout=5.0)
        return True

    def disown(self) -> None:
        """In a process forked from the one that started the worker: let go of the child's
        copies of the worker's pipes, so that the parent closing the worker's input still
        ends it (:meth:`close`, the parent's exit) and the child reads none of its results.
        The descriptors are pointed at the null device, not closed: the parent's reader
        thread, which did not come along, may hold the output's lock."""
        try:
            null = os.open(os.devnull, os.O_RDWR)
        except OSError:
            return
        try:
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError, ValueError):
                        os.dup2(null, stream.fileno())
        finally:
            os.close(null)

    def alive(self) -> bool:
        """Whether the worker process is still running."""
        return self._proc.poll() is None
