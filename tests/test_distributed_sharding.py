"""Rows by rank without MPI: contiguous shares that cover every row once, batch sizes that
give every rank the same minibatches per pass, shard folders read shard by shard, and the
notebook's merged metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.distributed.notebook import merge_metrics
from bidlab.distributed.sharding import (
    rank_batch_size,
    read_rank_data,
    shard,
    shard_range,
)


class _Rank:
    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size


@pytest.mark.parametrize("n,size", [(10, 3), (1001, 2), (32561, 4), (7, 7)])
def test_shares_cover_every_row_once(n, size):
    ranges = [shard_range(n, r, size) for r in range(size)]
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1


@pytest.mark.parametrize("n,size,bs", [(1001, 2, 100), (32561, 4, 1000), (3430, 2, 256),
                                       (11314, 2, 1000), (400, 4, 7)])
def test_every_rank_runs_the_same_minibatches_per_pass(n, size, bs):
    counts = set()
    for r in range(size):
        a, b = shard_range(n, r, size)
        mine = rank_batch_size(n, r, size, bs)
        assert mine <= bs
        counts.add(math.ceil((b - a) / mine))
    assert len(counts) == 1


def test_an_impossible_split_names_the_fix():
    with pytest.raises(ValueError, match="choose a batch_size"):
        [rank_batch_size(19, r, 2, 3) for r in range(2)]
    with pytest.raises(ValueError, match="use fewer ranks"):
        shard_range(3, 0, 4)


def test_shard_and_shard_folders_give_each_rank_its_rows(tmp_path):
    from bidlab.learn import write_shards

    X = sp.random(103, 20, density=0.2, format="csr", random_state=0)
    y = np.arange(103.0)
    write_shards(tmp_path / "s", X, y, rows_per_shard=10)
    for size in (1, 2, 3):
        got = []
        for r in range(size):
            data, n = read_rank_data(_Rank(r, size), str(tmp_path / "s"))
            Xs, ys = shard(_Rank(r, size), X, y)
            assert n == 103 and (data.X != Xs).nnz == 0
            np.testing.assert_array_equal(np.ravel(data.y), ys)
            got.append(ys)
        np.testing.assert_array_equal(np.concatenate(got), y)


def test_merged_metrics_sum_counts_and_average_scores():
    each = [{"samples": 10, "train_score": 1.0, "state": "running", "step": 4},
            {"samples": 30, "train_score": 3.0, "state": "running", "step": 4}]
    m = merge_metrics(each)
    assert m["samples"] == 40 and m["train_score"] == 2.0 and m["ranks"] == 2
    assert m["state"] == "running" and m["step"] == 4
