"""Run each CPU kernel on all cores or on one, whichever this machine is faster at right now.

Why: a numba ``prange`` loop splits its work between the threads and waits for the last
one. On an idle machine that halves a kernel's time; when another process keeps a core busy
(a browser rendering a live dashboard, a second notebook, a compile), the second thread's
share waits for a time slice and the call becomes several times *slower* than running it in
the calling thread. No fixed size threshold is right in both cases.

So every call site keeps, per size class (powers of four of its work), a moving average of
the cost per unit of work of the parallel and of the serial version, runs the cheaper one,
and now and then runs the other once to see whether the machine has changed: after at least
:data:`PROBE_EVERY` calls, and once the time spent at that site since the last probe is
:data:`PROBE_BUDGET` times what a probe is expected to lose (probing costs at most ~2 %).
A site's first calls run the parallel version :data:`SEED_RUNS` times, then the serial
one as often; each version's first timing is thrown away (it may include compiling or
waking the thread pool) and the lowest of the others seeds its estimate (one slow reading
seeded a 4x too high estimate that took a hundred calls to correct). The serial runs come
at once when the call is short, but for a long call (a whole pass of a full-batch model,
seconds each) only after :data:`WARMUP_BUDGET` times what those runs could lose, so that a
fit of a few long passes is not run at one core's speed to be measured. A probe that comes
in below its version's estimate replaces it (that estimate is a probe interval old, and
interference only ever adds time); other timings are averaged in.
The bookkeeping costs about a microsecond a call.

Policy: ``"adaptive"`` (default), ``"parallel"`` (always all threads: what the kernel
benchmark's roofline figures use) or ``"serial"``; set with :func:`set_policy`, the
:func:`policy` context manager, or the ``BIDLAB_KERNEL_THREADS`` environment variable.
:func:`decisions` shows what each call site chose and why. A thread limit set with
``numba.set_num_threads``, ``threadpoolctl.threadpool_limits`` (see
:mod:`bidlab.kern.threads`) or an estimator's ``n_jobs`` is read on every call: one thread
means the serial version.

:func:`adaptive_kernel` compiles a ``prange`` kernel once (``parallel=True``); its serial
run is the same machine code with numba's thread count set to 1 for the call (a separately
compiled serial copy loses the parallel lowering's no-alias guarantees and runs much
slower). Only kernels whose result does not depend on how the work is split go through
here (each output element is computed by one thread), so the choice changes the time,
never a bit of the answer, and a seeded run stays reproducible. Kernels that sum private
per-thread copies keep their fixed size rule.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numba

from bidlab.kern import standin, threads

__all__ = ["POLICIES", "PROBE_EVERY", "PROBE_BUDGET", "SEED_RUNS", "WARMUP_FREE", "WARMUP_BUDGET",
           "AdaptiveKernel", "adaptive_kernel", "one_thread", "run", "set_policy", "get_policy",
           "policy", "decisions", "reset"]

T = TypeVar("T")

POLICIES = ("adaptive", "parallel", "serial")
#: at least this many calls between two runs of the version not currently preferred
PROBE_EVERY = 32
#: a probe waits until the site has run this many times the probe's expected extra cost
PROBE_BUDGET = 50.0
_SMOOTHING = 0.5  # weight of a new timing in the moving average
#: runs of each version before the choice starts: the first is thrown away, the lowest of
#: the others seeds the version's estimate
SEED_RUNS = 3
#: the serial version's seed runs after the first (what they may lose against the parallel
#: one, at most ``threads - 1`` times its time each) start at once when that is below this
#: many seconds ...
WARMUP_FREE = 0.1
#: ... and otherwise once the site has run this many times that long
WARMUP_BUDGET = 4.0


def _initial_policy() -> str:
    value = os.environ.get("BIDLAB_KERNEL_THREADS", "adaptive").strip().lower()
    if value not in POLICIES:
        raise ValueError(f"BIDLAB_KERNEL_THREADS={value!r}: use one of {list(POLICIES)}")
    return value


_policy = _initial_policy()
threads.register()  # threadpoolctl's limits reach numba's thread count


@dataclass
class _Site:
    """Timings of one (call site, size class): index 0 serial, 1 parallel."""

    cost: list[float] = field(default_factory=lambda: [0.0, 0.0])  # seconds per unit
    seen: list[int] = field(default_factory=lambda: [0, 0])  # calls run (and timed)
    since_probe: int = 0
    time_since_probe: float = 0.0


_sites: dict[tuple[str, int], _Site] = {}


def set_policy(name: str) -> None:
    """``"adaptive"`` (default), ``"parallel"`` or ``"serial"`` for every CPU kernel."""
    global _policy
    if name not in POLICIES:
        raise ValueError(f"kernel thread policy {name!r}: use one of {list(POLICIES)}")
    _policy = name


def get_policy() -> str:
    """The policy in force (see :func:`set_policy`)."""
    return _policy


@contextlib.contextmanager
def policy(name: str) -> Iterator[None]:
    """Use policy ``name`` inside the ``with`` block (process-wide), then restore."""
    old = _policy
    set_policy(name)
    try:
        yield
    finally:
        set_policy(old)


def reset() -> None:
    """Forget every timing (the next calls measure both versions again)."""
    _sites.clear()


def _choose(site: _Site, units: float, threads: int) -> int:
    if site.seen[1] < SEED_RUNS:
        return 1
    if site.seen[0] < SEED_RUNS:
        # a serial run may take up to `threads` times the parallel one: short calls try it
        # at once; long ones once the site has spent WARMUP_BUDGET times that at parallel
        # speed (so a few long calls -- a fit's few passes -- are not run at one thread's
        # speed only to be measured)
        risk = (SEED_RUNS - 1) * (threads - 1) * site.cost[1] * units
        if site.seen[0] or risk <= WARMUP_FREE or \
                site.time_since_probe >= WARMUP_BUDGET * risk:
            return 0
        return 1
    best = 0 if site.cost[0] <= site.cost[1] else 1
    site.since_probe += 1
    extra = (site.cost[1 - best] - site.cost[best]) * units
    if site.since_probe >= PROBE_EVERY and site.time_since_probe >= PROBE_BUDGET * extra:
        site.since_probe = 0
        site.time_since_probe = 0.0
        return 1 - best
    return best


def run(name: str, work: float, serial: Callable[[], T], parallel: Callable[[], T]) -> T:
    """Call ``serial()`` or ``parallel()`` (the same kernel on one thread or on all).

    ``work`` is the call's size in the kernel's own unit (nonzeros x k, elements, ...):
    calls within a factor of four share timings.
    """
    threads = _counts()[0]()
    if _policy == "serial" or threads < 2:
        return serial()
    if _policy == "parallel":
        return parallel()
    units = max(float(work), 1.0)
    key = (name, int(units).bit_length() >> 1)
    site = _sites.get(key)
    if site is None:
        site = _sites.setdefault(key, _Site())
    mode = _choose(site, units, threads)
    standins = standin.runs()
    t0 = time.perf_counter()
    out = (parallel if mode else serial)()
    elapsed = time.perf_counter() - t0
    if standin.runs() != standins:  # an array-level stand-in ran: not this kernel's time
        return out
    site.time_since_probe += elapsed
    cost = elapsed / units
    seen = site.seen[mode]
    if seen == 1 or (1 < seen < SEED_RUNS and cost < site.cost[mode]):
        site.cost[mode] = cost  # the seed: the lowest timing after the first
    elif seen >= SEED_RUNS:
        probe = min(site.seen) >= SEED_RUNS and site.since_probe == 0
        if probe and cost < site.cost[mode]:
            site.cost[mode] = cost
        else:
            site.cost[mode] += _SMOOTHING * (cost - site.cost[mode])
    site.seen[mode] = seen + 1
    return out


def decisions() -> dict[str, dict[str, Any]]:
    """Per call site and size class: calls run each way and the current cost estimates."""
    out = {}
    for (name, size), s in sorted(_sites.items()):
        ready = min(s.seen) >= SEED_RUNS
        out[f"{name}[work~4^{size}]"] = {
            "serial_calls": s.seen[0], "parallel_calls": s.seen[1],
            "serial_ns_per_unit": s.cost[0] * 1e9 if s.seen[0] >= 2 else None,
            "parallel_ns_per_unit": s.cost[1] * 1e9 if s.seen[1] >= 2 else None,
            "prefers": ("parallel" if s.cost[1] < s.cost[0] else "serial") if ready else None,
        }
    return out


@functools.cache
def _counts() -> tuple[Callable[[], int], Callable[[int], None]]:
    """numba's own get/set of the calling thread's thread count.

    The public ``numba.get_num_threads`` re-checks the thread pool on every call, which
    costs as much as a small kernel's whole run; the ctypes entry points behind it cost a
    fraction of that (BENCHMARKS.md, "design measurements").
    Falls back to the public API if numba moves them.
    """
    numba.get_num_threads()  # starts numba's thread pool: the entry points need it
    try:
        from numba.np.ufunc import parallel as numba_parallel

        get, put = numba_parallel._get_num_threads, numba_parallel._set_num_threads
        if int(get()) == numba.get_num_threads():
            return (lambda: int(get())), put
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - other numba
        pass
    return numba.get_num_threads, numba.set_num_threads  # pragma: no cover


def one_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` with numba's thread count for this thread set to 1 (then restored)."""
    get, put = _counts()
    n = get()
    if n == 1:
        return fn(*args)
    put(1)
    try:
        return fn(*args)
    finally:
        put(n)


@dataclass(frozen=True)
class AdaptiveKernel:
    """A ``parallel=True`` numba kernel run on all threads or on one, per :func:`run`."""

    name: str
    parallel: Any  # the numba dispatcher

    def serial(self, *args: Any) -> Any:
        """The kernel on the calling thread only."""
        return one_thread(self.parallel, *args)

    def __call__(self, work: float, *args: Any) -> Any:
        """Run with ``args`` on the version :func:`run` picks for ``work``."""
        return run(self.name, work, lambda: self.serial(*args), lambda: self.parallel(*args))


def adaptive_kernel(**options: Any) -> Callable[[Callable[..., Any]], AdaptiveKernel]:
    """Decorator: ``numba.njit(parallel=True, **options)`` wrapped as an
    :class:`AdaptiveKernel` (call it with the work size first)."""

    def wrap(fn: Callable[..., Any]) -> AdaptiveKernel:
        return AdaptiveKernel(f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}",
                              numba.njit(parallel=True, **options)(fn))

    return wrap
