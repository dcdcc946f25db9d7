"""Users' own data files as ``bidlab train --data`` reads them: a BIF file saved with a
byte-order mark, a folder of UTF-8 text documents, ratings CSVs with leading blank lines or
a bad value near the top, errors that name the line of the file (ratings, SNAP edge lists),
and zip files that are not an .npz."""

from __future__ import annotations

import gzip
import io
import zipfile

import numpy as np
import pytest

from bidlab.cli.train_data import load_data
from bidlab.datasets.formats import DataFormatError
from bidlab.datasets.graphs import load_snap_edges
from bidlab.datasets.movielens import read_ratings_csv
from bidlab.datasets.sniff import sniff
from bidlab.models.bayesnet.bif import parse_bif, read_bif

BOM = b"\xef\xbb\xbf"
BIF = b"""network test { }
variable A { type discrete [ 2 ] { yes, no }; }
variable B { type discrete [ 2 ] { yes, no }; }
probability ( A ) { table 0.3, 0.7; }
probability ( B | A ) { (yes) 0.9, 0.1; (no) 0.2, 0.8; }
"""


# ------------------------------------------------------------------------------ BIF
@pytest.mark.parametrize("gz", [False, True])
def test_a_bif_file_saved_with_a_byte_order_mark_reads(tmp_path, gz):
    path = tmp_path / "net.bif"
    data = (BOM + BIF).replace(b"\n", b"\r\n")  # as a Windows editor saves it
    path.write_bytes(gzip.compress(data) if gz else data)
    net = read_bif(path)
    assert net.names == ["A", "B"]
    np.testing.assert_allclose(net.cpts[1], [[0.9, 0.1], [0.2, 0.8]])
    assert parse_bif((BOM + BIF).decode("utf-8")).names == ["A", "B"]


# ----------------------------------------------------------------------- text folders
def test_a_folder_of_utf8_documents_is_counted_in_its_own_words(tmp_path):
    root = tmp_path / "docs"
    for name, data in {"a/1.txt": "café naïve résumé\r\n".encode(),
                       "a/2.txt": BOM + "café über straße\n".encode(),
                       "b/3.txt": "naïve café\n".encode("latin-1")}.items():  # Latin-1
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    got = load_data(str(root), "lda", min_df=1, max_df=1.0)
    assert got.vocab == ["café", "naïve", "résumé", "straße", "über"]
    np.testing.assert_array_equal(got.X.toarray(), [[1, 1, 1, 0, 0], [1, 0, 0, 1, 1],
                                                    [1, 1, 0, 0, 0]])
    assert got.label_names == ["a", "b"] and got.y.tolist() == [0, 0, 1]


# ---------------------------------------------------------------------------- ratings
@pytest.mark.parametrize("sep", [",", "\t"])
def test_ratings_with_blank_lines_before_the_header_load(tmp_path, sep):
    path = tmp_path / "ratings.csv"
    rows = ["userId", "movieId", "rating"], ["1", "10", "4.0"], ["2", "10", "3.5"], \
        ["1", "11", "2"]
    path.write_text("\n\r\n" + "".join(sep.join(r) + "\n" for r in rows))
    assert sniff(path).format == "ratings"
    r = read_ratings_csv(path)
    assert r.user_ids.tolist() == [1, 2] and r.item_ids.tolist() == [10, 11]
    np.testing.assert_array_equal(r.X.toarray(), [[4.0, 2.0], [3.5, 0.0]])
    got = load_data(str(path), "nmf")
    np.testing.assert_array_equal(got.X.toarray(), [[4.0, 2.0], [3.5, 0.0]])


def _ratings_with_gap(tail: str) -> str:
    """A header (line 1), ratings on lines 2..61, a blank line 62, then ``tail`` at 63."""
    return ("user,item,rating\n" + "".join(f"{u},{u % 7},3\n" for u in range(60)) + "\n"
            + tail)


@pytest.mark.parametrize("tail, match", [
    ("5,6,x\n", r"ratings row 63 holds '5,6,x': the rating"),
    ("\n5,6,nan\n", r"ratings row 64 holds NaN or infinity"),
    ("5,,3\n", r"ratings row 63 has no item id"),
    ("5,6,3,4\n", r"columns changed from 3 to 4 at line 63, '5,6,3,4'"),
    ('"5",6,3,4\n', r"columns changed from 3 to 4 at line 63"),  # the quoted-fields path
])
def test_ratings_errors_name_the_line_of_the_file(tmp_path, tail, match):
    path = tmp_path / "ratings.csv"
    path.write_text(_ratings_with_gap(tail))
    with pytest.raises(ValueError, match=match) as err:
        load_data(str(path), "nmf")
    assert str(path) in str(err.value) and "usecols" not in str(err.value)


@pytest.mark.parametrize("text, match", [
    ("userId,movieId,rating\n1,10,good\n2,10,3\n", r"row 2 holds '1,10,good'"),
    ("userId,movieId,rating\n1,10,4\n2,10,nan\n", r"row 3 holds NaN"),
    ("user,item,rating,time\n1,10,4,2020-01-01\n2,10,3,2020-01-02\n",
     r"row 2 holds '1,10,4,2020-01-01': the rating \(and time\) must be numbers"),
])
def test_a_ratings_file_with_a_bad_value_near_the_top_says_where(tmp_path, text, match):
    path = tmp_path / "ratings.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_data(str(path), "nmf")


def test_a_table_that_is_not_ratings_still_gets_the_csv_hint(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("user,name,city\nann,Ann,Oslo\nbob,Bob,Rome\n")
    with pytest.raises(DataFormatError, match="It looks like a CSV / TSV table"):
        sniff(path)


# ------------------------------------------------------------------------- edge lists
GOOD_EDGES = "".join(f"{i}\t{i + 1}\n" for i in range(60))


@pytest.mark.parametrize("text, match", [
    ("# a\n# b\n# c\n# d\n" + GOOD_EDGES + "7\tx\n1\t2\n", r"line 65 holds b'7\\tx'"),
    ("# a\n" + GOOD_EDGES.replace("\n", "\t1\n") + "\n3\t4\tx\n", r"line 63 holds"),
    ("# a\n# b\n" + GOOD_EDGES + "7\t8\t9\n", r"line 63 \(b'7\\t8\\t9'\) has 3 fields"),
    ("# a\n# b\n" + GOOD_EDGES + "\n\n-7\t8\n", r"line 65 \(b'-7\\t8'\) has a negative"),
    ("# a\r\n1 2\r\n\r\n3 99999999999999999999\r\n", r"line 4 holds"),
])
def test_edge_list_errors_name_the_line_of_the_file(tmp_path, text, match):
    path = tmp_path / "graph.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as err:
        load_snap_edges(path)
    assert str(path) in str(err.value) and "row 60" not in str(err.value)


# ------------------------------------------------------------------------- zip files
def test_a_gzipped_npz_says_to_decompress_it(tmp_path):
    buf = io.BytesIO()
    np.savez(buf, X=np.eye(3), y=np.arange(3))
    path = tmp_path / "data.npz.gz"
    path.write_bytes(gzip.compress(buf.getvalue()))
    with pytest.raises(DataFormatError, match=r"data\.npz\.gz is a gzip-compressed zip file "
                       r".*gunzip -c data\.npz\.gz > data\.npz"):
        load_data(str(path), "glm")


def test_a_zip_of_text_documents_is_not_called_an_npz(tmp_path):
    path = tmp_path / "docs.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("docs/a/1.txt", "hello world")
        z.writestr("docs/b/2.txt", "another document")
    with pytest.raises(DataFormatError) as err:
        load_data(str(path), "lda")
    text = str(err.value)
    assert "zip archive of 2 files" in text and "not a numpy .npz" in text
    assert "unzip it and pass the folder" in text and "without features" not in text
    np.savez(tmp_path / "bad.npz", x=np.eye(2))  # an .npz, but without X: as before
    with pytest.raises(DataFormatError, match="an .npz without features"):
        sniff(tmp_path / "bad.npz")
