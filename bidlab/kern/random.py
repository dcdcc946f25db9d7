"""Counter-based random streams shared by the samplers: SplitMix64, the same bits in numba
and in CUDA (``kernels/lda_sampler.cu`` spells out the same arithmetic).

A stream is a 64-bit state; each draw adds the golden-ratio increment and mixes. The state
of a draw is a pure function of a key and a counter, so draws do not depend on threads,
launch shape or device, and a key made from (seed, step) gives every sweep, chain or
process its own independent stream (fold a process's rank into the seed for that).

Example::

    key = stream_key(seed, step)          # host side, once per sweep
    ...                                   # inside an @numba.njit kernel:
    s = key + np.uint64(i) * STRIDE       # stream i of the sweep
    u, s = uniform(s)                     # a double in [0, 1), and the advanced state
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["stream_key", "stream_key_nb", "mix64", "unit", "uniform", "GOLD", "STRIDE"]

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15

_U30 = np.uint64(30)
_U27 = np.uint64(27)
_U31 = np.uint64(31)
_U11 = np.uint64(11)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
#: the golden-ratio increment of one draw
GOLD = np.uint64(_GOLDEN)
#: distance between streams of one key: stream j starts j * 2^20 draws apart
STRIDE = np.uint64((_GOLDEN << 20) & _M64)
_TWO_M53 = 1.1102230246251565e-16  # 2**-53: 53 random bits to a double in [0, 1)


def _mix64_py(x: int) -> int:
    x &= _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def stream_key(seed: int, step: int) -> int:
    """The 64-bit key of one sweep: distinct (seed, step) pairs give independent streams."""
    return _mix64_py(_mix64_py((int(seed) & _M64) + _GOLDEN) + (int(step) & _M64) * _GOLDEN)


@numba.njit(inline="always")
def mix64(x):  # pragma: no cover - compiled
    """SplitMix64's finaliser (uint64 in, uint64 out)."""
    x = (x ^ (x >> _U30)) * _C1
    x = (x ^ (x >> _U27)) * _C2
    return x ^ (x >> _U31)


@numba.njit(inline="always")
def unit(x):  # pragma: no cover - compiled
    """A state's double in [0, 1): its 53 high mixed bits."""
    return float(mix64(x) >> _U11) * _TWO_M53


@numba.njit(inline="always")
def uniform(s):  # pragma: no cover - compiled
    """One draw from stream state ``s``: (a double in [0, 1), the next state)."""
    s = s + GOLD
    return unit(s), s


@numba.njit(inline="always")
def stream_key_nb(seed, step):  # pragma: no cover - compiled
    """:func:`stream_key` in numba (same bits: uint64 arithmetic wraps like ``& _M64``)."""
    return mix64(mix64(seed + GOLD) + step * GOLD)
