"""The frontend's messages, sent on the shell channel to a real kernel running 02_lda_live.

No browser: nbclient runs the notebook and the test plays the frontend's part with
``comm_msg`` messages of the shapes JupyterLab sends:
an ipywidgets slider ``update``, and a bokeh selection ``jsevent``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("jupyter_bokeh", reason="the notebooks need the viz extra")

from conftest import SHARED_DATA  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

WAIT = '''
import json, time
def wait(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False
'''


class Kernel:
    """A notebook executed in a live kernel, plus ways to run code and send comm messages."""

    def __init__(self, client: nbclient.NotebookClient, nb: nbformat.NotebookNode) -> None:
        self.client, self.nb = client, nb

    def run(self, code: str) -> dict:
        """Execute ``code``; it must print one JSON object last, which is returned."""
        cell = nbformat.v4.new_code_cell(code)
        self.nb.cells.append(cell)
        self.client.execute_cell(cell, len(self.nb.cells) - 1)
        text = "".join(o.get("text", "") for o in cell.outputs
                       if o.get("output_type") == "stream")
        return json.loads(text.strip().splitlines()[-1])

    def comm_msg(self, comm_id: str, data: dict) -> None:
        kc = self.client.kc
        kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))


@pytest.fixture(scope="module")
def kernel():
    nb = nbformat.read(NOTEBOOKS / "02_lda_live.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += f"\nDATA = {str(SHARED_DATA)!r}\nMAX_DOCS = 1000\nNPASSES = 100000"
    client = nbclient.NotebookClient(nb, timeout=60, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    with client.setup_kernel():
        for i, c in enumerate(list(nb.cells)):
            client.execute_cell(c, i)
        k = Kernel(client, nb)
        k.run(WAIT + "print(json.dumps(wait(lambda: bubbles.patches > 0 and dash.points > 0)))")
        yield k
        k.run("learner.stop(); dash.close(); bubbles.close(); print('{}')")


def test_slider_update_reaches_the_learner(kernel):
    ids = kernel.run("print(json.dumps({'alpha': dash.controls.widgets['alpha'].model_id, "
                     "'before': learner.opts.alpha}))")
    assert ids["before"] != pytest.approx(0.42)
    kernel.comm_msg(ids["alpha"], {"method": "update", "state": {"value": 0.42},
                                   "buffer_paths": []})
    got = kernel.run(
        # the pump moves the change to `applied`, then shows it on its next tick
        "ok = wait(lambda: dash.controls.applied and 'took effect' in dash.message.value)\n"
        "a = dash.controls.applied[-1] if ok else None\n"
        "print(json.dumps({'alpha': learner.opts.alpha, 'ok': ok, 'step': a and a.step,\n"
        "  'used': a and learner.option_used('alpha', a.step),\n"
        "  'before': a and learner.option_used('alpha', a.step - 1),\n"
        "  'delay': a and a.delay_s, 'msg': dash.message.value}))")
    assert got["alpha"] == pytest.approx(0.42)
    assert got["ok"], "the dashboard never saw the change take effect"
    assert got["used"] == pytest.approx(0.42) and got["before"] != pytest.approx(0.42)
    assert got["delay"] < 1.0
    assert f"took effect at step {got['step']}" in got["msg"]


def test_bubble_selection_sets_a_temperature(kernel):
    ids = kernel.run("print(json.dumps({'chart': bubbles.chart.model_id, "
                     "'sel': bubbles.source.selected.id, 'temp': bubbles.temperature.model_id,"
                     " 'k': bubbles.k, 'row0': int(bubbles._row_words[0])}))")
    topic, word = 2, ids["row0"]
    assert word >= 0
    kernel.comm_msg(ids["chart"], {"method": "custom", "content": {
        "event": "jsevent", "kind": "ModelChanged", "model": {"id": ids["sel"]},
        "attr": "indices", "new": [0 * ids["k"] + topic]}})
    kernel.comm_msg(ids["temp"], {"method": "update", "state": {"value": 3.0},
                                  "buffer_paths": []})
    got = kernel.run(
        f"ok = wait(lambda: ({topic}, {word}) in bubbles.heated)\n"
        "print(json.dumps({'ok': ok, 'selected': bubbles.selected,\n"
        "  'selections': bubbles.selections, 'log': learner.temperature_log,\n"
        f"  'T': float(learner.temperature[{topic}, {word}])}}))")
    assert got["selected"] == [topic, word]
    assert got["selections"] == 1  # the selection was applied once, not twice
    assert got["ok"], "the heated mark never appeared"
    mine = [e for e in got["log"] if (e["topic"], e["word"], e["value"]) == (topic, word, 3.0)]
    assert len(mine) == 1 and mine[0]["batch"] >= 0
    assert got["T"] == pytest.approx(3.0)


def test_a_pump_tick_wakes_iopub_once(kernel):
    """A tick's comm messages (a bokeh patch alone is 5) reach the IOPub thread as one event
    (see widgets/_iopub.py), and so do another thread's inside ``batched_iopub``."""
    got = kernel.run(
        "import threading\n"
        "from bidlab.widgets._iopub import HeldSends, batched_iopub, iopub_thread\n"
        "io = iopub_thread(); stock = io._bidlab_stock_schedule\n"
        "seen = {'pump': [], 'burst': 0}\n"
        "def counting(f):\n"
        "    name = threading.current_thread().name\n"
        "    if name.startswith('bidlab-pump'):\n"
        "        seen['pump'].append(len(f) if isinstance(f, HeldSends) else -1)\n"
        "    elif name == 'burst':  # not the kernel's own threads (stdout flushes, ...)\n"
        "        seen['burst'] += 1\n"
        "    stock(f)\n"
        "io._bidlab_stock_schedule = counting\n"
        "t0 = dash.pump.ticks; p0 = dash.points\n"
        "wait(lambda: dash.pump.ticks >= t0 + 10)\n"
        "ticks = dash.pump.ticks - t0; points = dash.points - p0\n"
        "import ipywidgets as W\n"
        "box = W.IntText(value=0)\n"
        "def burst():\n"
        "    with batched_iopub():\n"
        "        for i in range(1, 21):\n"
        "            box.value = i\n"
        "th = threading.Thread(target=burst, name='burst'); th.start(); th.join()\n"
        "burst_wakes = seen['burst']\n"
        "io._bidlab_stock_schedule = stock\n"
        "print(json.dumps({'pump': seen['pump'], 'ticks': ticks, 'points': points,\n"
        "                  'burst_wakes': burst_wakes, 'value': box.value}))")
    pump = got["pump"]
    assert got["points"] >= 5, "the learner was not streaming during the check"
    # one event per tick at most (a tick running as counting began may add one), every
    # one a batch, and the ticks that streamed a score row held a whole bokeh patch
    assert 0 < len(pump) <= got["ticks"] + 1
    assert all(n > 0 for n in pump), f"messages went out one by one: {pump}"
    assert max(pump) >= 5 and sum(pump) >= 5 * got["points"] - 5
    # 20 widget updates from another thread inside batched_iopub: one wake-up
    assert got["burst_wakes"] == 1 and got["value"] == 20


def test_resync_from_another_thread_never_repeats_a_streamed_row(kernel):
    """A reload's resync (a timer thread replacing every source whole) and the pump's
    streams reach the wire in the order the document changed: replaying the score chart's
    patches as the page applies them (a stream appends, a column data change replaces) gives each
    step once. With the pump's sends held for a tick outside DOC_LOCK, a resync could go out
    between a stream and the tick's send, and the page would hold that row twice."""
    got = kernel.run(
        "import base64, threading, numpy as np\n"
        "from bidlab.widgets._iopub import iopub_thread\n"
        "io = iopub_thread(); stock_send = io._really_send\n"
        "cid = dash.chart.comm.comm_id; wire = []\n"
        "def recording(msg, *a, **kw):\n"
        "    try:\n"
        "        frames = [f if isinstance(f, bytes) else bytes(f) for f in msg]\n"
        "        i = frames.index(b'<IDS|MSG>')\n"
        "        header, content = json.loads(frames[i + 2]), json.loads(frames[i + 5])\n"
        "        if header.get('msg_type') == 'comm_msg' and content.get('comm_id') == cid:\n"
        "            wire.append(content['data'].get('content', {}).get('payload'))\n"
        "    except Exception as exc:\n"
        "        wire.append(repr(exc))\n"
        "    return stock_send(msg, *a, **kw)\n"
        "io._really_send = recording\n"
        "stop = threading.Event()\n"
        "def hammer():\n"
        "    while not stop.is_set():\n"
        "        dash.chart.resync(); time.sleep(0.003)\n"
        "p0 = dash.points\n"
        "th = threading.Thread(target=hammer, name='resync-hammer'); th.start()\n"
        "wait(lambda: dash.points >= p0 + 20, 30)\n"
        "stop.set(); th.join()\n"
        "learner.pause(wait=True)\n"  # no new rows: every row the kernel holds goes out
        "t0 = dash.pump.ticks; wait(lambda: dash.pump.ticks >= t0 + 3)\n"
        "io._really_send = stock_send\n"
        "sid = dash.source.id\n"
        "def column(v):\n"
        "    if isinstance(v, dict) and v.get('type') == 'ndarray':\n"
        "        arr = v['array']\n"
        "        raw = base64.b64decode(arr['data']) if isinstance(arr, dict) else None\n"
        "        if raw is None:\n"
        "            return list(arr)\n"
        "        return np.frombuffer(raw, dtype=v['dtype']).tolist()\n"
        "    return list(v)\n"
        "def fields(d):\n"
        "    if isinstance(d, dict) and d.get('type') == 'map':\n"
        "        return {k: v for k, v in d['entries']}\n"
        "    return d\n"
        "page, streams, replaces, bad = [], 0, 0, [w for w in wire if not isinstance(w, str)]\n"
        "for payload in wire:\n"
        "    try:\n"
        "        body = json.loads(payload)\n"
        "    except (TypeError, ValueError):\n"
        "        continue\n"
        "    for ev in body.get('events', []) if isinstance(body, dict) else []:\n"
        "        if ev.get('model', {}).get('id') != sid:\n"
        "            continue\n"
        "        if ev.get('kind') == 'ColumnsStreamed':\n"
        "            page += column(fields(ev['data'])['step']); streams += 1\n"
        "        elif ev.get('kind') == 'ColumnDataChanged':\n"
        "            page = column(fields(ev['data'])['step']); replaces += 1\n"
        "kern = [float(s) for s in dash.source.data['step']]\n"
        "learner.resume()\n"
        "print(json.dumps({'page': page, 'streams': streams, 'replaces': replaces,\n"
        "                  'kernel': kern}))")
    counts = {k: v for k, v in got.items() if k != "page"}
    assert got["streams"] >= 15 and got["replaces"] >= 15, counts
    page = got["page"]
    assert page == sorted(set(page)), "a streamed row reached the page twice"
    assert page == got["kernel"][-len(page):] and page[-1] == got["kernel"][-1]


def test_browser_echo_of_a_stream_is_dropped(kernel):
    # stops the pump: keep this test last in the module
    ids = kernel.run("n0 = dash.points; dash.pump.stop()\n"
                     "print(json.dumps({'chart': dash.chart.model_id, 'src': dash.source.id,"
                     " 'n': len(dash.source.data['step']), 'points': dash.points}))")
    assert ids["n"] == ids["points"]
    kernel.comm_msg(ids["chart"], {"method": "custom", "content": {
        "event": "jsevent", "kind": "ColumnsStreamed", "model": {"id": ids["src"]},
        "data": {"step": [1e9], "train": [0.0], "val": [0.0]}, "rollover": 2000}})
    got = kernel.run("print(json.dumps({'n': len(dash.source.data['step']), "
                     "'points': dash.points}))")
    assert got == {"n": ids["n"], "points": ids["points"]}
