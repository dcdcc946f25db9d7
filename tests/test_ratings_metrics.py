"""Ratings files and MovieLens (the duplicate rule, the id maps, the per-user split) and
the ranking metrics against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets import load_movielens, read_ratings_csv
from bidlab.datasets.paths import find_shared_data_dir
from bidlab.models.sfa.metrics import (
    map_at_k,
    ndcg_at_k,
    precision_at_k,
    ranking_metrics,
    rmse,
    top_k,
)


def _movielens():
    base = find_shared_data_dir()
    if base is None or not (base / "movielens-latest-small" / "ratings.csv").is_file():
        pytest.skip("shared data movielens-latest-small not found (set BIDLAB_SHARED_DATA)")
    return load_movielens(base)


def test_ratings_csv_keeps_the_latest_of_duplicate_pairs(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("user,item,rating,time\n"
                    "10,7,4.0,100\n"
                    "3,7,2.0,50\n"
                    "10,7,1.5,300\n"   # later time: this one counts
                    "10,9,5.0,20\n"
                    "10,9,3.0,10\n")   # earlier time, later line: dropped
    r = read_ratings_csv(path)
    assert r.duplicates == 2
    assert list(r.user_ids) == [3, 10] and list(r.item_ids) == [7, 9]
    np.testing.assert_array_equal(r.X.toarray(), [[2.0, 0.0], [1.5, 5.0]])
    np.testing.assert_array_equal(r.times, [50, 300, 20])


def test_ratings_without_time_or_header_keep_the_later_line(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("1\t1\t3\n1\t1\t4\n2\t5\t1\n")
    r = read_ratings_csv(path)
    np.testing.assert_array_equal(r.X.toarray(), [[4.0, 0.0], [0.0, 1.0]])
    assert r.times is None and r.duplicates == 1


def test_bad_ratings_files_say_what_is_wrong(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("user,item\n1,2\n")
    with pytest.raises(ValueError, match="2 columns"):
        read_ratings_csv(path)
    path.write_text("user,item,rating\n")
    with pytest.raises(ValueError, match="no ratings"):
        read_ratings_csv(path)
    with pytest.raises(ValueError, match="regular file|not a|No such|does not exist"):
        read_ratings_csv(tmp_path)


def test_movielens_loads_with_titles_and_splits_per_user():
    ml = _movielens()
    assert ml.X.shape == (610, 9724) and ml.X.nnz == 100836 and ml.duplicates == 0
    assert ml.titles[ml.item_column(1)] == "Toy Story (1995)"
    assert ml.X[0, ml.item_column(1)] == 4.0  # user 1 rated Toy Story 4 stars
    parts = ml.split(0.2, seed=0)
    assert parts.train.nnz + parts.test.nnz == ml.X.nnz
    assert parts.train.multiply(parts.test).nnz == 0
    assert np.all(np.diff(parts.train.indptr) >= 1)
    counts = np.diff(ml.X.indptr)
    np.testing.assert_array_equal(np.diff(parts.test.indptr), (counts * 0.2).astype(int))
    again = ml.split(0.2, seed=0)
    assert (again.test != parts.test).nnz == 0
    other = ml.split(0.2, seed=1)
    assert (other.test != parts.test).nnz > 0
    imp = ml.implicit(4.0)
    assert imp.nnz == int((ml.X.data >= 4.0).sum()) and set(imp.data) == {1.0}


def test_metrics_against_hand_computed_values():
    rec = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    rel = [[2, 4, 20], [], [9]]  # the middle user has no held-out item: not counted
    # user 0: hits at ranks 2 and 4; user 2: a hit at rank 1
    assert precision_at_k(rec, rel, 4) == pytest.approx((2 / 4 + 1 / 4) / 2)
    assert map_at_k(rec, rel, 4) == pytest.approx(((1 / 2 + 2 / 4) / 3 + 1.0) / 2)
    dcg0 = 1 / np.log2(3) + 1 / np.log2(5)
    idcg0 = 1 + 1 / np.log2(3) + 1 / np.log2(4)
    assert ndcg_at_k(rec, rel, 4) == pytest.approx((dcg0 / idcg0 + 1.0) / 2)
    assert precision_at_k(rec, rel, 1) == pytest.approx(0.5)
    assert rmse([1, 2, 3], [1, 2, 6]) == pytest.approx(np.sqrt(3.0))
    with pytest.raises(ValueError, match="k must be >= 1"):
        precision_at_k(rec, rel, 0)
    with pytest.raises(ValueError, match="one recommended list per user"):
        map_at_k(rec[:2], rel, 2)


def test_ranking_metrics_leave_training_items_out():
    scores = np.array([[5.0, 4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
    train = sp.csr_matrix(np.array([[1, 0, 0, 0, 0], [0, 0, 0, 0, 1]], float))
    test = sp.csr_matrix(np.array([[0, 1, 0, 0, 0], [1, 0, 0, 0, 0]], float))
    np.testing.assert_array_equal(top_k(scores, 2, train), [[1, 2], [3, 2]])
    m = ranking_metrics(lambda u: scores[u], train, test, k=2)
    assert m["p@2"] == pytest.approx(0.25)
    assert m["map@2"] == pytest.approx(0.5)
    assert m["ndcg@2"] == pytest.approx(0.5)


def test_ratings_csv_is_sniffed_and_loaded_for_bidlab_train(tmp_path):
    from bidlab.datasets.sniff import DataFormatError, load, sniff

    path = tmp_path / "ratings"
    path.write_text("userId,movieId,rating,timestamp\n1,10,4.0,5\n2,10,3.5,6\n2,30,1.0,7\n")
    assert sniff(path).format == "ratings"
    data = load(path)
    np.testing.assert_array_equal(data.X.toarray(), [[4.0, 0.0], [3.5, 1.0]])
    assert list(data.extra["item_ids"]) == [10, 30]
    bare = tmp_path / "bare.csv"
    bare.write_text("1,10,4\n2,10,3\n")
    assert sniff(bare).format == "ratings"
    other = tmp_path / "table.csv"
    other.write_text("a,b,c\n1,2,3\n")  # a header naming no user or rating: not ratings
    with pytest.raises(DataFormatError):
        sniff(other)


def test_ratings_with_text_ids_keep_every_line(tmp_path):
    """Ids need not be numbers (a first data line of text ids was taken for a header and
    dropped, and the file then refused): the header is told by its rating column."""
    path = tmp_path / "r.csv"
    path.write_text("A1XZ,B001,4.0\nA2QQ,B001,3.0\nA1XZ,B002,5.0\n")
    r = read_ratings_csv(path)
    assert r.X.shape == (2, 2) and r.X.nnz == 3
    assert list(r.user_ids) == ["A1XZ", "A2QQ"] and r.item_column("B002") == 1
    assert r.X[0, 1] == 5.0
    path.write_text("user,item,rating,time\nA1XZ,B001,4.0,10\nA1XZ,B001,2.0,11\n")
    r = read_ratings_csv(path)
    assert r.X.nnz == 1 and r.X[0, 0] == 2.0 and r.duplicates == 1
    path.write_text("1,2,4.0\n3,4,x\n")
    with pytest.raises(ValueError, match=r"ratings row 2 holds '3,4,x'.*must be numbers"):
        read_ratings_csv(path)
