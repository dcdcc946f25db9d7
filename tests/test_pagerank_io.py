"""PageRank's files and outside parts: saving and pickling, edge lists and Matrix Market,
the command line, the GPU and the benchmark."""

from __future__ import annotations

import gzip
import pickle
import warnings

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from test_pagerank import oracle, random_graph

from bidlab import backend
from bidlab.datasets.graphs import load_matrix_market, load_snap_edges
from bidlab.learn import MODELS
from bidlab.models import PageRank, load


# ------------------------------------------------------------------------ files
def test_save_load_and_pickle(tmp_path):
    A = random_graph(50, 0.06, 14, n_dangling=5)
    pr = PageRank(tol=1e-10, personalization={1: 1.0, 2: 1.0}).fit(A)
    for back in (PageRank.load(pr.save(tmp_path / "pr.bidlab")), load(tmp_path / "pr.bidlab"),
                 pickle.loads(pickle.dumps(pr))):
        assert isinstance(back, PageRank)
        np.testing.assert_array_equal(back.scores_, pr.scores_)
        np.testing.assert_array_equal(back.residuals_, pr.residuals_)
        assert back.n_iter_ == pr.n_iter_ and back.get_params() == pr.get_params()
        assert back.top(3) == pr.top(3)


def test_registered_for_the_command_line():
    assert MODELS["pagerank"] is PageRank


# ------------------------------------------------------------------------ loaders
def test_snap_edge_list_comments_separators_remap_and_gzip(tmp_path):
    text = ("# Directed graph\r\n# FromNodeId\tToNodeId\r\n"
            "10\t20\r\n20 30\r\n30\t10\r\n10\t20\r\n40 40\r\n")
    f = tmp_path / "g.txt"
    f.write_bytes(text.encode())
    g = load_snap_edges(f)
    np.testing.assert_array_equal(g.ids, [10, 20, 30, 40])
    assert g.index_of() == {10: 0, 20: 1, 30: 2, 40: 3}
    assert g.A[0, 1] == 2 and g.A[1, 2] == 1 and g.A[2, 0] == 1 and g.A[3, 3] == 1
    assert g.n_edges == 4
    z = tmp_path / "g.txt.gz"
    z.write_bytes(gzip.compress(text.encode()))
    assert (load_snap_edges(z).A != g.A).nnz == 0
    u = load_snap_edges(f, directed=False)
    assert u.A[1, 0] == 1 and u.A[0, 1] == 1 and u.A[3, 3] == 1  # one edge per pair
    w = tmp_path / "w.txt"
    w.write_text("1 2 0.5\n2 1 1.5\n")
    assert load_snap_edges(w).A[0, 1] == 0.5
    big = tmp_path / "big.txt"  # ids past 2**53 stay exact (read as integers, not floats)
    big.write_text("9007199254740993 9007199254740992\n")
    assert load_snap_edges(big).ids.tolist() == [2**53, 2**53 + 1]
    # the scores of a loaded graph are a PageRank of it
    assert PageRank(tol=1e-10).fit(g).scores_.shape == (4,)


@pytest.mark.parametrize("text, match", [
    ("# only comments\n", "no edges"),
    ("1 2 3 4\n", "4 fields"),
    ("1 x\n", "not a SNAP edge list"),
    ("1 -2\n", "line 1 .* has a negative vertex id"),
    ("1 2.5\n", "two integer vertex ids"),
    ("1 2 0.5\n3 4\n", "not a SNAP edge list"),
])
def test_bad_edge_lists_are_refused(tmp_path, text, match):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_snap_edges(f)


def test_matrix_market_round_trip(tmp_path):
    A = random_graph(20, 0.2, 15)
    scipy.io.mmwrite(tmp_path / "g.mtx", A)
    B = load_matrix_market(tmp_path / "g.mtx")
    assert sp.isspmatrix_csr(B) and (B != A).nnz == 0
    (tmp_path / "g.mtx.gz").write_bytes(gzip.compress((tmp_path / "g.mtx").read_bytes()))
    assert (load_matrix_market(tmp_path / "g.mtx.gz") != A).nnz == 0
    (tmp_path / "bad.mtx").write_text("not a matrix\n")
    with pytest.raises(ValueError, match="not a Matrix Market file"):
        load_matrix_market(tmp_path / "bad.mtx")


# ------------------------------------------------------------------------ GPU
def test_cupy_graphs_are_ranked_on_the_gpu(xp):
    A = random_graph(200, 0.02, 16, n_dangling=15)
    G = backend.to_device(A) if xp is not np else A
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pr = PageRank(tol=1e-10).fit(G)
    assert backend.namespace(pr.model_.modelmats[0].data) is xp
    assert np.abs(pr.scores_ - oracle(A)[0]).sum() <= 1e-6
    cpu = PageRank(tol=1e-10, device="gpu" if xp is not np else "cpu").fit(A)
    np.testing.assert_allclose(cpu.scores_, pr.scores_, atol=1e-12)


# ------------------------------------------------------------------------ command line
def test_bidlab_train_pagerank_on_an_edge_list(tmp_path, capsys):
    from bidlab.cli import main
    from bidlab.datasets.sniff import DataFormatError, sniff

    A = random_graph(40, 0.08, 17, n_dangling=4, loops=False)
    coo = A.tocoo()
    lines = [f"{i + 100}\t{j + 100}" for i, j in zip(coo.row, coo.col, strict=True)]
    lines += [f"{i + 100}\t{i + 100}" for i in range(40) if A[i].nnz == 0][:1]  # a vertex id
    f = tmp_path / "edges"  # no extension: told by content, gzipped
    f.write_bytes(gzip.compress(("# a graph\n" + "\n".join(lines) + "\n").encode()))
    s = sniff(f)
    assert (s.format, s.gzip) == ("edge-list", True)
    out = tmp_path / "pr.bidlab"
    assert main(["train", "pagerank", "--data", str(f), "--tol", "1e-10", "--damping", "0.9",
                 "--save", str(out)]) == 0
    assert "(L1 change)" in capsys.readouterr().out
    g = load_snap_edges(f)
    pr = load(out)
    assert isinstance(pr, PageRank) and pr.damping == 0.9
    assert np.abs(pr.scores_ - oracle(g.A, d=0.9)[0]).sum() <= 1e-6
    assert main(["train", "pagerank", "--data", str(f), "--damping", "1.5"]) == 2
    assert "'damping' parameter of PageRank must be a float in (0, 1)" in capsys.readouterr().err
    folder = tmp_path / "graph"
    folder.mkdir()
    (folder / "edges.txt").write_text("1 2\n2 3\n")
    (folder / "README.md").write_text("# about\n")
    with pytest.raises(DataFormatError, match=r"edges.txt \(edge-list\)"):
        sniff(folder)


def test_a_run_cut_short_resumes_its_iteration_count_and_changes_from_the_checkpoint(
        tmp_path, capsys):
    """``--max_steps`` bounds the run that wrote the checkpoint, not the one resuming it;
    the measured changes and iteration count go on from the checkpoint's; a changed
    ``--max_iter`` (fixed once the model is built) is refused with the way out."""
    from bidlab.cli import main

    A = random_graph(300, 0.03, 18, n_dangling=10, loops=False)
    coo = A.tocoo()
    f = tmp_path / "edges.txt"
    f.write_text("".join(f"{i}\t{j}\n" for i, j in zip(coo.row, coo.col, strict=True)))
    ck, out = tmp_path / "pr.ck", tmp_path / "pr.bidlab"
    base = ["train", "pagerank", "--data", str(f), "--tol", "1e-10", "--progress", "none",
            "--checkpoint", str(ck)]
    assert main([*base, "--max_steps", "3"]) == 0
    assert main([*base, "--save", str(out)]) == 0
    assert "resuming from" in capsys.readouterr().err
    whole = PageRank(tol=1e-10).fit(load_snap_edges(f).A)
    resumed = load(out)
    assert resumed.converged_ and resumed.n_iter_ == whole.n_iter_ > 3
    np.testing.assert_allclose(resumed.residuals_, whole.residuals_, rtol=1e-9)
    assert main([*base, "--max_iter", "500"]) == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and "max_iter" in err and "--restart" in err
    assert main([*base, "--max_iter", "500", "--restart"]) == 0


# ------------------------------------------------------------------------ benchmark smoke
def test_pagerank_benchmark_runs_tiny_and_agrees_with_the_reference(capsys):
    import json

    from bidlab.bench import BENCHMARKS
    from bidlab.bench.pagerank import main as bench_main
    from bidlab.bench.pagerank import rmat

    assert "pagerank" in BENCHMARKS
    A = rmat(8, edge_factor=4, seed=1)
    assert A.shape == (256, 256) and A.sum() == 4 * 256  # duplicates summed into weights
    assert bench_main(["--quick", "--json", "--scale", "8", "--l1", "1e-9"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["benchmark"] == "pagerank" and [g["graph"] for g in doc["graphs"]] == ["rmat-8"]
    row = doc["graphs"][0]
    for s in ("bidlab", "scipy", "networkx", "igraph", "fast_pagerank"):
        if s in row:  # peers not installed are left out
            assert row[s]["seconds"] > 0 and row[s]["l1_to_reference"] <= 1e-6, (s, row[s])
    assert row["bidlab"]["iterations"] < row["scipy"]["iterations"]  # Gauss-Seidel sweeps
    assert any(t["name"].endswith("L1 to the reference") and t["met"] for t in doc["targets"])
