"""Regression tests: ratings CSVs with short header names, UTF-8 text folders, and NMF's
score on rows with nothing observed."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_datasets import _tarball

from bidlab.datasets import load_text_folder, read_text_documents
from bidlab.datasets.sniff import DataFormatError, load, sniff
from bidlab.models import NMF

RATINGS = [[4.0, 0.0], [0.0, 3.0]]


# --------------------------------------------------------------- ratings header names
@pytest.mark.parametrize("header", [
    "u,i,r", "u,i,r,t", "uid,iid,score", "user,item,rating", "user_id,item_id,stars",
    "Customer ID,Product_ID,Stars", "u\ti\tr", "userIdx,isbn,value,time",
])
def test_a_ratings_csv_with_short_user_and_item_names_is_ratings(tmp_path, header):
    sep = "\t" if "\t" in header else ","
    extra = f"{sep}0" if header.count(sep) == 3 else ""
    path = tmp_path / "data.csv"
    path.write_text(f"{header}\n1{sep}10{sep}4{extra}\n2{sep}20{sep}3{extra}\n")
    assert sniff(path).format == "ratings"
    data = load(path)
    np.testing.assert_array_equal(data.X.toarray(), RATINGS)
    np.testing.assert_array_equal(data.extra["user_ids"], [1, 2])
    np.testing.assert_array_equal(data.extra["item_ids"], [10, 20])


def test_a_short_named_ratings_csv_with_text_ids_loads(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("uid,iid,r\nann,book,4\nbob,film,3\n")
    data = load(path)
    np.testing.assert_array_equal(data.X.toarray(), RATINGS)
    assert list(data.extra["user_ids"]) == ["ann", "bob"]


@pytest.mark.parametrize("header", ["movieId,userId,rating", "i,u,r", "item_id,user_id,r,t"])
def test_a_header_naming_the_item_column_first_reads_in_that_order(tmp_path, header):
    extra = ",0" if header.count(",") == 3 else ""
    path = tmp_path / "data.csv"
    path.write_text(f"{header}\n10,1,4{extra}\n20,2,3{extra}\n")
    assert sniff(path).format == "ratings"
    data = load(path)
    np.testing.assert_array_equal(data.X.toarray(), RATINGS)  # users 1, 2 as the rows
    np.testing.assert_array_equal(data.extra["user_ids"], [1, 2])
    np.testing.assert_array_equal(data.extra["item_ids"], [10, 20])
    # a header-less file, or one naming the user first, keeps user, item order
    path.write_text("10,1,4\n20,2,3\n")
    np.testing.assert_array_equal(load(path).extra["user_ids"], [10, 20])


@pytest.mark.parametrize("header", ["x1,x2,label", "a,b,c", "i,i,r", "f0,f1,f2,y",
                                    "source,target,weight"])
def test_a_features_table_with_a_header_is_still_not_ratings(tmp_path, header):
    path = tmp_path / "table.csv"
    cols = header.count(",") + 1
    path.write_text(header + "\n" + "\n".join(",".join(["1"] * cols) for _ in range(3)) + "\n")
    with pytest.raises(DataFormatError, match="It looks like a CSV / TSV table"):
        sniff(path)


# ---------------------------------------------------------------- text folder decoding
TEXTS = {"a/1.txt": "Café naïve résumé über straße café\n", "b/2.txt": "café über naïve\n"}


def _folder(tmp_path):
    root = tmp_path / "docs"
    for name, text in TEXTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _archive(tmp_path):
    return _tarball(tmp_path, TEXTS, encoding="utf-8")


@pytest.mark.parametrize("make", [_folder, _archive], ids=["folder", "archive"])
def test_utf8_text_folders_decode_as_utf8_by_default(tmp_path, make):
    path = make(tmp_path)
    corpus = load_text_folder(path, min_df=1, max_df=1.0, stop_words=None)
    assert corpus.vocab == ["café", "naïve", "résumé", "straße", "über"]
    texts, _, _ = read_text_documents(path)
    assert texts == list(TEXTS.values())


def test_a_latin1_document_among_utf8_ones_still_loads(tmp_path):
    root = _folder(tmp_path)
    (root / "b" / "3.txt").write_bytes("garçon über\n".encode("latin-1"))  # invalid UTF-8
    corpus = load_text_folder(root, min_df=1, max_df=1.0, stop_words=None)
    assert {"café", "garçon", "über"} <= set(corpus.vocab)
    assert not any("Ã" in w for w in corpus.vocab)
    # a codec named explicitly still decodes every document with it
    latin = load_text_folder(root, min_df=1, max_df=1.0, stop_words=None, encoding="latin-1")
    assert "cafã" in latin.vocab


# ------------------------------------------------------------------ NMF score, empty rows
def _fitted(loss):
    X = np.random.default_rng(0).random((30, 6)) + 0.1
    return X, NMF(2, loss=loss, solver="mu", max_iter=30, random_state=0).fit(X)


@pytest.mark.parametrize("loss", ["frobenius", "kl"])
def test_nmf_score_skips_rows_with_nothing_observed(loss):
    X, est = _fitted(loss)
    Y = X[:4].copy()
    Y[0, 1] = np.nan  # some entries missing in every case, so each scores the same way
    want = est.score(Y)
    with_empty = np.insert(Y, 2, np.nan, axis=0)
    assert est.score(with_empty) == pytest.approx(want, rel=1e-9)
    mask = ~np.isnan(with_empty)
    assert est.score(sp.csr_matrix(np.nan_to_num(with_empty)), mask=mask) == pytest.approx(
        want, rel=1e-6)
    mask_only = np.ones_like(with_empty, bool)
    mask_only[2] = False  # the row masked out rather than NaN
    mask_only[0, 1] = False
    assert est.score(np.nan_to_num(with_empty), mask=mask_only) == pytest.approx(want,
                                                                                 rel=1e-9)


def test_nmf_score_with_nothing_observed_says_so():
    _, est = _fitted("frobenius")
    with pytest.raises(ValueError, match="X has no observed entry.*nothing to score"):
        est.score(np.full((3, 6), np.nan))
    with pytest.raises(ValueError, match="X has no observed entry.*nothing to score"):
        est.score(sp.csr_matrix((3, 6)), mask=np.zeros((3, 6), bool))
    # transform still refuses a row it can say nothing about
    with pytest.raises(ValueError, match="rows of X have no observed entry"):
        est.transform(np.full((1, 6), np.nan))
