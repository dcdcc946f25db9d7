"""A child forked after the parallel kernels ran (GNU OpenMP started in the parent) fits
models with the parallel kernels' array-level stand-ins instead of being ended by SIGTERM
at its first parallel kernel; the parent and "spawn"/"forkserver" children are unaffected."""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import pickle
import pkgutil
import signal
import subprocess
import sys
import traceback

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import both_paths

import bidlab.kern
from bidlab.kern import forked, standin
from bidlab.kern.adaptive import AdaptiveKernel
from bidlab.models import GLM, LDA, NMF, KMeans

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

_RNG = np.random.default_rng(0)
_DENSE = _RNG.random((300, 6))
_LABELS = (_DENSE[:, 0] + _DENSE[:, 1] > 1).astype(int)
_COUNTS = sp.random(200, 120, density=0.08, format="csr", random_state=1)
_COUNTS.data = np.ceil(_COUNTS.data * 4)


def _fit(name: str, seed: int = 0) -> np.ndarray:
    """One small fit: its learned matrix."""
    if name == "kmeans":
        return KMeans(n_clusters=4, random_state=seed).fit(_DENSE).cluster_centers_
    if name == "kmeans-csr":
        return KMeans(n_clusters=4, random_state=seed).fit(_COUNTS).cluster_centers_
    if name == "glm":
        return GLM("logistic", random_state=seed, n_passes=3).fit(_DENSE, _LABELS).coef_
    if name == "nmf":
        return NMF(3, random_state=seed, max_iter=15).fit(_COUNTS).components_
    if name == "nmf-kl":
        return NMF(3, loss="kl", random_state=seed, max_iter=15).fit(_COUNTS).components_
    return LDA(n_components=3, random_state=seed, n_passes=2).fit(_COUNTS).components_


MODELS = ("kmeans", "kmeans-csr", "glm", "nmf", "nmf-kl", "lda")


def _fits(seed: int = 0) -> dict[str, np.ndarray]:
    return {name: np.asarray(_fit(name, seed)) for name in MODELS}


def _close(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[str]:
    """The models whose results differ beyond float tolerance."""
    return [n for n in a if a[n].shape != b[n].shape
            or not np.allclose(a[n], b[n], rtol=1e-6, atol=1e-8)]


def _in_child(body) -> str:
    """Run ``body()`` in an ``os.fork()`` child; its return (a string) or traceback, or
    how it died."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        code = 0
        try:
            msg = str(body())
        except BaseException:  # noqa: BLE001 - reported to the parent
            msg, code = traceback.format_exc(), 1
        with os.fdopen(w, "w") as f:
            f.write(msg)
        os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        msg = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    assert os.WEXITSTATUS(status) == 0, msg
    return msg


@pytest.fixture(scope="module")
def parent_fits() -> dict[str, np.ndarray]:
    return _fits()  # starts numba's threads: GNU OpenMP here (forked.unsafe() is True)


def test_every_parallel_kernel_has_a_stand_in():
    """A parallel kernel without a stand-in would end a forked child (no other path)."""
    for mod in pkgutil.iter_modules(bidlab.kern.__path__, "bidlab.kern."):
        if "cuda" not in mod.name:
            importlib.import_module(mod.name)
    missing = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("bidlab.kern."):
            continue
        for attr, value in vars(module).items():
            disp = value.parallel if isinstance(value, AdaptiveKernel) else value
            if forked.is_parallel(disp) and disp.py_func.__module__ == name and \
                    not isinstance(disp.__dict__.get("_compile_for_args"), standin._Hook):
                missing.append(f"{name}.{attr}")
    assert not missing, f"parallel kernels without a stand-in: {missing}"


def test_new_stand_ins_match_their_kernels():
    from bidlab.kern import kmeans, nmf_kl, pagerank
    from bidlab.kern.scatter_sums import ScatterSums

    rng = np.random.default_rng(3)
    X = rng.random((50, 4))
    S = sp.random(50, 30, density=0.2, format="csr", random_state=4)
    labels = rng.integers(0, 3, 50)
    w = rng.random(50)

    def sums(data, zero, weights):
        part, pc = np.full((3, 3, data.shape[1]), 0.5), np.full((3, 3), 0.5)
        kmeans._accumulate(data, labels, weights, part, pc, 3, zero, True)
        return part, pc

    for data in (X, S):
        for zero, weights in ((True, None), (False, w)):
            got, want = both_paths(lambda: sums(data, zero, weights))  # noqa: B023
            for g, a in zip(got, want, strict=True):
                np.testing.assert_allclose(a, g, rtol=1e-12)

    W, Ht = rng.random((50, 2)) + 0.1, rng.random((30, 2)) + 0.1

    def kl():
        out = np.empty((50, 2))
        nmf_kl.kl_w_numerator(S, W, Ht, 1e-7, out)
        acc = ScatterSums(30, 2, np.float64, copies=2)
        losses = nmf_kl.kl_h_push(S, W, Ht, 1e-7, acc, np.empty((3, 2)))
        return out, acc.total().copy(), np.array(losses)

    for g, a in zip(*both_paths(kl), strict=True):
        np.testing.assert_allclose(a, g, rtol=1e-10)

    A = sp.random(40, 40, density=0.1, format="csc", random_state=5)
    y, u, p = rng.random(40), np.full(40, 1 / 40), np.full(40, 1 / 40)
    for weights in (A.data, np.empty(0)):
        def pull(weights=weights):
            return pagerank.pull_step(1.0, A.indptr, A.indices, weights, y, 0.85, 0.1, 0.05,
                                      u, p, np.empty(40)).copy()
        got, want = both_paths(pull)
        np.testing.assert_allclose(want, got, rtol=1e-12)


def test_forked_child_fits_like_the_parent(parent_fits):
    def child():
        got = _fits()
        assert standin.status()["fork_stand_ins"] == forked.unsafe()
        return repr(_close(parent_fits, got))

    assert _in_child(child) == "[]"
    assert not standin.status()["fork_stand_ins"]  # the parent keeps its machine code
    assert not _close(parent_fits, _fits())


def _pool_fit(seed: int) -> dict[str, np.ndarray]:
    return _fits(seed)


def test_fork_pool_workers_fit(parent_fits):
    want = {seed: _fits(seed) for seed in (0, 1)}
    with mp.get_context("fork").Pool(2) as pool:
        got = pool.map_async(_pool_fit, [0, 1]).get(timeout=120)
    for seed, fits in zip((0, 1), got, strict=True):
        assert not _close(want[seed], fits), seed


def test_forced_ready_and_switched_off_in_child(parent_fits):
    """forced() ending, ready() and stand-ins switched off bring no machine code back."""
    from bidlab.kern import pagerank

    A = sp.random(30, 30, density=0.1, format="csc", random_state=6)
    args = (A.indptr, A.indices, A.data, np.ones(30), 0.85, 0.1, 0.05, np.ones(30),
            np.ones(30), np.empty(30))

    pagerank.pull_step(300.0, *args)  # compiled (and in numba's disk cache)

    def child():
        with standin.forced():
            _fit("kmeans")
        for on in (False, True):
            standin.set_enabled(on)
            assert not standin.ready(pagerank.pull_step.parallel, *args)
            pagerank.pull_step(300.0, *args)
        standin.set_enabled(False)
        return repr(_close(parent_fits, _fits()))

    assert _in_child(child) == "[]"


_LATE_IMPORT = """
import os, numpy as np, scipy.sparse as sp
from bidlab.kern import cpu_elementwise
x = np.random.default_rng(0).random((40, 3))
out = np.empty_like(x)
cpu_elementwise._expdigamma_2d(x.size, x + 1, out)  # starts numba's OpenMP threads
pid = os.fork()
if pid == 0:
    from bidlab.kern import pagerank  # imported in the child only
    A = sp.random(30, 30, density=0.1, format="csc", random_state=6)
    o = pagerank.pull_step(300.0, A.indptr, A.indices, A.data, np.ones(30), 0.85, 0.1, 0.05,
                           np.ones(30), np.ones(30), np.empty(30))
    os._exit(0 if np.isfinite(o).all() else 1)
print(os.waitpid(pid, 0)[1])
"""


def test_kernel_module_imported_in_the_child():
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _LATE_IMPORT], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0", out.stdout + out.stderr


def _status_and_fit(seed: int) -> bytes:
    return pickle.dumps((standin.status()["fork_stand_ins"], forked.unsafe(),
                         np.asarray(_fit("kmeans", seed))))


def test_forkserver_children_unchanged(parent_fits):
    with mp.get_context("forkserver").Pool(1) as pool:
        pinned, unsafe, centres = pickle.loads(pool.apply_async(_status_and_fit, (0,))
                                               .get(timeout=120))
    assert not pinned and not unsafe
    np.testing.assert_allclose(centres, parent_fits["kmeans"], rtol=1e-6)
