"""Shared fixtures: the `xp` fixture runs a test on numpy and, where a GPU exists, on cupy;
`traced_allocations` measures what a block allocates without trusting bidlab's own counter."""

from __future__ import annotations

import os
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

# Kernels compile in the test process on first use (tests/test_kern_standin.py switches the
# array-level stand-ins and the background compiler on where it tests them).
os.environ.setdefault("BIDLAB_BACKGROUND_COMPILE", "0")

from bidlab import backend  # noqa: E402
from bidlab.datasets.paths import find_shared_data_dir, shared_data_candidates

REPO = Path(__file__).resolve().parent.parent
#: The shared data sets' folder (bidlab.datasets.paths decides where); when there is none,
#: the first place looked, so that a skip can say where the data was expected.
SHARED_DATA = find_shared_data_dir() or shared_data_candidates()[0]


def _backends() -> list:
    params = [pytest.param("numpy", id="numpy")]
    params.append(pytest.param("cupy", id="cupy", marks=pytest.mark.gpu))
    return params


@pytest.fixture(params=_backends())
def xp(request):
    """The array module to run a backend-generic test on (numpy, or cupy when a GPU exists)."""
    if request.param == "numpy":
        return np
    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: GPU variant skipped (install bidlab[gpu] on a GPU)")
    return backend.cupy()


@pytest.fixture
def shared_data() -> Path:
    """The shared data folder, or skip with the reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA} (set BIDLAB_SHARED_DATA)")
    return SHARED_DATA


@dataclass
class AllocationTrace:
    """What a traced block allocated, measured from outside bidlab.

    ``peak_bytes``: how far the traced heap (Python objects and numpy's array buffers, which
    numpy reports to :mod:`tracemalloc`) rose above its level at the start, at its highest;
    ``gpu_mallocs``: blocks taken from CuPy's memory pool (its memory hooks see every one,
    recycled or not); ``gpu_device_allocs``: those the pool had to get from the device.
    Arrays that compiled numba kernels allocate are not seen here (numba's own counter cannot
    tell them from the wrapper it makes for every array argument of every call); the kernels
    take ``out=`` and their own tests hold them to it.
    """

    peak_bytes: int = 0
    gpu_mallocs: int = 0
    gpu_device_allocs: int = 0


@contextmanager
def _trace() -> Iterator[AllocationTrace]:
    trace = AllocationTrace()
    hook = None
    if backend.gpu_available():
        from cupy.cuda import memory_hook

        class _Count(memory_hook.MemoryHook):
            name = "bidlab_test_count"

            def malloc_preprocess(self, **kwargs) -> None:
                trace.gpu_mallocs += 1

            def alloc_preprocess(self, **kwargs) -> None:
                trace.gpu_device_allocs += 1

        hook = _Count()
        hook.__enter__()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    try:
        yield trace
    finally:
        trace.peak_bytes = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        if hook is not None:
            hook.__exit__(None, None, None)


@pytest.fixture
def traced_allocations():
    """``with traced_allocations() as t: ...``, then read ``t.peak_bytes`` and
    ``t.gpu_mallocs`` (:class:`AllocationTrace`)."""
    return _trace


def _train_together(learners, timeout: float = 300) -> None:
    """Run ``fit`` of each learner in its own thread (the ranks of one group) and wait;
    fail on a hang or on any learner's exception."""
    errors: list[BaseException] = []

    def run(lrn) -> None:
        try:
            lrn.fit(progress=None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(lrn,)) for lrn in learners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a learner of the group hung"
    assert not errors, errors


@pytest.fixture
def fresh_cache():
    """The process's result cache, emptied and unlimited before and after the test."""
    import bidlab as bl
    from bidlab.mat.cache import CACHE

    bl.clear_cache()
    yield CACHE
    bl.cache_limit(None)
    bl.clear_cache()


@pytest.fixture
def train_together():
    """``train_together(learners)``: the learners of one communicator group, trained at
    once, one thread each."""
    return _train_together


def finishes(fn, fifos=(), seconds: float = 20) -> BaseException | None:
    """Run ``fn()`` in a thread; fail unless it ends within ``seconds`` (first freeing a
    reader blocked in ``open()`` of one of ``fifos``: a writer comes and goes). Returns what
    it raised (None if nothing)."""
    box: dict[str, BaseException | None] = {"exc": None}

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["exc"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        t.join(5)
        pytest.fail(f"{fn} still running after {seconds} s (blocked or looping)")
    return box["exc"]


def both_paths(fn):
    """``fn()`` through the compiled kernels, then with every numpy stand-in forced
    (:func:`bidlab.kern.standin.forced`): the pair, after checking a stand-in ran."""
    from bidlab.kern import standin

    compiled = fn()
    runs = standin.runs()
    with standin.forced():
        arrays = fn()
    assert standin.runs() > runs, "no stand-in ran"
    return compiled, arrays


def clamped_chains(path, rows, seed, monkeypatch, tabled=True):
    """A factory of two-replica Gibbs chains over the BIF network at ``path``, with
    ``rows`` observations of which some clamp a variable (a unit's partner, in some
    networks) and evidence on the last variable; ``tabled=False`` turns the tabled
    conditionals off (every unit's conditional formed from its tables)."""
    import numpy as np

    from bidlab.models.bayesnet import read_bif, tables
    from bidlab.models.bayesnet.sampler import GibbsChains

    if not tabled:
        monkeypatch.setattr(tables, "MAX_CONDITIONAL_ENTRIES", 0)
    net = read_bif(path)
    obs = np.full((rows, net.n_vars), -1, np.int32)
    obs[::3, 1] = 0
    obs[1::4, net.n_vars // 2] = 0
    ev = {net.names[-1]: net.states[-1][0]}

    def make():
        ch = GibbsChains(net, obs, m_max=2, seed=seed)
        ch.set_evidence(ev)
        return ch

    return make


def in_thread(fn, timeout: float = 10.0) -> tuple[bool, object]:
    """Run ``fn`` in a daemon thread; (finished, its result or exception) after
    ``timeout`` seconds, so a call that hangs fails a test instead of blocking it."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["value"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    return not t.is_alive(), out.get("value")


def drain(src) -> list[list[np.ndarray]]:
    """Every minibatch a data source gives until it ends, each matrix as a dense copy."""
    out = []
    while (b := src.next()) is not None:
        out.append([m.toarray().copy() if hasattr(m, "toarray") else m.numpy().copy()
                    for m in b.mats])
    return out


def mpi_ready() -> bool:
    """Whether mpi4py and an mpiexec are installed (the multi-process tests' skip)."""
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        return False
    from bidlab.distributed.launch import mpiexec_path

    try:
        mpiexec_path()
    except FileNotFoundError:
        return False
    return True


#: skip a test that runs MPI processes where mpi4py or mpiexec is missing
needs_mpi = pytest.mark.skipif(not mpi_ready(), reason="mpi4py and mpiexec are needed: pip "
                               "install 'bidlab[mpi]'")
