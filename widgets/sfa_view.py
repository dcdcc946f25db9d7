"""``SimilarItemsView(learner, titles)``: a live "similar items to ..." list of an SFA learner,
with its training RMSE and held-out p@10 curves.

For ``bidlab.models.SFA(k).learner(X)``: for each watched item (by default the most rated
ones) the ``n`` items whose factors are closest by cosine, by title, updating while the
factors train; a curve of the training RMSE of each minibatch (the learner's score) and,
when ``test`` (held-out users x items) is given, of p@10 on it (training items left out,
evaluated at most once a second in the pump thread).
"""

from __future__ import annotations

import html
import numbers
import time
from collections.abc import Sequence
from typing import Any

import ipywidgets as W
import numpy as np
import scipy.sparse as sp

from bidlab.learn import Snapshot
from bidlab.models.sfa.metrics import precision_at_k, top_k

from ._bokeh import LiveBokeh
from ._charts import legend_html, score_figure, stream_row
from ._pump import MAX_RATE, PumpedView, View, close_widgets, pump_for, state_text

__all__ = ["SimilarItemsView", "similar_titles"]


def similar_titles(V: np.ndarray, items: Sequence[int], titles: Sequence[str], n: int,
                   k: int, keep: np.ndarray | None = None) -> list[list[str]]:
    """For each of ``items``, the titles of the ``n`` items whose first ``k`` factor
    columns of ``V`` (items x f) are closest by cosine, best first (the item itself left
    out, and those ``keep`` marks False; as :meth:`bidlab.models.SFA.similar_items`); a list
    is shorter when fewer than ``n`` items are left."""
    F = np.asarray(V, np.float64)[:, :k]
    norms = np.linalg.norm(F, axis=1)
    norms[norms == 0] = np.inf
    out = []
    for i in items:
        cos = (F @ F[i]) / (norms * norms[i])
        cos[i] = -np.inf
        if keep is not None:
            cos[~keep] = -np.inf
        m = min(int(n), int(np.isfinite(cos).sum()))  # fewer when fewer items are left
        if m < 1:
            out.append([])
            continue
        top = np.argpartition(-cos, m - 1)[:m]
        top = top[np.argsort(-cos[top], kind="stable")]
        out.append([str(titles[j]) for j in top])
    return out


def _whole(x: Any) -> bool:
    """Whether ``x`` is a whole number: an int, a numpy integer or an integral float (not a
    bool, as ``True`` is no item id)."""
    return (not isinstance(x, (bool, np.bool_)) and isinstance(x, numbers.Real)
            and float(x).is_integer())


def _user_rows(model: Any) -> Any:
    return model.W.values if model.W is not None else None


class SimilarItemsView(PumpedView):
    """Live view of an SFA learner (display it as a cell's last value).

    Parameters
    ----------
    learner
        ``SFA(...).learner(X)``.
    titles
        one title per item (column of ``X``).
    items
        the items to watch (default: the ``watch`` most rated in ``train``, else
        the first ``watch``).
    n
        similar items listed for each.
    train
        the training users x items (``X``): its items are left out of the p@10
        lists, and it picks the default items.
    test
        held-out users x items (CSR of ``X``'s shape) for the p@10 curve, or None.
    watch
        how many items to watch when ``items`` is not given.
    rate
        updates per second at most.
    key
        the pump's key for this kind of view (a new view replaces the old one).
    min_ratings
        list only items with at least this many ratings in ``train`` (as
        :meth:`bidlab.models.SFA.similar_items`: the default 1 leaves out items never
        rated, 0 keeps every item).

    Notes
    -----
    The view follows the model's items: items folded in while it is shown
    (``SFA.partial_fit_items``) are listed from the next frame, titled ``"item 123"``
    until :meth:`set_titles` names them; ``train`` does not hold their ratings, so the
    ``min_ratings`` filter lists them all (each was folded in with one rating at least).

    Examples
    --------
    >>> learner = SFA(32).learner(parts.train)                            # doctest: +SKIP
    >>> SimilarItemsView(learner, ml.titles, train=parts.train, test=parts.test)  # doctest: +SKIP
    >>> learner.start()                                                    # doctest: +SKIP
    """

    def __init__(self, learner: Any, titles: Sequence[str], items: Sequence[int] | None = None,
                 n: int = 5, train: Any = None, test: Any = None, watch: int = 3,
                 min_ratings: int = 1, rate: float = MAX_RATE, key: str = "sfa") -> None:
        model = learner.model
        if not hasattr(model, "item_step"):
            raise TypeError("SimilarItemsView needs an SFA learner: "
                            "bidlab.models.SFA(n_components).learner(X)")
        if not model.initialised:
            learner.init()
        self.learner = learner
        self.titles = list(titles)
        self._titles_version = 0
        n_items = int(model.modelmats[0].shape[0])
        if len(self.titles) != n_items:
            raise ValueError(f"SimilarItemsView: {len(self.titles)} titles for {n_items} "
                             "items; give one title per column of X")
        if (isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Real)
                or not float(n).is_integer() or n < 1):
            raise ValueError(f"SimilarItemsView: n is the number of similar items to list, "
                             f"an integer >= 1; got {n!r}")
        if not _whole(watch) or watch < 1:
            raise ValueError(f"SimilarItemsView: watch is how many items to watch, a whole "
                             f"number >= 1; got {watch!r}")
        train = None if train is None else sp.csr_matrix(train)
        if items is None:
            counts = (np.bincount(train.indices, minlength=n_items) if train is not None
                      else np.zeros(n_items))
            items = np.argsort(-counts, kind="stable")[:int(watch)]
        elif np.ndim(items) != 1:
            raise ValueError(f"SimilarItemsView: items is a list of item ids (e.g. [{items!r}] "
                             f"for one); got {items!r}")
        bad = [i for i in items if not _whole(i) or not 0 <= i < n_items]
        if bad:
            shown = bad[0].item() if isinstance(bad[0], np.generic) else bad[0]
            raise ValueError(f"SimilarItemsView: item {shown!r} is not an item id: the "
                             f"learner has {n_items} items; give whole numbers from 0 to "
                             f"{n_items - 1}")
        self.items = [int(i) for i in items]
        self.n, self.k = int(n), int(model.opts.k)
        self.train = train
        self.keep = None
        if train is not None and min_ratings >= 1:  # as SFA.similar_items: 0 keeps all
            counts = np.bincount(train.indices, minlength=n_items)
            self.keep = counts >= min_ratings
            if not self.keep.any():
                raise ValueError(f"SimilarItemsView: no item has min_ratings={min_ratings} "
                                 f"or more ratings in train (the most any has is "
                                 f"{int(counts.max(initial=0))}): lower min_ratings")
        self.test = None if test is None else sp.csr_matrix(test)
        for name, M in (("train", train), ("test", self.test)):
            if M is not None and M.shape[1] != n_items:
                raise ValueError(f"SimilarItemsView: {name} has {M.shape[1]} items "
                                 f"(columns) but the learner has {n_items}: give the users "
                                 "x items matrix of the same items")
        if train is not None and self.test is not None and train.shape != self.test.shape:
            raise ValueError(f"SimilarItemsView: train {train.shape} and test "
                             f"{self.test.shape} must have one shape (users x items)")
        n_users = int(model.W.n_rows)  # p@10 scores test's rows with these users' factors
        if self.test is not None and self.test.shape[0] != n_users:
            raise ValueError(f"SimilarItemsView: test has {self.test.shape[0]} users (rows) "
                             f"but the learner has {n_users}: give the held-out users x "
                             "items matrix of the learner's users")
        self.users = (None if self.test is None
                      else np.flatnonzero(np.diff(self.test.indptr)))
        self.n_items = n_items  # the items the view was made with: the columns of X
        self._last_step, self._last_eval = -1, 0.0
        self._table_key: Any = None  # (step, items, titles version) of the table drawn
        self._V: np.ndarray | None = None  # the item factors the table was drawn from
        self._sized: dict[str, tuple[int, Any]] = {}  # per item count: titles, keep, train
        self._closed = False
        self.lists: list[list[str]] = []
        series = ["train RMSE"] + (["p@10"] if self.test is not None else [])
        fig, self.curves = score_figure("training RMSE and held-out p@10", "value", series,
                                        name="bidlab-sfa-curves", width=520, height=260)
        self.chart = LiveBokeh(fig)
        self.table = W.HTML(value="")
        self.legend = W.HTML(legend_html(series))
        self.status = W.HTML(value="")
        self.widget = W.VBox([self.table, self.chart, self.legend, self.status])
        views: dict[str, Any] = {"items": 0}
        if self.test is not None:
            views["users"] = _user_rows
        self.pump = pump_for(learner, rate)
        self.view = self.pump.attach(View(key, self.render, views=views, idle=True,
                                          close=self._close_widgets))

    def set_titles(self, titles: Sequence[str]) -> None:
        """Name the items anew: one title per item, from item 0, e.g. the old titles
        followed by those of items folded in with ``SFA.partial_fit_items`` (a longer
        list names items still to be folded in). The table shows them at the next frame.

        Raises
        ------
        ValueError
            When ``titles`` has fewer titles than the items the view was made with.
        """
        titles = list(titles)
        if len(titles) < self.n_items:
            raise ValueError(f"SimilarItemsView.set_titles: {len(titles)} titles for "
                             f"{self.n_items} items or more; give one title per item, "
                             "from item 0 (the old titles, then the new items')")
        self.titles = titles  # the pump reads the version before the titles
        self._titles_version += 1

    def _sized_for(self, what: str, n: int) -> Any:
        """``what`` ("titles", "keep" or "train") for a model of ``n`` items, kept until
        the item count changes: items past the view's are titled ``"item j"``, listed
        and unrated in ``train``; a model of fewer items (a checkpoint loaded) is cut."""
        version = self._titles_version if what == "titles" else 0
        kept = self._sized.get(what)
        if kept is not None and kept[0] == (n, version):
            return kept[1]
        if what == "titles":
            given = self.titles
            out: Any = [*given[:n], *(f"item {j}" for j in range(len(given), n))]
        elif what == "keep":
            keep = self.keep
            out = (None if keep is None else keep[:n] if keep.size >= n
                   else np.concatenate([keep, np.ones(n - keep.size, bool)]))
        else:
            T = self.train
            out = (None if T is None else T[:, :n].tocsr() if T.shape[1] >= n
                   else sp.csr_matrix((T.data, T.indices, T.indptr), (T.shape[0], n)))
        self._sized[what] = ((n, version), out)
        return out

    def p_at_10(self, U: np.ndarray, V: np.ndarray) -> float:
        """p@10 of the held-out items with these factors (training items left out; with
        fewer than 10 items, the missing places of each list count as misses)."""
        k = self.k
        scores = np.asarray(U, np.float64)[self.users, :k] @ np.asarray(V, np.float64)[:, :k].T
        if V.shape[1] > k:  # explicit: the item bias ranks too
            scores += np.asarray(V, np.float64)[:, -1]
        train = self._sized_for("train", V.shape[0])
        seen = train[self.users] if train is not None else None
        recs = top_k(scores, min(10, scores.shape[1]), seen)
        rels = [self.test.indices[self.test.indptr[u]: self.test.indptr[u + 1]]
                for u in self.users]
        return precision_at_k(list(recs), rels, 10)

    def render(self, snap: Snapshot | None) -> None:
        if snap is None or "items" not in snap.views:
            if self._V is not None:  # new titles show without waiting for a new step
                self._draw_table(self._V, self._table_key[0])
            return
        V = snap.views["items"]
        self._draw_table(V, int(snap.step))  # a fold-in changes the items, not the step
        if snap.step != self._last_step:  # a run's last snapshot may repeat the step
            self._last_step = int(snap.step)
            self._add_point(snap, V)
        self.status.value = f"step {snap.step} · {state_text(snap)}"

    def _draw_table(self, V: np.ndarray, step: int) -> None:
        """The similar items of each watched one, when the step, the model's item count
        or the titles moved since the table was drawn."""
        n = int(V.shape[0])
        key = (step, n, self._titles_version)
        if key == self._table_key:
            return
        self._table_key, self._V = key, V
        titles = self._sized_for("titles", n)
        items = [i for i in self.items if i < n]  # all, unless a checkpoint cut the model
        lists = similar_titles(V, items, titles, self.n, self.k, self._sized_for("keep", n))
        if lists != self.lists or items != self.items:
            self.lists = lists
            rows = "".join(
                f"<tr><td><b>{html.escape(str(titles[i]))}</b></td><td>"
                f"{html.escape(' · '.join(sim))}</td></tr>" for i, sim in zip(
                    items, lists, strict=True))
            self.table.value = (f"<table><tr><th>similar items to ...</th><th>{self.n} "
                                f"closest by factors</th></tr>{rows}</table>")

    def _add_point(self, snap: Snapshot, V: np.ndarray) -> None:
        point = {name: float("nan") for name in self.curves.data}
        point["step"] = float(snap.step)
        score = snap.metrics.get("train_score")
        if isinstance(score, float) and np.isfinite(score):
            point["train RMSE"] = -score
        now = time.monotonic()
        if self.test is not None and "users" in snap.views and now - self._last_eval >= 1.0:
            self._last_eval = now
            point["p@10"] = self.p_at_10(snap.views["users"], V)
        if any(np.isfinite(v) for k, v in point.items() if k != "step"):
            stream_row(self.curves, point)

    def _close_widgets(self) -> None:
        self._closed = True
        close_widgets(self.widget, self.chart, self.table, self.legend, self.status)
