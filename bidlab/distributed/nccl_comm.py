"""The NCCL communicator: ranks whose models live on GPUs combine them over NCCL.

:class:`NCCLComm` is an :class:`~bidlab.distributed.mpi_comm.MPIComm` whose collectives on
CuPy arrays run on NVIDIA's NCCL (through CuPy's ``cupy.cuda.nccl``: NVLink or PCIe between
the GPUs of a node, no copy through the host), while MPI keeps everything else: starting
the job and handing every rank NCCL's unique id, host arrays and flags (``any_of``), the
group's commands, checkpoints. One process per GPU, as MPI starts them::

    mpiexec -n 4 python -m bidlab.distributed.train glm --device gpu --comm nccl ...

Modes: ``"average"`` (allreduce, optionally elastic) and ``"butterfly"`` (NCCL's
point-to-point send / receive, NCCL 2.7 or later). The ``"sparse"`` mode's row exchange is
written for host arrays: a GPU model combines by ``"average"``.

NCCL's collectives cannot be timed out from the host: a rank that dies inside one leaves
the others waiting until MPI ends the job (``bidlab.distributed.guarded`` aborts it when
a rank fails outside a collective).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bidlab.distributed.mpi_comm import MPIComm, dense_allreduce_bytes

__all__ = ["NCCLComm", "nccl_module"]


def nccl_module() -> Any:
    """``cupy.cuda.nccl``, or an ImportError naming what to install."""
    try:
        import cupy  # noqa: F401 - CuPy itself first: its absence is the usual cause
        from cupy.cuda import nccl
    except ImportError as exc:
        raise ImportError("NCCLComm needs CuPy with NCCL: pip install 'bidlab[gpu]' and the "
                          "NCCL library (e.g. pip install nvidia-nccl-cu12)") from exc
    if not getattr(nccl, "available", True):  # pragma: no cover - depends on the install
        raise ImportError("CuPy was built without NCCL: install the NCCL library "
                          "(e.g. pip install nvidia-nccl-cu12)")
    return nccl


def _nccl_type(nccl: Any, dtype: Any) -> int:
    """NCCL's data type constant for ``dtype`` (float32 / float64 / int32 / int64)."""
    table = {np.dtype(np.float32): "NCCL_FLOAT32", np.dtype(np.float64): "NCCL_FLOAT64",
             np.dtype(np.int32): "NCCL_INT32", np.dtype(np.int64): "NCCL_INT64"}
    name = table.get(np.dtype(dtype))
    if name is None:
        raise TypeError(f"NCCLComm moves float32, float64, int32 or int64 arrays; got "
                        f"{np.dtype(dtype)}")
    return int(getattr(nccl, name))


class NCCLComm(MPIComm):
    """One rank of an MPI job whose CuPy arrays are combined over NCCL.

    Parameters
    ----------
    comm
        an ``mpi4py.MPI.Comm`` (default ``COMM_WORLD``).
    mode
        ``"average"`` or ``"butterfly"`` (see :class:`MPIComm`).
    elastic, timeout, spin
        as :class:`MPIComm` (``timeout`` bounds the MPI
        exchanges only).
    device
        the GPU this rank uses; None: ``rank % number of GPUs`` (one rank per
        GPU of each node when ranks are placed node by node).

    Notes
    -----
    Numpy arrays go through MPI as in :class:`MPIComm`; CuPy arrays through NCCL.

    Examples
    --------
    Under ``mpiexec -n 2 python script.py`` on a node with two GPUs::

        from bidlab.distributed import NCCLComm, shard
        comm = NCCLComm()
        Xr, yr = shard(comm, X, y)
        GLM("logistic", device="gpu").learner(Xr, yr, comm=comm).fit()
    """

    def __init__(self, comm: Any = None, mode: str = "average", elastic: float = 0.0,
                 timeout: float = 120.0, spin: float = 0.002,
                 device: int | None = None) -> None:
        if mode == "sparse":
            raise ValueError("NCCLComm combines GPU models by mode='average' or 'butterfly' "
                             "(the sparse row exchange is written for host arrays): use "
                             "MPIComm(mode='sparse') with device='cpu' models")
        self._nccl = nccl_module()
        import cupy

        super().__init__(comm, mode=mode, elastic=elastic, timeout=timeout, spin=spin)
        self._cupy = cupy
        n_gpus = cupy.cuda.runtime.getDeviceCount()
        self.device = self.rank % n_gpus if device is None else int(device)
        if not 0 <= self.device < n_gpus:
            raise ValueError(f"device must be a GPU of this node, 0 to {n_gpus - 1}; got "
                             f"{device!r}")
        cupy.cuda.Device(self.device).use()
        uid = self._nccl.get_unique_id() if self.rank == 0 else None
        uid = self.mpi.bcast(uid, root=0)
        self.nccl = self._nccl.NcclCommunicator(self.size, uid, self.rank)

    # ------------------------------------------------------------------ collectives
    def _on_gpu(self, a: Any) -> bool:
        return isinstance(a, self._cupy.ndarray)

    def _stream(self) -> int:
        return int(self._cupy.cuda.get_current_stream().ptr)

    def _split(self, arrays: Sequence[Any]) -> tuple[list[Any], list[tuple[Any, Any]]]:
        """(the host arrays; each CuPy array with a C-contiguous buffer of it, itself or a
        copy that is written back after the collective)."""
        host = [a for a in arrays if not self._on_gpu(a)]
        gpu = [(a, a if a.flags.c_contiguous else self._cupy.ascontiguousarray(a))
               for a in arrays if self._on_gpu(a)]
        return host, gpu

    def allreduce(self, arrays: Sequence[Any], op: str = "sum") -> None:
        if op not in ("sum", "mean"):
            raise ValueError(f"allreduce op must be 'sum' or 'mean'; got {op!r}")
        host, gpu = self._split(arrays)
        if host:
            super().allreduce(host, op)
        for a, buf in gpu:
            self.nccl.allReduce(buf.data.ptr, buf.data.ptr, buf.size,
                                _nccl_type(self._nccl, buf.dtype), self._nccl.NCCL_SUM,
                                self._stream())
            if op == "mean" and buf.dtype.kind in "fc":
                buf *= buf.dtype.type(1.0 / self.size)
            elif op == "mean":  # integers: as the other communicators (dtype(1/size) is 0)
                buf[...] = (buf * (1.0 / self.size)).astype(buf.dtype)
            if buf is not a:
                a[...] = buf
            self.bytes_sent += dense_allreduce_bytes(buf.nbytes, self.size)

    def broadcast(self, arrays: Sequence[Any], root: int = 0) -> None:
        host, gpu = self._split(arrays)
        if host:
            super().broadcast(host, root)
        for a, buf in gpu:
            self.nccl.bcast(buf.data.ptr, buf.size, _nccl_type(self._nccl, buf.dtype), root,
                            self._stream())
            if buf is not a:
                a[...] = buf
            if self.rank == root:
                self.bytes_sent += buf.nbytes * (self.size - 1)

    def exchange(self, array: Any, partner: int) -> Any:
        """Send ``array`` to ``partner`` and return the partner's (same shape; NCCL's
        send / receive for a CuPy array)."""
        if not self._on_gpu(array):
            return super().exchange(array, partner)
        buf = self._cupy.ascontiguousarray(array)
        out = self._cupy.empty_like(buf)
        kind, stream = _nccl_type(self._nccl, buf.dtype), self._stream()
        self._nccl.groupStart()  # both directions at once: neither rank waits for the other
        try:
            self.nccl.send(buf.data.ptr, buf.size, kind, partner, stream)
            self.nccl.recv(out.data.ptr, out.size, kind, partner, stream)
        finally:
            self._nccl.groupEnd()
        self.bytes_sent += buf.nbytes
        return out

    def sparse_allreduce(self, index: Any, values: Any,
                         n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`MPIComm.sparse_allreduce` of host copies (the result is on the host)."""
        from bidlab import backend

        return super().sparse_allreduce(backend.to_host(index), backend.to_host(values),
                                        n_rows)

    def close(self) -> None:
        """Release the NCCL communicator (the MPI one stays the caller's)."""
        nccl, self.nccl = self.nccl, None
        if nccl is not None:
            nccl.destroy()
