"""NCCLComm: GPU models combined over NCCL, MPI for the rest. The GPU cases skip without
CuPy, NCCL or enough GPUs; the refusals run everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install 'bidlab[mpi]'")

HERE = Path(__file__).resolve().parent


def _gpus() -> int:
    try:
        import cupy
        from cupy.cuda import nccl

        if not getattr(nccl, "available", True):
            return 0
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no NCCL, no driver: no GPU here
        return 0


def test_the_sparse_mode_is_refused_before_any_gpu_is_touched():
    from bidlab.distributed.nccl_comm import NCCLComm

    with pytest.raises(ValueError, match="mode='average' or 'butterfly'.*MPIComm"):
        NCCLComm(mode="sparse")


def test_train_with_nccl_says_what_is_missing(capsys):
    from bidlab.distributed.train import main

    code = main(["kmeans", "--data", str(HERE / "missing.npz"), "--comm", "nccl", "--nest",
                 "1"])
    assert code == 2 and "--nest" in capsys.readouterr().err
    if _gpus():
        pytest.skip("CuPy with NCCL is installed: nothing is missing")
    code = main(["kmeans", "--data", str(HERE / "missing.npz"), "--comm", "nccl"])
    assert code == 2 and "NCCL" in capsys.readouterr().err


def test_host_arrays_name_the_gpu_communicator():
    from bidlab.distributed.mpi_comm import _contiguous

    class NotNumpy:
        pass

    with pytest.raises(TypeError, match="NCCLComm"):
        _contiguous(NotNumpy())


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 1, reason="needs CuPy with NCCL and a GPU")
def test_one_rank_collectives_keep_the_arrays():
    import cupy as cp

    from bidlab.distributed.nccl_comm import NCCLComm

    comm = NCCLComm()
    a = cp.arange(6, dtype=cp.float64)
    f = cp.asfortranarray(cp.ones((3, 2), cp.float32) * 3)
    comm.allreduce([a, f], "mean")
    comm.broadcast([a])
    np.testing.assert_array_equal(cp.asnumpy(a), np.arange(6.0))
    np.testing.assert_array_equal(cp.asnumpy(f), np.full((3, 2), 3.0))
    with pytest.raises(TypeError, match="float32, float64"):
        comm.allreduce([cp.zeros(3, cp.complex64)])
    comm.close()


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason="needs CuPy with NCCL and two GPUs")
def test_two_ranks_sum_broadcast_and_exchange_over_nccl(tmp_path):
    from bidlab.distributed.launch import mpiexec_path

    out = tmp_path / "nccl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE)]))
    done = subprocess.run([mpiexec_path(), "-n", "2", sys.executable,
                           str(HERE / "nccl_program.py"), str(out)], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [dict(np.load(f"{out}.rank{r}.npz")) for r in range(2)]
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    for r, got in enumerate(ranks):
        np.testing.assert_array_equal(got["a"], base * 3)
        np.testing.assert_array_equal(got["m"], base * 1.5)
        np.testing.assert_array_equal(got["f"], np.full((3, 4), 3.0))
        np.testing.assert_array_equal(got["h"], np.full(5, 3.0))
        np.testing.assert_array_equal(got["b"], np.full(6, 8.0))
        np.testing.assert_array_equal(got["other"], np.full(4, float(1 - r)))
    assert {int(ranks[0]["device"]), int(ranks[1]["device"])} == {0, 1}
