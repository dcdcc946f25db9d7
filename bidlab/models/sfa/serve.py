"""What a fitted :class:`~bidlab.models.sfa.SFA` answers: predictions, recommendations,
similar items, and the fold-in of new users or items with the other side fixed."""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from bidlab import backend
from bidlab.kern import als
from bidlab.learn.rowstate import RowState
from bidlab.mat import Mat
from bidlab.models.sfa.inputs import check_counts, check_ids, ratings_csr

__all__ = ["ServeMixin"]


class ServeMixin:
    """Read and fold-in methods of a fitted ``SFA`` (``model_``, ``train_``)."""

    model_: Any
    train_: sp.csr_matrix
    n_users_: int
    n_items_: int

    # -- fitted arrays ------------------------------------------------------------------------
    def _follow_model(self) -> None:
        """Fitted, with ``train_``, ``n_users_`` and ``n_items_`` those of the model as it is
        now. A checkpoint taken before ``partial_fit_users`` / ``partial_fit_items``, loaded
        into the learner made before them (``learner.load``; refused unless the file was
        made with other fixed options, e.g. another seed, which rebuilds the model from the
        learner's data), leaves the model without the folded-in rows: the estimator then
        drops them too (they were appended last, so the rest is the learner's data), with
        a warning, rather than answer for ids the model no longer has."""
        check_is_fitted(self)
        W = getattr(self.model_, "W", None)
        if W is None:
            return
        users, items = int(W.n_rows), int(self.model_.modelmats[0].shape[0])
        had = (self.n_users_, self.n_items_)
        if (users, items) == had or users > had[0] or items > had[1]:
            return
        self.train_ = self.train_[:users, :items].tocsr()
        self.n_users_, self.n_items_ = users, items
        gone = [f"{what} {n}..{was - 1}" for what, n, was in
                (("users", users, had[0]), ("items", items, had[1])) if n < was]
        warnings.warn(f"{type(self).__name__}: the model has {users} users x {items} items "
                      f"(a checkpoint loaded into its learner), fewer than the {had[0]} x "
                      f"{had[1]} folded in since: {' and '.join(gone)} are gone with it, and "
                      "the estimator (train_, n_users_, n_items_) follows the model; fold "
                      "them in again (partial_fit_users / partial_fit_items) to use them",
                      UserWarning, stacklevel=3)

    @property
    def _k(self) -> int:
        return int(self.model_.opts.k)

    def _live(self) -> tuple[Any, Any]:
        """The model's user and item factors as they are now (users x f and items x f,
        where the model keeps them, not copied): each read takes only the rows and columns
        it needs, so it sees the latest sweep, fold-in or live learner's pass at the cost
        of what it reads."""
        m = self.model_
        return m.W.values.data, m.modelmats[0].data

    @property
    def user_factors_(self) -> np.ndarray:
        """users x k (host copy)."""
        return _host_copy(self._live()[0][:, : self._k])

    @property
    def item_factors_(self) -> np.ndarray:
        """items x k (host copy)."""
        return _host_copy(self._live()[1][:, : self._k])

    @property
    def user_bias_(self) -> np.ndarray:
        """Each user's bias (explicit; zeros for implicit feedback)."""
        U = self._live()[0]
        return _host_copy(U[:, -1]) if self.model_.bias else np.zeros(U.shape[0], U.dtype)

    @property
    def item_bias_(self) -> np.ndarray:
        """Each item's bias (explicit; zeros for implicit feedback)."""
        V = self._live()[1]
        return _host_copy(V[:, -1]) if self.model_.bias else np.zeros(V.shape[0], V.dtype)

    @property
    def global_mean_(self) -> float:
        """The mean training rating (explicit; 0 for implicit feedback)."""
        return float(self.model_.mu or 0.0)

    # -- predictions --------------------------------------------------------------------------
    def predict(self, users: Any, items: Any) -> np.ndarray:
        """The predicted rating (explicit) or preference score (implicit) of each
        ``(users[i], items[i])`` pair.

        Examples
        --------
        >>> sfa.predict([0, 1], [5, 5])  # doctest: +SKIP
        array([3.9, 3.1])
        """
        self._follow_model()
        name = type(self).__name__
        u = check_ids(name, "user", users, self.n_users_)
        i = check_ids(name, "item", items, self.n_items_)
        if u.shape != i.shape:
            raise ValueError(f"{name}: predict needs one item per user; got {u.size} users "
                             f"and {i.size} items")
        U, V = self._live()  # only the asked-for rows are read
        xp, k = backend.namespace(U), self._k
        du, di = xp.asarray(u), xp.asarray(i)
        out = backend.to_host(xp.einsum("ij,ij->i", U[du, :k], V[di, :k]))
        if self.model_.bias:
            ub, ib = backend.to_host(U[du, -1]), backend.to_host(V[di, -1])
        else:
            ub = ib = np.zeros(out.shape[0], out.dtype)
        return out + self.global_mean_ + ub + ib

    def _one_id(self, what: str, id_: Any, method: str) -> int:
        """One checked user or item id (``predict``'s rules: integral floats pass)."""
        name = type(self).__name__
        n = self.n_users_ if what == "user" else self.n_items_
        a = check_ids(name, what, id_, n)
        if a.size != 1:
            raise ValueError(f"{name}: {method} takes one {what} id; got {a.size}: call it "
                             f"once per {what}")
        return int(a[0])

    def _scores(self, u: int) -> np.ndarray:
        """Every item's score for user ``u``, from the factors as they are now: the item
        matrix is read in place (one product), not copied."""
        U, V = self._live()
        k = self._k
        s = backend.to_host(V[:, :k] @ U[u, :k])
        if not self.model_.bias:
            return s
        ub = backend.to_host(U[u, -1:])[0]
        return s + backend.to_host(V[:, -1]) + (self.global_mean_ + ub)

    def recommend(self, user: int, n: int = 10, filter_seen: bool = True
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` items of highest predicted score for ``user``, best first, and their
        scores; ``filter_seen`` leaves out the items the user rated in training.
        ``user`` is one id, checked as by :meth:`predict` (an integral float such as
        ``1.0`` is taken as the integer).

        Examples
        --------
        >>> items, scores = sfa.recommend(0, n=10)  # doctest: +SKIP
        """
        self._follow_model()
        u = self._one_id("user", user, "recommend")
        scores = self._scores(u)
        if filter_seen:
            seen = self.train_.indices[self.train_.indptr[u]: self.train_.indptr[u + 1]]
            scores[seen] = -np.inf
        available = int(np.isfinite(scores).sum())
        why = None
        if filter_seen and available == 0:
            why = (f"user {u} rated all {self.n_items_} items in training, so filter_seen="
                   "True leaves none to recommend: pass filter_seen=False")
        return _top(type(self).__name__, scores, n, "recommend", available, why)

    def similar_items(self, item: int, n: int = 10, min_ratings: int = 1
                      ) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` items whose factors are closest to ``item``'s by cosine (the item
        itself left out), best first, and the cosines. ``min_ratings``: leave out items
        with fewer training ratings (the L2 penalty shrinks a rarely rated item's factors
        towards 0, so its direction, all a cosine sees, is mostly noise); the default 1
        leaves out items never rated in training, 0 keeps every item; with
        ``min_ratings >= 1`` an ``item`` never rated in training is refused (its factors
        have no direction to compare). ``item`` is one id, checked as by :meth:`predict`.

        Examples
        --------
        >>> items, cosines = sfa.similar_items(0, n=5)  # doctest: +SKIP
        """
        self._follow_model()
        i = self._one_id("item", item, "similar_items")
        min_ratings = _min_ratings(type(self).__name__, min_ratings)
        # the item factors in float64, read in place (a float64 model) or converted once
        V = np.asarray(backend.to_host(self._live()[1][:, : self._k]), np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", V, V))  # no items x k temporary
        norms[norms == 0] = np.inf
        cos = (V @ V[i]) / (norms * (norms[i] if np.isfinite(norms[i]) else np.inf))
        cos[i] = -np.inf
        why = None
        if min_ratings >= 1:  # items with no training rating have no direction to compare
            counts = self._item_counts()
            if counts[i] == 0:
                raise ValueError(f"{type(self).__name__}: item {i} has no training "
                                 "rating: its factors are only the L2 penalty's pull "
                                 "towards 0, with no direction a cosine could compare; "
                                 "fit on data with its ratings, or pass min_ratings=0 "
                                 "to compare it anyway")
            few = counts < min_ratings
            cos[few] = -np.inf
            available = int(np.isfinite(cos).sum())
            few[i] = False
            if few.any() and isinstance(n, numbers.Real) and n > available:  # (_top checks n)
                most = int(np.delete(counts, i).max())
                if available == 0:
                    why = (f"no item other than item {i} has min_ratings={min_ratings} or "
                           f"more training ratings (the most any has is {most}): lower "
                           f"min_ratings to {most} or less")
                else:
                    why = (f"only {available} items other than item {i} have min_ratings="
                           f"{min_ratings} or more training ratings: use n <= {available} or "
                           "lower min_ratings")
        return _top(type(self).__name__, cos, n, "similar_items", int(np.isfinite(cos).sum()),
                    why)

    def _item_counts(self) -> np.ndarray:
        """Each item's number of training ratings (read-only), counted once per ``train_``:
        a fit, a new learner and each fold-in make a new ``train_``, so the count is kept
        until then (more sweeps do not change the ratings)."""
        S = self.train_
        kept = self.__dict__.get("_counts_of")
        if kept is None or kept[0] is not S:
            counts = np.bincount(S.indices, minlength=S.shape[1])
            counts.flags.writeable = False
            kept = self._counts_of = (S, counts)
        return kept[1]

    # -- fold-in ------------------------------------------------------------------------------
    def _fold(self, S: Any, other: np.ndarray) -> np.ndarray:
        """Solve the rows of ``S`` with the ``other`` side fixed, to convergence."""
        m = self.model_
        xp = m.modelmats[0].xp
        f = m.width
        O = xp.asarray(other)
        X = backend.zeros((S.shape[0], f), m.dtype, xp)
        sc = als.Scratch.new(S.shape[0], f, m.dtype, xp)
        gram = None
        if not m.bias:
            gram = O.T @ O
            gram[np.diag_indices(f)] += m.dtype.type(m.opts.l2)
        if xp is not np:
            import cupyx.scipy.sparse as csp  # a GPU model: CuPy is there

            S = csp.csr_matrix(S)
        als.solve_rows(S, O, X, sc, steps=4 * f + 10, gram=gram, l2=float(m.opts.l2),
                       alpha=float(m.opts.alpha), mu=float(m.mu or 0.0), bias=m.bias)
        return X

    def partial_fit_users(self, X: Any) -> np.ndarray:
        """Fold in new users: ``X`` (new users x items) solved with the item factors fixed,
        as a sweep's user step run to convergence would; returns their new user ids.

        Examples
        --------
        >>> new_ids = sfa.partial_fit_users(new_rows)  # doctest: +SKIP
        """
        self._follow_model()
        m = self.model_
        S = ratings_csr(type(self).__name__, X, m.dtype, n_items=self.n_items_,
                        implicit=not m.bias)
        check_counts(type(self).__name__, S, m.opts.feedback)
        X_new = self._fold(S, m.modelmats[0].data)
        old = m.W
        n = old.n_rows
        rows = RowState(n + S.shape[0], m.width, m.dtype, old.xp)
        rows.values.data[:n] = old.values.data
        rows.values.data[n:] = X_new
        rows.seen.data[...] = 1
        m.W = rows
        self.train_ = sp.vstack([self.train_, S], format="csr")
        self.n_users_ = int(self.train_.shape[0])
        return np.arange(n, self.n_users_)

    def partial_fit_items(self, X: Any) -> np.ndarray:
        """Fold in new items: ``X`` (users x new items, the fitted users' ratings of
        them) solved with the user factors fixed; returns their new item ids. Each new
        item (column) needs at least one rating; a user (row) may have none.

        Examples
        --------
        >>> new_ids = sfa.partial_fit_items(new_columns)  # doctest: +SKIP
        """
        self._follow_model()
        name = type(self).__name__
        Xc = ratings_csr(name, X, self.model_.dtype, allow_empty_rows=True,
                         implicit=not self.model_.bias)
        check_counts(name, Xc, self.model_.opts.feedback)
        if Xc.shape[0] != self.n_users_:
            raise ValueError(f"{name}: partial_fit_items needs one row per fitted user "
                             f"({self.n_users_}); X has {Xc.shape[0]}")
        empty = np.flatnonzero(np.bincount(Xc.indices, minlength=Xc.shape[1]) == 0)
        if empty.size:
            raise ValueError(f"{name}: {empty.size} new items (columns) of X have no rating "
                             f"(the first is column {int(empty[0])}, which would be item "
                             f"{self.n_items_ + int(empty[0])}): nothing can be learned about "
                             "them; drop those columns, or fold them in once they are rated")
        S = ratings_csr(name, Xc.T.tocsr(), self.model_.dtype)
        m = self.model_
        V_new = self._fold(S, m.W.values.data)
        xp = m.modelmats[0].xp
        V = xp.concatenate([m.modelmats[0].data, V_new])
        m.modelmats = [Mat(V)]
        m.updatemats = [Mat(backend.zeros(V.shape, m.dtype, xp))]
        m._by_item, m._gather = None, []
        d = self.n_items_
        self.train_ = sp.hstack([self.train_, Xc], format="csr")
        self.n_items_ = int(self.train_.shape[1])
        return np.arange(d, self.n_items_)


def _min_ratings(name: str, value: Any) -> int:
    """``similar_items``' ``min_ratings`` as an int >= 0 (an integral float such as ``2.0``
    is taken as the integer); anything else is refused, naming what was given."""
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real)
            or not np.isfinite(value) or not float(value).is_integer() or value < 0):
        raise ValueError(f"{name}: similar_items takes min_ratings, the least number of "
                         f"training ratings an item needs to be compared, as an integer >= 0 "
                         f"(0 keeps every item); got {value!r}")
    return int(value)


def _host_copy(x: Any) -> np.ndarray:
    """A host copy of ``x`` (a numpy or CuPy array) that its reader may change."""
    h = backend.to_host(x)
    return np.array(h, copy=True) if h is x else h


def _top(name: str, scores: np.ndarray, n: int, what: str, available: int,
         why: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` highest ``scores``, best first; ``why``: why only ``available`` (finite)
    scores are left, told when ``n`` is more."""
    if (isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Real)
            or not float(n).is_integer()):
        raise ValueError(f"{name}: {what} takes n, the number of items, as an integer; "
                         f"got {n!r}")
    n = int(n)
    if why is not None and n > available:
        raise ValueError(f"{name}: {what} asked for n={n} items but {available} can be "
                         f"returned: {why}")
    if n < 1 or n > available:
        raise ValueError(f"{name}: {what} asked for n={n} items but {available} can be "
                         f"returned: use 1 <= n <= {available}")
    part = np.argpartition(-scores, n - 1)[:n]
    order = part[np.argsort(-scores[part], kind="stable")]
    return order, scores[order]
