"""Regression tests for the dataset loaders: files as users have them (byte-order marks,
odd line ends, huge ids, malformed .npz), checked against scikit-learn where it applies."""

from __future__ import annotations

import codecs
import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets import (
    load_matrix_market,
    load_svmlight,
    load_text_folder,
    load_uci_bow,
    read_ratings_csv,
)
from bidlab.datasets.sniff import DataFormatError, load, sniff

BOM = codecs.BOM_UTF8
SVM = b"1 1:0.5 3:2\n-1 2:1\n"


@pytest.mark.parametrize("gz", [False, True])
def test_svmlight_with_a_byte_order_mark_sniffs_and_loads(tmp_path, gz):
    from sklearn.datasets import load_svmlight_file

    plain = tmp_path / "plain.svm"
    plain.write_bytes(SVM)
    path = tmp_path / "bom.svm"
    path.write_bytes(gzip.compress(BOM + SVM) if gz else BOM + SVM)
    assert sniff(path).format == "svmlight"
    X, y = load_svmlight(path)
    Xr, yr = load_svmlight_file(str(plain))
    np.testing.assert_array_equal(X.toarray(), Xr.toarray())
    np.testing.assert_array_equal(y, yr)
    assert load(path).X.shape == (2, 3)


def test_docword_with_a_byte_order_mark_sniffs_and_loads(tmp_path):
    (tmp_path / "docword.t.txt").write_bytes(BOM + b"2\r\n3\r\n3\r\n1 1 2\r\n1 3 1\r\n2 2 5\r\n")
    (tmp_path / "vocab.t.txt").write_bytes(b"apple\nbanana\ncherry\n")
    assert sniff(tmp_path).format == "uci-bow"
    corpus = load_uci_bow(tmp_path)
    np.testing.assert_array_equal(corpus.X.toarray(), [[2, 0, 1], [0, 5, 0]])


def test_sniffing_a_file_with_bare_cr_line_ends_is_a_format_error(tmp_path):
    path = tmp_path / "mac.txt"
    path.write_bytes(b"1 1:0.5\r-1 2:1\r")
    with pytest.raises(DataFormatError, match="cannot tell the format"):
        sniff(path)


@pytest.mark.parametrize("text, match", [
    (b"1 2:1\n-1 3000000000:1\n", r"bad\.svm.*line 2.*3000000000"),  # past int32
    (b"-1 1:1\n1 3:0.5 3:2\n", r"line 2.*indices must increase"),  # repeated
    (b"-1 1:1\n1 4:0.5 2:2\n", r"line 2.*indices must increase"),  # unsorted
    (b"1 1:1\n1,2 2:1\n", r"line 2.*multilabel=True"),
])
def test_svmlight_problems_name_the_file_and_line(tmp_path, text, match):
    path = tmp_path / "bad.svm"
    path.write_bytes(text)
    with pytest.raises(ValueError, match=match):
        load_svmlight(path)


def test_a_ratings_first_row_with_a_bad_rating_is_not_dropped_as_a_header(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b"1,10,good\n2,10,3.5\n")
    with pytest.raises(ValueError, match=r"row 1 holds '1,10,good'"):
        read_ratings_csv(path)


def test_ratings_ids_past_int64_stay_distinct_and_exact(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b"18446744073709551615,1,4\n18446744073709551614,1,3\n"
                     b"18446744073709551614,2,5\n")
    r = read_ratings_csv(path)
    assert r.X.shape == (2, 2) and r.duplicates == 0
    assert [int(u) for u in r.user_ids] == [18446744073709551614, 18446744073709551615]
    path.write_bytes(b"123456789012345678901234,1,4\n123456789012345678901235,1,3\n")
    r = read_ratings_csv(path)
    assert r.X.shape == (2, 1) and r.duplicates == 0
    assert list(r.user_ids) == ["123456789012345678901234", "123456789012345678901235"]


def test_a_header_only_ratings_csv_is_sniffed_as_ratings_and_says_none(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_bytes(b"userId,movieId,rating,timestamp\r\n")
    assert sniff(path).format == "ratings"
    with pytest.raises(ValueError, match="no ratings"):
        load(path)


def test_a_uci_vocabulary_word_holding_a_nel_byte_keeps_the_word_count(tmp_path):
    (tmp_path / "docword.t.txt").write_bytes(b"1\n3\n3\n1 1 1\n1 2 1\n1 3 1\n")
    (tmp_path / "vocab.t.txt").write_bytes(b"caf\xe9\nwait\x85more\nzed\n")  # Latin-1
    assert load_uci_bow(tmp_path).vocab == ["café", "wait\x85more", "zed"]


def test_a_docword_count_past_int64_names_its_line(tmp_path):
    path = tmp_path / "docword.t.txt"
    path.write_bytes(b"1\n3\n1\n1 1 99999999999999999999\n")
    with pytest.raises(ValueError, match=r"line 4: '1 1 99999999999999999999' \(a number"):
        load_uci_bow(path, vocab=False)


def test_matrix_market_with_a_byte_order_mark_and_complex_values(tmp_path):
    path = tmp_path / "m.mtx"
    path.write_bytes(BOM + b"%%MatrixMarket matrix coordinate real general\r\n2 2 1\r\n1 2 3.5\r\n")
    np.testing.assert_array_equal(load_matrix_market(path).toarray(), [[0, 3.5], [0, 0]])
    path.write_text("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 2 3.5 1\n")
    with pytest.raises(ValueError, match="complex"):
        load_matrix_market(path)
    assert load_matrix_market(path, dtype=np.complex128)[0, 1] == 3.5 + 1j


def test_a_scipy_coo_npz_is_sniffed_and_loaded(tmp_path):
    path = tmp_path / "coo.npz"
    sp.save_npz(path, sp.coo_matrix(np.array([[0, 2.0], [3, 0]])))
    assert sniff(path).format == "scipy-npz"
    np.testing.assert_array_equal(load(path).X.toarray(), [[0, 2], [3, 0]])


def _csr_parts(indices: list[int]) -> dict[str, np.ndarray]:
    return {"X__data": np.ones(2), "X__indices": np.array(indices),
            "X__indptr": np.array([0, 1, 2]), "X__shape": np.array([2, 3])}


@pytest.mark.parametrize("arrays, fragment", [
    ({"X": np.array([[1, "a"]], dtype=object)}, "pickled objects"),
    ({"X": np.arange(3.0)}, "not samples x features"),
    ({"X": np.eye(3), "y": np.arange(4)}, "X has 3 rows but y"),
    ({"X": np.eye(3), "y": np.arange(3), "w": np.ones(2)}, "X has 3 rows but w"),
    (_csr_parts([0, 5]), "row 1 has column index 5, outside"),
])
def test_a_malformed_npz_is_a_format_error_naming_the_problem(tmp_path, arrays, fragment):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(DataFormatError, match=fragment):
        load(path)


def _texts(tmp_path):
    for name, text in (("pos/a.txt", "good movie great plot"), ("neg/b.txt", "bad movie"),
                       ("neg/c.txt", "bad plot awful")):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("vocabulary, fragment", [([], "empty vocabulary"),
                                                  (["bad", "bad"], "Duplicate term")])
def test_a_bad_vocabulary_is_not_blamed_on_min_df(tmp_path, vocabulary, fragment):
    with pytest.raises(ValueError, match=fragment) as err:
        load_text_folder(_texts(tmp_path), vocabulary=vocabulary)
    assert "min_df" not in str(err.value) and "vocabulary=" in str(err.value)


def test_one_category_given_as_a_string_is_one_label(tmp_path):
    corpus = load_text_folder(_texts(tmp_path), categories="neg", min_df=1, max_df=1.0)
    assert corpus.label_names == ["neg"] and corpus.n_docs == 2


def test_newsgroups_take_one_category_and_one_removal_as_strings(shared_data):
    from bidlab.datasets import load_20newsgroups

    corpus = load_20newsgroups(shared_data, "test", categories="sci.space", remove="headers",
                               min_df=1)
    assert corpus.label_names == ["sci.space"] and corpus.n_docs == 394  # as scikit-learn
