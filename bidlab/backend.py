"""The one place where bidlab decides between numpy/scipy (CPU) and CuPy (GPU).

Numeric code never imports cupy itself: it asks :func:`namespace` for the array module of
its operands (``xp``) and :func:`sparse_module` for the matching sparse module, so one code
path serves both backends. CuPy is imported lazily, the first time a GPU array is seen or
asked for, so ``import bidlab`` stays fast and works on machines without a GPU.

Every array that the matrix core allocates goes through :func:`empty`, which counts it;
that counter is how tests and benchmarks prove a minibatch loop allocates nothing after
warm-up.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse as sp

from bidlab import _forksafe

GPU_EXTRA_HINT = (
    "CuPy is not available: install the GPU extra with `pip install 'bidlab[gpu]'` "
    "(a CuPy wheel for CUDA 12) on a machine with an NVIDIA GPU and driver, or keep the "
    "data on the CPU (numpy/scipy)."
)

_cupy: ModuleType | None = None
_cupy_error: str | None = None
_lock = _forksafe.lock(__name__, "_lock")


def _try_import_cupy() -> ModuleType | None:
    """Import cupy once; remember why it failed so the error can say so."""
    global _cupy, _cupy_error
    if _cupy is not None or _cupy_error is not None:
        return _cupy
    with _lock:
        if _cupy is None and _cupy_error is None:
            try:
                cp = importlib.import_module("cupy")
                cp.cuda.runtime.getDeviceCount()
                _cupy = cp
            except Exception as exc:  # ImportError, CUDARuntimeError, ...
                _cupy_error = f"{type(exc).__name__}: {exc}"
    return _cupy


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    return _try_import_cupy() is not None


def cupy() -> ModuleType:
    """Return the cupy module, or raise ImportError explaining the ``gpu`` extra."""
    cp = _try_import_cupy()
    if cp is None:
        raise ImportError(f"{GPU_EXTRA_HINT} (import failed with {_cupy_error})")
    return cp


def is_cupy_array(x: Any) -> bool:
    """True for cupy ndarrays and cupyx sparse matrices, without importing cupy."""
    mod = type(x).__module__
    return mod.startswith("cupy") or mod.startswith("cupyx")


def is_sparse(x: Any) -> bool:
    """True for scipy.sparse and cupyx.scipy.sparse matrices/arrays."""
    if sp.issparse(x):
        return True
    return type(x).__module__.startswith("cupyx.scipy.sparse")


def backend_name(x: Any) -> str:
    """'cupy' or 'numpy': the backend an array (dense or sparse) lives on."""
    return "cupy" if is_cupy_array(x) else "numpy"


def namespace(*arrays: Any) -> ModuleType:
    """The array module (numpy or cupy) shared by ``arrays``.

    Python scalars and None are ignored. Mixing numpy and cupy operands raises a TypeError
    that names both, because a silent host<->device copy would hide a 100x slowdown.
    """
    names = set()
    for a in arrays:
        if a is None or isinstance(a, (int, float, complex, bool, np.generic)):
            continue
        names.add(backend_name(a))
    if len(names) > 1:
        raise TypeError(
            "operands live on different backends (numpy and cupy): move them to one device "
            "first, e.g. with bidlab.to_gpu(x) or bidlab.to_cpu(x)"
        )
    if names == {"cupy"}:
        return cupy()
    return np


def sparse_module(xp: ModuleType) -> ModuleType:
    """scipy.sparse for numpy, cupyx.scipy.sparse for cupy."""
    if xp is np:
        return sp
    return importlib.import_module("cupyx.scipy.sparse")


def special_module(xp: ModuleType) -> ModuleType:
    """scipy.special for numpy, cupyx.scipy.special for cupy."""
    if xp is np:
        return importlib.import_module("scipy.special")
    return importlib.import_module("cupyx.scipy.special")


def to_host(x: Any) -> Any:
    """A numpy / scipy copy (or the object itself when it already lives on the host)."""
    if not is_cupy_array(x):
        return x
    if is_sparse(x):
        return x.get()
    return x.get()


def to_device(x: Any) -> Any:
    """Move a numpy array or scipy sparse matrix to the GPU (needs the ``gpu`` extra)."""
    cp = cupy()
    if is_cupy_array(x):
        return x
    if sp.issparse(x):
        csp = sparse_module(cp)
        return csp.csr_matrix(sp.csr_matrix(x))
    return cp.asarray(x)


# --------------------------------------------------------------------------- allocation
class AllocationCounter:
    """Counts every container the matrix core allocates (arrays and sparse buffers).

    One counter per process, thread-safe. ``count`` and ``bytes`` only grow; take the
    difference over a loop to measure its allocations.
    """

    def __init__(self) -> None:
        self._lock = _forksafe.lock(self, "_lock")
        self.count = 0
        self.bytes = 0

    def record(self, nbytes: int) -> None:
        with self._lock:
            self.count += 1
            self.bytes += int(nbytes)

    def snapshot(self) -> tuple[int, int]:
        """(count, bytes) so far."""
        with self._lock:
            return self.count, self.bytes


allocations = AllocationCounter()


def empty(shape: tuple[int, ...], dtype: Any, xp: ModuleType = np, order: str = "C") -> Any:
    """Allocate an uninitialised array through the one counted allocator."""
    try:
        arr = xp.empty(shape, dtype=dtype, order=order)
    except Exception as exc:  # cupy.cuda.memory.OutOfMemoryError and friends
        if type(exc).__name__ == "OutOfMemoryError":
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            raise MemoryError(
                f"GPU out of memory allocating {nbytes / 2**20:.1f} MiB for shape {shape}: "
                "use a smaller batch size, call bidlab.clear_cache(), or lower "
                "bidlab.cache_limit(bytes)"
            ) from exc
        raise
    allocations.record(arr.nbytes)
    return arr


def zeros(shape: tuple[int, ...], dtype: Any, xp: ModuleType = np, order: str = "C") -> Any:
    """Counted zero-filled allocation."""
    arr = empty(shape, dtype, xp, order)
    arr.fill(0)
    return arr


def order_of(a: Any) -> str:
    """``"F"`` for a column-major (and not also row-major) 2-d array, else ``"C"``."""
    flags = a.flags
    return "F" if a.ndim >= 2 and flags.f_contiguous and not flags.c_contiguous else "C"


def empty_as(a: Any) -> Any:
    """A counted uninitialised array with ``a``'s shape, dtype, backend and memory order.

    Why: state kept beside a matrix (an updater's sums, a mixin's scratch) is combined with
    it element by element every step; numpy walks two operands of different orders with
    one of them strided, several times slower (BENCHMARKS.md, "design measurements").
    """
    return empty(tuple(a.shape), a.dtype, namespace(a), order_of(a))


def zeros_as(a: Any) -> Any:
    """:func:`empty_as`, zero-filled."""
    arr = empty_as(a)
    arr.fill(0)
    return arr


def all_finite(a: Any) -> bool:
    """True when no entry of ``a`` is NaN or infinite, without an array of flags.

    ``isfinite(a).all()`` allocates a boolean array the size of ``a``; the largest and
    smallest entries are finite exactly when every entry is (NaN propagates through both).
    """
    if a.size == 0:
        return True
    if isinstance(a, np.ndarray):  # the ufuncs' reductions: no per-call wrapper cost
        return (bool(np.isfinite(np.maximum.reduce(a, axis=None)))
                and bool(np.isfinite(np.minimum.reduce(a, axis=None))))
    xp = namespace(a)
    return bool(xp.isfinite(xp.max(a))) and bool(xp.isfinite(xp.min(a)))


def take_into(a: Any, indices: Any, out: Any, axis: int | None = None) -> Any:
    """``xp.take(a, indices, axis=axis, out=out)``, writing straight into ``out``.

    In its default ``mode="raise"`` numpy fills a hidden temporary the size of ``out`` and
    copies it over, on every call; with ``mode="wrap"`` it writes in place. So the indices
    must be in range (negative ones count from the end, as in indexing): callers pass
    indices they made or checked. CuPy always writes in place.

    Example::

        take_into(X, rows, out=buf, axis=0)     # buf[i] = X[rows[i]]
    """
    if isinstance(a, np.ndarray):
        return np.take(a, indices, axis=axis, out=out, mode="wrap")
    return namespace(a).take(a, indices, axis=axis, out=out)


# -- pickling -------------------------------------------------------------------------------
class HostModule:
    """Stands for the array module of a pickled object (restored as numpy: its arrays were
    saved as numpy, so the object unpickles on a machine without CuPy)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return (HostModule, ())


def _walk(value: Any, leaf: Any) -> Any:
    """``value`` with ``leaf`` applied inside its plain lists, tuples and dicts (not their
    subclasses, which may carry meaning of their own), and to ``value`` itself otherwise."""
    if isinstance(value, list):
        return [_walk(v, leaf) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(_walk(v, leaf) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: _walk(v, leaf) for k, v in value.items()}
    return leaf(value)


def _portable(value: Any) -> Any:
    if isinstance(value, ModuleType):
        return HostModule()
    if is_cupy_array(value) or is_sparse(value):
        return to_host(value)
    return value


def portable_state(state: dict[str, Any]) -> dict[str, Any]:
    """An object's ``__dict__`` made picklable on any machine: modules (``self.xp``) are
    replaced by a marker and device arrays by host copies (lists, tuples, dicts searched).
    Mats and SMats pickle themselves as host arrays."""
    return {k: _walk(v, _portable) for k, v in state.items()}


def _restored(value: Any) -> Any:
    return np if isinstance(value, HostModule) else value


def restore_state(state: dict[str, Any]) -> dict[str, Any]:
    """Undo :func:`portable_state` (module markers become numpy)."""
    return {k: _walk(v, _restored) for k, v in state.items()}
