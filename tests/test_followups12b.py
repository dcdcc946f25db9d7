"""The learner's bar at a run that converges early, PageRank's method at a small damping,
and SFA's serving: ``similar_items``' ``min_ratings`` checked, and the estimator after a
checkpoint taken before a fold-in is loaded into its learner."""

from __future__ import annotations

import io
import os
import threading
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets.graphs import load_snap_edges
from bidlab.learn.progress import ended_early
from bidlab.models import SFA, PageRank
from bidlab.models.graph.estimator import POWER_DAMPING, sweeps


class _Terminal(io.StringIO):
    """A stream that says it is a terminal, so fit draws its bar on it."""

    def isatty(self) -> bool:
        return True


def _graph(n: int = 200, density: float = 0.05, seed: int = 0) -> sp.csr_matrix:
    return sp.random(n, n, density=density, random_state=seed, format="csr")


def _last_frame(text: str) -> str:
    """The bar's last frame: what the terminal shows once the run is over."""
    return [f for f in text.replace("\n", "\r").split("\r") if f.strip()][-1]


# -- the bar of a run that converges before n_passes --------------------------------------
@pytest.mark.parametrize("mode", ["tqdm", "text"])
def test_a_run_that_converges_early_ends_its_bar_full_saying_so(mode):
    pr = PageRank()
    lrn = pr.learner(_graph())
    out = _Terminal()
    lrn.fit(progress=mode, file=out)
    assert lrn.state == "done" and pr.converged_
    assert lrn.progress < 0.5  # about 10 of max_iter + 1 = 101 passes
    last = _last_frame(out.getvalue())
    assert "100" in last and "%" in last, last
    assert f"converged after {pr.n_iter_} iterations" in last, last


def test_a_run_of_all_its_passes_is_full_without_a_note():
    pr = PageRank(tol=0.0, max_iter=5)  # max_iter iterations, then the last pass measures
    lrn = pr.learner(_graph())
    out = _Terminal()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lrn.fit(progress="tqdm", file=out)
    assert lrn.progress == 1.0 and ended_early(lrn) is None
    last = _last_frame(out.getvalue())
    assert "100%" in last and "converged" not in last, last


def test_a_stopped_run_does_not_claim_completion():
    pr = PageRank(tol=0.0, max_iter=10**6)  # far more iterations than the test waits for
    lrn = pr.learner(_graph())
    out = _Terminal()
    asked = threading.Event()

    def stop(snapshot):
        if not asked.is_set():
            asked.set()
            lrn.stop(wait=False)

    sub = lrn.observe(stop, rate=20.0)
    try:
        lrn.fit(progress="tqdm", file=out)
    finally:
        sub.cancel()
    assert lrn.state == "stopped" and ended_early(lrn) is None
    last = _last_frame(out.getvalue())
    assert "100%" not in last and "converged" not in last, last


# -- PageRank's method="auto" at a small damping ------------------------------------------
def test_auto_takes_the_power_iteration_at_a_small_damping():
    A = _graph(300, 0.03, 1)
    small = PageRank(damping=0.01).fit(A)
    assert not small.model_.gauss_seidel
    assert small.n_iter_ <= 3
    power = PageRank(damping=0.01, method="power").fit(A)
    assert small.n_iter_ == power.n_iter_
    np.testing.assert_allclose(small.scores_, power.scores_)
    normal = PageRank().fit(A)  # 0.85: sweeps, as before
    assert normal.model_.gauss_seidel
    assert not sweeps("auto", 10, POWER_DAMPING) and sweeps("auto", 10, 0.85)
    assert sweeps("gauss-seidel", 10, 0.01)  # asked for: sweeps whatever the damping


def test_auto_at_a_small_damping_on_snap_needs_no_more_iterations_than_power(shared_data):
    g = load_snap_edges(shared_data / "snap-ca-grqc" / "ca-GrQc.txt")
    for d in (0.001, 0.01, 0.05):
        auto = PageRank(damping=d).fit(g.A)
        power = PageRank(damping=d, method="power").fit(g.A)
        assert auto.n_iter_ == power.n_iter_ <= 3, d


# -- SFA.similar_items' min_ratings --------------------------------------------------------
def _ratings(users: int = 60, items: int = 40, seed: int = 0) -> sp.csr_matrix:
    R = sp.random(users, items, density=0.3, random_state=seed, format="csr")
    R.data = np.ceil(R.data * 5)
    return R


@pytest.fixture(scope="module")
def fitted() -> SFA:
    return SFA(4, max_iter=3, random_state=0).fit(_ratings())


@pytest.mark.parametrize("bad", [-1, -0.5, 1.5, "2", None, True, float("nan"), [2]])
def test_similar_items_refuses_a_min_ratings_that_is_not_a_count(fitted, bad):
    with pytest.raises(ValueError, match=r"min_ratings.*integer >= 0") as err:
        fitted.similar_items(0, n=3, min_ratings=bad)
    assert str(err.value).endswith(f"got {bad!r}")


def test_similar_items_takes_an_integral_min_ratings(fitted):
    a = fitted.similar_items(0, n=3, min_ratings=2)
    b = fitted.similar_items(0, n=3, min_ratings=np.float64(2.0))
    np.testing.assert_array_equal(a[0], b[0])
    fitted.similar_items(0, n=3, min_ratings=np.int64(0))


# -- SFA: a checkpoint from before a fold-in, loaded into the learner ----------------------
def _checkpoint_of_another_seed(tmp_path, R: sp.csr_matrix) -> str:
    """A checkpoint of R's shape made with another seed: loading it rebuilds the model
    from the learner's data (users and items folded in since are not in it)."""
    other = SFA(4, max_iter=2, random_state=1).learner(R)
    other.fit(progress=None)
    return other.save(os.path.join(tmp_path, "before.npz"))


def _folded_in_then_loaded(tmp_path, fold: str, new: sp.csr_matrix) -> tuple[SFA, Any]:
    """An SFA trained on ``_ratings()``, ``new`` folded in by ``fold``, then a checkpoint
    of another seed from before the fold-in loaded into its learner: (estimator, ids)."""
    R = _ratings()
    ck = _checkpoint_of_another_seed(tmp_path, R)
    sfa = SFA(4, max_iter=2, random_state=0)
    lrn = sfa.learner(R)
    lrn.fit(progress=None)
    ids = getattr(sfa, fold)(new)
    lrn.load(ck)
    return sfa, ids


def test_loading_a_checkpoint_from_before_partial_fit_items(tmp_path):
    R = _ratings()
    sfa, ids = _folded_in_then_loaded(tmp_path, "partial_fit_items", _ratings(60, 5, seed=1))
    assert list(ids) == [40, 41, 42, 43, 44]
    with pytest.warns(UserWarning, match=r"items 40\.\.44 are gone"):
        assert sfa.predict([0], [39]).shape == (1,)
    assert (sfa.n_users_, sfa.n_items_) == (60, 40)
    assert sfa.train_.shape == (60, 40)
    assert (sfa.train_ != R).nnz == 0
    with pytest.raises(ValueError, match="item id 40 is out of range"):
        sfa.predict([0], [40])
    items, _ = sfa.recommend(0, n=5)
    assert items.max() < 40
    sfa.similar_items(3, n=5)
    assert np.isfinite(sfa.score(R))
    again = sfa.partial_fit_items(_ratings(60, 5, seed=1))
    assert list(again) == [40, 41, 42, 43, 44] and sfa.predict([0], [44]).shape == (1,)


def test_loading_a_checkpoint_from_before_partial_fit_users(tmp_path):
    R = _ratings()
    sfa, ids = _folded_in_then_loaded(tmp_path, "partial_fit_users", _ratings(5, 40, seed=1))
    assert list(ids) == [60, 61, 62, 63, 64]
    with pytest.warns(UserWarning, match=r"users 60\.\.64 are gone"):
        with pytest.raises(ValueError, match="user id 60 is out of range"):
            sfa.recommend(60, n=3)
    assert (sfa.n_users_, sfa.n_items_) == (60, 40) and sfa.train_.shape == (60, 40)
    assert sfa.user_factors_.shape == (60, 4)
    assert np.isfinite(sfa.score(R))


def test_similar_items_refuses_n_none_as_recommend_does_with_items_never_rated():
    R = sp.hstack([_ratings(), sp.csr_matrix((60, 2))]).tocsr()  # 2 items never rated
    sfa = SFA(4, max_iter=2, random_state=0).fit(R)
    for method, arg in ((sfa.similar_items, 0), (sfa.recommend, 0)):
        with pytest.raises(ValueError, match="takes n, the number of items, as an integer"):
            method(arg, n=None)
