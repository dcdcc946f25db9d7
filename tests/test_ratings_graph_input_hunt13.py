"""Ratings and graph files as users bring them: which header lines make a table ratings,
and the vertex ids a loaded PageRank may hold."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.cli import main
from bidlab.datasets import read_ratings_csv
from bidlab.datasets.formats import DataFormatError
from bidlab.datasets.graphs import EdgeList
from bidlab.datasets.sniff import load, sniff
from bidlab.learn.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from bidlab.learn.persist_check import StateError, check_state
from bidlab.models import PageRank
from bidlab.models.base import load as load_model

ROWS = "1,10,4.0\n1,20,3.5\n2,10,1.0\n3,30,5.0\n"


# ------------------------------------------------------------------ ratings header lines
@pytest.mark.parametrize("header", ["x1,x2,rating", "age,income,rating", "x,y,rating,time",
                                    "user_age,user_income,rating", "a,b,score",
                                    "movieId,imdbId,tmdbId"])
def test_a_rating_column_alone_does_not_make_a_table_ratings(tmp_path, header):
    path = tmp_path / "table.csv"
    extra = ",0" if header.count(",") == 3 else ""
    path.write_text(header + "\n" + ROWS.replace("\n", extra + "\n"))
    with pytest.raises(DataFormatError) as e:
        sniff(path)
    text = str(e.value)
    assert f"its header {header!r} does not start with a user and an item column" in text
    assert "userId,movieId,rating" in text and "read_ratings_csv(path)" in text
    assert "It looks like a CSV / TSV table" in text
    # the way the message gives to read it as ratings does read it
    assert read_ratings_csv(path).X.nnz == 4


@pytest.mark.parametrize("model", ["sfa", "nmf", "glm"])
def test_train_refuses_a_features_table_named_like_ratings(tmp_path, capsys, model):
    path = tmp_path / "t.csv"
    path.write_text("x1,x2,rating\n" + ROWS)
    assert main(["train", model, "--data", str(path), "--progress", "none"]) == 2
    err = capsys.readouterr().err
    assert "its header 'x1,x2,rating' does not start with a user and an item" in err, err
    assert "drop the header line" in err


@pytest.mark.parametrize("header,order", [
    ("userId,movieId,rating,timestamp", "user-item"),
    ("reviewerID,asin,overall", "user-item"),
    ("user_id,parent_asin,rating,timestamp", "user-item"),
    ("user_id,venue_id,rating", "user-item"),
    ("venueId,userId,rating", "item-user"),
    ("i,u,r", "item-user"),
])
def test_headers_naming_a_user_and_an_item_are_ratings_in_their_order(tmp_path, header,
                                                                       order):
    path = tmp_path / "r.csv"
    extra = ",0" if header.count(",") == 3 else ""
    path.write_text(header + "\n" + ROWS.replace("\n", extra + "\n"))
    assert sniff(path).format == "ratings"
    data = load(path)
    rows, cols = ([1, 2, 3], [10, 20, 30]) if order == "user-item" else ([10, 20, 30],
                                                                          [1, 2, 3])
    np.testing.assert_array_equal(data.extra["user_ids"], rows)
    np.testing.assert_array_equal(data.extra["item_ids"], cols)


# ---------------------------------------------------------------- PageRank's loaded ids
@pytest.fixture
def saved_pagerank(tmp_path):
    A = sp.csr_matrix(([1.0, 1.0, 1.0, 1.0], ([0, 1, 2, 2], [1, 2, 0, 1])), shape=(3, 3))
    pr = PageRank().fit(EdgeList(A, np.array([10, 20, 30])))
    path = tmp_path / "pr.bidlab"
    pr.save(path)
    return pr, load_checkpoint(path)


def _with_ids(ck, tmp_path, value, array=None):
    meta = {k: v for k, v in copy.deepcopy(ck.meta).items()
            if k not in ("format", "version", "written")}
    arrays = dict(ck.arrays)
    if array is not None:
        arrays["a/ids"] = array
        value = {"$array": "a/ids"}
    meta["root"]["state"]["$dict"]["ids_"] = value
    path = tmp_path / "crafted.bidlab"
    save_checkpoint(path, arrays, meta)
    return path


@pytest.mark.parametrize("value,array,what", [
    (None, np.full(3, np.nan), "NaN or infinity"),
    (None, np.array([1.0, np.inf, 2.0]), "NaN or infinity"),
    (None, np.array([True, False, True]), "dtype bool"),
    ([1, "a", None], None, "a list"),
    ([[1], {"$dict": {}}, 2.5], None, "a list"),
    ({"$tuple": [1, 2, 3]}, None, "a tuple"),
])
def test_a_loaded_pagerank_with_odd_vertex_ids_is_refused(saved_pagerank, tmp_path, value,
                                                          array, what):
    _, ck = saved_pagerank
    path = _with_ids(ck, tmp_path, value, array)
    with pytest.raises(CheckpointError, match=rf"PageRank\.ids_: .*{what}.*file is corrupt"):
        load_model(path)


@pytest.mark.parametrize("ids", [np.array([1j, 2j, 3j]), np.array([b"a", b"b", b"c"]),
                                 np.array([1, "a", None], dtype=object)])
def test_pagerank_state_with_ids_of_no_id_kind_is_refused(saved_pagerank, ids):
    pr, _ = saved_pagerank
    with pytest.raises(StateError, match=r"PageRank\.ids_: an (object )?array"):
        check_state(PageRank, {**vars(pr), "ids_": ids}, "PageRank")


@pytest.mark.parametrize("value,array", [
    (None, np.array([7, 8, 9], dtype=np.uint64)),
    (None, np.array([1.5, 2.5, 3.5])),
    ({"$strings": ["a", "b", "c"], "shape": [3], "object": True}, None),
    ({"$strings": ["a", "b", "c"], "shape": [3]}, None),
])
def test_a_loaded_pagerank_keeps_vertex_ids_of_every_kind_fit_gives(saved_pagerank, tmp_path,
                                                                     value, array):
    pr, ck = saved_pagerank
    got = load_model(_with_ids(ck, tmp_path, value, array))
    assert [v for v, _ in got.top(3)] == [got.ids_[i] for i in np.argsort(-pr.scores_,
                                                                           kind="stable")]
    assert load_model(_with_ids(ck, tmp_path, None)).ids_ is None


# ------------------------------------------------------------- ratings files users bring
def test_space_separated_ratings_are_ratings_not_a_graph(tmp_path, capsys):
    """FilmTrust's ``ratings.txt`` (``user item rating``, space-separated) was read as a
    weighted edge list: one id set for users and items, a square graph SFA then factored."""
    path = tmp_path / "ratings.txt"
    path.write_text("1 1 2.0\n1 2 4.0\n2 1 3.5\n3  2  1.0 \n")
    data = load(path)
    assert sniff(path).format == "edge-list" and "ratings" in sniff(path).also
    r = read_ratings_csv(path)
    assert r.X.shape == (3, 2) and r.X.toarray().tolist() == [[2, 4], [3.5, 0], [0, 1]]
    assert main(["train", "sfa", "--data", str(path), "--n_components", "1",
                 "--progress", "none"]) == 0
    said = capsys.readouterr()
    assert "ratings, 3 x 2 (sparse, 4 nonzeros)" in said.out + said.err, said
    headed = tmp_path / "headed.txt"
    headed.write_text("user item rating\n1 10 4\n2 20 3.5\n")
    assert sniff(headed).format == "ratings"
    assert load(headed).X.toarray().tolist() == [[4, 0], [0, 3.5]]
    assert data.X.shape == (3, 3)  # what the file is as an edge list, read as one


@pytest.mark.parametrize("text,line", [("1,2,nan\n1,3,4\n", 1),
                                       ("user,item,rating\n1,2,NaN\n", 2),
                                       ("u\ti\tr\n1\t2\tinf\n2\t2\t3\n", 2)])
def test_a_nan_first_rating_is_named_not_an_unknown_format(tmp_path, text, line):
    path = tmp_path / "r.csv"
    path.write_text(text)
    assert sniff(path).format == "ratings"
    with pytest.raises(ValueError, match=f"ratings row {line} holds NaN or infinity"):
        load(path)


def test_old_mac_line_ends_are_ratings_as_the_reader_reads_them(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b"userId,movieId,rating\r1,10,4\r2,10,3\r")
    assert sniff(path).format == "ratings"
    assert load(path).X.toarray().tolist() == [[4], [3]]


def test_pagerank_refuses_a_csv_of_edges_read_as_ratings(tmp_path, capsys):
    """``src,dst,weight`` lines sniff as ratings: sources and targets were numbered apart
    (users x items), so PageRank ranked a wrong graph of 3 vertices out of 4."""
    path = tmp_path / "edges.csv"
    path.write_text("1,2,1\n2,3,1\n3,4,1\n1,4,1\n")
    assert main(["train", "pagerank", "--data", str(path), "--progress", "none"]) == 2
    err = capsys.readouterr().err
    assert "reads as ratings" in err and "SNAP edge list" in err, err
    tabs = tmp_path / "edges.txt"
    tabs.write_text(path.read_text().replace(",", "\t"))
    assert main(["train", "pagerank", "--data", str(tabs), "--progress", "none"]) == 0
    said = capsys.readouterr()
    assert "top 4 vertices" in said.out + said.err, said


def test_a_trailing_tab_ends_a_ratings_line(tmp_path, capsys):
    """A spreadsheet's TSV with a tab after each rating was refused by the reader (an
    empty time), and so read as a weighted edge list: SFA factored a 5 x 5 graph."""
    path = tmp_path / "r.tsv"
    path.write_text("1\t10\t3\t\n2\t20\t4\t\n3\t10\t5\t\n")
    assert read_ratings_csv(path).X.toarray().tolist() == [[3, 0], [0, 4], [5, 0]]
    assert main(["train", "sfa", "--data", str(path), "--n_components", "1",
                 "--progress", "none"]) == 0
    said = capsys.readouterr()
    assert "ratings, 3 x 2 (sparse, 3 nonzeros)" in said.out + said.err, said


@pytest.mark.parametrize("ids", [np.array([1.0, np.nan, 3.0]), np.array([True, False, True]),
                                 np.array([[1, 2], [3, 4], [5, 6]])])
def test_a_fit_on_ids_a_saved_model_cannot_hold_drops_them_with_a_warning(tmp_path, ids):
    # Such ids were kept and saved, and the file was then refused on load: the fit's work
    # lost. They are only labels: the fit warns, ranks by vertex index, and saves loadably.
    A = sp.csr_matrix(([1.0, 1.0, 1.0, 1.0], ([0, 1, 2, 2], [1, 2, 0, 1])), shape=(3, 3))
    with pytest.warns(UserWarning, match="ids_ is None"):
        pr = PageRank().fit(EdgeList(A, ids))
    assert pr.ids_ is None
    pr.save(tmp_path / "pr.bidlab")
    np.testing.assert_array_equal(load_model(tmp_path / "pr.bidlab").scores_, pr.scores_)
