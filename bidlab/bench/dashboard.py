"""``python -m bidlab.bench dashboard``: what a live dashboard in a real browser costs.

Opens ``notebooks/02_lda_live.ipynb`` in JupyterLab (127.0.0.1, token) in headless Debian
chromium, runs it (an ``LDAGibbs`` learner with a ``Dashboard`` and a ``TopicBubbles``
chart, training in the background), and in the same kernel makes a second learner with
the same data and options and no dashboard. It then alternates: the dashboard learner
trains ``--steps`` minibatches while the page renders it, then the bare learner trains
``--steps`` minibatches (the other one paused each time), for ``--rounds`` rounds, the
bare learner first in every other round (D B B D D B ...: a host drifting faster or slower
over the run favours neither). Each run's time comes from the learner's own per-minibatch
record (first to last minibatch of the window), so the ratio compares the same number of
minibatches on the same data, side by side on one machine. Besides the headline ratio
(mean rate over mean rate) it reports each round's ratio and their geometric mean with a
90 % bootstrap interval: on a shared machine one window's rate varies by more than the
effect measured, and the interval shows how uncertain round-to-round noise alone leaves a
run's figure (the host's slower drift adds to that). Target: throughput ratio >= 0.95.

The first window starts after ``--warmup`` seconds of training with the page rendering
(default 10): the page's own start-up work and the first seconds of a fresh model, whose
top words change on nearly every tick, are not steady state. ``--warmup 0`` measures from
the notebook's first minibatches (the JSON records the warm-up used).

During the dashboard windows it also counts the score chart's updates in the page while
the learner trains (first to last minibatch of each window; target 9.5/s) and measures who
used the machine's cores (``cpu_cores``: chromium's renderer and its other processes, the
Jupyter server, the whole kernel, and within it the training thread and the pump; from
the processes' CPU times: what explains a ratio below 1 on a small machine). At the end
it drags the ``kappa`` slider ``--drags`` times and reports the delay from the browser
event to the first minibatch using the new value (target p95 <= 150 ms).

``--page-only R`` adds R rounds that split the cost: a second bare learner runs in its own
process (no GIL shared with the kernel) while the dashboard learner is slowed to ~12
minibatches/s (enough for 10 updates/s) and its views alternately render into the page and
stand still. That ratio is what the page, the Jupyter server and the views' pump cost a
learner that shares only the machine with them; the main ratio adds what sharing the
kernel's process (its GIL and its sending threads) costs. ``--isolate`` gives both
learners' training threads the last core and pins chromium, the Jupyter server and the
kernel's other threads to the rest: the dashboard's cost when the browser does not share
the training core. Needs a source checkout (for the notebook), chromium
at /usr/bin/chromium, playwright and jupyterlab; the browser harness is
:mod:`bidlab.bench._browser`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bidlab.bench import _browser as bh
from bidlab.bench import _live_page as lp
from bidlab.bench._common import emit, machine, print_targets, target
from bidlab.datasets.paths import find_shared_data_dir

# Statements run in the kernel (through exec: the probe evaluates expressions only). The bare
# learner gets the notebook learner's temperatures too (the notebook heats one parameter), so
# the two learners differ only in the dashboard.
_BARE = """
bare = LDAGibbs(k=K, nsamps=20, batch_size=64, random_state=0).learner(X, n_passes=NPASSES)
bare.start(); bare.pause()
_bench_T = learner.estimator.temperature
for _t, _w in zip(*__import__('numpy').nonzero(_bench_T != 1.0)):
    bare.set_temperature(float(_bench_T[_t, _w]), topic=int(_t), word=int(_w))
_bench_heated = int((_bench_T != 1.0).sum())
"""


class CpuShares:
    """Cores used by each party of the benchmark over a window (CPU seconds / wall seconds).

    Parties: chromium's renderer and its other processes (found by command line), the
    Jupyter server, the kernel, and the kernel's threads named in ``threads``
    (native id -> name, read in the kernel); and ``machine_busy``, the cores every process
    on the machine used (the parties, this program, Playwright's driver, the system).
    """

    def __init__(self, server_pid: int, kernel_pid: int, threads: dict[int, str]) -> None:
        import psutil  # a dependency of ipykernel, which this benchmark needs anyway

        self._psutil = psutil
        self.server_pid, self.kernel_pid, self.threads = server_pid, kernel_pid, threads

    def _party(self, proc: Any) -> str | None:
        if proc.pid == self.kernel_pid:
            return "kernel"
        if proc.pid == self.server_pid:
            return "jupyter_server"
        try:
            cmd = " ".join(proc.cmdline())
        except self._psutil.Error:
            return None
        if "chrom" not in proc.name() and "chrom" not in cmd:
            return None
        return "chromium_renderer" if "--type=renderer" in cmd else "chromium_other"

    def chromium_pids(self) -> list[int]:
        """Chromium's processes (renderer and others) running now."""
        return [p.pid for p in self._psutil.process_iter()
                if (self._party(p) or "").startswith("chromium")]

    def sample(self) -> tuple[float, dict[tuple[str, int], float]]:
        times: dict[tuple[str, int], float] = {}
        for proc in self._psutil.process_iter():
            party = self._party(proc)
            if party is None:
                continue
            try:
                cpu = proc.cpu_times()
                times[(party, proc.pid)] = cpu.user + cpu.system
                if party == "kernel":
                    for t in proc.threads():
                        name = self.threads.get(t.id)
                        if name is not None:
                            times[(name, t.id)] = t.user_time + t.system_time
            except self._psutil.Error:
                continue
        machine = self._psutil.cpu_times()  # every process: the parties and all the rest
        times[("machine_busy", 0)] = sum(machine) - machine.idle - getattr(machine, "iowait", 0)
        return time.time(), times

    @staticmethod
    def shares(before: tuple[float, dict], after: tuple[float, dict]) -> dict[str, float]:
        wall = after[0] - before[0]
        out: dict[str, float] = {}
        for key, t in after[1].items():
            out[key[0]] = out.get(key[0], 0.0) + (t - before[1].get(key, 0.0)) / wall
        return {k: round(v, 3) for k, v in sorted(out.items())}


def core_split(cores: list[int]) -> tuple[list[int], list[int]]:
    """``--isolate``: the core the learners' training threads get (the last one) and the
    cores left to everything else (the page, the server, the kernel's other threads)."""
    if len(cores) < 2:
        raise ValueError(f"--isolate needs at least 2 cores to split; this process may use "
                         f"{len(cores)} ({cores})")
    return cores[-1:], cores[:-1]


def isolate(training: list[int], kernel_pid: int, others: list[int]) -> dict[str, Any]:
    """Give the training threads ``training`` (native ids) a core of their own: pin them to
    the last usable core and every thread of the kernel ``kernel_pid`` and of the processes
    ``others`` (the Jupyter server, chromium's) to the remaining cores. Threads started
    later inherit their creator's cores. Returns the split for the report."""
    train_cores, rest = core_split(sorted(os.sched_getaffinity(0)))
    pinned = 0
    for pid in (kernel_pid, *others):
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except FileNotFoundError:
            continue  # a process that ended
        for tid in tids:
            try:
                os.sched_setaffinity(tid, train_cores if tid in training else rest)
                pinned += 1
            except (ProcessLookupError, PermissionError):
                continue  # a thread that ended, or one we may not move
    return {"training_cores": train_cores, "other_cores": rest, "threads_pinned": pinned}


# Names of the kernel threads CpuShares reports (the rest of the kernel is in "kernel"): the
# training thread, the views' pump, the observers' publisher, the Learners panel's bridge
# and ipykernel's IOPub sender; all but the first hold the GIL for their Python work.
_THREADS = """
{t.native_id: {'bidlab-learner-': 'training_thread', 'bidlab-pump-': 'pump',
               'bidlab-observers-': 'observers', 'bidlab-lab-bridge': 'lab_bridge',
               'IOPub': 'iopub'}[p]
 for t in __import__('threading').enumerate()
 for p in ('bidlab-learner-', 'bidlab-pump-', 'bidlab-observers-', 'bidlab-lab-bridge', 'IOPub')
 if t.name.startswith(p)}
"""


# A window runs in the kernel: a thread resumes the learner, waits for its steps and pauses
# it, so the benchmark need not poll. Every request a client sends makes the kernel publish
# "busy" then "idle" to all its clients, and JupyterLab redraws its kernel indicators and the
# tab's favicon on each: polling ten times a second cost the page's processes ~0.5 of a core
# in every window, taken from the training thread on a 2-core machine.
_WINDOW = """
def _bench_window(lr, steps):
    import threading, time
    state = {'s0': lr.step, 'done': False}
    def run():
        lr.resume()
        while lr.step < state['s0'] + steps and lr.state in ('running', 'paused'):
            time.sleep(0.02)
        if lr.state == 'running':
            lr.pause()
        state['done'] = lr.state
    threading.Thread(target=run, name='bench-window', daemon=True).start()
    return state
"""


# --page-only: the dashboard learner slowed (a sleep before each update) and its views' render
# switched off and on again; the originals are kept under _bench_* names.
_SLOW = """
import time as _bench_time
_bench_update = learner.model.update
def _bench_slow_update(batch, _update=_bench_update):
    _bench_time.sleep(0.08)
    return _update(batch)
learner.model.update = _bench_slow_update
_bench_renders = {v: v.view.render for v in (dash, bubbles)}
"""
_VIEWS_ON = "[setattr(v.view, 'render', r) for v, r in _bench_renders.items()] and 0"
_VIEWS_OFF = "[setattr(v.view, 'render', lambda s: None) for v in _bench_renders] and 0"
_UNSLOW = "(_bench_renders.clear(), learner.model.__dict__.pop('update')) and 0"


def window_rate(steps: list[int], times: list[float], first: int, count: int) -> float:
    """Minibatches per second over a learner's record rows ``first`` .. ``first + count - 1``
    (end of the first to end of the last: ``count - 1`` intervals)."""
    t = [ti for s, ti in zip(steps, times, strict=True) if first <= s < first + count]
    return (len(t) - 1) / (t[-1] - t[0])


def paused_learner(X: Any, k: int) -> Any:
    """An ``LDAGibbs`` learner with the notebook's options on ``X``, started and paused after
    its first minibatch (compiled, counts initialised): ready for :func:`train_window`."""
    from bidlab.models import LDAGibbs

    lr = LDAGibbs(k=k, nsamps=20, batch_size=64, random_state=0).learner(X, n_passes=100_000)
    lr.start()
    lr.pause(wait=True)
    return lr


def train_window(lr: Any, steps: int, timeout: float = 300.0) -> float:
    """Resume the paused learner ``lr`` for ``steps`` minibatches, pause it, and return its
    rate over them from its own record (minibatches per second)."""
    s0 = lr.step
    lr.resume()
    end = time.monotonic() + timeout
    while lr.step < s0 + steps and lr.state in ("running", "paused"):
        if time.monotonic() > end:
            raise TimeoutError(f"{steps} minibatches took more than {timeout} s")
        time.sleep(0.02)
    lr.pause(wait=True)
    if lr.step < s0 + steps:
        raise RuntimeError(f"the learner ended ({lr.state}) after {lr.step - s0} of {steps} "
                           f"minibatches: {lr.error}")
    rec = lr.record.as_dict()
    return window_rate(rec["step"].tolist(), rec["time"].tolist(), s0, steps)


def bare_process(data: str, docs: int, k: int) -> None:
    """A bare learner in its own process (``--page-only``): one line in per window (its
    minibatches), one JSON line out (its rate, from its record)."""
    from bidlab.datasets import load_kos, synthetic_lda_corpus

    corpus = (load_kos(data) if data else
              synthetic_lda_corpus(n_docs=docs, n_words=2000, k=k, seed=0))
    lr = paused_learner(corpus.X[:docs], k)
    print(json.dumps({"pid": os.getpid()}), flush=True)
    for line in sys.stdin:
        rate = train_window(lr, int(line))
        print(json.dumps({"minibatches_per_s": rate}), flush=True)
    lr.stop()


def _page_only(probe: Any, page: Any, cpu: CpuShares, steps: int, rounds: int,
               docs: int, data: Path | None) -> dict[str, Any]:
    """The ``--page-only`` rounds (see the module docstring)."""
    import subprocess

    probe.eval(f"exec({_SLOW!r}, globals()) or 0")
    code = ("import sys; from bidlab.bench.dashboard import bare_process; "
            "bare_process(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(data or ""), str(docs),
                             str(probe.eval("K"))], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    runs: dict[str, list[dict[str, Any]]] = {"rendering": [], "still": []}
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdout.readline()  # ready
        for i in range(rounds):
            for tag in (("rendering", "still") if i % 2 == 0 else ("still", "rendering")):
                probe.eval(_VIEWS_ON if tag == "rendering" else _VIEWS_OFF)
                time.sleep(1.0)  # let the page settle into the new state
                before, start_ms = cpu.sample(), page.evaluate("() => Date.now()")
                proc.stdin.write(f"{steps}\n")
                proc.stdin.flush()
                run = json.loads(proc.stdout.readline())
                run["cpu_cores"] = CpuShares.shares(before, cpu.sample())
                run["page_updates_per_s"] = lp.update_rate(page, since_ms=start_ms)["rate"]
                runs[tag].append(run)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(60)
        probe.eval(_VIEWS_ON)
        probe.eval(_UNSLOW)
    rate = {tag: sum(r["minibatches_per_s"] for r in rs) / rounds for tag, rs in runs.items()}
    return {"ratio": rate["rendering"] / rate["still"], "rounds": rounds, **runs}


def _wait_window(probe: Any, name: str, steps: int, timeout: float) -> None:
    """Wait for the kernel's window on ``name`` to end, asking a few times per window: each
    wait is the remaining steps at the rate seen so far (at least 20 ms)."""
    t0 = time.time()
    while True:
        done, step, s0 = probe.eval(f"(_bench_state['done'], {name}.step, _bench_state['s0'])")
        if done and step < s0 + steps:  # the learner ended (done, stopped or failed) early
            raise RuntimeError(f"{name} ended ({done}) after {step - s0} of {steps} "
                               f"minibatches: see {name}.error in the notebook")
        if done:
            return
        elapsed = time.time() - t0
        if elapsed > timeout:
            raise TimeoutError(f"{name} did not train {steps} minibatches in {timeout} s")
        made = step - s0
        rate = made / elapsed if made > 0 and elapsed > 0 else steps / 2.0
        time.sleep(min(max(0.9 * (s0 + steps - step) / rate, 0.02), 2.0))


def _run_window(probe: Any, name: str, steps: int, timeout: float,
                cpu: CpuShares | None = None) -> dict[str, Any]:
    """Resume learner ``name`` for ``steps`` minibatches, pause it; time them from its
    record (end of the first to end of the last: ``steps - 1`` intervals)."""
    before = cpu.sample() if cpu else None
    s0 = probe.eval(f"(globals().__setitem__('_bench_state', _bench_window({name}, {steps})) "
                    f"or _bench_state['s0'])")
    _wait_window(probe, name, steps, timeout)
    shares = CpuShares.shares(before, cpu.sample()) if cpu else None
    # the record's times are perf_counter(); the offset puts them on the page's clock
    *rec, off = probe.eval(
        f"(lambda r, t: (r['step'].tolist(), r['time'].tolist(), r['n'].tolist(), "
        f"t.time() - t.perf_counter()))({name}.record.as_dict(), __import__('time'))",
        timeout=30)
    rows = [(s, t, n) for s, t, n in zip(*rec, strict=True) if s0 <= s < s0 + steps]
    seconds = rows[-1][1] - rows[0][1]
    samples = sum(n for _, _, n in rows[1:])
    out = {"learner": name, "first_step": s0, "minibatches": len(rows), "seconds": seconds,
           "samples_per_s": samples / seconds, "minibatches_per_s": (len(rows) - 1) / seconds,
           "epoch_ms": [(rows[0][1] + off) * 1e3, (rows[-1][1] + off) * 1e3]}
    if shares is not None:
        out["cpu_cores"] = shares
    return out


def measure(steps: int, rounds: int, drags: int, docs: int, data: Path | None,
            page_rounds: int = 0, warmup: float = 10.0, isolated: bool = False
            ) -> dict[str, Any]:
    reason = bh.skip_reason()
    if reason:
        raise LookupError(reason)
    with tempfile.TemporaryDirectory(prefix="bidlab-bench-dashboard-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        lp.lab_notebook(root / "02_lda_live.ipynb", data,
                        f"NPASSES = 100_000\nMAX_DOCS = {docs}")
        server = bh.start_lab(root, Path(tmp) / "lab")
        browser = None
        try:
            browser = bh.start_browser(Path(tmp) / "chromium")
            page = browser.new_page()
            bh.open_notebook(page, server, "02_lda_live.ipynb")
            bh.run_all_cells(page)
            probe = bh.KernelProbe.for_page(server, page)
            bh.wait_for(lambda: probe.eval("'bubbles' in globals() and learner.state == "
                                           "'running' and dash.points > 0"), 90,
                        "the notebook to run")
            bh.wait_for(lambda: page.evaluate(f"() => !!{lp.find_source_js(lp.SCORES)}"),
                        30, "the score chart in the page")
            time.sleep(warmup)  # the notebook's learner trains, the page renders it
            probe.eval("learner.pause() or 0")
            probe.eval(f"exec({_BARE!r}, globals()) or 0", timeout=60)
            heated = probe.eval("_bench_heated")
            probe.eval(f"exec({_WINDOW!r}, globals()) or 0")
            lp.install_update_counter(page, lp.SCORES)
            kernel_pid = probe.eval("__import__('os').getpid()")
            cpu = CpuShares(server.process.pid, kernel_pid, probe.eval(_THREADS.strip()))
            split = (isolate(list(probe.eval("(learner._thread.native_id, "
                                             "bare._thread.native_id)")),
                             kernel_pid, [server.process.pid, *cpu.chromium_pids()])
                     if isolated else None)
            with_dash, bare, rates = [], [], []
            for i in range(rounds):
                # alternate which learner goes first (dashboard, bare, bare, dashboard, ...):
                # a host that speeds up or slows down over the run then favours neither
                for name in window_order(i):
                    if name == "bare":
                        bare.append(_run_window(probe, "bare", steps, 300, cpu))
                        continue
                    with_dash.append(_run_window(probe, "learner", steps, 300, cpu))
                    # the page's updates while the learner trained (first to last minibatch
                    # of the window): the time around it, learner paused, has none to show
                    rates.append(lp.update_rate(page, *with_dash[-1]["epoch_ms"]))
            probe.eval("learner.resume() or 0")
            moves = []
            for i in range(drags):
                moves.append(lp.drag_slider(page, "kappa", 24 if i % 2 == 0 else -24))
                lp.wait_ms(350)
            stamps = [d["stamp"] for d in moves if d["after"] != d["before"]]
            bh.wait_for(lambda: probe.eval("len(dash.controls.pending) == 0"), 10,
                        "the slider changes to apply")
            lat = lp.control_delays(probe, "kappa", stamps)
            page_only = (_page_only(probe, page, cpu, steps, page_rounds, docs, data)
                         if page_rounds else None)
            probe.eval("learner.stop(wait=False) or bare.stop(wait=False) or 0")
            probe.close()
        finally:
            if browser is not None:
                browser.close()
            server.stop()
    dash_rate = sum(r["minibatches_per_s"] for r in with_dash) / rounds
    bare_rate = sum(r["minibatches_per_s"] for r in bare) / rounds
    updates = sum(r["updates"] for r in rates)
    seconds = sum(r["seconds"] for r in rates)
    delays = lat["delays_s"]
    out = {
        "benchmark": "dashboard",
        "notebook": "notebooks/02_lda_live.ipynb",
        "data": str(data) if data else "synthetic",
        "minibatches_per_run": steps,
        "rounds": rounds,
        "warmup_s": warmup,
        "isolated": split,
        "with_dashboard": with_dash,
        "without_dashboard": bare,
        "throughput_ratio": dash_rate / bare_rate,
        **pair_ratios(with_dash, bare),
        "machine_cores": os.cpu_count(),
        "heated_parameters_both_learners": heated,
        "cpu_cores_with_dashboard": _mean_shares(with_dash),
        "cpu_cores_without_dashboard": _mean_shares(bare),
        "update_rate_per_s": updates / seconds if seconds else 0.0,
        "update_windows": rates,
        "control": {"option": "kappa", "drags": drags, "changes": lat["changes"],
                    "matched": len(delays), "p50_ms": lp.percentile(delays, 50) * 1e3,
                    "p95_ms": lp.percentile(delays, 95) * 1e3,
                    "max_ms": max(delays) * 1e3 if delays else None},
        "page_only": page_only,
        "machine": machine(),
    }
    out["targets"] = [
        target("throughput with the dashboard / without", out["throughput_ratio"], 0.95),
        target("chart updates in the page per second", out["update_rate_per_s"], 9.5),
        target("control delay p95 (ms)", out["control"]["p95_ms"], 150, at_most=True),
    ]
    return out


def window_order(round_index: int) -> tuple[str, str]:
    """Which learner trains first in round ``round_index``: the dashboard's in even rounds,
    the bare one in odd rounds (so the windows run D B B D D B ...)."""
    return ("learner", "bare") if round_index % 2 == 0 else ("bare", "learner")


def pair_ratios(with_dash: list[dict[str, Any]], bare: list[dict[str, Any]],
                seed: int = 0) -> dict[str, Any]:
    """Each round's ratio (its dashboard window over the adjacent bare window of the same
    round), their median, their geometric mean and a 90 % bootstrap interval of it.

    Why beside the headline ratio (mean rate over mean rate): on a shared machine the
    neighbours' load drifts over seconds, and adjacent windows share more of it than the
    run's means; the spread of the pairs shows how much of a run's figure is that drift,
    and the interval says whether a run can tell its ratio from a target a few per cent
    away. The geometric mean is the mean of a ratio's logarithm (a round at 0.5 and one at
    2.0 average to 1.0); the interval resamples the rounds (2000 times, seeded: the same
    rounds give the same interval). It counts rounds as independent; a host whose speed
    drifts over longer than a round spreads whole runs wider than that."""
    import numpy as np

    ratios = [d["minibatches_per_s"] / b["minibatches_per_s"]
              for d, b in zip(with_dash, bare, strict=True)]
    if not ratios:
        return {"pair_ratios": [], "pair_ratio_median": None, "pair_ratio_geomean": None,
                "pair_ratio_ci90": None}
    logs = np.log(np.asarray(ratios))
    interval = None  # one round says nothing about its own spread
    if len(logs) > 1:
        rng = np.random.default_rng(seed)
        means = logs[rng.integers(0, len(logs), size=(2000, len(logs)))].mean(axis=1)
        interval = [round(float(v), 4) for v in np.exp(np.percentile(means, [5.0, 95.0]))]
    return {"pair_ratios": [round(r, 4) for r in ratios],
            "pair_ratio_median": float(np.median(ratios)),
            "pair_ratio_geomean": float(np.exp(logs.mean())),
            "pair_ratio_ci90": interval}


def _mean_shares(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Average of the windows' ``cpu_cores`` (parties missing from a window count 0)."""
    keys = sorted({k for r in runs for k in r.get("cpu_cores", {})})
    return {k: round(sum(r.get("cpu_cores", {}).get(k, 0.0) for r in runs) / len(runs), 3)
            for k in keys}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bidlab.bench dashboard", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=250, help="minibatches per timed run")
    ap.add_argument("--rounds", type=int, default=16,
                    help="alternations of the two learners (more: less noise; one round's "
                         "ratio has a standard deviation of ~6 %% on a shared 2-core VM)")
    ap.add_argument("--drags", type=int, default=16, help="slider drags for the latency")
    ap.add_argument("--docs", type=int, default=2000, help="documents (MAX_DOCS)")
    ap.add_argument("--data", type=Path, default=find_shared_data_dir(),
                    help="the shared data folder (uci-kos); synthetic data when absent")
    ap.add_argument("--page-only", type=int, default=0, metavar="R",
                    help="R more rounds: a bare learner in its own process, with the views "
                         "rendering vs still (what the page alone costs)")
    ap.add_argument("--warmup", type=float, default=10.0, metavar="S",
                    help="seconds of training with the page rendering before the first "
                         "window (default 10; 0: measure from the start)")
    ap.add_argument("--isolate", action="store_true",
                    help="give both learners' training threads a core of their own (the "
                         "last one) and pin the page, the server and the kernel's other "
                         "threads to the rest: the cost of the dashboard when the browser "
                         "does not share the training core")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    for name, least in (("steps", 2), ("rounds", 1), ("drags", 0), ("page_only", 0),
                        ("warmup", 0)):
        if getattr(args, name) < least:
            ap.error(f"--{name.replace('_', '-')} must be at least {least}; "
                     f"got {getattr(args, name)}")
    data = args.data if args.data is not None and args.data.is_dir() else None
    if args.isolate:
        try:
            core_split(sorted(os.sched_getaffinity(0)))  # fail early on a 1-core machine
        except ValueError as exc:
            ap.error(str(exc))
    try:
        out = measure(args.steps, args.rounds, args.drags, args.docs, data, args.page_only,
                      args.warmup, args.isolate)
    except LookupError as exc:
        print(f"python -m bidlab.bench dashboard: cannot run: {exc}", file=sys.stderr)
        return 2
    return emit(out, args.json, print_report)


def print_report(out: dict[str, Any]) -> None:
    """The readable report of :func:`main`'s result."""
    iso = out["isolated"]
    print(f"LDAGibbs on {out['data']}, {out['minibatches_per_run']} minibatches per run, "
          f"{out['rounds']} rounds after {out['warmup_s']:g} s of warm-up"
          + (f"; training threads on core {iso['training_cores']}, everything else on "
             f"{iso['other_cores']}" if iso else ""))
    for tag, runs in (("with dashboard", out["with_dashboard"]),
                      ("no dashboard  ", out["without_dashboard"])):
        print(f"  {tag}: " + ", ".join(f"{r['minibatches_per_s']:.1f}" for r in runs)
              + " minibatches/s")
    c = out["control"]
    print(f"  throughput ratio {out['throughput_ratio']:.3f}; rounds: "
          + ", ".join(f"{r:.3f}" for r in out["pair_ratios"])
          + f" (median {out['pair_ratio_median']:.3f}, geometric mean "
          f"{out['pair_ratio_geomean']:.3f}, 90 % interval "
          + ("-".join(f"{v:.3f}" for v in ci) if (ci := out["pair_ratio_ci90"])
             else "n/a with one round") + ")")
    for tag, key in (("with dashboard", "cpu_cores_with_dashboard"),
                     ("no dashboard  ", "cpu_cores_without_dashboard")):
        print(f"  cores used {tag}: " + ", ".join(f"{k} {v:.2f}" for k, v in out[key].items())
              + f" (of {out['machine_cores']})")
    print(f"  chart updates in the page {out['update_rate_per_s']:.2f}/s")
    print(f"  control delay ({c['matched']} drags of {c['option']}): p50 {c['p50_ms']:.0f} ms,"
          f" p95 {c['p95_ms']:.0f} ms")
    po = out["page_only"]
    if po:
        print("  page only (bare learner in its own process): "
              + ", ".join(f"{r['minibatches_per_s']:.1f}" for r in po["rendering"])
              + " rendering vs " + ", ".join(f"{r['minibatches_per_s']:.1f}" for r in po["still"])
              + f" still: ratio {po['ratio']:.3f}")
    print_targets(out["targets"])
