"""The chains' sweeps on the GPU (``BayesNet(device="gpu")``).

:class:`DeviceSweeps` runs :meth:`GibbsChains.sweep <bidlab.models.bayesnet.sampler.
GibbsChains.sweep>`'s kernel call on the GPU (:func:`bidlab.kern.bn_gibbs_cuda.sweep_gpu`:
the numba kernel's draws, bit for bit) and leaves everything else to the host code: the
state ``X`` stays a host array, copied into a device buffer before each sweep and back
after it, with the observations, the evidence, the sweep's recorded marginals and its
flags. So evidence changes, repairs, replicas, learning's counts and the estimates run
unchanged, and a GPU run gives the CPU run's results. The device buffers are made at the
first sweep and reused (a sweep allocates nothing); the tables are copied once, and again
when learning changes them (:meth:`tables_changed`).

Cost: each sweep moves the state across the bus twice (4 bytes a variable a row each
way); a sweep's kernel work per row grows with the tables a unit reads, so the transfers
matter most for many rows of a small network.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern import bn_gibbs_cuda

__all__ = ["DeviceSweeps"]


class DeviceSweeps:
    """Sweeps of one :class:`~bidlab.models.bayesnet.sampler.GibbsChains` on the GPU.

    Raises ImportError (naming the ``gpu`` extra) when CuPy or a device is missing.
    """

    def __init__(self) -> None:
        self.cp = backend.cupy()
        self._tables: tuple[Any, ...] | None = None
        self._bufs: dict[str, Any] = {}

    def tables_changed(self) -> None:
        """The network's tables changed (learning's M-step): copy them again."""
        self._tables = None

    def _device_tables(self, t: Any) -> tuple[Any, ...]:
        if self._tables is None:
            up = self.cp.asarray
            dets = (t.det_ptr, t.det_idx)  # the CUDA kernel has no form without them
            self._tables = (
                up(t.cpt), up(t.off), up(t.card), *(up(a) for a in t.parents),
                up(t.unit_a), up(t.unit_b), up(t.fac_ptr), up(t.fac_idx), up(t.fac_step_a),
                up(t.fac_step_b), *(up(a) for a in dets), up(t.blk_ptr), up(t.blk_units),
                up(t.cond), up(t.cond_ptr), up(t.mb_ptr), up(t.mb_idx), up(t.mb_stride))
        return self._tables

    def _buffers(self, ch: Any) -> dict[str, Any]:
        """Device copies of the chains' per-sweep arrays, made once per chains' shapes."""
        b = self._bufs
        if not b or b["X"].shape != ch.X.shape or b["obs"].shape != ch.obs.shape:
            cp = self.cp
            b.clear()
            b.update(X=cp.empty_like(ch.X), obs=cp.empty_like(ch.obs),
                     ev=cp.empty_like(ch.ev), cur=cp.empty_like(ch.cur),
                     bad=cp.empty_like(ch._bad), state_off=cp.asarray(ch.t.state_off),
                     work=bn_gibbs_cuda.scratch(cp, ch.t.card, ch.X.shape[0]))
        return b

    def sweep(self, ch: Any, m: int, lo: int, hi: int, key: np.uint64, record: bool) -> None:
        """The kernel call of ``ch.sweep``: ``ch.X``, ``ch.cur`` (when ``record``) and
        ``ch._bad`` are written as the CPU kernel writes them."""
        b = self._buffers(ch)
        b["X"].set(ch.X)
        b["obs"].set(ch.obs)
        b["ev"].set(ch.ev)
        b["bad"].fill(0)
        bn_gibbs_cuda.sweep_gpu(b["X"], b["obs"], b["ev"], ch.n_obs, m, lo, hi,
                                *self._device_tables(ch.t), key, b["cur"], b["state_off"],
                                record, b["bad"], work=b["work"])
        b["X"].get(out=ch.X)
        if record:
            b["cur"].get(out=ch.cur)
        b["bad"].get(out=ch._bad)
