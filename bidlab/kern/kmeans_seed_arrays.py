"""Array-level forms of :mod:`bidlab.kern.kmeans_seed`'s and
:mod:`bidlab.kern.kmeans_order`'s kernels (numpy), run while numba compiles them in the
background (:mod:`bidlab.kern.standin`); same arguments, same outputs, the same seeds from
the same draws."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["accept", "draw", "project", "seed_distances", "stable_argsort", "trials"]


def _block_sums(v: np.ndarray, block: int) -> np.ndarray:
    return np.add.reduceat(v, np.arange(0, v.shape[0], block)) if v.shape[0] else v[:0]


def trials(X: Any, order: Any, w: Any, closest: Any, label: Any, Ct: Any, sc2: Any, D: Any,
           gains: Any, skipped: Any, prune: bool, sample: int, block: int,
           copy_to: Any) -> None:
    """:func:`bidlab.kern.kmeans_seed.trials` (the kernel's arguments)."""
    Xo = X[order] if order.shape[0] else X
    if copy_to.shape[0]:
        copy_to[...] = Xo
    wp = w if w.shape[0] > 0 else np.ones(Xo.shape[0])
    n, t = Xo.shape[0], Ct.shape[0]
    counted = np.ones(n, bool) if prune else np.arange(n) % block % sample == 0
    skipped[:, 0] = 0
    skipped[:, 1] = _block_sums(counted.astype(np.int64), block) * t
    for c in range(t):
        diff = Xo - Ct[c]
        acc = np.einsum("ij,ij->i", diff, diff)
        ruled_out = sc2[c, label] >= 4.0 * closest
        skip = ruled_out & prune
        D[c] = np.where(skip, np.inf, acc)
        gain = np.where(~skip & (acc < closest), wp * (closest - acc), 0.0)
        gains[:, c] = _block_sums(gain, block)
        skipped[:, 0] += _block_sums((ruled_out & counted).astype(np.int64), block)


def accept(j: int, seed: int, D: Any, sc2: Any, w: Any, closest: Any, second: Any,
           label: Any, mass: Any, block: int) -> None:
    """:func:`bidlab.kern.kmeans_seed.accept` (the kernel's arguments)."""
    v = D[j].astype(np.float64)
    c0 = closest.copy()
    nearer = v < c0
    between = ~nearer & (v < second)
    skipped = ~nearer & ~between & np.isinf(v) & (c0 < np.inf)
    second[nearer] = c0[nearer]
    closest[nearer] = v[nearer]
    label[nearer] = seed
    second[between] = v[between]
    gap = np.sqrt(sc2[j, label[skipped]]) - np.sqrt(c0[skipped])
    second[skipped] = np.minimum(second[skipped], gap * gap)
    mass[:] = _block_sums(w * closest if w.shape[0] > 0 else closest, block)


def draw(targets: Any, mass: Any, closest: Any, w: Any, block: int, out: Any) -> None:
    """:func:`bidlab.kern.kmeans_seed.draw` (the kernel's arguments)."""
    n, nb = closest.shape[0], mass.shape[0]
    m_all = w * closest if w.shape[0] > 0 else closest
    for i, r in enumerate(targets):
        acc, b = 0.0, 0
        while b < nb - 1 and acc + mass[b] <= r:
            acc += mass[b]
            b += 1
        m = m_all[b * block:min(n, (b + 1) * block)]
        hit = np.flatnonzero((acc + np.cumsum(m) > r) & (m > 0))
        if hit.shape[0]:
            out[i] = b * block + hit[0]
            continue
        live = np.flatnonzero(m > 0)
        if live.shape[0]:
            out[i] = b * block + live[-1]
        else:
            every = np.flatnonzero(m_all > 0)
            out[i] = every[-1] if every.shape[0] else 0


def seed_distances(Ct: Any, S: Any, out: Any) -> None:
    """:func:`bidlab.kern.kmeans_seed.seed_distances` (the kernel's arguments)."""
    diff = Ct[:, None, :].astype(np.float64) - S[None, :, :]
    out[...] = np.einsum("cad,cad->ca", diff, diff)


def project(X: Any, r: Any, out: Any) -> None:
    """:func:`bidlab.kern.kmeans_order.project` (the kernel's arguments)."""
    out[:] = X.astype(np.float64) @ r


def stable_argsort(p: Any, out: Any) -> None:
    """:func:`bidlab.kern.kmeans_order.stable_argsort` (the kernel's arguments)."""
    out[:] = np.argsort(p, kind="stable")
