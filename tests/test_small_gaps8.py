"""The SFA view's watched item ids, NMF on a float32 sparse frame, the batch size ranks
take when an estimator's ``batch_size`` is None, and the CSV hint for a two-line table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import needs_mpi

from bidlab.learn.comm import SingleProcess, ThreadGroup

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ SimilarItemsView ids
def _ratings(seed: int = 0, n_users: int = 40) -> sp.csr_matrix:
    """``n_users`` x 12 ratings, every user with one in the first column at least."""
    rng = np.random.default_rng(seed)
    full = rng.standard_normal((n_users, 3)) @ rng.standard_normal((3, 12)) + 3
    mask = rng.random(full.shape) < 0.5
    mask[:, 0] = True
    rows, cols = np.nonzero(mask)
    return sp.csr_matrix((full[rows, cols], (rows, cols)), shape=full.shape)


@pytest.mark.parametrize("kw, said", [
    ({"items": [1.5]}, "item 1.5 is not an item id"),
    ({"items": [0, True]}, "item True is not an item id"),
    ({"items": ["3"]}, "item '3' is not an item id"),
    ({"items": 5}, "items is a list of item ids (e.g. [5] for one)"),
    ({"watch": -1}, "watch is how many items to watch, a whole number >= 1; got -1"),
    ({"watch": 0}, "watch is how many items to watch, a whole number >= 1; got 0"),
    ({"watch": 2.5}, "watch is how many items to watch, a whole number >= 1; got 2.5"),
])
def test_the_sfa_view_refuses_item_ids_it_would_truncate_or_misread(kw, said):
    """``items=[1.5]`` watched item 1 and ``watch=-1`` every item but one, silently."""
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.widgets import SimilarItemsView

    from bidlab.models import SFA

    X = _ratings()
    lrn = SFA(2, random_state=0).learner(X)
    titles = [f"t{j}" for j in range(X.shape[1])]
    with pytest.raises(ValueError, match="SimilarItemsView: ") as got:
        SimilarItemsView(lrn, titles, train=X, **kw)
    assert said in str(got.value)


def test_the_sfa_view_takes_whole_ids_given_as_numbers_of_any_type():
    pytest.importorskip("ipywidgets", reason="bidlab.widgets needs the viz extra")
    pytest.importorskip("jupyter_bokeh", reason="bidlab.widgets needs the viz extra")
    from bidlab.widgets import SimilarItemsView

    from bidlab.models import SFA

    X = _ratings()
    lrn = SFA(2, random_state=0).learner(X)
    titles = [f"t{j}" for j in range(X.shape[1])]
    for kw, want in (({"items": [np.int64(2), 3.0]}, [2, 3]),
                     ({"items": np.array([4, 1])}, [4, 1]),
                     ({"watch": np.int32(2)}, [0, None]),
                     ({"watch": 2.0}, [0, None])):
        view = SimilarItemsView(lrn, titles, train=X, **kw)
        try:
            assert len(view.items) == 2 and all(type(i) is int for i in view.items)
            assert all(w is None or w == i for w, i in zip(want, view.items, strict=True))
        finally:
            view.close()


# ------------------------------------------------------------------ NMF on a sparse frame
def test_nmf_follows_a_float32_sparse_frame_as_a_float32_csr():
    pd = pytest.importorskip("pandas")
    from bidlab.models import NMF

    X = sp.random(30, 10, density=0.5, format="csr", dtype=np.float32, random_state=0)
    frame = pd.DataFrame.sparse.from_spmatrix(X)
    got = NMF(3, max_iter=3, random_state=0).fit(frame)
    want = NMF(3, max_iter=3, random_state=0).fit(X)
    assert got.model_.dtype == np.float32 and got.components_.dtype == np.float32
    np.testing.assert_allclose(got.components_, want.components_, rtol=1e-5, atol=1e-6)
    assert got.transform(frame).dtype == np.float32
    streamed = NMF(3, random_state=0).partial_fit(frame)
    assert streamed.components_.dtype == np.float32
    # a frame whose columns differ still trains in float64, as a float64 CSR does
    mixed = frame.astype({0: pd.SparseDtype(np.float64, 0.0)})
    assert NMF(3, max_iter=2, random_state=0).fit(mixed).components_.dtype == np.float64


def test_sfa_still_follows_a_float32_sparse_frame():
    pd = pytest.importorskip("pandas")
    from bidlab.models import SFA

    frame = pd.DataFrame.sparse.from_spmatrix(_ratings().astype(np.float32))
    assert SFA(2, max_iter=1, random_state=0).fit(frame).model_.dtype == np.float32


# ------------------------------------------------------------------ batch sizes on ranks
def _docs(n: int, seed: int = 0) -> sp.csr_matrix:
    """``n`` short documents (a few tokens each, none empty) over 50 words."""
    rng = np.random.default_rng(seed)
    C = rng.poisson(0.1, (n, 50)).astype(np.float64)
    C[np.arange(n), rng.integers(0, 50, n)] += 1
    return sp.csr_matrix(C)


def _on_threads(size: int, each):
    """``each(comm, rank)`` on ``size`` in-process ranks; their results by rank."""
    import threading

    group, out = ThreadGroup(size), [None] * size

    def run(r: int) -> None:
        out[r] = each(group.comm(r), r)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_a_rank_takes_the_batch_size_sfa_takes_for_none_all_its_users():
    """SFA's batch_size None is every user, one minibatch a pass; ranks took 1000 rows."""
    from bidlab.distributed.sharding import chosen_batch_size, rank_batch_size, shard_range
    from bidlab.models import SFA

    X = _ratings(n_users=2401)
    single = SFA(2).learner(X)
    assert chosen_batch_size(SFA(2), None, 2401, 1, rows=X,
                             comm=SingleProcess()) == single.source.batch_size == 2401
    assert chosen_batch_size(SFA(2), 64, 2401, 1, rows=X, comm=SingleProcess()) == 64
    assert chosen_batch_size(SFA(2, batch_size=300), None, 2401, 1, rows=X) == 300

    def each(comm, r):
        a, b = shard_range(2401, r, 2)
        bs = chosen_batch_size(SFA(2), None, 2401, 2, rows=X[a:b], comm=comm)
        return bs, rank_batch_size(2401, r, 2, bs)

    got = _on_threads(2, each)
    # both ranks agree on the larger share (1201 rows), so each makes one minibatch
    assert got == [(1201, 1200), (1201, 1201)]


@pytest.mark.parametrize("name", ["LDA", "LDAGibbs"])
def test_a_rank_takes_the_batch_size_lda_takes_for_none(name):
    """LDA's batch_size None is a default per device, raised for short documents (thousands
    of documents of a few tokens here); ranks took 1000 rows."""
    import bidlab.models
    from bidlab.distributed.sharding import chosen_batch_size

    cls = getattr(bidlab.models, name)
    C = _docs(9000)
    want = cls(2).learner(C).source.batch_size
    assert want != 1000
    assert chosen_batch_size(cls(2), None, 9000, 1, rows=C) == want
    # a rank asks on its own rows; the ranks agree on the largest of their answers
    parts = [_docs(3000, seed=1) * 3, C[:6000]]
    mine = [cls(2).learner(p).source.batch_size for p in parts]
    assert mine[0] != mine[1]
    got = _on_threads(2, lambda comm, r: chosen_batch_size(cls(2), None, 9000, 2,
                                                           rows=parts[r], comm=comm))
    assert got == [max(mine)] * 2


def test_without_rows_or_a_rule_the_fallback_stays():
    from bidlab.distributed.sharding import chosen_batch_size
    from bidlab.models import GLM, SFA

    assert chosen_batch_size(SFA(2), None, 5000, 2) == 1000  # no rows to ask on
    assert chosen_batch_size(GLM(), None, 2000, 2) == 63
    with pytest.raises(ValueError, match="comm"):
        chosen_batch_size(SFA(2), None, 5000, 2, rows=_ratings())


@pytest.mark.gpu
def test_a_rank_takes_ldas_gpu_batch_size():
    pytest.importorskip("cupy")
    from bidlab import backend
    from bidlab.distributed.sharding import chosen_batch_size
    from bidlab.models import LDA

    if not backend.gpu_available():
        pytest.skip("no CUDA device")
    C = _docs(40000) * 64  # 64 tokens a document or more: the token floor stays below
    want = LDA(2, device="gpu").learner(C).source.batch_size
    assert want != LDA(2).learner(C).source.batch_size
    assert chosen_batch_size(LDA(2, device="gpu"), None, 40000, 1, rows=C) == want


_PROGRAM = """
import sys
from bidlab.distributed.train import main
sys.exit(main(["sfa", "--data", sys.argv[1], "--n_components", "2", "--max_iter", "2",
               "--progress", "none"]))
"""


@needs_mpi
def test_sfa_on_two_ranks_trains_each_ranks_users_in_one_minibatch(tmp_path):
    """2,400 users on 2 ranks: each rank's 1,200 users made two minibatches of 600 a pass
    (the 1000-row fallback); SFA's None is all of them, one minibatch a pass."""
    from bidlab.distributed.launch import mpiexec_path

    rng = np.random.default_rng(0)
    lines = [f"{u}\t{100 + i}\t{rng.integers(1, 6)}" for u in range(2400)
             for i in rng.choice(10, 3, replace=False)]
    (tmp_path / "r.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "prog.py").write_text(_PROGRAM)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, str(tmp_path / "prog.py"),
                           str(tmp_path / "r.tsv")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # rank 0's 1,200 users, one minibatch in each of the 2 passes
    assert "done: 2 minibatches, 2400 samples" in done.stdout, done.stdout


# ------------------------------------------------------------------ CSV hint
def test_a_two_line_csv_without_a_final_newline_gets_the_csv_hint(tmp_path):
    from bidlab.datasets.formats import DataFormatError, looks_table, sniff_file

    assert looks_table(b"name,height\nann,1.7")
    assert looks_table(b"name\theight\nann\t1.7\n")
    assert not looks_table(b"name,height\n")
    path = tmp_path / "people.csv"
    path.write_bytes(b"name,height\nann,1.7")
    with pytest.raises(DataFormatError, match="It looks like a CSV / TSV table"):
        sniff_file(path)


def test_a_table_cut_short_still_leaves_its_cut_line_out():
    """A head cut at the bytes read is judged on its whole lines: the partial last one
    (here 21 lines of 3,005 bytes, then the start of a line, with no comma yet) is not."""
    from bidlab.datasets.formats import _HEAD_BYTES, looks_table

    lines = (b"x" * 3000 + b",y,z\n") * 21
    head = lines + b"w" * (_HEAD_BYTES - len(lines))
    assert len(head) == _HEAD_BYTES
    assert looks_table(head)
    assert not looks_table(head, complete=True)  # the whole file: its last line counts
