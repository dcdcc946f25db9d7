"""Greedy k-means++ over dense CPU rows, in three numba kernels a seeding step.

The rows are visited along a fixed order of positions ``p`` (row ``order[p]``), in blocks
of :data:`BLOCK` positions, each block one thread's work whatever the thread count, so a
seeded run picks the same seeds on any number of cores. Per position the kernels keep the
squared distance to the nearest seed so far (``closest``), that seed's index (``label``)
and a lower bound on the squared distance to the second-nearest (``second``); per block,
the sum of ``w * closest`` (``mass``), from which candidates are drawn without a pass over
the rows.

One step:

1. :func:`draw` picks candidate positions with probability proportional to
   ``w * closest`` (the first position whose running sum of mass exceeds each target);
2. :func:`trials` computes every row's squared distance to each candidate and each
   candidate's gain, the drop in potential ``sum w * closest`` it would bring. A row can
   be skipped for a candidate ``c`` when its nearest seed ``a`` is at least twice the
   row's distance away from ``c`` (``|s_a - c| >= 2 |x - s_a|`` means ``|x - c| >=
   |x - s_a|``: the triangle inequality), so rows of clusters already seeded cost no
   distance; it is, when the last step showed that this saves more than the
   mispredicted branches cost (:func:`should_prune`);
3. :func:`accept` takes the best candidate: nearer rows move to it, the others lower
   their second-nearest bound (``(|s_a - c| - |x - s_a|)^2`` where the row was skipped),
   and the blocks' mass is summed for the next draw.

After the last step ``label`` and ``closest`` are the first assignment of the rows to the
seeds, and ``sqrt(closest)`` / ``sqrt(second)`` are Hamerly's upper and lower bounds. Oracle:
:func:`bidlab.models.kmeans.seeding.greedy_seeds` on the full distance matrix picks the same
seeds from the same draws.
"""

from __future__ import annotations

import numba
import numpy as np

from bidlab.kern import kmeans_seed_arrays as arrays
from bidlab.kern.adaptive import adaptive_kernel
from bidlab.kern.standin import stand_in

__all__ = ["BLOCK", "PRUNE_DIMS", "accept", "blocks", "draw", "seed_distances",
           "should_prune", "trials"]

#: positions per block: one thread's unit of work and one entry of the mass sums
BLOCK = 2048
#: :func:`should_prune`'s threshold: squared differences saved per pair (the share of
#: pairs ruled out times d) above which skipping them beats computing them all. Measured
#: on blobs, greedy k-means++ alone, the two ways alternated: every distance took 0.83x
#: the time at d = 2, k = 8 (half to four fifths of the pairs ruled out: 1 to 1.6 saved
#: a pair) and 0.93x at d = 16 (k = 8: 0 to 0.8 ruled out), 0.97x on a9a (d = 123, a
#: twentieth ruled out), but 1.45x at d = 32, k = 64 (0.87 ruled out: 28 saved a pair)
PRUNE_DIMS = 16.0
_SAMPLE = 16  # without pruning, the ruled-out share is counted on every 16th row

_FM = {"reassoc", "contract", "arcp", "nsz"}


@numba.njit(fastmath=_FM, inline="always")
def _sq_distance(x, cr):  # pragma: no cover - compiled
    acc = x[0] - x[0]  # in the rows' dtype
    for q in range(x.shape[0]):
        diff = x[q] - cr[q]
        acc += diff * diff
    return acc


@numba.njit(fastmath=_FM, inline="always")
def _row(X, order, p, ordered, copy, Xo):  # pragma: no cover - compiled
    """Position p's row (copied to ``Xo[p]`` on the way when ``copy``)."""
    x = X[order[p]] if ordered else X[p]
    if copy:
        Xo[p, :] = x
    return x


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _trials(X, order, w, closest, label, Ct, sc2, D, gains, skipped, prune, sample, block,
            Xo):  # pragma: no cover - compiled
    n = closest.shape[0]
    t = Ct.shape[0]
    weighted = w.shape[0] > 0
    ordered = order.shape[0] > 0
    copy = Xo.shape[0] > 0
    nb = (n + block - 1) // block
    for b in numba.prange(nb):
        g = gains[b]
        for c in range(t):
            g[c] = 0.0
        lo, hi = b * block, min(n, (b + 1) * block)
        ruled_out = 0
        if prune:
            for p in range(lo, hi):
                c0 = closest[p]
                lim = 4.0 * c0
                a = label[p]
                x = _row(X, order, p, ordered, copy, Xo)
                wp = w[p] if weighted else 1.0
                for c in range(t):
                    if sc2[c, a] >= lim:
                        D[c, p] = np.inf
                        ruled_out += 1
                        continue
                    acc = _sq_distance(x, Ct[c])
                    D[c, p] = acc
                    if acc < c0:
                        g[c] += wp * (c0 - acc)
            skipped[b, 1] = (hi - lo) * t
        else:  # every distance, no branch; the test's share counted on every sample-th row
            for p in range(lo, hi):
                c0 = closest[p]
                x = _row(X, order, p, ordered, copy, Xo)
                wp = w[p] if weighted else 1.0
                for c in range(t):
                    acc = _sq_distance(x, Ct[c])
                    D[c, p] = acc
                    g[c] += wp * max(c0 - acc, 0.0)
            for p in range(lo, hi, sample):
                lim = 4.0 * closest[p]
                a = label[p]
                for c in range(t):
                    ruled_out += sc2[c, a] >= lim
            skipped[b, 1] = ((hi - lo + sample - 1) // sample) * t
        skipped[b, 0] = ruled_out


@adaptive_kernel(fastmath=_FM, cache=True, nogil=True)
def _accept(j, seed, D, sc2, w, closest, second, label, mass, block):  # pragma: no cover
    n = closest.shape[0]
    weighted = w.shape[0] > 0
    nb = (n + block - 1) // block
    for b in numba.prange(nb):
        tot = 0.0
        for p in range(b * block, min(n, (b + 1) * block)):
            v = np.float64(D[j, p])
            c0 = closest[p]
            if v < c0:
                second[p] = c0
                closest[p] = v
                label[p] = seed
            elif v < second[p]:
                second[p] = v
            elif v == np.inf and c0 < np.inf:  # skipped: |x - c| >= |s_a - c| - |x - s_a|
                gap = np.sqrt(sc2[j, label[p]]) - np.sqrt(c0)
                lb = gap * gap
                if lb < second[p]:
                    second[p] = lb
            tot += (w[p] * closest[p]) if weighted else closest[p]
        mass[b] = tot


@numba.njit(cache=True, nogil=True)
def _draw(targets, mass, closest, w, block, out):  # pragma: no cover - compiled
    n = closest.shape[0]
    nb = mass.shape[0]
    weighted = w.shape[0] > 0
    for i in range(targets.shape[0]):
        r = targets[i]
        acc = 0.0
        b = 0
        while b < nb - 1 and acc + mass[b] <= r:
            acc += mass[b]
            b += 1
        last = -1
        pick = -1
        for p in range(b * block, min(n, (b + 1) * block)):
            m = (w[p] * closest[p]) if weighted else closest[p]
            if m > 0:
                last = p
            acc += m
            if acc > r and m > 0:
                pick = p
                break
        if pick < 0:  # rounding at the end: the last position with mass
            if last < 0:
                for p in range(n - 1, -1, -1):
                    if ((w[p] * closest[p]) if weighted else closest[p]) > 0:
                        last = p
                        break
            pick = max(last, 0)
        out[i] = pick


@numba.njit(fastmath=_FM, cache=True, nogil=True)
def _seed_distances(Ct, S, out):  # pragma: no cover - compiled
    t, d = Ct.shape
    for c in range(t):
        for a in range(S.shape[0]):
            acc = 0.0
            for q in range(d):
                diff = np.float64(Ct[c, q]) - S[a, q]
                acc += diff * diff
            out[c, a] = acc


stand_in(_trials)(arrays.trials)
stand_in(_accept)(arrays.accept)
stand_in(_draw)(arrays.draw)
stand_in(_seed_distances)(arrays.seed_distances)


def trials(X: np.ndarray, order: np.ndarray, w: np.ndarray, closest: np.ndarray,
           label: np.ndarray, Ct: np.ndarray, sc2: np.ndarray, D: np.ndarray,
           gains: np.ndarray, copy_to: np.ndarray | None = None, prune: bool = True) -> float:
    """Squared distances of every row to the t candidates ``Ct`` (t x d) into ``D``
    (t x n) and each block's gain per candidate into ``gains`` (blocks x t). ``sc2``
    (t x seeds): squared distances of the candidates to the seeds; ``w`` empty for unit
    weights. Arrays of positions (``w``, ``closest``, ``label``, ``D``) follow ``order``;
    an empty ``order`` means the rows of ``X`` are in that order already. ``copy_to``
    (n x d, optional) receives the rows in that order (``X[order]``), read on the way:
    later steps pass it as ``X`` with an empty ``order`` and read it front to back.

    With ``prune`` a (row, candidate) pair the triangle inequality rules out gets ``inf``
    and no distance; without, every distance is computed, without a branch (cheaper where
    few pairs are ruled out or the rows are short: :func:`should_prune`). Returns the
    share of pairs the test rules out, either way (without ``prune``, on every
    ``_SAMPLE``-th row: counting them all cost a tenth of the step at d = 2)."""
    Xo = X[:0] if copy_to is None else copy_to
    skipped = np.empty((gains.shape[0], 2), np.int64)
    _trials(float(closest.shape[0]) * Ct.shape[0] * Ct.shape[1],
            X, order, w, closest, label, Ct, sc2, D, gains, skipped, bool(prune), _SAMPLE,
            BLOCK, Xo)
    ruled_out, examined = skipped.sum(axis=0).tolist()
    return ruled_out / max(1, examined)


def should_prune(ruled_out: float, d: int) -> bool:
    """Whether the next step's :func:`trials` should skip the ruled-out pairs, given the
    share the last step ruled out: a skipped pair saves ``d`` squared differences but
    costs a branch the processor mispredicts (the pairs come in no pattern), so skipping
    pays once ``ruled_out * d`` exceeds :data:`PRUNE_DIMS`.

    Examples
    --------
    >>> should_prune(0.8, 2), should_prune(0.05, 123), should_prune(0.87, 32)
    (False, False, True)
    """
    return ruled_out * d >= PRUNE_DIMS


def accept(j: int, seed: int, D: np.ndarray, sc2: np.ndarray, w: np.ndarray,
           closest: np.ndarray, second: np.ndarray, label: np.ndarray,
           mass: np.ndarray) -> None:
    """Make candidate ``j`` of :func:`trials` seed number ``seed``: rows nearer to it move
    to it, the others lower their second-nearest bound; ``mass`` gets each block's
    ``sum w * closest``."""
    _accept(float(closest.shape[0]), int(j), int(seed), D, sc2, w, closest, second, label,
            mass, BLOCK)


def draw(targets: np.ndarray, mass: np.ndarray, closest: np.ndarray, w: np.ndarray,
         out: np.ndarray) -> np.ndarray:
    """For each target in [0, total mass): the first position whose running sum of
    ``w * closest`` exceeds it (numpy's ``searchsorted(cumsum, r, side="right")``)."""
    _draw(np.asarray(targets, np.float64), mass, closest, w, BLOCK, out)
    return out


def seed_distances(Ct: np.ndarray, S: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Squared distances (float64) of the candidates ``Ct`` (t x d) to the seeds ``S``."""
    _seed_distances(Ct, S, out)
    return out


def blocks(n: int) -> int:
    """Blocks of :data:`BLOCK` positions covering ``n`` rows."""
    return (int(n) + BLOCK - 1) // BLOCK
