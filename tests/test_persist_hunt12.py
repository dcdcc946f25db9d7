"""Saving, loading, checkpoints and resume of recently added model state, as a user meets
them: real files, and a new ``bidlab train`` process for each resumed run. A k-means
run cut short and resumed reports the iterations of the whole run, an estimator given
``--random_state`` resumes its own checkpoint, and a saved k-means model whose ``origin``
is damaged is refused by name."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.models import KMeans, PageRank, load


def _bidlab(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bidlab.cli", "train", *args],
                          capture_output=True, text=True, timeout=timeout)


def _whole_and_resumed(tmp_path, common: list[str]) -> tuple[Any, Any, str]:
    """``bidlab train *common`` saved whole, and saved after a run of 3 passes resumed
    from its checkpoint in a new process: (whole, resumed, the checkpoint's path)."""
    full, part, ck = (str(tmp_path / n) for n in ("full.bidlab", "part.bidlab", "ck.npz"))
    _ok(_bidlab(*common, "--save", full))
    _ok(_bidlab(*common, "--checkpoint", ck, "--n_passes", "3"))
    run = _bidlab(*common, "--checkpoint", ck, "--save", part)
    _ok(run)
    assert "resuming from" in run.stderr
    return load(full), load(part), ck


def _ok(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def _far_blobs(tmp_path) -> tuple[str, np.ndarray]:
    """float32 blobs around 1e4 (trained less an origin), as an .npz ``bidlab train`` reads."""
    rng = np.random.default_rng(1)
    centres = rng.normal(0, 10, (8, 4))
    X = (centres[rng.integers(0, 8, 3000)] + rng.normal(0, 2.5, (3000, 4)) + 1e4)
    X = X.astype(np.float32)
    f = tmp_path / "blobs.npz"
    np.savez(f, X=X)
    return str(f), X


def test_lloyd_run_resumed_in_a_new_process_counts_every_iteration(tmp_path):
    """n_iter_ of a Lloyd run cut after 3 passes and resumed by a second ``bidlab train``
    was the resumed part's only (13 of 16): the checkpoint did not keep the count."""
    data, X = _far_blobs(tmp_path)
    common = ["kmeans", "--data", data, "--n_clusters", "8", "--tol", "0", "--holdout",
              "0", "--progress", "none", "--random_state", "0", "--algorithm", "lloyd"]
    a, b, _ = _whole_and_resumed(tmp_path, common)
    assert a.model_.origin is not None and b.model_.origin is not None  # trained shifted
    assert a.n_iter_ > 3
    assert b.n_iter_ == a.n_iter_
    assert b.model_.n_updates == a.model_.n_updates
    np.testing.assert_array_equal(b.cluster_centers_, a.cluster_centers_)
    assert b.inertia_ == a.inertia_
    np.testing.assert_array_equal(b.predict(X), a.predict(X))
    b.partial_fit(X[:500])  # a loaded model trains on, in its own frame
    assert np.abs(b.cluster_centers_ - a.cluster_centers_).max() < 1.0


@pytest.mark.parametrize("model", ["nmf", "sfa"])
def test_resume_with_random_state_given_again(tmp_path, model):
    """The same command with ``--random_state 0`` run twice: the second refused to resume
    ("random_state ... is fixed once the model is built (it is 209652396 ...)"), the seed
    the estimator made of 0 compared with the 0 given; it now resumes, and the pass
    history (NMF's errors, SFA's rmse) equals an uninterrupted run's."""
    rng = np.random.default_rng(0)
    if model == "nmf":
        data = tmp_path / "x.npz"
        np.savez(data, X=rng.random((300, 40)))
        history = "errors"
    else:
        R = sp.random(200, 80, density=0.1, random_state=0, format="coo")
        data = tmp_path / "r.csv"
        data.write_text("user,item,rating\n" + "".join(
            f"{u},{i},{int(r)}\n" for u, i, r in
            zip(R.row, R.col, rng.integers(1, 6, R.nnz), strict=True)))
        history = "rmse"
    common = [model, "--data", str(data), "--n_components", "5", "--random_state", "0",
              "--progress", "none", "--max_iter", "8"]
    a, b, ck = _whole_and_resumed(tmp_path, common)
    assert len(getattr(a.model_, history)) == 8
    assert getattr(b.model_, history) == getattr(a.model_, history)
    other = _bidlab(*common, "--random_state", "1", "--checkpoint", ck)
    assert other.returncode == 2 and "random_state" in other.stderr  # another seed: refused


def _resaved(src: str, dst: str, change) -> str:
    """``src`` written again as ``dst`` with ``change(root, arrays)`` applied."""
    ck = load_checkpoint(src)
    meta = {k: v for k, v in ck.meta.items() if k not in ("format", "version", "written")}
    arrays = dict(ck.arrays)
    change(meta["root"], arrays)
    save_checkpoint(dst, arrays, meta)
    return dst


def _holder(node, key):
    """The JSON object in a saved object's tree that holds attribute ``key``."""
    if isinstance(node, dict):
        if key in node:
            return node
        node = list(node.values())
    if isinstance(node, list):
        for v in node:
            found = _holder(v, key)
            if found is not None:
                return found
    return None


@pytest.fixture(scope="module")
def saved_far_kmeans(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("km")
    _, X = _far_blobs(tmp)
    km = KMeans(8, random_state=0)
    km.learner(X, n_passes=5).fit(progress=None)
    assert km.model_.origin is not None
    return str(km.save(tmp / "km.bidlab")), X


@pytest.mark.parametrize("bad, why", [
    (lambda a: a[:3], "shape (3,)"),
    (lambda a: a.reshape(1, -1), "shape (1, 4)"),
    (lambda a: np.array(5.0), "shape ()"),
    (lambda a: np.full_like(a, np.nan), "NaN"),
    (lambda a: np.full_like(a, np.inf), "NaN or infinity"),
    (lambda a: a.astype(np.int64), "dtype int64"),
])
def test_damaged_kmeans_origin_is_refused(saved_far_kmeans, tmp_path, bad, why):
    """A saved k-means model whose origin has the wrong length failed in predict with
    numpy's broadcast error; NaN / infinite, 2-d or scalar origins loaded silently (NaN:
    every row predicted cluster 0). Now the load names the field and what is wrong."""
    path, X = saved_far_kmeans
    assert (load(path).predict(X[:50]) == KMeans.load(path).predict(X[:50])).all()

    def change(root, arrays):
        key = _holder(root, "origin")["origin"]["$array"]
        arrays[key] = bad(arrays[key])

    bad_path = _resaved(path, str(tmp_path / "bad.bidlab"), change)
    with pytest.raises(CheckpointError, match=r"model_\.origin") as got:
        load(bad_path)
    assert why in str(got.value)


@pytest.mark.parametrize("value", ["abc", [1.0, 2.0, 3.0, 4.0], 5])
def test_kmeans_origin_of_another_kind_is_refused(saved_far_kmeans, tmp_path, value):
    path, _ = saved_far_kmeans

    def change(root, arrays):
        _holder(root, "origin")["origin"] = value

    bad_path = _resaved(path, str(tmp_path / "bad.bidlab"), change)
    with pytest.raises(CheckpointError, match=r"model_\.origin: a (str|list|int)"):
        load(bad_path)


def test_pagerank_resumed_in_a_new_process_keeps_ids(tmp_path):
    """``bidlab train pagerank`` cut short and resumed saves the edge list's ids and the
    scores of an uninterrupted run."""
    rng = np.random.default_rng(3)
    A = sp.coo_matrix((rng.random((80, 80)) < 0.06).astype(float))
    ids = 500 + 7 * np.arange(80)
    f = tmp_path / "edges.txt"
    f.write_text("".join(f"{ids[i]}\t{ids[j]}\n" for i, j in zip(A.row, A.col, strict=True)))
    common = ["pagerank", "--data", str(f), "--progress", "none", "--method", "power"]
    a, b, ck = _whole_and_resumed(tmp_path, common)
    assert isinstance(b, PageRank)
    np.testing.assert_array_equal(b.ids_, a.ids_)
    assert set(b.ids_.tolist()) <= set(ids.tolist())
    np.testing.assert_allclose(b.scores_, a.scores_, rtol=1e-12, atol=0)
    assert b.top(5) == a.top(5) and b.n_iter_ == a.n_iter_
