"""``python -m bidlab.bench distributed``'s parts that need no MPI job: the cost model and
the report of a run's figures (the MPI jobs themselves take minutes on a small machine)."""

from __future__ import annotations

import math

from bidlab.bench import distributed as bench


def test_cost_model_grows_with_ranks_and_butterfly_stays_flat():
    rows = bench.cost_model(latency=1e-5, bandwidth=1e9, model_bytes=1 << 20, touched=0.05)
    assert [r["ranks"] for r in rows] == [8, 16, 32, 64, 128, 256]
    dense = [r["dense_s"] for r in rows]
    assert dense == sorted(dense) and dense[0] > 0
    assert len({round(r["butterfly_s"], 12) for r in rows}) == 1
    # the union of the ranks' touched rows approaches every row
    assert rows[0]["union_touched"] < rows[-1]["union_touched"] <= 1.0
    # two layers: d1 x d2 = N; fewer messages than one layer of N, so at this latency and
    # touched fraction the nested exchange is the cheaper one from 32 ranks on
    for r in rows:
        assert math.prod(r["nest"]) == r["ranks"]
    assert all(r["nested_s"] < r["sparse_s"] for r in rows if r["ranks"] >= 32)
    one = bench.cost_model(1e-5, 1e9, 1 << 20, 0.05, ranks=(2,))[0]
    assert one["nest"] == (2, 1) and math.isclose(one["nested_s"], one["sparse_s"])


def test_report_prints_every_job_and_the_targets(capsys):
    job = {"rows_per_s": 1000.0, "seconds": 1.0, "syncs": 10, "bytes_per_sync": 400.0,
           "steady_bytes_per_sync": 100.0, "touched_fraction": math.nan}
    res = {"load_before": 1.0, "load_after": 1.5,
           "pingpong": {"latency_s": 1e-5, "bandwidth_Bps": 1e9},
           "jobs": {"glm/1/average": {**job, "accuracy": 0.97},
                    "glm/2/sparse": {**job, "touched_fraction": 0.2}},
           "cost_model": bench.cost_model(1e-5, 1e9, 1000, 0.2),
           "targets": [bench.target("glm: sparse / dense bytes per sync", 0.25, 0.2,
                                    at_most=True)]}
    bench._report(res)
    out = capsys.readouterr().out
    assert "glm/1/average" in out and "glm/2/sparse" in out and "0.9700" in out
    assert "0.200" in out and "N= 256" in out
    assert "sparse / dense bytes per sync" in out


def test_passes_fill_the_seconds_and_ranks_get_their_threads():
    assert bench.pass_count(20.0, 0.15) == 134  # 134 x 0.15 s >= 20 s > 133 x 0.15 s
    assert bench.pass_count(20.0, 30.0) == 1 and bench.pass_count(0.0, 0.1) == 1
    env = bench.rank_env(1)
    assert env["NUMBA_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"
    assert env["BIDLAB_BACKGROUND_COMPILE"] == "0"


def test_throughput_is_the_median_of_alternated_pairs(capsys):
    # each N-rank run over the 1-rank run before it; one slow pair does not decide
    assert bench.paired_ratio([180.0, 90.0, 170.0], [100.0, 100.0, 100.0]) == 1.7
    job = {"rows_per_s": 1000.0, "seconds": 1.0, "syncs": 10, "bytes_per_sync": 400.0,
           "steady_bytes_per_sync": 100.0, "touched_fraction": math.nan,
           "rows_per_s_runs": [900.0, 1000.0, 1100.0]}
    bench._report({"load_before": 1.0, "load_after": 1.0,
                   "pingpong": {"latency_s": 1e-5, "bandwidth_Bps": 1e9},
                   "jobs": {"glm/2/average": job}, "targets": [],
                   "cost_model": bench.cost_model(1e-5, 1e9, 1000, 0.2)})
    assert "rows/s of each run: 900, 1000, 1100" in capsys.readouterr().out
