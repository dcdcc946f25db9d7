"""Data files read as a user would write them: ratings CSVs with quotes, byte-order marks,
large or empty ids; SNAP edge lists with trailing comments or a weight on some lines only;
BIF files in the older and the quoted forms; missing files named with what was expected."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from bidlab.datasets import load_snap_edges, read_ratings_csv
from bidlab.datasets.sniff import load, sniff

BOM = b"\xef\xbb\xbf"


# ------------------------------------------------------------------------------ ratings
def test_ratings_with_quoted_fields_read_like_pandas(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b'"userId","movieId","rating"\n"1","10","4.0"\n"2","20","3.5"\n'
                     b'"smith, j","20","1"\n')
    r = read_ratings_csv(path)
    assert list(r.user_ids) == ["1", "2", "smith, j"] and list(r.item_ids) == [10, 20]
    np.testing.assert_array_equal(r.X.toarray(), [[4.0, 0.0], [0.0, 3.5], [0.0, 1.0]])


def test_ratings_with_a_byte_order_mark_and_no_header_keep_numeric_ids(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(BOM + b"1,10,4.0\n2,20,3.5\n")
    r = read_ratings_csv(path)
    assert r.user_ids.dtype.kind == "i" and list(r.user_ids) == [1, 2]
    np.testing.assert_array_equal(r.X.toarray(), [[4.0, 0.0], [0.0, 3.5]])


def test_ratings_ids_beyond_float_precision_stay_distinct(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("user,item,rating\n12345678901234567,1,3\n12345678901234568,1,4\n")
    r = read_ratings_csv(path)
    assert r.duplicates == 0 and r.X.shape == (2, 1)
    assert list(r.user_ids) == [12345678901234567, 12345678901234568]


def test_latin1_ratings_ids_stay_distinct(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b"user,item,rating\nj\xe9r\xf4me,1,3\nj\xe8r\xf6me,1,4\n")
    r = read_ratings_csv(path)
    assert r.duplicates == 0 and list(r.user_ids) == ["jèröme", "jérôme"]


def test_an_empty_ratings_id_is_an_error_naming_the_row(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("user,item,rating\n1,10,4\n,10,3\n")
    with pytest.raises(ValueError, match=r"r\.csv: ratings row 3 has no user id"):
        read_ratings_csv(path)


@pytest.mark.parametrize("text", [
    b"user\titem\trating\n1\t10\t4\n2\t20\t3\n",
    b"user, item, rating\n1, 10, 4\n2, 20, 3\n",
    b'"user","item","rating"\n"1","10","4"\n"2","20","3"\n',
    b"user,item,rating\nalice,book,4\nbob,film,3\n",
    BOM + b"1,10,4\n2,20,3\n",
], ids=["tsv", "spaces", "quoted", "text-ids", "bom"])
def test_bidlab_train_sniffs_every_ratings_file_the_reader_reads(tmp_path, text):
    path = tmp_path / "ratings.csv"
    path.write_bytes(text)
    assert sniff(path).format == "ratings"
    np.testing.assert_array_equal(load(path).X.toarray(), [[4.0, 0.0], [0.0, 3.0]])


# ------------------------------------------------------------------------------- graphs
def test_snap_edges_with_a_weight_on_some_lines_only_are_refused(tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("1 2\n2 3 1.5\n")
    with pytest.raises(ValueError, match=r"e\.txt: not a SNAP .* line 2 .* has 3 fields .* has 2"):
        load_snap_edges(path)


def test_snap_edges_with_trailing_comments_and_a_byte_order_mark(tmp_path):
    path = tmp_path / "e.txt"
    path.write_bytes(BOM + b"# graph\n1\t2  # first\n2\t3\n")
    g = load_snap_edges(path)
    assert list(g.ids) == [1, 2, 3] and g.n_edges == 2
    assert sniff(path).format == "edge-list"


# -------------------------------------------------------------------------------- files
@pytest.mark.parametrize("reader", ["ratings", "edges", "bif"])
def test_a_missing_file_says_what_was_expected_there(tmp_path, reader):
    from bidlab.models.bayesnet import read_bif

    fn, what = {"ratings": (read_ratings_csv, "ratings file"),
                "edges": (load_snap_edges, "SNAP edge list"),
                "bif": (read_bif, "BIF file")}[reader]
    path = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match=rf"nope\.txt not found: expected a {what}"):
        fn(path)


# ---------------------------------------------------------------------------------- BIF
_PARENT_TABLE = """network n { }
variable A { type discrete [ 2 ] { a0, a1 }; }
variable B { type discrete [ 3 ] { b0, b1, b2 }; }
probability ( A ) { table 0.3, 0.7; }
probability ( B | A ) { table 0.1, 0.2, 0.3, 0.5, 0.6, 0.3; }
"""


def test_a_bif_table_with_parents_lists_the_child_state_slowest():
    """As BIF and pgmpy's reader have it: P(b0|a0), P(b0|a1), P(b1|a0), ..."""
    from bidlab.models.bayesnet.bif import parse_bif

    net = parse_bif(_PARENT_TABLE)
    np.testing.assert_allclose(net.cpts[1], [[0.1, 0.3, 0.6], [0.2, 0.5, 0.3]])


def test_bif_in_the_older_quoted_form_reads_and_round_trips(tmp_path):
    """JavaBayes' style: quoted names with spaces and '//' inside, parents without '|'."""
    from bidlab.models.bayesnet import read_bif, write_bif

    text = b'''network "dog problem" {
  property "credit http://example.org/dog" ;
}
variable "family out" { // two values
  type discrete[2] { "true" "false" };
  property "position = (1, 2)" ;
}
variable "light-on" {
  type discrete[2] { "true" "false" };
}
probability ( "family out" ) { table 0.15 0.85 ; }
probability ( "light-on" "family out" ) { table 0.6 0.05 0.4 0.95 ; }
'''
    path = tmp_path / "dog.bif.gz"
    path.write_bytes(gzip.compress(text))
    net = read_bif(path)
    assert net.name == "dog problem" and net.names == ["family out", "light-on"]
    assert net.states == [["true", "false"]] * 2 and net.parents == [[], [0]]
    np.testing.assert_allclose(net.cpts[1], [[0.6, 0.4], [0.05, 0.95]])
    back = read_bif(write_bif(net, tmp_path / "back.bif"))
    assert back.names == net.names and back.name == net.name
    np.testing.assert_array_equal(back.cpts[1], net.cpts[1])


def test_a_uci_vocabulary_with_a_byte_order_mark_names_its_first_word(tmp_path):
    from bidlab.datasets import load_uci_bow

    (tmp_path / "docword.x.txt").write_text("1\n2\n2\n1 1 2\n1 2 1\n")
    (tmp_path / "vocab.x.txt").write_bytes(BOM + b"apple\nbanana\n")
    assert load_uci_bow(tmp_path).vocab == ["apple", "banana"]


def test_a_single_text_file_given_as_a_corpus_is_not_called_missing(tmp_path):
    from bidlab.datasets import load_text_folder

    path = tmp_path / "doc.txt"
    path.write_text("hello world\n")
    with pytest.raises(ValueError, match=r"doc\.txt is a single file, not a folder"):
        load_text_folder(path)
