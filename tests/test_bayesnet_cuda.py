"""The CUDA Bayesian-network sweep (``kernels/bn_gibbs.cu``) draws the numba kernel's bits.

Without a GPU: the same source built for the host by a C++ compiler
(``BIDLAB_HOST_EMULATION``: the kernel's entry runs its threads one after the other) and
called with the argument list :func:`bidlab.kern.bn_gibbs_cuda.launch_args` makes for the
GPU launch. With CuPy and a device: :func:`~bidlab.kern.bn_gibbs_cuda.sweep_gpu` itself.
Networks with coupled pairs, tabled and untabled conditionals and deterministic units, rows
clamped by observations, evidence, and the Rao-Blackwellised marginals recorded.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
from conftest import clamped_chains

from bidlab import backend
from bidlab._source_checkout import cuda_source_dir
from bidlab.datasets.paths import find_shared_data_dir
from bidlab.kern import bn_gibbs, bn_gibbs_cuda

_SHARED = find_shared_data_dir()
BNLEARN = None if _SHARED is None else _SHARED / "bnlearn"
needs_data = pytest.mark.skipif(BNLEARN is None or not BNLEARN.is_dir(),
                                reason="shared data folder with bnlearn/ not found")


@pytest.fixture(scope="module")
def host_sweep(tmp_path_factory):
    """``bidlab_bn_sweep`` of kernels/bn_gibbs.cu built for the host (a ctypes function)."""
    cxx = shutil.which("g++") or shutil.which("clang++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler here to build kernels/bn_gibbs.cu for the host")
    folder = tmp_path_factory.mktemp("bn_gibbs_host")
    src = folder / "emulate.cpp"
    src.write_text("#define BIDLAB_HOST_EMULATION\n"
                   f'#include "{cuda_source_dir() / bn_gibbs_cuda.SOURCE}"\n')
    lib = folder / "emulate.so"
    proc = subprocess.run([cxx, "-O2", "-std=c++17", "-ffp-contract=off", "-shared", "-fPIC",
                           str(src), "-o", str(lib)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{cxx} failed on bn_gibbs.cu:\n{proc.stderr}"
    fn = getattr(ctypes.CDLL(str(lib)), bn_gibbs_cuda.KERNEL)
    fn.restype = None
    return fn


def _ctype(value):
    if isinstance(value, np.ndarray):
        return ctypes.c_void_p(value.ctypes.data)
    kinds = {np.uint64: ctypes.c_ulonglong, np.int64: ctypes.c_longlong, np.int32: ctypes.c_int}
    return kinds[type(value)](int(value))


def _chains(name, monkeypatch, tabled):
    ch = clamped_chains(BNLEARN / f"{name}.bif.gz", 30, 9, monkeypatch, tabled)()
    ch.sweep(m_active=2)  # evidence applied, both replicas drawn
    return ch


def _arguments(ch, X, rb, bad, key, record):
    t = ch.t
    return (X, ch.obs, ch.ev, ch.n_obs, 2, 0, ch.n_obs, t.cpt, t.off, t.card, *t.parents,
            t.unit_a, t.unit_b, t.fac_ptr, t.fac_idx, t.fac_step_a, t.fac_step_b, *t.dets,
            t.blk_ptr, t.blk_units, t.cond, t.cond_ptr, t.mb_ptr, t.mb_idx, t.mb_stride,
            np.uint64(key), rb, t.state_off, record, bad)


def _numba_sweep(args):
    head, tail = args[:7], args[7:]
    total = head[4] * (head[6] - head[5])
    bn_gibbs._sweep_rows(*head, 0, total, *tail)


@needs_data
@pytest.mark.parametrize("name", ["alarm", "asia", "hailfinder", "water"])
@pytest.mark.parametrize("tabled", [True, False])
def test_the_cuda_source_built_for_the_host_draws_the_numba_kernels_bits(
        host_sweep, name, tabled, monkeypatch):
    ch = _chains(name, monkeypatch, tabled)
    rows = ch.X.shape[0]
    X = {"numba": ch.X.copy(), "cuda": ch.X.copy()}
    rb = {k: np.zeros((rows, ch.t.n_states)) for k in X}
    bad = {k: np.zeros(rows, np.uint8) for k in X}
    work = bn_gibbs_cuda.scratch(np, ch.t.card, rows)  # kept between sweeps, as on the GPU
    for sweep in range(6):
        key = 1000 + 7 * sweep
        record = sweep % 2 == 0
        _numba_sweep(_arguments(ch, X["numba"], rb["numba"], bad["numba"], key, record))
        args, n = bn_gibbs_cuda.launch_args(
            np, *_arguments(ch, X["cuda"], rb["cuda"], bad["cuda"], key, record), work=work)
        assert n == rows
        host_sweep(*map(_ctype, args))
        np.testing.assert_array_equal(X["cuda"], X["numba"])
        np.testing.assert_array_equal(rb["cuda"], rb["numba"])
        np.testing.assert_array_equal(bad["cuda"], bad["numba"])
    assert not np.array_equal(X["numba"], ch.X)  # the sweeps drew
    assert rb["numba"].any()  # and recorded


def test_launch_args_name_a_wrong_dtype():
    i64 = np.zeros(1, np.int64)
    with pytest.raises(TypeError, match="X must be C-contiguous int32; got int64"):
        bn_gibbs_cuda.launch_args(np, np.zeros((2, 1), np.int64), *([i64] * 32))


@pytest.mark.gpu
@needs_data
@pytest.mark.parametrize("name", ["alarm", "hailfinder"])
def test_sweep_on_the_gpu_draws_the_numba_kernels_bits(name, monkeypatch):
    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: the GPU sweep is checked on the host build")
    cp = backend.cupy()
    ch = _chains(name, monkeypatch, True)
    rows = ch.X.shape[0]
    rb, bad = np.zeros((rows, ch.t.n_states)), np.zeros(rows, np.uint8)
    X = ch.X.copy()
    dev = [cp.asarray(a) if isinstance(a, np.ndarray) else a
           for a in _arguments(ch, X.copy(), rb.copy(), bad.copy(), 5, True)]
    for key in (5, 6, 7):
        _numba_sweep(_arguments(ch, X, rb, bad, key, True))
        dev[-5] = np.uint64(key)
        bn_gibbs_cuda.sweep_gpu(*dev)
        np.testing.assert_array_equal(cp.asnumpy(dev[0]), X)
        np.testing.assert_array_equal(cp.asnumpy(dev[-4]), rb)
        np.testing.assert_array_equal(cp.asnumpy(dev[-1]), bad)


def _tiny():
    from bidlab.models.bayesnet import Network

    return Network(["rain", "wet"], [["no", "yes"], ["no", "yes"]], [[], [0]],
                   [np.array([[0.8, 0.2]]), np.array([[0.9, 0.1], [0.2, 0.8]])])


def test_device_gpu_without_cupy_says_what_to_install():
    from bidlab.models import BayesNet

    if backend.gpu_available():
        pytest.skip("CuPy and a device are here")
    with pytest.raises(ImportError, match=r"bidlab\[gpu\]"):
        BayesNet(_tiny(), n_samples=5, burn_in=1, device="gpu").infer({"wet": "yes"})
    with pytest.raises(ValueError, match="device"):
        BayesNet(_tiny(), device="tpu").infer()


@pytest.mark.gpu
@needs_data
def test_bayesnet_on_the_gpu_infers_and_learns_the_cpu_results():
    if not backend.gpu_available():
        pytest.skip("no CuPy/CUDA device here: the GPU sweep is checked on the host build")
    from bidlab.models import BayesNet

    def run(device):
        bn = BayesNet(BNLEARN / "alarm.bif.gz", n_chains=300, burn_in=20, n_samples=50,
                      n_passes=4, random_state=3, device=device)
        marg = bn.infer({"HRBP": "HIGH", "CVP": "LOW"})
        data = BayesNet(BNLEARN / "alarm.bif.gz").sample(2000, random_state=1).astype(float)
        data[np.random.default_rng(0).random(data.shape) < 0.3] = np.nan
        learned = bn.fit(data).network_.flat_tables()[0]
        return marg, learned

    cpu, gpu = run("cpu"), run("gpu")
    assert gpu[0] == cpu[0]
    np.testing.assert_array_equal(gpu[1], cpu[1])
