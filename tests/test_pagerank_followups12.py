"""PageRank and ``bidlab train pagerank`` as a user meets them: Gauss-Seidel sweeps with a
tiny damping (or float32 scores) converge, the non-convergence warning says what was
measured against what and the way out, the command prints the top vertices in the file's
own ids, ``--save`` keeps those ids, the progress lines count iterations, and a run on
ranks does not speak of a ``--holdout 0`` nobody gave."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from bidlab.datasets.graphs import load_snap_edges
from bidlab.models import PageRank, load


def _graph(n: int, p: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = (rng.random((n, n)) < p) * rng.random((n, n))
    return sp.csr_matrix(dense)


def _edge_file(tmp_path, n: int = 60, seed: int = 5) -> tuple[str, np.ndarray]:
    """A SNAP edge list whose ids are arbitrary integers (1000 + 37 i), not 0..n-1."""
    A = _graph(n, 0.08, seed).tocoo()
    ids = 1000 + 37 * np.arange(n)
    f = tmp_path / "edges.txt"
    f.write_text("# a graph\n" + "".join(f"{ids[i]}\t{ids[j]}\n" for i, j in
                                       zip(A.row, A.col, strict=True)))
    return str(f), ids


def _bidlab(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bidlab.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def _fit(A, **kw) -> tuple[PageRank, list[str]]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pr = PageRank(**kw).fit(A)
    return pr, [str(w.message) for w in got if issubclass(w.category, ConvergenceWarning)]


# ----------------------------------------------------------- Gauss-Seidel, tiny damping
@pytest.mark.parametrize(("n", "p", "damping", "dtype"), [
    (20, 0.2, 1e-12, np.float64), (50, 0.1, 1e-13, np.float64),
    (200, 0.03, 1e-3, np.float32), (200, 0.03, 1e-6, np.float32)])
def test_gauss_seidel_with_a_tiny_damping_converges(n, p, damping, dtype):
    """The sweeps' rule divides the change by the damping: it asked for less than rounding
    leaves, and the run took all max_iter sweeps and warned."""
    A = _graph(n, p, 3)
    ref = PageRank(damping=damping, method="power", tol=1e-15, max_iter=1000).fit(A).scores_
    pr, warned = _fit(A, damping=damping, method="gauss-seidel", dtype=dtype)
    assert not warned and pr.converged_ and pr.n_iter_ < 20, (pr.n_iter_, warned)
    assert np.abs(pr.scores_ - ref).sum() <= 50 * np.finfo(dtype).eps
    # tol=0 still means "run every iteration"
    pr, warned = _fit(A, damping=damping, method="gauss-seidel", dtype=dtype, tol=0.0,
                      max_iter=25)
    assert pr.n_iter_ == 25 and not pr.converged_ and warned


def test_the_non_convergence_warning_names_the_tolerance_the_change_and_the_fix():
    A = _graph(200, 0.03, 3)
    n = A.shape[0]
    _, [power] = _fit(A, method="power", max_iter=3)
    assert "did not converge in max_iter=3 iterations" in power
    assert re.search(r"changed the scores by [0-9.e-]+ in L1 norm, above the tolerance "
                     r"tol x n = 2e-06\): raise max_iter", power), power
    pr, [gs] = _fit(A, method="gauss-seidel", max_iter=3)
    bound = pr.model_.last_bound
    assert bound > 1e-8 * n
    assert "did not converge in max_iter=3 Gauss-Seidel sweeps" in gs, gs
    assert f"divided by damping x their total, {bound:.3g}, above the tolerance" in gs, gs
    assert "raise max_iter" in gs and "method='power'" not in gs
    # the change itself is below tol x n, only the sweeps' rule is not met: use power
    pr, _ = _fit(A, method="gauss-seidel", damping=0.05, tol=0.0, max_iter=3)
    change, bound = pr.residuals_[-1], pr.model_.last_bound
    assert change < bound / 10
    tol = float(np.sqrt(change * bound)) / n  # between the two: the same sweeps run
    pr, [gs] = _fit(A, method="gauss-seidel", damping=0.05, tol=tol, max_iter=3)
    assert pr.residuals_[-1] == change < tol * n < pr.model_.last_bound == bound
    assert "or use method='power'" in gs, gs


# ------------------------------------------------------------------ ids kept and shown
def test_fit_on_an_edge_list_names_its_vertices_by_their_ids(tmp_path):
    f, ids = _edge_file(tmp_path)
    g = load_snap_edges(f)
    pr = PageRank().fit(g)
    np.testing.assert_array_equal(pr.ids_, ids)
    best = int(np.argmax(pr.scores_))
    assert pr.top(1) == [(int(ids[best]), float(pr.scores_[best]))]
    back = load(pr.save(tmp_path / "pr.bidlab"))
    np.testing.assert_array_equal(back.ids_, ids)
    assert back.top(5) == pr.top(5)
    assert pr.fit(g.A).ids_ is None and pr.top(1)[0][0] == best  # a plain matrix: indices


def test_bidlab_train_pagerank_prints_the_top_vertices_and_saves_their_ids(tmp_path):
    f, ids = _edge_file(tmp_path)
    out = tmp_path / "pr.bidlab"
    r = _bidlab("train", "pagerank", "--data", f, "--progress", "lines", "--save", str(out))
    assert r.returncode == 0, r.stderr
    ref = PageRank().fit(load_snap_edges(f))
    lines = r.stdout.splitlines()
    head = lines.index("top 10 vertices (vertex id in the data file, score):")
    shown = [(int(m.group(1)), float(m.group(2))) for m in
             (re.fullmatch(r"\s*\d+\.\s+(\d+)\s+(\S+)", line) for line in lines[head + 1:])]
    assert len(shown) == 10 and all(v in set(ids.tolist()) for v, _ in shown)
    assert [v for v, _ in shown] == [v for v, _ in ref.top(10)]
    np.testing.assert_allclose([s for _, s in shown], [s for _, s in ref.top(10)],
                               rtol=1e-5)
    assert re.search(r"PageRank converged in \d+ ", r.stdout), r.stdout
    # the saved estimator maps each score to the vertex's id in the file
    saved = load(out)
    np.testing.assert_array_equal(saved.ids_, ids)
    by_id = dict(zip(saved.ids_.tolist(), saved.scores_, strict=True))
    for v, s in ref.top(10):
        assert by_id[v] == pytest.approx(s, rel=1e-5)
    # the progress lines count iterations and say how the run ended, not passes of 101
    assert "pass " not in r.stderr and "/101" not in r.stderr, r.stderr
    assert "pagerank: iteration   1 (max_iter 100)" in r.stderr, r.stderr
    assert re.search(rf"pagerank: converged after {saved.n_iter_} iterations", r.stderr)


def test_bidlab_train_pagerank_says_when_max_iter_stopped_it(tmp_path):
    f, _ = _edge_file(tmp_path)
    r = _bidlab("train", "pagerank", "--data", f, "--progress", "lines", "--max_iter", "3")
    assert r.returncode == 0, r.stderr
    assert "pagerank: max_iter=3 iterations run, not converged" in r.stderr, r.stderr
    assert "PageRank did not converge in max_iter=3 " in r.stdout, r.stdout
    assert "raise max_iter" in r.stdout


# ----------------------------------------------------------------------------- --ranks
def test_a_run_on_ranks_speaks_of_no_holdout_it_was_not_given(tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install 'bidlab[mpi]'")
    from bidlab.distributed.launch import mpiexec_path

    try:
        mpiexec_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    X = sp.csr_matrix(np.random.default_rng(0).poisson(1.0, (40, 12)).astype(float))
    sp.save_npz(tmp_path / "counts.npz", X)
    r = _bidlab("train", "lda", "--ranks", "2", "--data", str(tmp_path / "counts.npz"),
                "--n_components", "2", "--n_passes", "1", "--progress", "none")
    assert r.returncode == 0, r.stderr
    done = next(line for line in r.stdout.splitlines() if line.startswith("done:"))
    assert "--holdout" not in done and "none is held out on 2 ranks" in done, done
