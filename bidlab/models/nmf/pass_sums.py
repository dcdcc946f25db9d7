"""The batch method's pass statistics, summed by the model: :class:`PassSums`.

With ``method="batch"`` the components ``H`` take one multiplicative step per pass from
the pass's summed statistics (scikit-learn's ``solver="mu"`` iteration), so NMF is a
full-batch model (:attr:`bidlab.learn.Model.full_batch`): it sums them itself and hands
the totals to :class:`~bidlab.learn.updaters.BatchMult` at the pass's last minibatch.
Summing them itself is what lets a minibatch skip every k x n_features product:

* every entry observed, a CSR ``X`` on the CPU (``"sparse"``), the **Frobenius** step's
  numerator ``W^T X`` is pushed into per-thread running sums
  (:class:`~bidlab.kern.scatter_sums.ScatterSums`, O(nnz k) per minibatch, the threads'
  copies summed once a pass) and its denominator ``(W^T W) H`` keeps only the k x k Gram
  matrix per minibatch: ``H``'s k x n_features product is formed once, at the pass end.
  The loss needs no k x n_features term either:
  ``||X - W H||^2 = ||X||^2 - 2 <W, X H^T> + <W^T W, H H^T>``, with ``X H^T`` the
  W step's numerator and ``H H^T`` formed once per ``H``;
* the same for **KL**: the numerator ``W^T (X / P)`` pushed, with the loss, in one fused
  loop over the stored entries (:func:`bidlab.kern.nmf_kl.kl_h_push`), the
  denominator's column sums of ``W`` kept as a 1 x k row;
* any other data (a mask, dense data, the GPU): each minibatch's statistics
  (:func:`~bidlab.models.nmf.steps.h_stats`) added to k x n_features sums.

The penalties of ``H`` (scikit-learn's ``n_samples x alpha_H``) are added to the total
once, with the pass's row count. :meth:`PassSums.state` lists the sums so far for a
checkpoint (a run resumed mid-pass continues from them).
"""

from __future__ import annotations

import numpy as np

from bidlab import backend
from bidlab.kern.nmf_kl import kl_h_push
from bidlab.kern.scatter_sums import ScatterSums
from bidlab.mat import Mat, SMat
from bidlab.models.nmf.steps import EPS, Block, h_stats, penalised

__all__ = ["PassSums"]


class PassSums:
    """A pass's statistics of ``H``'s step and its loss (see the module doc).

    Parameters
    ----------
    kind
        which entries count (:mod:`bidlab.models.nmf.steps`).
    loss
        ``"frobenius"`` or ``"kl"``.
    H
        the components (k x n_features), for the shapes, dtype and array module.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> import bidlab as bl
    >>> from bidlab.models.nmf.pass_sums import PassSums
    >>> from bidlab.models.nmf.steps import Block
    >>> X = bl.SMat(sp.random(8, 6, density=0.5, format="csr", random_state=0))
    >>> H, W = bl.Mat(np.ones((2, 6))), bl.Mat(np.ones((8, 2)))
    >>> sums = PassSums("sparse", "frobenius", H)
    >>> Ht = bl.Mat(np.ascontiguousarray(H.data.T))
    >>> total, count = sums.add(Block("sparse", X), W, H, Ht, X @ Ht, H @ Ht, None)
    >>> num, den = bl.Mat(np.zeros((2, 6))), bl.Mat(np.zeros((2, 6)))
    >>> sums.finish(num, den, H, 0.0, 0.0)
    >>> bool(np.allclose(num.data, W.data.T @ X.csr.toarray()))
    True
    """

    def __init__(self, kind: str, loss: str, H: Mat) -> None:
        k, d = H.shape
        xp, dtype = H.xp, H.dtype
        self.kind, self.loss = kind, loss
        self.pushed = xp is np and kind == "sparse"
        self.misc = Mat(backend.zeros((1, 3), np.float64, np))  # rows, loss, entries
        if self.pushed:
            self.num_t = ScatterSums(d, k, dtype)
            self._parts = backend.zeros((self.num_t.work.shape[0] + 1, 2), np.float64, np)
            self.den = Mat(backend.zeros((k, k) if loss == "frobenius" else (1, k), dtype, xp))
        else:
            self.num = Mat(backend.zeros((k, d), dtype, xp))
            self.den = Mat(backend.zeros((k, d), dtype, xp))
            self._num = Mat(backend.zeros((k, d), dtype, xp))
            self._den = Mat(backend.zeros((k, d), dtype, xp))
        # W^T W, coordinate descent's statistic (the pushed Frobenius den is that already)
        self.gram = self.den if self.pushed else \
            Mat(backend.zeros((k, k), dtype, xp)) if loss == "frobenius" else None

    def state(self) -> dict[str, Mat]:
        """The sums so far, by name (a checkpoint writes them; loading writes them back)."""
        num = Mat(self.num_t.total()) if self.pushed else self.num
        out = {"pass.num": num, "pass.den": self.den, "pass.misc": self.misc}
        if self.gram is not None and not self.pushed:
            out["pass.gram"] = self.gram
        return out

    def zero(self) -> None:
        """Start a new pass."""
        if self.pushed:
            self.num_t.zero()
        else:
            self.num.data.fill(0)
        self.den.data.fill(0)
        if self.gram is not None:
            self.gram.data.fill(0)
        self.misc.data.fill(0)

    def drop(self) -> None:
        """Forget the sums so far, those a checkpoint wrote into them included (:meth:`zero`
        alone passes over a pushed total that nothing was pushed into since the last)."""
        if self.pushed:
            self.num_t.mark()
        self.zero()

    def add(self, b: Block, W: Mat, H: Mat, Ht: Mat, XHt: Mat | None, HHt: Mat | None,
            Htsum: Mat | None) -> tuple[float, float]:
        """Add a minibatch's statistics at its new row factors ``W``; return its loss and
        its number of observed entries. ``XHt``: ``X H^T`` (Frobenius), ``HHt``:
        ``H H^T`` (Frobenius), ``Htsum``: ``H``'s row sums as a 1 x k row (KL)."""
        if not self.pushed:
            total, count = h_stats(b, W, H, Ht, self.loss, self._num, self._den)
            self.num.data += self._num.data
            self.den.data += self._den.data
            if self.gram is not None:
                self.gram.data += (W.T @ W).data
        elif self.loss == "frobenius":
            total, count = self._frobenius(b.X, W, XHt, HHt)
        else:
            total, count = self._kl(b.X, W, Ht, Htsum)
        m = self.misc.data
        m[0, 0] += W.shape[0]
        m[0, 1] += total
        m[0, 2] += count
        return total, count

    def _frobenius(self, X: SMat, W: Mat, XHt: Mat, HHt: Mat) -> tuple[float, float]:
        self.num_t.add(X.csr, W.data)
        G = W.T @ W
        self.den.data += G.data
        xx = float((X * X).sum().data[0, 0])
        cross = float((W * XHt).sum().data[0, 0])
        quad = float((G * HHt).sum().data[0, 0])
        return 0.5 * max(xx - 2.0 * cross + quad, 0.0), float(X.shape[0] * X.shape[1])

    def _kl(self, X: SMat, W: Mat, Ht: Mat, Htsum: Mat) -> tuple[float, float]:
        xlogq, xsum = kl_h_push(X.csr, W.data, Ht.data, EPS, self.num_t, self._parts)
        ws = W.sum(axis=0)
        self.den.data += ws.data
        mass = float((ws * Htsum).sum().data[0, 0])  # the sum of W H
        return max(xlogq - xsum + mass, 0.0), float(X.shape[0] * X.shape[1])

    def finish_cd(self, num: Mat, gram: Mat, l1: float, l2: float) -> None:
        """Write the pass's ``W^T X`` into ``num`` (k x n_features) and ``W^T W`` into
        ``gram`` (k x k), with the penalties per row ``l1`` (off ``num``) and ``l2`` (on
        ``gram``'s diagonal), for :class:`~bidlab.learn.updaters.BatchCD`; start a new
        pass."""
        rows = float(self.misc.data[0, 0])
        if self.pushed:
            self.num_t.total(transposed=num.data)
        else:
            num.data[...] = self.num.data
        gram.data[...] = self.gram.data
        if l2:
            d = gram.data.reshape(-1)[:: gram.shape[0] + 1]
            d += gram.dtype.type(rows * l2)
        if l1:
            num.data -= num.dtype.type(rows * l1)
        self.zero()

    def finish(self, num: Mat, den: Mat, H: Mat, l1: float, l2: float) -> None:
        """Write the pass's totals into ``num`` and ``den`` (k x n_features) with the
        penalties ``l1``, ``l2`` (per row: scikit-learn's ``alpha_H`` split by
        ``l1_ratio``), and start a new pass."""
        rows = float(self.misc.data[0, 0])
        if self.pushed:
            self.num_t.total(transposed=num.data)
            if self.loss == "frobenius":
                H.xp.matmul(self.den.data, H.data, out=den.data)
            else:
                den.data[...] = self.den.data.T
        else:
            num.data[...] = self.num.data
            den.data[...] = self.den.data
        if l1 or l2:
            den <<= penalised(den, H, rows * l1, rows * l2)
        self.zero()
