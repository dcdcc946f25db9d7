"""The nearest centres of a block of rows in a Lloyd pass (:class:`LloydAssignment`, a
mixin of :class:`~bidlab.models.kmeans.lloyd.LloydKMeansModel`).

Three ways, one result: dense CPU rows go through the fused
:func:`~bidlab.kern.kmeans_lloyd.lloyd_block` (bound test, GEMM of the rows left, nearest
two centres and, when asked, the cluster sums in one kernel); other rows whose Hamerly
bounds hold are tested by :func:`~bidlab.kern.kmeans.hamerly` and only those it leaves
open are gathered and multiplied; without bounds every row is. Each way updates the rows'
labels, upper and lower bounds, counts the labels that changed and the distances
computed.
"""

from __future__ import annotations

from typing import Any

from bidlab import backend
from bidlab.kern.kmeans import assign, hamerly, row_norms_sq
from bidlab.kern.kmeans_lloyd import lloyd_block
from bidlab.models.kmeans.distances import cross

__all__ = ["LloydAssignment"]


class LloydAssignment:
    """Assigns a block of rows to their nearest centres (see the module doc); it reads the
    model's ``modelmats``, ``xp``, ``_rows``, ``_work`` and ``_pass_bounds`` and counts
    ``distance_evaluations`` and ``_flops``."""

    def _assign_rows(self, X: Any, lab: Any, u: Any, lo: Any, xx: Any, buf: dict[str, Any],
                     ps: dict[str, Any], m: int, count: bool, w: Any = None,
                     add: bool = False) -> bool:
        """Nearest centres of a block of rows: by Hamerly's test where the bounds hold,
        else for every row. With ``add``, dense CPU rows are also added to the pass's
        cluster sums in the same kernel; returns whether they were."""
        xp = self.xp
        k = self.modelmats[0].shape[0]
        CT, cc = buf["CT"], buf["cc"]
        if self._fused(X):
            pruned = bool(ps["pruned"])
            changed, cnt = lloyd_block(X, self.modelmats[0].data, cc, xx, lab, u, lo,
                                       self._work, w,
                                       xx_ready=self._rows.xx_ok,
                                       bounds=self._pass_bounds if pruned else None, sums=add)
            if count:
                ps["changed"] += changed if pruned or ps["labels_ok"] else m
            self.distance_evaluations += cnt * k
            self._flops = 2.0 * cnt * X.shape[1] * k
            return add
        if ps["pruned"]:
            b = self._pass_bounds
            need = buf["need"]
            cnt = hamerly(lab, u, lo, b["drift"], b["s"], b["top"], b["m1"], b["m2"], need)
            if cnt:
                idx = need[:cnt]
                if backend.is_sparse(X):
                    Xg = X[idx]
                else:
                    if buf["G"] is None or buf["G"].shape[0] < buf["cap"]:
                        buf["G"] = backend.empty((buf["cap"], X.shape[1]), X.dtype, xp)
                    Xg = buf["G"][:cnt]
                    backend.take_into(X, idx, out=Xg, axis=0)
                D = buf["D"][:cnt]
                cross(Xg, CT, D)
                newlab, d1, d2 = buf["lab"][:cnt], buf["d1"][:cnt], buf["d2"][:cnt]
                xxg = buf["xx"][:cnt]
                backend.take_into(xx, idx, out=xxg)
                assign(D, cc, xxg, newlab, d1, d2)
                if count:
                    ps["changed"] += int(xp.count_nonzero(newlab != lab[idx]))
                lab[idx] = newlab
                u[idx] = xp.sqrt(d1)
                lo[idx] = xp.sqrt(d2)
            self.distance_evaluations += cnt * k
            self._flops = 2.0 * cnt * X.shape[1] * k
            return False
        if not self._rows.xx_ok:
            row_norms_sq(X, out=xx)
        cross(X, CT, buf["D"][:m])
        newlab, d1, d2 = buf["lab"][:m], buf["d1"][:m], buf["d2"][:m]
        assign(buf["D"][:m], cc, xx, newlab, d1, d2)
        if count:
            ps["changed"] += int(xp.count_nonzero(newlab != lab)) if ps["labels_ok"] else m
        lab[...] = newlab
        xp.sqrt(d1, out=u)
        xp.sqrt(d2, out=lo)
        self.distance_evaluations += m * k
        self._flops = 2.0 * (X.nnz if backend.is_sparse(X) else m * X.shape[1]) * k
        return False
