"""What a fitted :class:`~bidlab.models.nmf.NMF` answers: the row factors of new rows
(``transform``), the data factors reconstruct (``inverse_transform``), the loss on held-out
entries (``score``) and the reconstruction error ``fit`` reports."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

import bidlab as bl
from bidlab import backend
from bidlab.kern.threads import one_blas_thread
from bidlab.models.nmf.inputs import Prepared, unwrap
from bidlab.models.nmf.steps import Block, objective, w_cd_step, w_step

__all__ = ["NMFServe"]


class NMFServe:
    """NMF's methods on a fitted model (mixed into the estimator)."""

    #: which entries counted in the loss, by the kind of data trained on
    #: (:func:`bidlab.models.nmf.model.data_kind`)
    _OBSERVED = {"dense": "all", "sparse": "all (unstored ones as 0)",
                 "masked": "those neither NaN nor masked out by mask=",
                 "stored": "the stored ones (the rest missing)"}

    def _facts(self) -> list[tuple[str, Any]]:
        """The fitted shape, how it was trained and how far, for ``summary()``."""
        model = self.model_
        if not model.initialised:
            return [("trained", "not yet")]
        o = model.opts
        k, d = model.modelmats[0].shape
        try:
            err: Any = f"{self.reconstruction_err_:.6g}"
        except AttributeError:  # no pass finished yet
            err = "- (no pass done yet)"
        passes = f"{self.n_iter_}" + (" (tol reached)" if model.converged else "")
        return [("components_", f"{k} components x {d} features"),
                ("loss", o.loss), ("solver", f"{o.solver} ({o.method})"),
                ("observed entries", self._OBSERVED.get(model.kind, model.kind)),
                ("n_iter_", passes), ("reconstruction_err_", err)]

    def _block(self, data: Prepared) -> Block:
        mats = [self._on_device(m) for m in data.mats]
        wrap = [bl.SMat(m) if backend.is_sparse(m) else bl.Mat(m) for m in mats]
        return Block(data.kind, wrap[0], wrap[1] if len(wrap) > 1 else None)

    def _mats(self, W: Any) -> tuple[Any, Any, Any]:
        H = self.model_.modelmats[0]
        Ht = bl.Mat(H.xp.ascontiguousarray(H.data.T))
        return bl.Mat(H.xp.ascontiguousarray(H.xp.asarray(W))), H, Ht

    def _error(self, data: Prepared, W: np.ndarray) -> float:
        Wm, H, Ht = self._mats(W)
        total, _ = objective(self._block(data), Wm, H, Ht, self.model_.opts.loss)
        return math.sqrt(2.0 * total)

    def _factors(self, data: Prepared) -> bl.Mat:
        """``W`` for fixed components: scikit-learn's ``transform`` (constant start,
        ``max_iter`` steps of the model's solver, its stopping rule every 10)."""
        k, loss = self.n_components_, self.model_.opts.loss
        n = data.shape[0]
        W0 = np.full((n, k), math.sqrt(data.mean / k), dtype=self.model_.dtype)
        W, H, Ht = self._mats(W0)
        b = self._block(data)
        l1, l2 = self.model_.w_penalties()
        start = previous = math.sqrt(2.0 * objective(b, W, H, Ht, loss)[0])
        frobenius = loss == "frobenius"  # H's products, formed once
        fixed = {"XHt": b.X @ Ht if frobenius else None,
                 "HHt": H @ Ht if frobenius else None,
                 "Htsum": None if frobenius else Ht.sum(axis=0)}
        cd = self.model_.opts.solver == "cd" and data.kind not in ("masked", "stored")
        cols = bl.Mat(H.xp.zeros((n, 2), W.dtype)) if cd else None
        with bl.caching(), one_blas_thread():
            for it in range(1, self.max_iter + 1):
                if cd:
                    w_cd_step(W, fixed["XHt"], fixed["HHt"], l1, l2, cols)
                else:
                    w_step(b, W, H, Ht, loss, l1, l2, **fixed)
                if self.tol > 0 and it % 10 == 0:
                    err = math.sqrt(2.0 * objective(b, W, H, Ht, loss)[0])
                    if start > 0 and (previous - err) / start < self.tol:
                        break
                    previous = err
        return W

    def transform(self, X: Any, mask: Any = None) -> np.ndarray:
        """The row factors ``W`` (n x k) of ``X``'s rows with the components fixed."""
        check_is_fitted(self)
        data = self._data(X, mask, reset=False, columns=False)
        return np.array(backend.to_host(self._factors(data).data), copy=True)

    def inverse_transform(self, X: Any) -> np.ndarray:
        """``W @ components_``: the data the factors ``X`` (n x k) reconstruct."""
        check_is_fitted(self)
        W = backend.to_host(unwrap(X))
        if sp.issparse(W):  # factors kept sparse (scikit-learn's takes them too)
            W = W.toarray()
        W = np.asarray(W, dtype=self.model_.dtype)
        if W.ndim != 2 or W.shape[1] != self.n_components_:
            raise ValueError(f"NMF: inverse_transform needs n x {self.n_components_} factors "
                             f"(one column per component); got shape {W.shape}")
        return W @ self.components_

    def score(self, X: Any, y: Any = None, mask: Any = None) -> float:
        """Minus the mean loss per observed entry of ``X`` (squared error, or the
        generalised KL divergence), its factors found by :meth:`transform`: higher is
        better, so ``GridSearchCV`` can pick ``n_components``. Rows with no observed entry
        add nothing (a ValueError when no entry of ``X`` is observed)."""
        check_is_fitted(self)
        data = self._data(X, mask, reset=False, columns=False, need_rows=False)
        W = self._factors(data)
        _, H, Ht = self._mats(backend.to_host(W.data))
        loss = self.model_.opts.loss
        total, count = objective(self._block(data), W, H, Ht, loss)
        if loss == "frobenius":
            total *= 2.0
        return -total / max(count, 1.0)
