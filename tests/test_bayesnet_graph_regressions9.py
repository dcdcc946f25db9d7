"""BayesNet learning and its view: complete rows that the starting tables give probability
zero, pandas' nullable columns, and clicks on BayesNetView's bars from the page."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from bidlab.models.bayesnet import BayesNet, BayesNetError, Network


def _or_net() -> Network:
    """a, b roots; c = a or b (a deterministic table): c=no with a=yes is impossible."""
    det = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    return Network(["a", "b", "c"], [["no", "yes"]] * 3, [[], [], [0, 1]],
                   [np.array([[0.6, 0.4]]), np.array([[0.7, 0.3]]), det])


def _ml_tables(X: np.ndarray, net: Network, alpha: float) -> list[np.ndarray]:
    """Each table's counts plus ``alpha``, each row normalised (complete rows)."""
    out = []
    for v in range(net.n_vars):
        cfg = np.zeros(X.shape[0], np.int64)
        for p in net.parents[v]:
            cfg = cfg * int(net.cards[p]) + X[:, p]
        c = np.zeros(net.cpts[v].shape)
        np.add.at(c, (cfg, X[:, v]), 1.0)
        c += alpha
        out.append(c / c.sum(axis=1, keepdims=True))
    return out


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_complete_rows_the_starting_tables_call_impossible_are_learned_from(alpha):
    """Complete data that contradict a deterministic row of the starting network (noisy
    data on a BIF network): the tables are the counts' maximum likelihood plus the prior,
    as for any complete data (no row has anything to draw). It raised 'has probability
    zero ... raise init_tries' after 1000 useless ancestral draws."""
    net = _or_net()
    X = BayesNet(net, random_state=0).sample(400)
    X[:7, 0], X[:7, 2] = 1, 0  # a = yes, c = no: impossible under the starting tables
    bn = BayesNet(net, n_passes=2, alpha=alpha, random_state=0).fit(X)
    for got, want in zip(bn.network_.cpts, _ml_tables(X, net, alpha), strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    assert bn.network_.cpts[2][2, 0] > 0  # (a, b) = (yes, no) now allows c = no


def test_a_row_with_missing_values_that_no_completion_explains_still_raises():
    """The fix is for complete rows only: an observation whose observed part is impossible
    whatever its missing values are still has no E-step, and says so."""
    X = np.array([[1.0, np.nan, 0.0]] + [[0.0, 0.0, 0.0]] * 5)
    with pytest.raises(BayesNetError, match="probability zero"):
        BayesNet(_or_net(), n_passes=1, random_state=0).fit(X)


def test_pandas_nullable_integer_columns_read_pd_na_as_missing():
    """A DataFrame of pandas' nullable Int64 columns (what ``convert_dtypes`` and many
    readers give) with pd.NA where missing: learned as with NaN. It was refused as
    holding 'entries that are not numbers: map state names to indices'."""
    pd = pytest.importorskip("pandas")
    net = _or_net()
    X = BayesNet(net, random_state=1).sample(300).astype(np.float64)
    X[::4, 1] = np.nan
    df = pd.DataFrame(X, columns=net.names).astype("Int64")
    assert df["b"].isna().sum() == 75
    a = BayesNet(net, n_passes=3, random_state=0).fit(df)
    b = BayesNet(net, n_passes=3, random_state=0).fit(X)
    for ta, tb in zip(a.network_.cpts, b.network_.cpts, strict=True):
        np.testing.assert_array_equal(ta, tb)
    assert a.log_likelihood(df.fillna(0)) == b.log_likelihood(np.nan_to_num(X))
    with pytest.raises(ValueError, match="map state names to indices"):
        BayesNet(net).fit(pd.DataFrame({n: ["no"] * 3 for n in net.names}))


def _view():
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.widgets import BayesNetView

    bn = BayesNet(_or_net(), n_chains=50, burn_in=2, n_samples=5, random_state=0)
    lrn = bn.learner()
    view = BayesNetView(lrn)
    view.pump.stop()  # the renders below are the test's own
    return lrn, view


@pytest.mark.parametrize("order", ["select-then-tap", "tap-then-select"])
def test_one_tap_on_a_bar_sets_its_evidence_once(order):
    """A tap on a bar reaches the kernel as the bar's selection and as a Tap event (the
    page sends both): that is one click, which sets the evidence. Each was a click, so the
    second cleared what the first set and a tap did nothing."""
    lrn, view = _view()
    try:
        i = view.source.data["label"].index("b = yes")
        tap = SimpleNamespace(x=0.3, y=float(i))
        if order == "select-then-tap":
            view._on_select("indices", [], [i])
            view._on_tap(tap)
        else:
            view._on_tap(tap)
            view._on_select("indices", [], [i])
        assert lrn.model.chains.evidence == {"b": "yes"}
        assert view.clicks == 1
        view._on_tap(tap)  # a second tap (the selection does not change): clears it
        assert lrn.model.chains.evidence == {}
    finally:
        view.close()


def test_a_click_whose_evidence_is_impossible_is_shown_not_raised():
    """Clicking a state that the evidence already set makes impossible (a = yes, then
    c = no with c = a or b): the page's click handler raised BayesNetError into the
    kernel's log and the chart said nothing; now the status says why and the evidence
    stays as it was."""
    lrn, view = _view()
    try:
        labels = view.source.data["label"]
        view._on_tap(SimpleNamespace(x=0.5, y=float(labels.index("a = yes"))))
        assert lrn.model.chains.evidence == {"a": "yes"}
        view._on_tap(SimpleNamespace(x=0.5, y=float(labels.index("c = no"))))
        assert lrn.model.chains.evidence == {"a": "yes"}
        assert "refused" in view.status.value and "probability zero" in view.status.value
        lrn.fit(progress=None)
        m = lrn.model.chains.marginals()
        from bidlab.learn import Snapshot

        view.render(Snapshot({}, {"marginals": m, "evidence": lrn.model.chains.ev.astype(
            np.float64)}, "done", 1))
        assert "probability zero" in view.status.value  # kept until the next click
        view._on_tap(SimpleNamespace(x=0.5, y=float(labels.index("a = yes"))))
        assert lrn.model.chains.evidence == {}
        view.render(Snapshot({}, {"marginals": m, "evidence": lrn.model.chains.ev.astype(
            np.float64)}, "done", 2))
        assert "refused" not in view.status.value
    finally:
        view.close()
