"""The page side of ``python -m bidlab.bench dashboard``: run the notebook and time it.

Starts JupyterLab (:mod:`bidlab.bench._browser`) on a copy of ``notebooks/02_lda_live.ipynb``,
runs it in headless chromium, adds a bare learner to the same kernel and takes every
measurement the benchmark reports: the two learners' alternating training windows (timed
from their own records), the score chart's updates in the page during each dashboard
window, the cores each party used (:class:`CpuShares`), the ``kappa`` slider's delays and
the ``--page-only`` rounds. :func:`run_session` returns them raw in a :class:`Session`;
the ratios, intervals and the report are :mod:`bidlab.bench.dashboard`'s. Kept apart so
that the statistics can be read (and tested) without a browser.

Work in the kernel is sent as Python source through :class:`~bidlab.bench._browser.KernelProbe`
(it evaluates expressions; statements go through ``exec``); the snippets below are that
source.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bidlab.bench import _browser as bh
from bidlab.bench import _live_page as lp
from bidlab.bench._learner_windows import paused_learner, train_window

# Statements run in the kernel (through exec: the probe evaluates expressions only). The bare
# learner gets the notebook learner's temperatures too (the notebook heats one parameter), so
# the two learners differ only in the dashboard.
_BARE = """
bare = LDAGibbs(n_components=K, nsamps=20, batch_size=64,
                random_state=0).learner(X, n_passes=NPASSES)
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
_WITH_MAP = ("'topic_map' in globals() and _bench_renders.__setitem__(topic_map, "
             "topic_map.view.render)")
_VIEWS_OFF = "[setattr(v.view, 'render', lambda s: None) for v in _bench_renders] and 0"
_UNSLOW = "(_bench_renders.clear(), learner.model.__dict__.pop('update')) and 0"

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
               docs: int, data: Path | None) -> dict[str, list[dict[str, Any]]]:
    """The ``--page-only`` rounds (see :mod:`bidlab.bench.dashboard`): the bare learner's
    windows in its own process, ``rendering`` (the views drawing into the page) and
    ``still`` (their render switched off), ``rounds`` of each."""
    import subprocess

    probe.eval(f"exec({_SLOW!r}, globals()) or 0")
    probe.eval(f"({_WITH_MAP}) or 0")  # the map renders and stands still with the others
    code = ("import sys; from bidlab.bench._dashboard_run import bare_process; "
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
    return runs


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


def window_order(round_index: int) -> tuple[str, str]:
    """Which learner trains first in round ``round_index``: the dashboard's in even rounds,
    the bare one in odd rounds (so the windows run D B B D D B ...)."""
    return ("learner", "bare") if round_index % 2 == 0 else ("bare", "learner")


@dataclass
class Session:
    """What one run of the page measured, before any statistics."""

    with_dashboard: list[dict[str, Any]]  # the dashboard learner's windows (_run_window)
    without_dashboard: list[dict[str, Any]]  # the bare learner's windows
    update_windows: list[dict[str, Any]]  # the page's chart updates in each dashboard window
    control: dict[str, Any]  # the slider's delays (bidlab.bench._live_page.control_delays)
    page_only: dict[str, list[dict[str, Any]]] | None  # --page-only windows, by view state
    heated: int  # heated parameters, the same in both learners
    isolated: dict[str, Any] | None  # the --isolate core split (None without it)


#: ``--map``: the intertopic map on the dashboard learner, right after its bubbles
MAP_CELL = """from bidlab.widgets import IntertopicMap

topic_map = IntertopicMap(learner, vocab)
topic_map"""


def run_session(steps: int, rounds: int, drags: int, docs: int, data: Path | None,
                page_rounds: int = 0, warmup: float = 10.0, isolated: bool = False,
                with_map: bool = False) -> Session:
    """Run the notebook in JupyterLab in chromium and take every measurement: ``rounds``
    alternating windows of ``steps`` minibatches after ``warmup`` seconds, ``drags`` slider
    drags, then ``page_rounds`` ``--page-only`` rounds. ``with_map`` adds the intertopic
    map (:data:`MAP_CELL`); its frames in the kernel and its data changes in the page are
    then counted in every dashboard window too. A ``LookupError`` says why a real browser
    cannot run here."""
    reason = bh.skip_reason()
    if reason:
        raise LookupError(reason)
    with tempfile.TemporaryDirectory(prefix="bidlab-bench-dashboard-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        lp.lab_notebook(root / "02_lda_live.ipynb", data,
                        f"NPASSES = 100_000\nMAX_DOCS = {docs}",
                        extra_cells=(MAP_CELL,) if with_map else ())
        server = bh.start_lab(root, Path(tmp) / "lab")
        browser = None
        try:
            browser = bh.start_browser(Path(tmp) / "chromium")
            page = browser.new_page()
            probe = bh.KernelProbe.run_notebook(
                server, page, "02_lda_live.ipynb",
                "'bubbles' in globals() and learner.state == 'running' and dash.points > 0",
                90, "the notebook to run")
            bh.wait_for(lambda: page.evaluate(f"() => !!{lp.find_source_js(lp.SCORES)}"),
                        30, "the score chart in the page")
            if with_map:
                bh.wait_for(lambda: probe.eval("topic_map.frames > 0") and page.evaluate(
                    f"() => !!{lp.find_source_js(lp.MAP)}"), 60, "the intertopic map drawn")
            time.sleep(warmup)  # the notebook's learner trains, the page renders it
            probe.eval("learner.pause() or 0")
            probe.eval(f"exec({_BARE!r}, globals()) or 0", timeout=60)
            heated = probe.eval("_bench_heated")
            probe.eval(f"exec({_WINDOW!r}, globals()) or 0")
            lp.install_update_counter(page, lp.SCORES)
            if with_map:
                lp.install_change_counter(page, lp.MAP)
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
                    frames = probe.eval("topic_map.frames") if with_map else 0
                    with_dash.append(_run_window(probe, "learner", steps, 300, cpu))
                    # the page's updates while the learner trained (first to last minibatch
                    # of the window): the time around it, learner paused, has none to show
                    rates.append(lp.update_rate(page, *with_dash[-1]["epoch_ms"]))
                    if with_map:
                        w = with_dash[-1]
                        w["map_frames_per_s"] = ((probe.eval("topic_map.frames") - frames)
                                                 / max(w["seconds"], 1e-9))
                        rates[-1]["map"] = lp.change_rate(page, lp.MAP, *w["epoch_ms"])
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
    return Session(with_dash, bare, rates, lat, page_only, heated, split)
