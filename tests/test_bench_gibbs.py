"""Smoke test of ``python -m bidlab.bench gibbs``: a tiny run prints sane JSON (timings are
reported by the program, never judged here)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _bench(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NUMBA_NUM_THREADS=os.environ.get("NUMBA_NUM_THREADS", "2"))
    return subprocess.run([sys.executable, "-m", "bidlab.bench", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_gibbs_json_quick() -> None:
    pytest.importorskip("tomotopy")
    proc = _bench("gibbs", "--quick", "--corpora", "long", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["benchmark"] == "gibbs" and doc["tomotopy_sweeps"] == 40
    (corpus,) = doc["corpora"]
    assert corpus["corpus"] == "long" and corpus["tokens_per_doc"] > 1000
    (run,) = corpus["runs"]
    for key in ("tomotopy_s", "bidlab_s"):
        assert run[key] > 0, key
    for key in ("tomotopy_loglik", "bidlab_loglik"):
        # per-word log-likelihoods: finite and above the uniform model's -log(V)
        assert -math.log(corpus["vocabulary"]) < run[key] < 0, (key, run[key])
    (t,) = corpus["targets"]
    assert t["target"] == 0.4 and isinstance(t["met"], bool)
    assert t["value"] == run["ratio"]
