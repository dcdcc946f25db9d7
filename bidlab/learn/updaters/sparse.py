"""Sparse updates: a model matrix's update handed over as a product with a sparse minibatch.

A model whose update of matrix ``i`` is a product with a sparse minibatch (a GLM's gradient
``X.T @ A``) may hand it over unformed: it sets ``model.sparse_updates = {i: SparseUpdate}``
in its ``update`` instead of filling ``updatemats[i]`` (:class:`~bidlab.learn.Model`
declares the attribute, None by default). The L1 / L2 mixins then record their terms on
it, and Grad and ADAGrad (vexp 0.5, no momentum) apply the whole step over the rows the
minibatch touches (:mod:`bidlab.kern.touched`: no dense gradient is formed). Any other
case -- another updater, momentum, the GPU -- calls :meth:`SparseUpdate.materialize`, which
forms ``updatemats[i]`` and adds the recorded terms, and goes on as for a dense update.
"""

from __future__ import annotations

from typing import Any

from bidlab.mat import Mat, SMat, sparse_t_dense

__all__ = ["SparseUpdate", "sparse_updates", "form_sparse_updates"]


class SparseUpdate:
    """A model matrix's update given as a product with a sparse minibatch, not formed.

    ``updatemats[i] = (X.T @ A).T``: ``X`` the n x cols CSR minibatch (an SMat), ``A`` an
    n x rows C-ordered dense factor (a Mat; e.g. a GLM's loss gradient per margin, already
    scaled to an ascent direction). Mixins add their terms with :meth:`add_term`; updaters
    either apply everything over the touched rows or call :meth:`materialize`.
    """

    def __init__(self) -> None:
        self.X: SMat | None = None
        self.A: Mat | None = None
        self.terms: list[tuple[str, Any, Any, int]] = []
        #: defer the untouched rows' regulariser terms whatever share of rows a minibatch
        #: touches (the model's rows are exchanged sparsely between ranks: see
        #: ``Communicator.changed_rows_only``)
        self.lazy = False
        self._out: tuple[Any, Mat] | None = None  # (U's array, a Mat of its transpose)

    def reset(self, X: SMat, A: Mat) -> None:
        """Describe this minibatch's update (the model calls this in ``update``)."""
        self.X, self.A = X, A
        self.terms.clear()

    def add_term(self, kind: str, column: Any, mixin: Any, i: int) -> None:
        """Record a regulariser's term: ``kind`` ``"l1"`` (``-column * sign(m)``) or ``"l2"``
        (``-column * m``); ``mixin._dense_term(i)`` adds it to a formed update."""
        self.terms.append((kind, column, mixin, i))

    @property
    def pending(self) -> bool:
        """Whether it describes a minibatch's update not yet applied or formed."""
        return self.X is not None

    def done(self) -> None:
        """Forget the minibatch (the updater has used it; no references are kept)."""
        self.X = self.A = None
        self.terms.clear()

    def columns(self, kind: str) -> Any:
        """The recorded ``kind`` column (rows x 1), None when absent, False when several."""
        found = [t[1] for t in self.terms if t[0] == kind]
        return None if not found else (found[0] if len(found) == 1 else False)

    def materialize(self, U: Mat) -> None:
        """Form the update in ``U`` (rows x cols), then add the recorded terms."""
        if self._out is None or self._out[0] is not U.data:
            self._out = (U.data, Mat(U.data.T))
        sparse_t_dense(self.X, self.A, out=self._out[1])
        for _kind, _col, mixin, i in self.terms:
            mixin._dense_term(i)


def sparse_updates(model: Any) -> dict[int, SparseUpdate] | None:
    """The model's unformed updates of the current minibatch (None: all are formed)."""
    return model.sparse_updates


def form_sparse_updates(model: Any, mats: Any = None) -> None:
    """Form every unformed update in ``updatemats`` (for updaters without a sparse step);
    ``mats``: only those model matrices (default all)."""
    for i, rec in (model.sparse_updates or {}).items():
        if rec.pending and (mats is None or i in mats):
            rec.materialize(model.updatemats[i])
            rec.done()
