"""The sampler's draws one by one: each (nonzero, topic) draw is the Poisson inverse CDF of
that pair's uniform from the counter-based stream, whether the kernel skipped the topic
(a rate too small for the uniform to pass exp(-lam)) or drew it."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy import stats

from bidlab.kern import lda_sampler
from bidlab.kern.random import GOLD, STRIDE, stream_key

_CP = np.uint64(0xD1B54A32D192ED03)


def _mix64(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _uniforms(key: int, nnz: int, k: int) -> np.ndarray:
    """u[p, j]: the first uniform of nonzero p's stream for topic j (numpy, the same bits)."""
    with np.errstate(over="ignore"):
        p = np.arange(nnz, dtype=np.uint64)
        base = (np.uint64(key) ^ _mix64(p * _CP)) + GOLD
        x = base[:, None] + np.arange(k, dtype=np.uint64)[None, :] * STRIDE
        return (_mix64(x) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def test_every_draw_is_the_inverse_cdf_of_its_uniform():
    """One nonzero per document, so theta_hat[d] * m is that nonzero's k draws; rates from
    about 1e-4 to 9 (all by inversion): the kernel's draws are poisson.ppf(u, lam) exactly,
    the many topics it never draws (rate too small) included."""
    rng = np.random.default_rng(5)
    D, V, k, m, seed, step = 3000, 50, 16, 3.0, 11, 2
    cols = rng.integers(0, V, D)
    counts = rng.integers(1, 4, D).astype(np.float64)
    X = sp.csr_matrix((counts, cols, np.arange(D + 1)), shape=(D, V))
    theta = rng.gamma(0.1, size=(D, k)) + 1e-4  # peaked: most rates tiny, a few large
    phiT = rng.random((V, k))
    phiT /= phiT.sum(0)
    th, ph = np.empty((D, k)), np.empty((V, k))
    lda_sampler.same_sample(X, theta, phiT, m, seed, step, th, ph)
    q = theta * phiT[cols]
    lam = q * (m * counts / q.sum(1))[:, None]
    assert lam.max() < lda_sampler.LAM_INV and (lam < 0.05).mean() > 0.5
    want = stats.poisson.ppf(_uniforms(stream_key(seed, step), D, k), lam)
    got = np.rint(th * m)
    # rounding of lam in the last bit may move a uniform across a CDF step: rarely
    assert (got != want).mean() < 1e-4, (got != want).sum()
    assert (want > 0).sum() > D  # nonzero draws are common, not only zeros compared
