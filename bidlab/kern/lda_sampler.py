"""SAME Gibbs sampling for LDA, fused with its SDDMM: numba on the CPU, CUDA on the GPU.

One call makes one sampling sweep over a minibatch (thesis ch. 4, Algorithm 3, with the
coordinate-factored Poisson approximation). For each nonzero (d, w) of the documents x
vocabulary count matrix X (count c) and each topic j::

    mu    = sum_j theta[d, j] * phiT[w, j]                      # the SDDMM, fused in
    lam_j = (m / T[w, j]) * c * theta[d, j] * phiT[w, j] / mu    # m = nsamps
    z_j  ~ Poisson(lam_j)
    theta_hat[d, j] += z_j * T[w, j] / m
    phi_hat[w, j]   += z_j * T[w, j] / m

m Gibbs samples of a token become one Poisson draw per topic. The temperature T (V x k,
default all 1) scales a parameter's effective sample count to m / T: its expected
contribution stays ``c * theta * phi / mu`` while the variance grows by T.

Numpy oracle for the mean (the test compares averages over seeds against it)::

    mu = np.einsum("dk,wk->dw", theta, phiT)[X.nonzero()]        # sddmm
    R = X with values X.data / mu
    E[theta_hat] = theta * (R @ phiT);   E[phi_hat] = phiT * (R.T @ theta)

and each entry's variance is ``T / m`` times its mean (Poisson).

``phiT`` may also be given as topic-word counts N with ``scale``, ``beta`` and ``invden``:
the kernel then reads ``phi[w, j] = (scale * N[w, j] + beta) * invden[j]`` on the fly, so
a trainer never writes a normalised copy; with ``rows`` (CPU) only the minibatch's rows of
phi_hat are touched. Both keep a minibatch's cost proportional to its nonzeros.

Where the time goes (CPU): a nonzero's k rates and first uniforms are formed for every
topic at once (vectorised); most rates are tiny, and where the uniform lies below
``1 - lam`` the draw is 0 with no exponential, so only the few other topics (about 8 of
64 on KOS, 20 Newsgroups and 2,000-token documents once trained) are drawn and
accumulated, one by one (:mod:`bidlab.kern.lda_poisson`).

Random numbers come from a counter-based SplitMix64 stream per (nonzero, topic) keyed by
(seed, step), identical in both kernels, so the draws do not depend on threads, launch
shape or device: CPU and GPU differ only in float summation order.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from bidlab import backend
from bidlab.kern import lda_sampler_arrays as arrays
from bidlab.kern import standin
from bidlab.kern.lda_poisson import DENSE_DRAWS, LAM_INV, SURE, _draw_all, _invert, _ptrs
from bidlab.kern.lda_rows import (
    _NO_HEAT,
    _first_at_least,
    heated_words,
    rows_step,
    unique_columns,
)
from bidlab.kern.lda_sampler_cuda import same_sample_gpu
from bidlab.kern.random import GOLD, STRIDE, mix64, stream_key, stream_key_nb, unit
from bidlab.kern.standin import stand_in

__all__ = ["PARALLEL_MIN_PAIRS", "heated_words", "rows_step", "same_sample", "same_sample_sweeps",
           "unique_columns", "workspace"]

_M64 = (1 << 64) - 1
_CP = np.uint64(0xD1B54A32D192ED03)  # spreads nonzero p's streams apart

# ----------------------------------------------------------------------------- numba (CPU)

@numba.njit(fastmath={"reassoc", "contract"}, inline="always")
def _products(th, cnt, a, beta, invden, q):
    """q_j = th_j * phi_j with phi_j = (a cnt_j + beta) invden_j, and sum_j q_j (vectorised:
    reassociation is allowed here only)."""
    mu = 0.0
    for j in range(q.shape[0]):
        v = float(th[j]) * ((a * float(cnt[j]) + beta) * float(invden[j]))
        q[j] = v
        mu += v
    return mu


@numba.njit(cache=True, fastmath={"contract"}, nogil=True)
def _sample_rows(lo, hi, indptr, indices, counts, theta, cnt, a, beta, invden, temp, hot,
                 theta_hat, out, with_phi, nsamps, key):
    k = theta.shape[1]
    inv_m = 1.0 / nsamps
    q = np.empty(k)  # per-thread scratch: products, then rates
    uu = np.empty(k)  # first uniform of each topic's stream
    act = np.empty(k, np.int64)  # the topics whose draw is not 0 for sure
    zz = np.empty(k)  # many topics to draw: the draws, all topics at once
    cdf = np.empty(k)  # ... P(Z <= x) after the first terms
    pr = np.empty(k)  # ... P(Z = x) of the last of them
    for d in range(lo, hi):
        for j in range(k):
            theta_hat[d, j] = 0
        for p in range(indptr[d], indptr[d + 1]):
            w = indices[p]
            mu = _products(theta[d], cnt[w], a, beta, invden, q)
            if not mu > 0.0:
                continue
            scale = nsamps * float(counts[p]) / mu
            base = (key ^ mix64(np.uint64(p) * _CP)) + GOLD
            # branch-free, vectorised over topics: rates and first uniforms
            for j in range(k):
                q[j] = q[j] * scale
                uu[j] = unit(base + np.uint64(j) * STRIDE)
            # a word whose temperatures are all 1 (nearly every word, even with a few heated)
            # never reads its row of temp: see heated_words
            heated = hot[w] != 0
            if heated:
                for j in range(k):
                    q[j] = q[j] / float(temp[w, j])
            # z = 0 wherever u <= (1 - lam) * SURE <= exp(-lam), the inversion's first step:
            # most topics of a nonzero (branch-free); only the others are drawn, one by one
            n = 0
            for j in range(k):
                act[n] = j
                n += 1 if uu[j] > (1.0 - q[j]) * SURE else 0
            if n * DENSE_DRAWS > k:  # many to draw: every topic's first terms at once
                _draw_all(q, uu, zz, cdf, pr, base)
                if heated:
                    for j in range(k):
                        zz[j] = zz[j] * float(temp[w, j])
                for j in range(k):
                    theta_hat[d, j] += zz[j] * inv_m
                if with_phi:
                    for j in range(k):
                        out[w, j] += zz[j] * inv_m
                continue
            for i in range(n):
                j = act[i]
                lam = q[j]
                if lam >= LAM_INV:
                    z = float(_ptrs(lam, base + np.uint64(j) * STRIDE))
                else:
                    z = float(_invert(lam, uu[j]))
                if heated:
                    z = z * float(temp[w, j])
                theta_hat[d, j] += z * inv_m
                if with_phi:
                    out[w, j] += z * inv_m


@numba.njit(parallel=True, cache=True, nogil=True)
def _sample_cpu(indptr, indices, counts, theta, cnt, a, beta, invden, temp, hot,
                theta_hat, phi_hat, with_phi, bufs, rows, nsamps, key):
    ndocs = theta.shape[0]
    nch = bufs.shape[0] + 1
    nnz = indptr[ndocs]
    k = phi_hat.shape[1]
    if with_phi:
        for i in numba.prange(rows.shape[0]):
            w = rows[i]
            phi_hat[w, :] = 0
            for c in range(nch - 1):
                bufs[c, w, :] = 0
    for c in numba.prange(nch):
        lo = _first_at_least(indptr, ndocs, (nnz * c) // nch)
        hi = _first_at_least(indptr, ndocs, (nnz * (c + 1)) // nch) if c < nch - 1 else ndocs
        if c == 0:
            lo = np.int64(0)  # not a literal 0: one specialization of _sample_rows
            _sample_rows(lo, hi, indptr, indices, counts, theta, cnt, a, beta, invden, temp,
                         hot, theta_hat, phi_hat, with_phi, nsamps, key)
        else:
            _sample_rows(lo, hi, indptr, indices, counts, theta, cnt, a, beta, invden, temp,
                         hot, theta_hat, bufs[c - 1], with_phi, nsamps, key)
    if nch > 1 and with_phi:
        for i in numba.prange(rows.shape[0]):
            w = rows[i]
            for c in range(nch - 1):
                for j in range(k):
                    phi_hat[w, j] += bufs[c, w, j]


@numba.njit(cache=True, nogil=True)
def _sample_serial(indptr, indices, counts, theta, cnt, a, beta, invden, temp, hot,
                   theta_hat, phi_hat, with_phi, rows, nsamps, key):
    if with_phi:
        for i in range(rows.shape[0]):
            phi_hat[rows[i], :] = 0
    # np.int64(0), not 0: a literal would compile a second specialization of _sample_rows
    _sample_rows(np.int64(0), theta.shape[0], indptr, indices, counts, theta, cnt, a, beta,
                 invden, temp, hot, theta_hat, phi_hat, with_phi, nsamps, key)


@numba.njit(cache=True, nogil=True)
def _sweeps_serial(indptr, indices, counts, theta, cnt, a, beta, invden, temp, hot,
                   theta_hat, phi_hat, rows, nsamps, seed, step, sweeps, alpha):
    """``sweeps`` sweeps on one thread without the GIL: :func:`same_sample_sweeps`."""
    for i in range(sweeps):
        last = i == sweeps - 1
        if last:
            for r in range(rows.shape[0]):
                phi_hat[rows[r], :] = 0
        _sample_rows(np.int64(0), theta.shape[0], indptr, indices, counts, theta, cnt, a, beta,
                     invden, temp, hot, theta_hat, phi_hat, last, nsamps,
                     stream_key_nb(seed, step + np.uint64(i)))
        for d in range(theta.shape[0]):
            for j in range(theta.shape[1]):
                theta[d, j] = theta_hat[d, j] + alpha


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
# The one-thread E-step compiles before the rest: its stand-in does most of the work.
stand_in(_sample_cpu)(arrays.sample_cpu)
stand_in(_sample_serial)(arrays.sample_serial)
stand_in(_sweeps_serial, priority=-1)(arrays.sweeps_serial)

# Below this many (nonzero, topic) pairs one thread is faster than waking the others (and
# far faster when other processes keep the cores busy).
PARALLEL_MIN_PAIRS = 1 << 17


def workspace(vocab: int, k: int, dtype: Any, xp: Any = np) -> Any:
    """Scratch for :func:`same_sample` (per-thread phi_hat copies on the CPU; none on GPU).

    Allocate it once (through the counted allocator) and pass it on every call, so that a
    minibatch loop allocates nothing.
    """
    if xp is not np:
        return None
    nthreads = max(numba.get_num_threads(), 1)
    return backend.empty((nthreads - 1, vocab, k), dtype, np)


# ----------------------------------------------------------------------------- the API


def _check(X, theta, phiT, temp, theta_hat, phi_hat, invden) -> None:
    ndocs, vocab = X.shape
    k = theta.shape[1]
    want = {
        "theta": (theta, (ndocs, k)),
        "phiT": (phiT, (vocab, k)),
        "theta_hat": (theta_hat, (ndocs, k)),
        "phi_hat": (phi_hat, (vocab, k)),
    }
    if temp is not None:
        want["temp"] = (temp, (vocab, k))
    if invden is not None:
        want["invden"] = (invden, (k,))
    for name, (arr, shape) in want.items():
        if tuple(arr.shape) != shape:
            need = " x ".join(str(n) for n in shape)
            raise ValueError(
                f"same_sample: {name} has shape {tuple(arr.shape)} but X is {ndocs} x {vocab} "
                f"with k={k}, so {name} must be {need}"
            )
        if not arr.flags.c_contiguous:
            raise ValueError(f"same_sample: {name} must be C-ordered (rows of k contiguous)")
        if arr.dtype != theta.dtype or X.dtype != theta.dtype:
            raise TypeError(
                f"same_sample: {name} is {arr.dtype}, X is {X.dtype} and theta is "
                f"{theta.dtype}; use one float dtype for all"
            )


def same_sample(
    X: Any,
    theta: Any,
    phiT: Any,
    nsamps: float,
    seed: int,
    step: int,
    theta_hat: Any,
    phi_hat: Any,
    temp: Any = None,
    work: Any = None,
    *,
    scale: float = 1.0,
    beta: float = 0.0,
    invden: Any = None,
    rows: Any = None,
    with_phi: bool = True,
    hot: Any = None,
) -> None:
    """One fused SAME sampling sweep over the CSR count matrix ``X`` (documents x vocab).

    Parameters
    ----------
    X: scipy or cupyx CSR, ndocs x vocab, float32/float64 counts.
    theta: ndocs x k (C-ordered) document-topic weights (any positive scale per row).
    phiT: vocab x k (C-ordered) topic-word probabilities, transposed -- or, with ``invden``,
        topic-word *counts* N from which the kernel forms
        ``phi[w, j] = (scale * N[w, j] + beta) * invden[j]`` on the fly (no normalised copy).
    nsamps: m, the number of samples per token (> 0).
    seed, step: select the random stream; use a new ``step`` for every sweep.
    theta_hat: ndocs x k output (overwritten): sum over words of z * T / m.
    phi_hat: vocab x k output: sum over documents of z * T / m. All of it is overwritten,
        or with ``rows`` (host int array, CPU) only those rows -- the distinct columns of X,
        see :func:`unique_columns` -- the others are left as they are.
    temp: vocab x k temperatures (> 0), or None for all 1.
    work: scratch from :func:`workspace` (CPU); allocated on the fly when None.
    with_phi: False skips phi_hat (not touched at all): a sweep that only refines theta.
    hot: (CPU) :func:`heated_words` of ``temp``, kept by the caller and refreshed when the
        temperatures change; made here (one pass over ``temp``) when None.
    """
    if not nsamps > 0:
        raise ValueError(f"nsamps (m, samples per token) must be > 0; got {nsamps}")
    _check(X, theta, phiT, temp, theta_hat, phi_hat, invden)
    key = stream_key(seed, step)
    gpu = backend.is_cupy_array(theta)
    if invden is None:
        xp = backend.namespace(theta)
        invden = xp.ones(theta.shape[1], dtype=theta.dtype)
        scale, beta = 1.0, 0.0
    if gpu:
        backend.namespace(X, theta, phiT, theta_hat, phi_hat, temp, invden)
        same_sample_gpu(X, theta, phiT, float(scale), float(beta), invden, temp,
                         float(nsamps), key, theta_hat, phi_hat, bool(with_phi))
        return
    work, scale, beta, invden, rows, hot = _cpu_args(X, theta, phiT, temp, work, scale, beta,
                                                     invden, rows, hot)
    args = (X.indptr, X.indices, X.data, theta, phiT, float(scale), float(beta), invden,
            phiT if temp is None else temp, hot, theta_hat, phi_hat, bool(with_phi))
    if _serial(X, theta, work):
        _sample_serial(*args, rows, float(nsamps), np.uint64(key))
        return
    _sample_cpu(*args, work, rows, float(nsamps), np.uint64(key))


def _serial(X: Any, theta: Any, work: Any) -> bool:
    """Whether a CPU sweep runs on one thread (small minibatches, or no workspace)."""
    return X.nnz * theta.shape[1] < PARALLEL_MIN_PAIRS or work.shape[0] == 0


def _cpu_args(X: Any, theta: Any, phiT: Any, temp: Any, work: Any, scale: float, beta: float,
              invden: Any, rows: Any, hot: Any) -> tuple[Any, ...]:
    """The defaults :func:`same_sample` fills in on the CPU: (work, scale, beta, invden,
    rows, hot), checked."""
    if invden is None:
        invden = np.ones(theta.shape[1], dtype=theta.dtype)
        scale, beta = 1.0, 0.0
    if work is None:
        work = workspace(phiT.shape[0], theta.shape[1], theta.dtype)
    if work.shape[1:] != phiT.shape or work.dtype != theta.dtype:
        raise ValueError(
            f"same_sample: workspace has shape {work.shape[1:]} / {work.dtype}; need "
            f"{phiT.shape} / {theta.dtype}: make it with workspace(vocab, k, dtype)"
        )
    vocab = phiT.shape[0]
    if rows is None:
        rows = _ALL_ROWS.get(vocab)
        if rows is None:
            rows = _ALL_ROWS[vocab] = np.arange(vocab, dtype=np.int64)
    if temp is None:
        hot = _NO_HEAT.get(vocab)
        if hot is None:
            hot = _NO_HEAT[vocab] = np.zeros(vocab, dtype=np.uint8)
            hot.flags.writeable = False
    elif hot is None:
        hot = heated_words(temp)
    elif hot.shape != (vocab,) or hot.dtype != np.uint8:
        raise ValueError(f"same_sample: hot must be uint8 of shape ({vocab},) (see "
                         f"heated_words); got {hot.dtype} {hot.shape}")
    return work, scale, beta, invden, rows, hot


def same_sample_sweeps(
    X: Any,
    theta: Any,
    phiT: Any,
    nsamps: float,
    seed: int,
    step: int,
    sweeps: int,
    alpha: float,
    theta_hat: Any,
    phi_hat: Any,
    temp: Any = None,
    work: Any = None,
    *,
    scale: float = 1.0,
    beta: float = 0.0,
    invden: Any = None,
    rows: Any = None,
    hot: Any = None,
) -> None:
    """A minibatch's E-step: ``sweeps`` :func:`same_sample` sweeps, each followed by
    ``theta[:] = theta_hat + alpha``; phi_hat is made by the last sweep only.

    Sweep ``i`` uses the random stream of step ``step + i``, so the result is bit for bit
    that of calling :func:`same_sample` ``sweeps`` times (``with_phi`` on the last) with
    the theta update in between. Why one call: on the CPU, when the sweeps run on one
    thread (small minibatches, the usual case), the whole E-step is a single numba call
    that holds no GIL, instead of ``sweeps`` calls separated by Python steps. Another
    thread of the process (a dashboard's pump rendering the model) can then hold the GIL
    for the whole E-step without stopping training between sweeps. Other cases (GPU,
    parallel CPU sweeps) loop over :func:`same_sample`.
    """
    if isinstance(sweeps, bool) or not isinstance(sweeps, (int, np.integer)) or sweeps < 1:
        raise ValueError(f"same_sample_sweeps: sweeps must be >= 1 and a whole number; got "
                         f"{sweeps!r}")
    if backend.is_cupy_array(theta):
        serial = False
    else:
        if not nsamps > 0:
            raise ValueError(f"nsamps (m, samples per token) must be > 0; got {nsamps}")
        _check(X, theta, phiT, temp, theta_hat, phi_hat, invden)
        work, scale, beta, invden, rows, hot = _cpu_args(X, theta, phiT, temp, work, scale,
                                                         beta, invden, rows, hot)
        args = (X.indptr, X.indices, X.data, theta, phiT, float(scale), float(beta), invden,
                phiT if temp is None else temp, hot, theta_hat, phi_hat)
        serial = _serial(X, theta, work) or not _parallel_ready(args, rows, nsamps, seed, step,
                                                                sweeps, alpha, work)
    if not serial:
        xp = backend.namespace(theta)
        a = theta.dtype.type(alpha)
        for i in range(sweeps):
            same_sample(X, theta, phiT, nsamps, seed, step + i, theta_hat, phi_hat, temp, work,
                        scale=scale, beta=beta, invden=invden, rows=rows, hot=hot,
                        with_phi=i == sweeps - 1)
            xp.add(theta_hat, a, out=theta)
        return
    _sweeps_serial(*args, *_sweeps_tail(rows, nsamps, seed, step, sweeps, alpha, theta))


def _sweeps_tail(rows: Any, nsamps: float, seed: int, step: int, sweeps: int, alpha: float,
                 theta: Any) -> tuple[Any, ...]:
    """``_sweeps_serial``'s arguments after phi_hat."""
    return (rows, float(nsamps), np.uint64(int(seed) & _M64), np.uint64(int(step) & _M64),
            int(sweeps), theta.dtype.type(alpha))


def _parallel_ready(args: tuple[Any, ...], rows: Any, nsamps: float, seed: int, step: int,
                    sweeps: int, alpha: float, work: Any) -> bool:
    """Whether the threaded sweep runs compiled code now. On a fresh installation it is
    compiled in the background (:mod:`bidlab.kern.standin`); until then an E-step runs
    on one thread, in ``_sweeps_serial``, which compiles in about half the time (its
    numpy stand-in runs until it does): asked first, it is compiled first."""
    standin.ready(_sweeps_serial, *args,
                  *_sweeps_tail(rows, nsamps, seed, step, sweeps, alpha, args[3]))
    return standin.ready(_sample_cpu, *args, True, work, rows, float(nsamps), np.uint64(0))


_ALL_ROWS: dict[int, np.ndarray] = {}
