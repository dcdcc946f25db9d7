"""Topic tools and reported progress: coherence refuses a ``top_n`` whose working arrays
would not fit, the pyLDAvis export's relevance grid ends at lambda = 1 whatever the step,
and a run that converged reports progress 1 to its observers, the learners panel and the
dashboard (a stopped or failed one does not)."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.lab.snapshot import describe
from bidlab.models import LDA, PageRank
from bidlab.models.lda import coherence as coherence_module
from bidlab.models.lda.coherence import coherence
from bidlab.models.lda.export import prepared_data, relevance


# -- coherence: top_n and the memory its pairs take ---------------------------------------
def _docs(n_docs: int, V: int, seed: int = 0) -> sp.csr_matrix:
    X = sp.random(n_docs, V, density=0.01, format="csr", random_state=seed)
    X.data = np.ceil(X.data * 3)
    return X


@pytest.mark.parametrize("convention", ["gensim", "tomotopy"])
@pytest.mark.parametrize("measure", ["c_npmi", "c_v"])
def test_a_huge_top_n_is_refused_before_its_arrays_are_built(measure, convention):
    V = 20_000  # top_n capped at V still means 3 x 20000 x 20000 pairs: tens of GiB
    topics = np.random.default_rng(0).random((3, V))
    with pytest.raises(ValueError, match=r"top_n=1000000 .*GiB.*MEMORY_BUDGET.*smaller "
                                         r"top_n \(top_n=\d+ fits\)"):
        coherence(topics, _docs(40, V), measure, top_n=10**6, convention=convention)


def test_the_estimators_coherence_refuses_a_huge_top_n():
    X = _docs(60, 20_000, seed=1)
    X = (X + sp.eye(60, 20_000, format="csr")).tocsr()  # every document holds a word
    est = LDA(3, n_passes=1, batch_size=60, random_state=0).fit(X)
    with pytest.raises(ValueError, match="MEMORY_BUDGET"):
        est.coherence(X, top_n=10**6)
    assert np.isfinite(est.coherence(X, top_n=10))


def test_the_top_n_suggested_fits_and_a_top_n_past_the_vocabulary_is_capped(monkeypatch):
    rng = np.random.default_rng(2)
    V = 2000
    topics, X = rng.random((3, V)), _docs(80, V, seed=2)
    monkeypatch.setattr(coherence_module, "MEMORY_BUDGET", 2**20)  # 1 MiB
    with pytest.raises(ValueError, match=r"top_n=\d+ fits") as err:
        coherence(topics, X, "c_npmi", top_n=10**6)
    fits = int(re.search(r"top_n=(\d+) fits", str(err.value)).group(1))
    assert 2 <= fits < V
    assert np.isfinite(coherence(topics, X, "c_npmi", top_n=fits))
    monkeypatch.setattr(coherence_module, "MEMORY_BUDGET", 512)  # not even two words
    with pytest.raises(ValueError, match=r"no top_n fits for 3 topics: raise .*MEMORY_BUDGET"):
        coherence(topics, X, "c_npmi", top_n=10)
    monkeypatch.setattr(coherence_module, "MEMORY_BUDGET", 2**20)
    # within the budget, a top_n past the vocabulary scores the whole vocabulary
    small = rng.random((2, 30))
    Xs = _docs(200, 30, seed=3) + sp.eye(200, 30, format="csr")
    assert coherence(small, Xs, "c_v", top_n=10**6) == coherence(small, Xs, "c_v", top_n=30)


@pytest.mark.parametrize("bad", [0, 1, -5, 2.0, True, np.True_, "10", None])
def test_top_n_must_be_an_int_of_two_or_more(bad):
    X = _docs(50, 40) + sp.eye(50, 40, format="csr")
    with pytest.raises(ValueError, match=r"top_n must be an int >= 2"):
        coherence(np.random.default_rng(0).random((2, 40)), X, top_n=bad)


# -- the pyLDAvis export: the relevance grid ----------------------------------------------
def _listed(d: dict, t: int) -> set[str]:
    tinfo = d["tinfo"]
    return {term for term, cat in zip(tinfo["Term"], tinfo["Category"], strict=True)
            if cat == f"Topic{t}"}


def _expected(P: np.ndarray, share: np.ndarray, vocab: list[str], grid: np.ndarray,
              R: int) -> set[str]:
    out: set[str] = set()
    for lam in grid:
        rel = relevance(P[None, :], share, float(lam))[0]
        out.update(vocab[j] for j in np.argsort(-rel, kind="stable")[:R])
    return out


@pytest.mark.parametrize("step, grid", [
    (0.3, [0.0, 0.3, 0.6, 0.9, 1.0]),
    (0.7, [0.0, 0.7, 1.0]),
    (1.0, [0.0, 1.0]),
    (0.1, np.linspace(0.0, 1.0, 11)),
    (0.25, [0.0, 0.25, 0.5, 0.75, 1.0]),
])
def test_the_relevance_grid_ends_at_one_whatever_the_step(step, grid):
    # topic 1's most probable word "a" is common (low lift): it tops its list only at
    # lambda = 1, which a grid of 0, 0.3, 0.6, 0.9 never reached
    topics = np.array([[0.40, 0.39, 0.21], [0.90, 0.01, 0.09]])
    X = sp.csr_matrix(np.array([[40, 5, 5], [40, 5, 5]]))
    theta = np.array([[0.5, 0.5], [0.5, 0.5]])
    vocab = ["a", "b", "c"]
    d = prepared_data(topics, theta, X, vocab, lambda_step=step, R=1)
    share = np.array([0.8, 0.1, 0.1])
    for t, orig in enumerate(d["topic.order"], start=1):
        P = topics[orig - 1] / topics[orig - 1].sum()
        assert _listed(d, t) == _expected(P, share, vocab, np.asarray(grid), 1), (t, step)
    order = d["topic.order"]
    assert "a" in _listed(d, order.index(1) + 1)  # topic 1's top word by probability


# -- progress reported for a run that converged, was stopped or failed --------------------
def _graph() -> sp.csr_matrix:
    return sp.random(200, 200, density=0.05, random_state=0, format="csr")


def _watched(lrn):
    """The (state, progress) of every snapshot ``lrn``'s observer gets."""
    seen: list[tuple[str, float]] = []
    sub = lrn.observe(lambda s: seen.append((s.state, s.metrics["progress"])), rate=1000.0)
    return seen, sub


def test_a_converged_run_reports_progress_one_to_observers_and_the_panel():
    pr = PageRank()
    lrn = pr.learner(_graph())
    seen, sub = _watched(lrn)
    try:
        lrn.fit(progress=None)
        assert lrn._hub.wait_idle()
    finally:
        sub.cancel()
    assert lrn.state == "done" and pr.converged_
    assert lrn.progress < 0.5  # where the training stopped: about 10 of 101 passes
    assert seen[-1] == ("done", 1.0)
    assert lrn.metrics["progress"] == 1.0 and lrn.summary()["progress"] == 1.0
    assert describe(lrn)["progress"] == 1.0
    assert all(p < 1.0 for state, p in seen[:-1] if state == "running")


def test_a_stopped_run_reports_where_it_stopped():
    pr = PageRank(tol=0.0, max_iter=10**6)
    lrn = pr.learner(_graph())
    asked = threading.Event()

    def stop(snapshot):
        if not asked.is_set():
            asked.set()
            lrn.stop(wait=False)

    seen, sub = _watched(lrn)
    stopper = lrn.observe(stop, rate=20.0)
    try:
        lrn.fit(progress=None)
        assert lrn._hub.wait_idle()
    finally:
        sub.cancel()
        stopper.cancel()
    assert lrn.state == "stopped"
    assert seen[-1][0] == "stopped" and seen[-1][1] < 1.0
    assert lrn.metrics["progress"] < 1.0 and describe(lrn)["progress"] < 1.0


def test_a_run_that_converged_then_failed_does_not_report_completion(monkeypatch):
    pr = PageRank()
    lrn = pr.learner(_graph())
    ended = lrn.model.run_ended

    def run_ended(state, error):  # the end of the run fails (say, a full disk)
        ended(state, error)
        if state == "done":
            raise OSError("No space left on device")

    monkeypatch.setattr(lrn.model, "run_ended", run_ended)
    seen, sub = _watched(lrn)
    try:
        with pytest.raises(OSError, match="No space"):
            lrn.fit(progress=None)
        assert lrn._hub.wait_idle()
    finally:
        sub.cancel()
    assert lrn.state == "failed" and pr.model_.converged
    assert seen[-1][0] == "failed" and seen[-1][1] < 1.0
    assert lrn.metrics["progress"] < 1.0 and describe(lrn)["progress"] < 1.0


def test_the_dashboard_of_a_converged_run_shows_a_full_bar():
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.widgets import Dashboard  # noqa: PLC0415 - the viz extra

    pr = PageRank()
    lrn = pr.learner(_graph())
    dash = Dashboard(lrn)
    dash.pump.stop()  # each render is the test's own
    try:
        lrn.fit(progress=None)
        dash.render(None)
        assert dash.progress.value == 1.0 and dash.progress.bar_style == "success"
        later = Dashboard(lrn)  # one built after the run
        later.pump.stop()
        assert later.progress.value == 1.0
        later.close()
    finally:
        dash.close()
