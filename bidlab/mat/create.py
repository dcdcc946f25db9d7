"""Making matrices: zeros, ones, random, hyperparameter scalars and vectors, device moves.

Every array is allocated through :func:`bidlab.backend.empty`, so it is counted.
``device`` is ``"cpu"`` (numpy, the default) or ``"gpu"`` (cupy; needs ``bidlab[gpu]``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from bidlab import backend
from bidlab.mat.dense import Mat
from bidlab.mat.sparse import SMat


def _xp(device: str) -> ModuleType:
    if device == "cpu":
        return np
    if device == "gpu":
        return backend.cupy()
    raise ValueError(f"device must be 'cpu' or 'gpu'; got {device!r}")


def _shape(shape: Any) -> tuple[int, int]:
    if isinstance(shape, int):
        return (shape, shape)
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2 or min(shape) < 0:
        raise ValueError(f"a Mat shape is (rows, cols) with both >= 0; got {shape}")
    return shape  # type: ignore[return-value]


def full(shape: Any, value: float, dtype: Any = np.float32, device: str = "cpu") -> Mat:
    """A matrix filled with ``value``."""
    arr = backend.empty(_shape(shape), dtype, _xp(device))
    arr.fill(value)
    return Mat(arr)


def zeros(shape: Any, dtype: Any = np.float32, device: str = "cpu") -> Mat:
    """A matrix of zeros."""
    return full(shape, 0, dtype, device)


def ones(shape: Any, dtype: Any = np.float32, device: str = "cpu") -> Mat:
    """A matrix of ones."""
    return full(shape, 1, dtype, device)


def rand(shape: Any, dtype: Any = np.float32, device: str = "cpu", seed: int | None = None) -> Mat:
    """Uniform [0, 1) random values from a seeded generator."""
    xp = _xp(device)
    rng = xp.random.default_rng(seed)
    out = backend.empty(_shape(shape), dtype, xp)
    out[...] = rng.random(out.shape, dtype=np.dtype(dtype) if np.dtype(dtype).kind == "f" else None)
    return Mat(out)


def scalar(value: float, dtype: Any = np.float32, device: str = "cpu") -> Mat:
    """A 1 x 1 hyperparameter. Change it with ``h.set(v)``: its GUID (cache key) stays."""
    return full((1, 1), value, dtype, device)


def row(values: Any, dtype: Any = np.float32, device: str = "cpu") -> Mat:
    """A 1 x n row vector (e.g. one learning rate per model or per target)."""
    v = np.asarray(values, dtype=dtype).reshape(1, -1)
    out = Mat(backend.empty(v.shape, dtype, _xp(device)))
    out.data[...] = v if device == "cpu" else _xp(device).asarray(v)
    return out


def col(values: Any, dtype: Any = np.float32, device: str = "cpu") -> Mat:
    """An m x 1 column vector (e.g. one value per feature row)."""
    m = row(values, dtype, device)
    return Mat(m.data.reshape(-1, 1))


def to_gpu(x: Mat | SMat) -> Mat | SMat:
    """A copy of ``x`` on the GPU (needs ``bidlab[gpu]``)."""
    if isinstance(x, SMat):
        return SMat(backend.to_device(x.csr))
    return Mat(backend.to_device(x.data))


def to_cpu(x: Mat | SMat) -> Mat | SMat:
    """A copy of ``x`` on the host (numpy / scipy)."""
    if isinstance(x, SMat):
        return SMat(backend.to_host(x.csr))
    return Mat(backend.to_host(x.data))
