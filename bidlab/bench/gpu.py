"""``python -m bidlab.bench gpu [--out DIR] [--budget S] [--only a,b] [--data DIR]``: every GPU
check in one run, inside a fixed time budget.

A machine with a GPU is often lent for minutes, so its checks are one prepared run rather
than a session of trials. This program runs, in turn and each in its own process, the GPU
tests and the GPU form of every benchmark that has one, most important first:

* ``tests``: ``pytest -m gpu`` (on several workers where pytest-xdist and the cores
  allow), every test's CuPy variant (modules that need packages the machine lacks, such
  as bokeh for the dashboards, are skipped);
* ``kernels``: ``kernels --gpu --gpu-only``, SDDMM and the sparse products against the
  device's triad roofline and cuSPARSE;
* ``sfa``: ``sfa --gpu --quick``, seconds an iteration past the first at 64 and 256
  factors on the generated x1 matrix (6.9 M training ratings; target 0.3 s at 256);
* ``pagerank``: ``pagerank --gpu``, edges per second per iteration on the device (target
  1e9) on the SNAP graphs and R-MAT graphs of 56 K and 22 M edges;
* ``nmf``: ``nmf --gpu`` on KOS at k = 20 and 64 (Frobenius) against scikit-learn on the CPU;
* ``lda``: ``lda --gpu``, the 100 M-token run on the device;
* ``bayesnet``: ``bayesnet --device gpu``, accuracy and draws per second of the device
  sampler.

Each step gets at most its planned seconds (tests 150; kernels 120, its GPU part alone with
``--gpu-only``; sfa 100; pagerank and nmf 90; lda 120; bayesnet 60: 730 in all) and never
more than what is left of ``--budget``; a step that
overruns is stopped (its output so far is kept) and the next one starts, and steps past the
budget are listed as skipped (``--only`` runs them in a second call). Everything lands in
two files of ``--out``: ``gpu-report.json`` (per step: the command, exit status, seconds,
the benchmark's JSON document or the tail of its output) and ``gpu-log.txt`` (everything
the steps printed), written again after every step, so a run cut short still leaves what
it measured. ``--data`` points the steps at the shared data sets (``BIDLAB_SHARED_DATA``);
steps whose data is absent say so in their output. Without a CUDA device the program exits
with status 2 at once.

Examples
--------
On the GPU machine, from the repository's root (bidlab importable)::

    python -m bidlab.bench gpu --out /tmp/a --budget 480 --data ./data --only tests,kernels,sfa
    python -m bidlab.bench gpu --out /tmp/b --data ./data --only pagerank,nmf,bayesnet,lda
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bidlab.bench._common import machine

__all__ = ["STEPS", "Step", "main", "run_steps"]

#: the checkout: the steps run here (``tests/`` is its test suite)
ROOT = Path(__file__).resolve().parents[2]

#: how much of a step's output the report keeps when it printed no JSON document
TAIL_CHARS = 4000


@dataclass(frozen=True)
class Step:
    """One check: ``argv`` after ``python``, at most ``seconds`` of the budget."""

    name: str
    argv: tuple[str, ...]
    seconds: float


def _bench(*args: str) -> tuple[str, ...]:
    return ("-m", "bidlab.bench", *args, "--json")


def _pytest_workers() -> tuple[str, ...]:
    """``-n N`` for pytest-xdist where it is installed and the machine has at least 4 cores
    (N = half of them, at most 8: the GPU tests' time is mostly kernel compilation)."""
    import importlib.util

    n = min(8, (os.cpu_count() or 1) // 2)
    return ("-n", str(n)) if n >= 2 and importlib.util.find_spec("xdist") else ()


STEPS: tuple[Step, ...] = (
    Step("tests", ("-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                   *_pytest_workers(), "--continue-on-collection-errors", "-W",
                   "ignore::DeprecationWarning", "tests"), 150),
    Step("kernels", _bench("kernels", "--gpu", "--gpu-only", "--repeats", "3"), 120),
    Step("sfa", _bench("sfa", "--gpu", "--quick", "--scale", "1", "--factors", "64,256"), 100),
    Step("pagerank", _bench("pagerank", "--gpu", "--repeats", "1", "--scale", "12",
                            "--big-scale", "20"), 90),
    Step("nmf", _bench("nmf", "--gpu", "--data", "kos", "--ks", "20", "64", "--losses",
                       "frobenius", "--iters", "100", "--cap", "150", "--no-masked"), 90),
    Step("lda", _bench("lda", "--gpu", "--quick", "--corpora", "kos", "--peers", ""), 120),
    Step("bayesnet", _bench("bayesnet", "--device", "gpu", "--parts", "accuracy,speed"), 60),
)


def _json_document(text: str) -> Any:
    """The JSON document a ``--json`` benchmark printed (its stdout), or None."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def _run_one(step: Step, seconds: float, env: dict[str, str], log: Any,
             cwd: Path) -> dict[str, Any]:
    """Run ``step`` in ``cwd`` for at most ``seconds``; its record for the report."""
    cmd = [sys.executable, *step.argv]
    log.write(f"\n===== {step.name}: {' '.join(step.argv)} (at most {seconds:.0f} s)\n")
    log.flush()
    t0 = time.monotonic()
    # its own process group, so that a step that overruns is stopped with its children
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=cwd, text=True, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    took = time.monotonic() - t0
    json_out = "--json" in step.argv  # a benchmark's document, else plain output (pytest)
    log.write(err)
    log.write("" if json_out else out)
    log.write(f"\n===== {step.name}: exit {proc.returncode}, {took:.1f} s"
              f"{' (stopped: out of time)' if timed_out else ''}\n")
    log.flush()
    record: dict[str, Any] = {"step": step.name, "command": ["python", *step.argv],
                              "exit": proc.returncode, "seconds": round(took, 2),
                              "timed_out": timed_out}
    doc = _json_document(out) if json_out else None
    if doc is not None:
        record["result"] = doc
    else:
        record["output_tail"] = (err + out)[-TAIL_CHARS:]
    return record


def run_steps(steps: list[Step], budget: float, out_dir: Path, env: dict[str, str],
              cwd: Path | None = None) -> dict[str, Any]:
    """Run ``steps`` in order (in ``cwd``, default the checkout) within ``budget`` seconds;
    write and return the report."""
    cwd = ROOT if cwd is None else cwd
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"benchmark": "gpu", "machine": machine(),
                              "budget_s": budget, "steps": []}
    try:
        from bidlab import backend

        props = backend.cupy().cuda.runtime.getDeviceProperties(0)
        report["device"] = props["name"].decode() if isinstance(props["name"], bytes) \
            else str(props["name"])
    except Exception as exc:  # noqa: BLE001 - the name is informative only
        report["device"] = f"unknown ({exc})"
    end = time.monotonic() + budget
    with open(out_dir / "gpu-log.txt", "w", encoding="utf-8") as log:
        for step in steps:
            left = end - time.monotonic()
            if left < 5:
                report["steps"].append({"step": step.name, "skipped": "out of budget"})
                continue
            report["steps"].append(_run_one(step, min(step.seconds, left), env, log, cwd))
            _write(report, out_dir)
    _write(report, out_dir)
    return report


def _write(report: dict[str, Any], out_dir: Path) -> None:
    tmp = out_dir / "gpu-report.json.tmp"
    tmp.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, out_dir / "gpu-report.json")


def _summary(report: dict[str, Any]) -> str:
    lines = [f"GPU checks on {report.get('device')} (budget {report['budget_s']:.0f} s)"]
    for r in report["steps"]:
        if "skipped" in r:
            lines.append(f"  {r['step']:<9} skipped: {r['skipped']}")
            continue
        state = "out of time" if r["timed_out"] else f"exit {r['exit']}"
        lines.append(f"  {r['step']:<9} {state}, {r['seconds']:.1f} s")
        for t in (r.get("result") or {}).get("targets", []):
            lines.append(f"      {t.get('name')}: {t.get('value')} "
                         f"({'met' if t.get('met') else 'missed'})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    names = [s.name for s in STEPS]
    p = argparse.ArgumentParser(prog="python -m bidlab.bench gpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="gpu-checks", help="folder for gpu-report.json and "
                   "gpu-log.txt (default ./gpu-checks)")
    p.add_argument("--budget", type=float, default=540.0,
                   help="seconds for all steps together (default 540)")
    p.add_argument("--only", default="", help=f"comma-separated steps to run, of {names}")
    p.add_argument("--data", default=None,
                   help="the shared data sets' folder (sets BIDLAB_SHARED_DATA)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    a = p.parse_args(argv)
    wanted = [s for s in a.only.split(",") if s]
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        p.error(f"unknown steps {unknown}; choose from {names}")
    if a.budget <= 0:
        p.error(f"--budget must be positive; got {a.budget}")
    if Path(a.out).exists() and not Path(a.out).is_dir():
        p.error(f"--out {a.out} is a file: name a folder (made if missing) for the report")
    from bidlab import backend

    if not backend.gpu_available():
        p.error("no CUDA device here: these checks need CuPy and an NVIDIA GPU "
                "(pip install 'bidlab[gpu]' on such a machine)")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH")) if x)
    if a.data:
        env["BIDLAB_SHARED_DATA"] = str(Path(a.data).resolve())
    steps = [s for s in STEPS if not wanted or s.name in wanted]
    report = run_steps(steps, a.budget, Path(a.out), env)
    print(json.dumps(report, indent=1, default=str) if a.json else _summary(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
