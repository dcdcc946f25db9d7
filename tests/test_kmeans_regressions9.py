"""KMeans: results that do not depend on the thread limit, the final labelling of rows
whose type differs from the centres', and ties between centres equal but for the sign of
a zero."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.models.kmeans.distances import first_equal, labels_inertia, sq_distances

_THREADS_SCRIPT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    from bidlab.models import KMeans
    warnings.simplefilter("ignore")
    # float32 rows far from the origin: the GEMM's rounding is above the gaps between
    # near-tied distances, so GEMM blocks of other sizes label rows differently
    X = (np.random.default_rng(0).random((1000, 40)) + 100.0).astype(np.float32)
    one = KMeans(8, random_state=0, max_iter=30, n_jobs=1).fit(X)
    every = KMeans(8, random_state=0, max_iter=30).fit(X)
    mb_one = KMeans(8, random_state=0, algorithm="minibatch", batch_size=100, n_jobs=1).fit(X)
    mb_every = KMeans(8, random_state=0, algorithm="minibatch", batch_size=100).fit(X)
    before = one.predict(X)
    one.set_params(n_jobs=None)
    print(json.dumps({
        "fit_labels": int((one.labels_ != every.labels_).sum()),
        "fit_centres": bool(np.array_equal(one.cluster_centers_, every.cluster_centers_)),
        "minibatch_centres": bool(np.array_equal(mb_one.cluster_centers_,
                                                 mb_every.cluster_centers_)),
        "predict": int((one.predict(X) != before).sum()),
        "labels_vs_predict": int((one.predict(X) != one.labels_).sum()),
    }))
""")


@pytest.mark.slow
def test_kmeans_results_do_not_depend_on_n_jobs() -> None:
    """With numba able to run 8 threads, ``n_jobs=1`` and the default (all threads) give the
    same centres and labels, and ``predict`` after ``set_params(n_jobs=...)`` the same labels:
    the rows used to be split into as many shares as the limit allowed, which changed the
    GEMM blocks (near-tied rows labelled the other way, 62 of 1,000 here) and the order of
    the sums (a different clustering)."""
    env = dict(os.environ, NUMBA_NUM_THREADS="8", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"fit_labels": 0, "fit_centres": True, "minibatch_centres": True,
                   "predict": 0, "labels_vs_predict": 0}


def _exact(X: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, float]:
    D = ((X.astype(np.float64)[:, None, :] - C.astype(np.float64)[None]) ** 2).sum(-1)
    return D.argmin(axis=1), float(D.min(axis=1).sum())


def test_labels_inertia_of_integer_rows_keeps_the_centres() -> None:
    """Integer rows with float centres: the centres were rounded to integers (all of them
    0 here), so every row went to centre 0."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 10, (200, 3))
    C = rng.random((4, 3)) * 9.0
    labels, inertia = labels_inertia(X, C)
    want, total = _exact(X, C)
    np.testing.assert_array_equal(labels, want)
    assert inertia == pytest.approx(total, rel=1e-12)
    labels32, inertia32 = labels_inertia(X, C.astype(np.float32))
    np.testing.assert_array_equal(labels32, _exact(X, C.astype(np.float32))[0])


def test_labels_inertia_of_float32_rows_with_float64_centres_is_float64() -> None:
    """float32 rows with float64 centres are labelled and measured in float64 (the centres
    were rounded to float32), as the CSR path measures them."""
    rng = np.random.default_rng(1)
    X = (rng.random((500, 5)) + 100.0).astype(np.float32)
    C = X[:6].astype(np.float64) + rng.normal(0.0, 1e-3, (6, 5))
    labels, inertia = labels_inertia(X, C)
    want, total = _exact(X, C)
    np.testing.assert_array_equal(labels, want)
    assert inertia == pytest.approx(total, rel=1e-9)
    labels_csr, inertia_csr = labels_inertia(sp.csr_matrix(X), C)
    assert inertia == pytest.approx(inertia_csr, rel=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ties_between_centres_equal_but_for_a_signed_zero_go_to_the_lowest(
        dtype: type) -> None:
    """Centres equal in value but one with -0.0 where the other has 0.0 (different bytes)
    were not seen as equal: the CSR labelling sent 201 of 2,000 float64 rows to the later
    one."""
    P = np.random.default_rng(1).integers(10, 20, (3, 16)).astype(dtype)
    P[:, 3] = 0.0
    C = P[[0, 1, 2, 0, 1, 2, 0, 1, 0]].copy()
    C[3:, 3] = -0.0
    first = np.array([0, 1, 2, 0, 1, 2, 0, 1, 0])
    np.testing.assert_array_equal(first_equal(C), first)
    Xn = (np.random.default_rng(2).random((2000, 16)) * 10.0 + 10.0).astype(dtype)
    for X in (Xn, sp.csr_matrix(Xn)):
        labels = np.asarray(labels_inertia(X, C)[0])
        np.testing.assert_array_equal(first[labels], labels)
    D = sq_distances(Xn, C)
    np.testing.assert_array_equal(D[:, 3], D[:, 0])
