"""``python -m bidlab.bench gpu``: the one-run GPU checks.

The runner's bookkeeping (a step's JSON document kept, a failing step's output kept, a step
that overruns stopped, steps past the budget skipped, the report written after each step)
runs here on real processes; the benchmarks' GPU forms themselves need a CUDA device, so
here each step's command line is checked to parse (the benchmark then stops at its GPU
check with a message naming CuPy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bidlab import backend
from bidlab.bench import BENCHMARKS
from bidlab.bench.gpu import STEPS, Step, run_steps

REPO = Path(__file__).resolve().parent.parent


def test_steps_run_in_turn_within_the_budget(tmp_path: Path) -> None:
    doc = {"benchmark": "x", "targets": [{"name": "speed", "value": 2.0, "met": True}]}
    steps = [
        # a step passing --json prints one JSON document (the runner keeps it)
        Step("json", ("-c", f"import json; print(json.dumps({doc!r}))", "--json"), 30),
        Step("fails", ("-c", "import sys; print('half done', file=sys.stderr); sys.exit(3)"),
             30),
        Step("sleeps", ("-c", "import time; print('started', flush=True); time.sleep(60)"),
             60),
        Step("late", ("-c", "print('never')"), 30),
    ]
    env = dict(os.environ)
    t0 = time.monotonic()
    report = run_steps(steps, 6.0, tmp_path, env, cwd=tmp_path)
    took = time.monotonic() - t0
    assert took < 20, took  # the sleeper was stopped at the budget's end, not after 60 s
    by = {r["step"]: r for r in report["steps"]}
    assert by["json"]["exit"] == 0 and by["json"]["result"] == doc
    assert by["fails"]["exit"] == 3 and "half done" in by["fails"]["output_tail"]
    assert by["sleeps"]["timed_out"] and by["sleeps"]["exit"] != 0
    assert "started" in by["sleeps"]["output_tail"]
    assert by["late"] == {"step": "late", "skipped": "out of budget"}
    saved = json.loads((tmp_path / "gpu-report.json").read_text())
    assert [r["step"] for r in saved["steps"]] == ["json", "fails", "sleeps", "late"]
    log = (tmp_path / "gpu-log.txt").read_text()
    assert "===== fails: exit 3" in log and "half done" in log
    assert "(stopped: out of time)" in log
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu-log.txt", "gpu-report.json"]


def test_every_step_is_a_known_benchmark_or_the_gpu_tests() -> None:
    for step in STEPS:
        if step.name == "tests":
            assert step.argv[:4] == ("-m", "pytest", "-m", "gpu")
            continue
        assert step.argv[:3] == ("-m", "bidlab.bench", step.name), step
        assert step.name in BENCHMARKS


@pytest.mark.skipif(backend.gpu_available(), reason="checks the message given without a GPU")
@pytest.mark.parametrize("step", [s for s in STEPS if s.name != "tests"], ids=lambda s: s.name)
def test_each_steps_options_parse(step: Step) -> None:
    """Every option of the step is the benchmark's: it gets as far as its GPU check."""
    res = subprocess.run([sys.executable, *step.argv], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "CuPy" in res.stderr and "unrecognized" not in res.stderr \
        and "argument" not in res.stderr, res.stderr[-2000:]


@pytest.mark.skipif(backend.gpu_available(), reason="checks the message given without a GPU")
def test_without_a_gpu_it_says_so_and_runs_nothing(tmp_path: Path) -> None:
    out = tmp_path / "checks"
    res = subprocess.run([sys.executable, "-m", "bidlab.bench", "gpu", "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "no CUDA device here" in res.stderr, res.stderr
    assert not out.exists()


def test_unknown_steps_are_named(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "bidlab.bench", "gpu", "--only", "kernels,nope"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "unknown steps ['nope']" in res.stderr, res.stderr


def test_an_out_that_is_a_file_is_refused_before_anything_runs(tmp_path: Path) -> None:
    taken = tmp_path / "report.txt"
    taken.write_text("keep me")
    res = subprocess.run([sys.executable, "-m", "bidlab.bench", "gpu", "--out", str(taken)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "is a file: name a folder" in res.stderr, res.stderr
    assert taken.read_text() == "keep me"
