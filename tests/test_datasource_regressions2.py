"""Data sources driven as a user would: pandas inputs, numpy integer arguments, a blended
source whose second stream is smaller than its share, and crafted shard manifests."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import drain

from bidlab.learn.datasource import BlendedSource, MemorySource
from bidlab.learn.shards import ShardError, ShardSource, write_shards


def test_memory_source_takes_a_dataframe_and_a_series():
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [0, 1, 0, 1, 1]})
    y = pd.Series([0, 1, 0, 1, 1])
    got = drain(MemorySource(df, y, batch_size=2, n_passes=1))
    ref = drain(MemorySource(df.to_numpy(), y.to_numpy(), batch_size=2, n_passes=1))
    assert len(got) == len(ref) == 3
    for g, r in zip(got, ref, strict=True):
        for u, v in zip(g, r, strict=True):
            np.testing.assert_array_equal(u, v)


def test_a_text_column_names_the_matrix_and_the_fix():
    with pytest.raises(TypeError, match="data matrix 'y' holds object; convert it"):
        MemorySource(np.ones((2, 2)), pd.Series(["a", "b"]), batch_size=1)


def test_write_shards_takes_pandas_and_numpy_ints(tmp_path):
    df = pd.DataFrame(np.arange(10.0).reshape(5, 2))
    write_shards(tmp_path, df, pd.Series(np.arange(5)), rows_per_shard=np.int64(2))
    got = drain(ShardSource(tmp_path, batch_size=np.int64(2), n_passes=np.int64(1)))
    np.testing.assert_array_equal(np.vstack([g[0] for g in got]), df.to_numpy())


def test_numpy_int_n_passes_is_accepted():
    src = MemorySource(np.ones((4, 2)), batch_size=2, n_passes=np.int64(2))
    assert len(drain(src)) == 4


def test_blended_size_counts_the_rows_a_small_second_source_gives():
    x = np.arange(20.0).reshape(10, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        src = BlendedSource(MemorySource(x, batch_size=4), MemorySource(x[:1], batch_size=1),
                            frac=0.5, n_passes=1)
    assert src.info.n_samples == sum(len(b[0]) for b in drain(src)) == 15


@pytest.mark.parametrize("edit, match", [
    (lambda m: m["matrices"][0].pop("kind"), "KeyError"),
    (lambda m: m["matrices"][1].pop("name"), "KeyError"),
    (lambda m: m["matrices"][1].__setitem__("dtype", "object"), "numeric dtype"),
    (lambda m: m["matrices"][1].__setitem__("cols", -1), "cols >= 0"),
    (lambda m: m["matrices"][0].__setitem__("index_dtype", "float32"), "index_dtype"),
    (lambda m: m["matrices"][0].__setitem__("row_nnz_hist", "abc"), "malformed"),
    (lambda m: m.__setitem__("matrices", []), "lists no matrices"),
    (lambda m: m.__setitem__("n_samples", "7"), "not an int"),
    (lambda m: (m["shards"][0].__setitem__("rows", -3),
                m["shards"][1].__setitem__("rows", 7)), "negative row count"),
])
def test_crafted_manifest_is_refused_naming_it(tmp_path, edit, match):
    x = sp.random(7, 4, density=0.5, format="csr", random_state=0, dtype=np.float32)
    write_shards(tmp_path, x, np.arange(7.0), rows_per_shard=3)
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match=match) as err:
        drain(ShardSource(tmp_path, batch_size=2, n_passes=1))
    assert "manifest.json is malformed" in str(err.value)
