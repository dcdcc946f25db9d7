"""The chains' sweeps on the GPU (``BayesNet(device="gpu")``).

:class:`DeviceSweeps` runs :meth:`GibbsChains.sweep <bidlab.models.bayesnet.sampler.
GibbsChains.sweep>`'s kernel call on the GPU (:func:`bidlab.kern.bn_gibbs_cuda.sweep_gpu`:
the numba kernel's draws, bit for bit) and leaves everything else to the host code: the
state ``X`` stays a host array, sent to the device before each sweep and read back after
it, with the observations, the evidence, the sweep's recorded marginals and its flags. So
evidence changes, repairs, replicas, learning's counts and the estimates run unchanged,
and a GPU run gives the CPU run's results. The tables are copied once, and again when
learning changes them (:meth:`tables_changed`).

Cost: each sweep moves the state across the bus twice (4 bytes a variable a row each
way); a sweep's kernel work per row grows with the tables a unit reads, so the transfers
matter most for many rows of a small network.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend
from bidlab.kern.bn_gibbs_cuda import sweep_gpu

__all__ = ["DeviceSweeps"]


class DeviceSweeps:
    """Sweeps of one :class:`~bidlab.models.bayesnet.sampler.GibbsChains` on the GPU.

    Raises ImportError (naming the ``gpu`` extra) when CuPy or a device is missing.
    """

    def __init__(self) -> None:
        self.cp = backend.cupy()
        self._tables: tuple[Any, ...] | None = None

    def tables_changed(self) -> None:
        """The network's tables changed (learning's M-step): copy them again."""
        self._tables = None

    def _device_tables(self, t: Any) -> tuple[Any, ...]:
        if self._tables is None:
            cp = self.cp
            dets = tuple(None if a is None else cp.asarray(a) for a in t.dets)
            self._tables = (
                cp.asarray(t.cpt), cp.asarray(t.off), cp.asarray(t.card),
                *(cp.asarray(a) for a in t.parents), cp.asarray(t.unit_a),
                cp.asarray(t.unit_b), cp.asarray(t.fac_ptr), cp.asarray(t.fac_idx),
                cp.asarray(t.fac_step_a), cp.asarray(t.fac_step_b), *dets,
                cp.asarray(t.blk_ptr), cp.asarray(t.blk_units), cp.asarray(t.cond),
                cp.asarray(t.cond_ptr), cp.asarray(t.mb_ptr), cp.asarray(t.mb_idx),
                cp.asarray(t.mb_stride))
        return self._tables

    def sweep(self, ch: Any, m: int, lo: int, hi: int, key: np.uint64, record: bool) -> None:
        """The kernel call of ``ch.sweep``: ``ch.X``, ``ch.cur`` (when ``record``) and
        ``ch._bad`` are written as the CPU kernel writes them."""
        cp = self.cp
        t = ch.t
        X = cp.asarray(ch.X)
        cur = cp.asarray(ch.cur) if record else cp.zeros((0, t.n_states))
        bad = cp.zeros(ch._bad.shape[0], np.uint8)
        sweep_gpu(X, cp.asarray(ch.obs), cp.asarray(ch.ev), ch.n_obs, m, lo, hi,
                  *self._device_tables(t), key, cur, cp.asarray(t.state_off), record, bad)
        ch.X[...] = cp.asnumpy(X)
        if record:
            ch.cur[...] = cp.asnumpy(cur)
        ch._bad[...] = cp.asnumpy(bad)
