"""Smoke tests of the benchmark programs: they run at a tiny size and print sane JSON.

These run ``python -m bidlab.bench ...`` in a subprocess, exactly as a user would, and check
the document's fields hold finite positive numbers. They never judge speed: timings on a
shared CI machine say nothing, so the targets are reported by the programs, not asserted.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def _bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NUMBA_NUM_THREADS=os.environ.get("NUMBA_NUM_THREADS", "2"))
    return subprocess.run([sys.executable, "-m", "bidlab.bench", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _bench_json(*args: str) -> dict[str, Any]:
    proc = _bench(*args, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def test_kernels_json_tiny() -> None:
    doc = _bench_json("kernels", "--scale", "0.002", "--triad-mib", "8", "--repeats", "1",
                      "--baseline-repeats", "1", "--numpy-sddmm-repeats", "1")
    assert doc["benchmark"] == "kernels"
    assert _positive(doc["triad"]["bandwidth_GBps"]) and _positive(doc["roofline_gflops"])
    assert doc["workload"]["k"] == 64 and doc["workload"]["nnz"] > 0
    expected = {"sddmm", "dense_sparse", "dense_sparse_t", "sparse_dense", "sparse_t_dense",
                "expdigamma"}
    assert set(doc["kernels"]) == expected
    for name, r in doc["kernels"].items():
        for key in ("seconds", "rate", "roofline", "roofline_ratio", "speedup_vs_single",
                    "speedup_vs_blocked", "speedup_vs_best"):
            assert _positive(r[key]), (name, key, r[key])
        for way in ("single", "blocked"):
            assert _positive(r[way]["seconds"]) and _positive(r[way]["rate"]), (name, way)
        assert r["max_rel_err"] < 1e-3, (name, r["max_rel_err"])  # bidlab agrees with scipy
    assert len(doc["targets"]) == 4
    for t in doc["targets"]:
        assert isinstance(t["met"], bool) and _positive(t["value"]) and _positive(t["target"])


def test_cache_json_tiny() -> None:
    doc = _bench_json("cache", "--docs", "64", "--vocab", "500", "--nnz-per-doc", "10",
                      "--k", "8", "--steps", "4")
    assert doc["benchmark"] == "cache"
    assert _positive(doc["time_ratio_cached_over_uncached"])
    for way in ("cached", "uncached"):
        assert _positive(doc[way]["median_step_s"])
        assert isinstance(doc[way]["allocations_after_step2"], int)
    # the cache's contract (not a timing): a cached loop allocates nothing after warm-up
    assert doc["cached"]["allocations_after_step2"] == 0
    assert doc["uncached"]["allocations_after_step2"] > 0


@pytest.mark.parametrize("name", ["no-such-benchmark"])
def test_unknown_benchmark_lists_valid_names(name: str) -> None:
    proc = _bench(name)
    assert proc.returncode == 2
    for valid in ("kernels", "cache", "learner", "lda", "glm", "kmeans", "dashboard"):
        assert valid in proc.stderr


def test_dashboard_cpu_shares_add_up_per_party() -> None:
    """The dashboard benchmark's core accounting: CPU seconds / wall seconds per party."""
    import threading

    pytest.importorskip("psutil", reason="the dashboard benchmark's accounting needs psutil")
    from bidlab.bench._dashboard_run import CpuShares

    before = (100.0, {("kernel", 1): 5.0, ("training_thread", 11): 2.0,
                      ("chromium_renderer", 7): 1.0, ("chromium_other", 8): 0.5,
                      ("chromium_other", 9): 0.5})
    after = (102.0, {("kernel", 1): 6.8, ("training_thread", 11): 3.6,
                     ("chromium_renderer", 7): 2.2, ("chromium_other", 8): 0.7,
                     ("chromium_other", 9): 0.9, ("chromium_other", 10): 0.2})  # a new one
    assert CpuShares.shares(before, after) == {
        "chromium_other": 0.4, "chromium_renderer": 0.6, "kernel": 0.9,
        "training_thread": 0.8}

    # a real sample: this process stands in for the kernel, this thread for training
    me = threading.current_thread()
    cpu = CpuShares(server_pid=-1, kernel_pid=os.getpid(),
                    threads={me.native_id: "training_thread"})
    t0 = cpu.sample()
    c0 = time.thread_time()
    while time.thread_time() - c0 < 0.5:  # burn 0.5 s of CPU in this thread
        pass
    burnt = time.thread_time() - c0
    t1 = cpu.sample()
    shares = CpuShares.shares(t0, t1)
    # the thread's share is its own CPU time over the wall time, however loaded the
    # machine (CPU times tick every 10 ms: +-0.02 s at each end)
    wall = t1[0] - t0[0]
    assert abs(shares["training_thread"] - burnt / wall) <= 0.04 / wall + 0.002
    assert shares["kernel"] >= shares["training_thread"] - 0.1
    # the whole machine's busy cores include this process's
    assert shares["machine_busy"] >= shares["kernel"] - 0.1


def test_glm_news20_sweep_json_quick(shared_data) -> None:
    """The news20 part of ``bench glm``: the softmax target against saga and both SGDs, and
    the sweep against the same configurations as separate scikit-learn fits."""
    proc = _bench("glm", "--quick", "--json", "--workloads", "news20", "--peers", "saga,sgd",
                  timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (w,) = json.loads(proc.stdout)["workloads"]
    assert w["workload"] == "news20" and w["classes"] == 20
    target = w["target"]
    assert isinstance(target["met"], bool) and _positive(target["time_ratio_bidlab_over_faster"])
    assert target["faster_peer"] in ("saga", "sgd", "sgd_hinge")
    accuracies = [r["accuracy"] for r in w["results"] if r["system"].startswith("sklearn")]
    assert len(accuracies) == 3 and target["reference_accuracy"] == max(accuracies)
    sw = w["sweep"]
    assert sw["configs"] == 32
    separate = sw["separate_sklearn"]
    assert separate["configs_timed"] == 4 and 0.0 < separate["best_accuracy"] <= 1.0
    assert _positive(sw["speedup_over_separate_sklearn"])
    for key in ("one_config_s", "sweep_s", "ratio_sweep_over_one", "products_floor_s",
                "ratio_products_floor_over_one"):
        assert _positive(sw[key]), (key, sw[key])
    assert sw["products_floor_s"] < sw["sweep_s"]  # the products are part of the sweep
    assert 0.0 < sw["best"]["accuracy"] <= 1.0 and sw["best"]["lrate"] > 0
    for key in ("one_config_s", "sweep_s", "sweep_over_fit", "one_config_over_fit"):
        assert _positive(sw["learner"][key]), (key, sw["learner"])


def test_glm_planted100_json_quick() -> None:
    """The untuned 100-target workload: SGD's log loss within 0.002 is the reference."""
    proc = _bench("glm", "--quick", "--json", "--workloads", "planted100", "--peers", "sgd",
                  timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (w,) = json.loads(proc.stdout)["workloads"]
    assert w["workload"] == "planted100" and w["targets"] == 100
    assert w["glm_params"]["l2"] > 0
    bid, sgd = w["results"]
    assert sgd["targets_timed"] == 20 and _positive(sgd["wall_s"])
    target = w["target"]
    assert "+ 0.002" in target["goal"] and isinstance(target["met"], bool)
    assert bid["reached_reference"] or not target["met"]
    assert bid["reached_reference"] == (bid["log_loss"] <= target["reference_log_loss"] + 0.002
                                        + 1e-5)


def test_glm_defaults_json_quick(shared_data) -> None:
    """``GLM(link)`` with no settings against scikit-learn's default of the same loss, every
    link on a9a and w8a (seed 0): each within 0.001 of its reference."""
    proc = _bench("glm", "--quick", "--json", "--workloads", "defaults", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (w,) = json.loads(proc.stdout)["workloads"]
    assert w["glm_defaults"] == {"lrate": "auto", "n_passes": 10, "tol": 1e-4, "average": 0.5,
                                 "batch_size": "auto", "l2": 1e-4}
    cases = w["cases"]
    assert [(c["data"], c["link"]) for c in cases] == [
        (d, lk) for d in ("a9a", "w8a") for lk in ("logistic", "softmax", "svm", "linear")]
    for c in cases:
        assert c["metric"] == ("r2" if c["link"] == "linear" else "accuracy")
        assert c["glm"] >= c["reference_score"] - 1e-3, c
        assert isinstance(c["met"], bool) and _positive(c["glm_fit_s"])


def test_glm_l2cost_json_quick() -> None:
    """The L2-cost A/B: the rule defers on the large model (and its weights then differ a
    little from the swept ones) and sweeps on the small one (identical weights)."""
    proc = _bench("glm", "--quick", "--json", "--workloads", "l2cost", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (w,) = json.loads(proc.stdout)["workloads"]
    big, small = w["cases"]
    assert big["rule_defers"] and not small["rule_defers"]
    assert 0.0 < big["max_abs_coef_diff"] < 0.05 and small["max_abs_coef_diff"] == 0.0
    for case in (big, small):
        for key in ("swept_s", "rule_s", "l2_0_s", "swept_over_rule"):
            assert _positive(case[key]), (key, case)


def test_dashboard_bare_process_trains_windows_on_command() -> None:
    """``bench dashboard --page-only``'s separate learner: one window per line in, its rate
    (from its own record) out, and it exits when its input closes."""
    code = ("import sys; from bidlab.bench._dashboard_run import bare_process; "
            "bare_process('', 200, 3)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        assert json.loads(proc.stdout.readline())["pid"] == proc.pid
        rates = []
        for steps in (6, 9):
            proc.stdin.write(f"{steps}\n")
            proc.stdin.flush()
            rates.append(json.loads(proc.stdout.readline())["minibatches_per_s"])
        assert all(_positive(r) for r in rates), rates
        proc.stdin.close()
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("args", [("--page-only", "-1"), ("--rounds", "0"), ("--steps", "1"),
                                  ("--warmup", "-1")])
def test_dashboard_rejects_counts_it_cannot_time(args: tuple[str, str]) -> None:
    proc = _bench("dashboard", *args)
    assert proc.returncode == 2
    assert f"{args[0]} must be at least" in proc.stderr


def test_coldstart_names_missing_shared_data_before_running(tmp_path: Path,
                                                          monkeypatch: Any,
                                                          capsys: Any) -> None:
    from bidlab.bench import coldstart

    monkeypatch.setenv("BIDLAB_SHARED_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit) as info:
        coldstart.main(["--no-warmup", "--workloads", "kmeans,sfa,bayesnet"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "workloads sfa,bayesnet read the shared data" in err and "nowhere" in err


def test_dashboard_window_rate_counts_intervals_of_the_window() -> None:
    from bidlab.bench._learner_windows import window_rate

    steps = [0, 1, 2, 3, 4, 5]
    times = [0.0, 1.0, 1.5, 2.0, 2.5, 9.0]
    assert window_rate(steps, times, 1, 4) == pytest.approx(3 / 1.5)  # rows 1..4


def test_temperature_json_tiny(tmp_path: Path) -> None:
    """Synthetic data (no uci-kos under --data): both learners train every window, the
    heated one has the parameters asked for, and the ratio is of the two means."""
    doc = _bench_json("temperature", "--steps", "5", "--rounds", "2", "--docs", "200",
                      "--k", "4", "--heated", "3", "--data", str(tmp_path))
    assert doc["benchmark"] == "temperature" and doc["data"] == "synthetic"
    assert doc["heated_parameters"] == 3 and doc["docs"] == 200
    rates = doc["minibatches_per_s"]
    assert len(rates["plain"]) == len(rates["heated"]) == 2
    assert all(_positive(x) for x in rates["plain"] + rates["heated"])
    mean = doc["mean_minibatches_per_s"]
    assert doc["heated_over_plain"] == pytest.approx(mean["heated"] / mean["plain"])


@pytest.mark.parametrize("args", [("--steps", "1"), ("--rounds", "0"), ("--heated", "-1")])
def test_temperature_rejects_counts_it_cannot_time(args: tuple[str, str]) -> None:
    proc = _bench("temperature", *args)
    assert proc.returncode == 2
    assert args[0] in proc.stderr


def test_dashboard_pair_ratios_pair_adjacent_windows() -> None:
    """Each round's dashboard window over its round's bare window, their median (odd and
    even counts), geometric mean and a bootstrap interval that contains it, narrows when
    the rounds agree and is reproducible; the pairs must match one to one."""
    from bidlab.bench.dashboard import pair_ratios

    dash = [{"minibatches_per_s": v} for v in (90.0, 50.0, 120.0)]
    bare = [{"minibatches_per_s": v} for v in (100.0, 100.0, 100.0)]
    out = pair_ratios(dash, bare)
    assert out["pair_ratios"] == [0.9, 0.5, 1.2]
    assert out["pair_ratio_median"] == pytest.approx(0.9)
    assert out["pair_ratio_geomean"] == pytest.approx(math.exp(
        (math.log(0.9) + math.log(0.5) + math.log(1.2)) / 3))
    lo, hi = out["pair_ratio_ci90"]
    assert 0.5 <= lo < out["pair_ratio_geomean"] < hi <= 1.2
    assert pair_ratios(dash, bare)["pair_ratio_ci90"] == [lo, hi]  # seeded
    steady = pair_ratios([{"minibatches_per_s": v} for v in (93.0, 94.0, 95.0, 96.0)],
                         [{"minibatches_per_s": 100.0}] * 4)
    s_lo, s_hi = steady["pair_ratio_ci90"]
    assert 0.93 <= s_lo < s_hi <= 0.96 and s_hi - s_lo < hi - lo
    out = pair_ratios(dash[:2], bare[:2])
    assert out["pair_ratio_median"] == pytest.approx(0.7)
    assert pair_ratios([], [])["pair_ratio_geomean"] is None
    assert pair_ratios(dash[:1], bare[:1])["pair_ratio_ci90"] is None  # one round: no spread
    with pytest.raises(ValueError):
        pair_ratios(dash, bare[:2])


def test_dashboard_windows_alternate_which_learner_goes_first() -> None:
    """D B, B D, D B, ...: over an even number of rounds each learner goes first equally
    often, so a linear drift of the host's speed favours neither."""
    from bidlab.bench._dashboard_run import window_order

    orders = [window_order(i) for i in range(4)]
    assert orders == [("learner", "bare"), ("bare", "learner")] * 2
    assert all(sorted(o) == ["bare", "learner"] for o in orders)


def test_dashboard_core_split_keeps_the_last_core_for_training() -> None:
    """--isolate: the training threads get the last core, the rest get the others; one
    core cannot be split and says so."""
    from bidlab.bench._dashboard_run import core_split

    assert core_split([0, 1]) == ([1], [0])
    assert core_split([0, 2, 5, 7]) == ([7], [0, 2, 5])
    with pytest.raises(ValueError, match="at least 2 cores"):
        core_split([3])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 usable cores")
def test_dashboard_isolate_pins_real_threads_of_another_process() -> None:
    """A child process with a named extra thread: isolate() puts that thread alone on the
    last core and every other thread of the child on the remaining cores."""
    from bidlab.bench._dashboard_run import isolate

    code = ("import threading, time\n"
            "t = threading.Thread(target=time.sleep, args=(60,), daemon=True); t.start()\n"
            "print(t.native_id, flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        trainer = int(child.stdout.readline())
        cores = sorted(os.sched_getaffinity(0))
        split = isolate([trainer], child.pid, [])
        assert split["training_cores"] == cores[-1:] and split["other_cores"] == cores[:-1]
        tids = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        assert split["threads_pinned"] == len(tids) >= 2
        for tid in tids:
            want = cores[-1:] if tid == trainer else cores[:-1]
            assert sorted(os.sched_getaffinity(tid)) == want
    finally:
        child.kill()
        child.wait()


def test_dashboard_update_rate_counts_the_span_it_is_given() -> None:
    """The page's update rate over a training window: events inside the span only, the
    span's own length (a paused tail must not dilute it), and the longest gap in it."""
    from bidlab.bench._live_page import events_rate

    events = [[1000.0 + 100.0 * i, i, i + 1] for i in range(30)]  # 10 /s for 2.9 s
    inside = events_rate(events, 1000.0, 2000.0)
    assert inside["updates"] == 11 and inside["seconds"] == pytest.approx(1.0)
    assert inside["rate"] == pytest.approx(11.0)
    assert inside["max_gap_s"] == pytest.approx(0.1)
    # the same events with a 1 s paused tail counted in: the old, diluted figure
    tail = events_rate(events, 1000.0, 4900.0)
    assert tail["rate"] == pytest.approx(30 / 3.9) and tail["max_gap_s"] == pytest.approx(1.0)
    assert events_rate([], 0.0, 1000.0)["rate"] == 0.0
    assert events_rate(events, None, 1900.0)["updates"] == 10


def test_glm_news20_tfidf_json_quick(shared_data) -> None:
    """20 Newsgroups as TfidfVectorizer writes it, one logistic target per newsgroup, the
    GLM with its defaults (the rate race included); no peer, so no target."""
    proc = _bench("glm", "--quick", "--json", "--workloads", "news20_tfidf", "--peers", "",
                  timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (w,) = json.loads(proc.stdout)["workloads"]
    assert w["workload"] == "news20_tfidf" and w["targets"] == 20 and "target" not in w
    (bid,) = w["results"]
    assert _positive(bid["wall_s"]) and 0 < bid["log_loss"] < 0.2
    assert set(bid["lrate_chosen"]) <= {0.03, 0.1, 0.3, 1.0, 3.0, 10.0}


def test_glm_roofline_json_quick() -> None:
    """One GLM pass against the bytes it must move: a fraction of the copy bandwidth."""
    proc = _bench("glm", "--quick", "--json", "--workloads", "roofline", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (w,) = json.loads(proc.stdout)["workloads"]
    assert w["workload"] == "roofline" and w["targets"] == 100
    assert 0 < w["bytes"]["touched_rows"] <= w["d"] * -(-w["n_train"] // 500)
    assert _positive(w["pass_s"]) and _positive(w["stream_GBps"])
    assert w["fraction_of_roofline"] == pytest.approx(w["roofline_s"] / w["pass_s"], rel=0.02)


def test_dashboard_map_cell_and_summary(tmp_path: Path) -> None:
    """``bench dashboard --map``: the map's cell goes right after the bubbles' cell of the
    notebook copy, and its page and kernel rates are the windows' totals over their time."""
    import nbformat

    from bidlab.bench import _live_page as lp
    from bidlab.bench._dashboard_run import MAP_CELL
    from bidlab.bench.dashboard import map_summary

    nb = nbformat.read(lp.lab_notebook(tmp_path / "nb.ipynb", None, "NPASSES = 5",
                                       extra_cells=(MAP_CELL,)), as_version=4)
    sources = [c.source for c in nb.cells]
    at = next(i for i, s in enumerate(sources) if "TopicBubbles(learner" in s)
    assert sources[at + 1] == MAP_CELL and sources.count(MAP_CELL) == 1
    plain = nbformat.read(lp.lab_notebook(tmp_path / "plain.ipynb", None), as_version=4)
    assert len(plain.cells) == len(nb.cells) - 1
    got = map_summary([{"map_frames_per_s": 9.0}, {"map_frames_per_s": 11.0}],
                      [{"map": {"updates": 30, "seconds": 3.0}},
                       {"map": {"updates": 50, "seconds": 5.0}}])
    assert got == {"kernel_frames_per_s": 10.0, "page_updates_per_s": 10.0}

