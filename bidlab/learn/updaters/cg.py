"""CG: a few conjugate-gradient steps per minibatch on a symmetric positive-definite system.

For each model matrix ``X`` (rows x cols) it moves, the model describes a linear system
whose solution the matrix should be, row by row: ``A_r x_r = b_r`` with each ``A_r``
symmetric positive definite (ALS / SFA: a factor's rows given the other factor). It writes
``updatemats[i]`` as a dict holding

* ``"rhs"``: ``B``, a Mat of ``X``'s shape (row ``r`` is ``b_r``), and either
* ``"gram"``: ``G``, a cols x cols SPD Mat shared by every row (the normal equations
  ``X @ G = B``, e.g. ``H @ H.T + l2 * I``), or
* ``"matvec"``: a callable ``matvec(P, out)`` writing each row's product ``A_r p_r`` of the
  rows x cols array ``P`` into ``out`` (rows with systems of their own, e.g. ALS with
  missing entries).

Each update runs up to ``steps`` conjugate-gradient steps on every row at once, starting
from the model matrix as it is -- the last minibatch's solution, so a system that changes
little between minibatches needs few steps (warm start). With ``tol > 0`` a row stops once
its residual ``|b_r - A_r x_r|`` is at most ``tol * |b_r|``, and the update stops when every
row has; :attr:`CG.last_steps` is how many steps the last update took.
"""

from __future__ import annotations

from typing import Any

from bidlab import backend
from bidlab.learn.options import Option
from bidlab.learn.updaters.base import Updater

__all__ = ["CG"]


class CG(Updater):
    """Conjugate-gradient steps on each row's SPD system, warm-started (see the module doc).
    """

    STATS = ("rhs",)
    OPTIONS = (
        Option("steps", int, 3, "conjugate-gradient steps per minibatch (at most)", low=1),
        Option("tol", float, 0.0, "stop a row once its residual is at most tol times its "
               "right-hand side's norm (0: always take every step)", low=0.0),
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.last_steps = 0

    def check_stats(self, i: int) -> None:
        super().check_stats(i)
        shape = self.model.modelmats[i].shape
        self.stat_mat(i, "rhs", (shape,))
        u = self.model.updatemats[i]
        if "gram" in u:
            self.stat_mat(i, "gram", ((shape[1], shape[1]),))
        elif not callable(u.get("matvec")):
            raise ValueError(
                f"CG needs the system's matrix for model matrix {self.model.mat_name(i)!r}: "
                f"{type(self.model).__name__}.updatemats[{i}] must also hold 'gram' (a "
                f"{shape[1]} x {shape[1]} SPD Mat) or 'matvec' (a callable matvec(P, out)); "
                f"it holds {sorted(u)}")

    def _matvec(self, i: int, P: Any, out: Any) -> None:
        u = self.model.updatemats[i]
        if "gram" in u:
            self.xp.matmul(P, u["gram"].data, out=out)
        else:
            u["matvec"](P, out)

    def update(self, step: int) -> None:
        taken = 0
        for i in self.mats:
            taken = max(taken, self._solve(i))
        self.last_steps = taken
        self.t += 1

    def _solve(self, i: int) -> int:
        """Up to ``steps`` CG steps on matrix ``i``'s rows; returns the steps taken."""
        xp = self.xp
        X = self.model.modelmats[i].data
        B = self.model.updatemats[i]["rhs"].data
        R, P, AP, Q = self._tmp[i], self._p[i], self._ap[i], self._q[i]
        n = X.shape[0]
        self._matvec(i, X, AP)
        xp.subtract(B, AP, out=R)
        xp.copyto(P, R)
        rs = xp.einsum("ij,ij->i", R, R)
        tiny = xp.finfo(X.dtype).tiny
        if self.opts.tol > 0:
            stop = xp.einsum("ij,ij->i", B, B) * self.opts.tol ** 2
        else:
            stop = backend.zeros((n,), X.dtype, xp)
        for taken in range(self.opts.steps):
            live = rs > stop
            if not bool(live.any()):
                return taken
            self._matvec(i, P, AP)
            pap = xp.einsum("ij,ij->i", P, AP)
            alpha = xp.where(live, rs / xp.maximum(pap, tiny), 0.0)[:, None]
            xp.multiply(P, alpha, out=Q)
            xp.add(X, Q, out=X)
            xp.multiply(AP, alpha, out=Q)
            xp.subtract(R, Q, out=R)
            rs_new = xp.einsum("ij,ij->i", R, R)
            beta = xp.where(live, rs_new / xp.maximum(rs, tiny), 0.0)[:, None]
            xp.multiply(P, beta, out=P)
            xp.add(P, R, out=P)
            rs = rs_new
        return self.opts.steps

    def _new_scratch(self) -> None:
        super()._new_scratch()
        self._p = type(self._tmp)(self.model)
        self._ap = type(self._tmp)(self.model)
        self._q = type(self._tmp)(self.model)

    _SCRATCH = ("_tmp", "_p", "_ap", "_q")
