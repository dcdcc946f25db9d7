"""Poisson draws of the SAME Gibbs sampler (:mod:`bidlab.kern.lda_sampler`), numba, shared
step by step with the CUDA kernel (``kernels/lda_sampler.cu``).

* ``lam < LAM_INV``: inversion from the stream's first uniform u, ``z = #{x : u > F(x)}``,
  the CDF built term by term (``p_x = p_{x-1} * lam / x``) until ``u <= F``. Most of a
  nonzero's topics have tiny rates: where ``u <= (1 - lam) * SURE``, below ``F(0) =
  exp(-lam)``, z is 0 without the exponential, and the CPU kernel draws only the others
  (:func:`_invert`). When many of a nonzero's topics need drawing (early sweeps, many
  samples per token), the CPU kernel builds the first terms for every topic at once
  (:func:`_invert_first`, branch-free and vectorised) and goes on term by term only for
  the few left (:func:`_invert_from`), as the CUDA kernel does. The same z either way;
* ``lam >= LAM_INV``: PTRS (Hormann 1993), from the stream's following uniforms.

Numpy oracle: ``scipy.stats.poisson(lam)`` (the sampler's tests compare means and variances).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from bidlab.kern.random import STRIDE, uniform

LAM_INV = 10.0
MAX_TERMS = 96
_INV = np.array([0.0] + [1.0 / x for x in range(1, MAX_TERMS + 1)])  # correctly rounded 1/x
# exp(-y) for 0 <= y < 0.625 (lam / 16): Taylor to degree 11, Horner, highest first
_EXP_C = np.array([(-1.0) ** i / math.factorial(i) for i in range(11, -1, -1)])


@numba.njit(inline="always")
def _exp_neg(lam):
    """exp(-lam) for 0 <= lam < 10 (relative error < 1e-8): exp(-lam/16) ** 16."""
    y = lam * 0.0625
    r = _EXP_C[0]
    for i in range(1, 12):
        r = r * y + _EXP_C[i]
    r = r * r
    r = r * r
    r = r * r
    return r * r


@numba.njit(cache=True, nogil=True)
def _ptrs(lam, s):
    """Poisson(lam) for lam >= 10 by PTRS (transformed rejection), stream state ``s``."""
    slam = math.sqrt(lam)
    loglam = math.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    for _ in range(1000):
        uu, s = uniform(s)
        uu -= 0.5
        v, s = uniform(s)
        us = 0.5 - abs(uu)
        kk = math.floor((2.0 * a / us + b) * uu + lam + 0.43)
        if us >= 0.07 and v <= vr:
            return int(kk)
        if kk < 0.0 or (us < 0.013 and v > us):
            continue
        if (
            math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b)
            <= -lam + kk * loglam - math.lgamma(kk + 1.0)
        ):
            return int(kk)
    return int(math.floor(lam + 0.5))



#: below ``(1 - lam) * SURE`` a uniform is below exp(-lam) (as :func:`_exp_neg` rounds it,
#: relative error < 1e-8): the draw is 0 without computing the exponential
SURE = 1.0 - 1e-7


@numba.njit(fastmath={"contract"}, inline="always")
def _invert(lam, u):
    """Poisson(lam) for 0 <= lam < LAM_INV by inversion from the uniform ``u``:
    ``#{x : u > F(x)}``, the CDF built term by term (the steps of the vectorised version)."""
    f = _exp_neg(lam)
    if not u > f:
        return 0
    return _invert_from(lam, u, f, f, 1)


#: how many terms :func:`_invert_first` builds for every topic at once
FIRST_TERMS = 8


@numba.njit(fastmath={"contract"}, inline="always")
def _invert_first(q, uu, zz, cdf, pr):
    """The first :data:`FIRST_TERMS` inversion steps for every topic at once: ``zz[j]`` the
    count so far, ``cdf[j]`` / ``pr[j]`` the CDF and the last term (for :func:`_invert_from`).
    Branch-free with a constant trip count, so the topic loop vectorises; the same steps
    as :func:`_invert`, so the same z."""
    for j in range(q.shape[0]):
        lam = min(max(q[j], 0.0), LAM_INV)
        u = uu[j]
        f = _exp_neg(lam)
        t = f
        z = 1.0 if u > f else 0.0
        for x in range(1, FIRST_TERMS):
            t = t * (lam * _INV[x])
            f = f + t
            z += 1.0 if u > f else 0.0
        zz[j] = z
        cdf[j] = f
        pr[j] = t


@numba.njit(fastmath={"contract"}, inline="always")
def _invert_from(lam, u, f, t, start):
    """The inversion's count from step ``start`` on (``u`` beyond the first ``start``
    steps), from the CDF ``f`` and the last term ``t`` those steps left."""
    z = start
    for x in range(start, MAX_TERMS):
        t = t * (lam * _INV[x])
        f = f + t
        if not u > f:
            break
        z += 1
    return z


#: a nonzero whose topics to draw (those not 0 for sure) are more than 1 / DENSE_DRAWS of
#: k draws every topic by the vectorised first terms; fewer, only those, one by one
DENSE_DRAWS = 4


@numba.njit(fastmath={"contract"}, inline="always")
def _draw_all(q, uu, zz, cdf, pr, base):
    """Every topic's draw into ``zz``: the first terms at once, then the few left."""
    _invert_first(q, uu, zz, cdf, pr)
    for j in range(q.shape[0]):
        lam = q[j]
        if lam >= LAM_INV:
            zz[j] = _ptrs(lam, base + np.uint64(j) * STRIDE)
        elif zz[j] == FIRST_TERMS and lam > 0.0:  # u beyond the first terms: go on
            zz[j] = _invert_from(lam, uu[j], cdf[j], pr[j], FIRST_TERMS)
