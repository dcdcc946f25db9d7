"""Vectorised sampling of sparse column patterns for the synthetic generators."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def powerlaw_sampler(
    n_cols: int, exponent: float, rng: np.random.Generator
) -> Callable[[int], np.ndarray]:
    """A function ``draw(size) -> int64 columns`` with P(column j) ~ (j + 1) ** -exponent.

    Inverse-CDF of the continuous power law x ** -exponent on [0.5, n_cols + 0.5), rounded
    to the nearest integer (a midpoint rule that tracks the discrete law closely even for the
    first columns): O(1) per draw, so tens of millions of draws take well under a second.
    Column 0 is the most frequent; ``exponent=0`` is uniform.
    """
    if exponent < 0:
        raise ValueError(f"power-law exponent must be >= 0, got {exponent}")
    if exponent == 0:
        return lambda size: rng.integers(0, n_cols, size=size, dtype=np.int64)
    lo, hi = 0.5, n_cols + 0.5
    b = 1.0 - exponent

    def draw(size: int) -> np.ndarray:
        u = rng.random(size)
        if b == 0.0:
            x = lo * np.exp(u * np.log(hi / lo))
        else:
            x = (lo**b + u * (hi**b - lo**b)) ** (1.0 / b)
        x += 0.5
        cols = x.astype(np.int64)
        cols -= 1
        np.clip(cols, 0, n_cols - 1, out=cols)
        return cols

    return draw


def distinct_sorted_rows(
    n_rows: int,
    m: int,
    n_cols: int,
    draw: Callable[[int], np.ndarray],
    max_rounds: int = 500,
) -> np.ndarray:
    """An n_rows x m array of column indices, each row sorted with m distinct entries.

    Draws every entry from ``draw`` and redraws only the duplicates until none remain
    (sampling without replacement, row by row). Needs ``m <= n_cols / 2`` so that the
    redraws converge quickly.
    """
    if not 0 < m <= n_cols // 2:
        raise ValueError(
            f"need 0 < nnz_per_row <= n_features / 2 for distinct sparse columns, got "
            f"nnz_per_row={m}, n_features={n_cols}; use a dense generator instead"
        )
    cols = draw(n_rows * m).reshape(n_rows, m)
    cols.sort(axis=1)
    rows = np.arange(n_rows)
    for _ in range(max_rounds):
        dup = cols[rows, 1:] == cols[rows, :-1]
        has_dup = dup.any(axis=1)
        rows = rows[has_dup]
        if rows.size == 0:
            return cols
        sub = cols[rows]
        mask = np.zeros(sub.shape, dtype=bool)
        mask[:, 1:] = dup[has_dup]
        sub[mask] = draw(int(mask.sum()))
        sub.sort(axis=1)
        cols[rows] = sub
    raise RuntimeError(
        f"could not draw {m} distinct columns per row out of {n_cols} in {max_rounds} rounds: "
        "lower nnz_per_row or the power-law exponent"
    )
