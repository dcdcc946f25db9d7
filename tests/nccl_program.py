"""A 2-rank NCCL job for tests/test_distributed_nccl.py (one GPU per rank):
``mpiexec -n 2 python tests/nccl_program.py OUT`` writes ``OUT.rank{r}.npz``."""

from __future__ import annotations

import sys

import cupy as cp
import numpy as np

from bidlab.distributed.nccl_comm import NCCLComm


def main(out: str) -> None:
    comm = NCCLComm()
    r = comm.rank
    a = cp.arange(12, dtype=cp.float32).reshape(3, 4) * (r + 1)
    m = a.copy()
    f = cp.asfortranarray(cp.ones((3, 4)) * (r + 1))  # not C-contiguous: a copy goes back
    h = np.full(5, float(r + 1))  # a host array in the same call goes through MPI
    comm.allreduce([a, f, h])
    comm.allreduce([m], "mean")
    b = cp.full(6, float(r + 7))
    comm.broadcast([b], root=1)
    x = cp.full(4, float(r))
    other = comm.exchange(x, 1 - r)
    comm.close()
    np.savez(f"{out}.rank{r}.npz", a=cp.asnumpy(a), m=cp.asnumpy(m), f=cp.asnumpy(f), h=h,
             b=cp.asnumpy(b), other=cp.asnumpy(other), device=comm.device)


if __name__ == "__main__":
    main(sys.argv[1])
