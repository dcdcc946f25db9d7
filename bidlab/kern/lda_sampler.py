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

Threads (CPU): one kernel, ``_sweeps``, written for one thread and without the GIL; a large
minibatch is split into ranges of documents with equal shares of the nonzeros, run side by
side (:func:`bidlab.kern.threads.run_together`, as many as numba's thread count for the
calling thread, so ``threadpool_limits(1)`` makes it serial), each range's phi_hat draws
going to its own copy, added in range order at the end. One kernel rather than a serial and
a ``prange`` one compiles in about a third of the time, so a fresh installation's first fit
waits less for the background compiler (:mod:`bidlab.kern.standin`).

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
from bidlab.kern import standin, threads
from bidlab.kern.lda_poisson import DENSE_DRAWS, LAM_INV, SURE, _draw_all, _invert, _ptrs
from bidlab.kern.lda_rows import (
    _NO_HEAT,
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
def _sweeps(indptr, indices, counts, theta, cnt, a, beta, invden, temp, hot, theta_hat, out,
            rows, nsamps, seed, step, sweeps, alpha, with_phi, set_theta):
    """``sweeps`` sweeps over all of ``theta``'s documents, sweep i with the stream of
    ``step + i``: ``theta_hat`` overwritten; with ``set_theta``, ``theta = theta_hat +
    alpha`` after each sweep; with ``with_phi``, the last sweep's draws into ``out`` (its
    ``rows`` zeroed first). One kernel for :func:`same_sample` (one sweep) and
    :func:`same_sample_sweeps` (an E-step), run on one thread or on ranges of documents
    in threads: a fresh installation compiles it once."""
    ndocs = theta.shape[0]
    k = theta.shape[1]
    inv_m = 1.0 / nsamps
    q = np.empty(k)  # scratch: products, then rates
    uu = np.empty(k)  # first uniform of each topic's stream
    act = np.empty(k, np.int64)  # the topics whose draw is not 0 for sure
    zz = np.empty(k)  # many topics to draw: the draws, all topics at once
    cdf = np.empty(k)  # ... P(Z <= x) after the first terms
    pr = np.empty(k)  # ... P(Z = x) of the last of them
    for i in range(sweeps):
        phi = with_phi and i == sweeps - 1
        if phi:
            for r in range(rows.shape[0]):
                out[rows[r], :] = 0
        key = stream_key_nb(seed, step + np.uint64(i))
        for d in range(ndocs):
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
                # a word whose temperatures are all 1 (nearly every word, even with a few
                # heated) never reads its row of temp: see heated_words
                heated = hot[w] != 0
                if heated:
                    for j in range(k):
                        q[j] = q[j] / float(temp[w, j])
                # z = 0 wherever u <= (1 - lam) * SURE <= exp(-lam), the inversion's first
                # step: most topics of a nonzero (branch-free); only the others are drawn
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
                    if phi:
                        for j in range(k):
                            out[w, j] += zz[j] * inv_m
                    continue
                for t in range(n):
                    j = act[t]
                    lam = q[j]
                    if lam >= LAM_INV:
                        z = float(_ptrs(lam, base + np.uint64(j) * STRIDE))
                    else:
                        z = float(_invert(lam, uu[j]))
                    if heated:
                        z = z * float(temp[w, j])
                    theta_hat[d, j] += z * inv_m
                    if phi:
                        out[w, j] += z * inv_m
        if set_theta:
            for d in range(ndocs):
                for j in range(k):
                    theta[d, j] = theta_hat[d, j] + alpha


@numba.njit(cache=True, nogil=True)
def _add_rows(dst, bufs, rows):
    """``dst[rows] += bufs[c][rows]`` for each buffer c in order: the threads' phi_hat
    parts summed into the first thread's."""
    k = dst.shape[1]
    for i in range(rows.shape[0]):
        w = rows[i]
        for c in range(bufs.shape[0]):
            for j in range(k):
                dst[w, j] += bufs[c, w, j]


# Array-level forms run while a kernel compiles in the background (bidlab.kern.standin).
# The one-thread E-step compiles before the rest: its stand-in does most of the work.
stand_in(_add_rows)(arrays.add_rows)
stand_in(_sweeps, priority=-1)(arrays.sweeps)

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
    if backend.is_cupy_array(theta):
        if invden is None:
            invden = backend.namespace(theta).ones(theta.shape[1], dtype=theta.dtype)
            scale, beta = 1.0, 0.0
        backend.namespace(X, theta, phiT, theta_hat, phi_hat, temp, invden)
        same_sample_gpu(X, theta, phiT, float(scale), float(beta), invden, temp,
                         float(nsamps), stream_key(seed, step), theta_hat, phi_hat,
                         bool(with_phi))
        return
    work, scale, beta, invden, rows, hot = _cpu_args(X, theta, phiT, temp, work, scale, beta,
                                                     invden, rows, hot)
    args = (X.indptr, X.indices, X.data, theta, phiT, float(scale), float(beta), invden,
            phiT if temp is None else temp, hot, theta_hat, phi_hat)
    _run(X, args, work, rows, nsamps, seed, step, 1, 0.0, bool(with_phi), False)


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
    the theta update in between. Why one call: on the CPU the whole E-step is one numba
    call that holds no GIL (per range of documents when it runs in threads: a document's
    sweeps need only its own row of theta), instead of ``sweeps`` calls separated by Python
    steps. Another thread of the process (a dashboard's pump rendering the model) can then
    hold the GIL for the whole E-step without stopping training between sweeps. On the GPU
    it loops over :func:`same_sample`.
    """
    if isinstance(sweeps, bool) or not isinstance(sweeps, (int, np.integer)) or sweeps < 1:
        raise ValueError(f"same_sample_sweeps: sweeps must be >= 1 and a whole number; got "
                         f"{sweeps!r}")
    if backend.is_cupy_array(theta):
        xp = backend.namespace(theta)
        a = theta.dtype.type(alpha)
        for i in range(sweeps):
            same_sample(X, theta, phiT, nsamps, seed, step + i, theta_hat, phi_hat, temp, work,
                        scale=scale, beta=beta, invden=invden, rows=rows, hot=hot,
                        with_phi=i == sweeps - 1)
            xp.add(theta_hat, a, out=theta)
        return
    if not nsamps > 0:
        raise ValueError(f"nsamps (m, samples per token) must be > 0; got {nsamps}")
    _check(X, theta, phiT, temp, theta_hat, phi_hat, invden)
    work, scale, beta, invden, rows, hot = _cpu_args(X, theta, phiT, temp, work, scale, beta,
                                                     invden, rows, hot)
    args = (X.indptr, X.indices, X.data, theta, phiT, float(scale), float(beta), invden,
            phiT if temp is None else temp, hot, theta_hat, phi_hat)
    _run(X, args, work, rows, nsamps, seed, step, sweeps, alpha, True, True)


def _run(X: Any, args: tuple[Any, ...], work: Any, rows: Any, nsamps: float, seed: int,
         step: int, sweeps: int, alpha: float, with_phi: bool, set_theta: bool) -> None:
    """The CPU sweeps: ``_sweeps`` on one thread (small minibatches; or while it is being
    compiled in the background, when its numpy stand-in runs), else on ranges of documents
    in threads (:func:`_threaded`)."""
    theta = args[3]
    tail = (rows, float(nsamps), np.uint64(int(seed) & _M64), np.uint64(int(step) & _M64),
            int(sweeps), theta.dtype.type(alpha), with_phi, set_theta)
    if _serial(X, theta, work) or not standin.ready(_sweeps, *args, *tail):
        _sweeps(*args, *tail)
        return
    _threaded(args, tail, work, rows, with_phi)


def _threaded(args: tuple[Any, ...], tail: tuple[Any, ...], work: Any, rows: Any,
              with_phi: bool) -> None:
    """Run ``_sweeps`` on ranges of documents in threads, then sum the phi_hat
    parts. Range c covers documents ``lo:hi`` holding about ``c / n`` of the nonzeros
    (``indptr[lo:hi + 1]``, ``theta[lo:hi]`` and ``theta_hat[lo:hi]`` are views, the
    nonzeros keep their positions, so their random streams are unchanged); the first range
    writes phi_hat, range c > 0 the workspace's ``work[c - 1]``, added in order after all
    ranges are done. The calling thread runs the first range."""
    indptr, theta = args[0], args[3]
    ndocs = theta.shape[0]
    n = max(1, min(numba.get_num_threads(), work.shape[0] + 1, ndocs))
    nnz = int(indptr[ndocs])
    cuts = [0] + [int(np.searchsorted(indptr[:ndocs], (nnz * c) // n)) for c in range(1, n)]
    cuts.append(ndocs)
    calls = []
    for c in range(n):
        lo, hi = cuts[c], cuts[c + 1]
        part = list(args)
        part[0] = indptr[lo: hi + 1]
        part[3] = theta[lo:hi]
        part[10] = args[10][lo:hi]  # theta_hat
        if c > 0:
            part[11] = work[c - 1]  # this range's phi_hat part
        calls.append(tuple(part) + tail)
    threads.run_together(_sweeps, calls)
    if with_phi and n > 1:
        _add_rows(args[11], work[: n - 1], rows)


_ALL_ROWS: dict[int, np.ndarray] = {}
