"""Every demo notebook executes headless (nbclient, a real kernel) on small data and ends
with a trained model; the committed notebooks carry the outputs of such a run.

Each notebook's ``parameters`` cell is overridden with the data path; without the shared
data the notebooks must fall back to synthetic data and say so.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("jupyter_bokeh", reason="the notebooks need the viz extra")

from conftest import SHARED_DATA  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["01_quickstart.ipynb", "02_lda_live.ipynb", "03_glm_sweep.ipynb", "04_kmeans.ipynb",
         "05_factor_models.ipynb", "06_graphs_bayesnets.ipynb", "07_distributed.ipynb",
         "08_topic_steering.ipynb"]
LIVE = NAMES[1:]  # the notebooks with a live learner (and its widgets)
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
#: What the live notebooks print once their learner has finished.
FINAL = re.compile(r"state: (\w+), passes: (\d+)/(\d+)")
#: What each notebook's last cells print about the trained model (regular expressions).
PERPLEXITY = r"held-out perplexity \(\d+ documents\): \d+"
RESULT = {
    "01_quickstart.ipynb": [r"[1-9]\d* passes done", PERPLEXITY, r"topic 9: \w+"],
    "02_lda_live.ipynb": [PERPLEXITY, r"topic 0: \w+", r"topic 9: \w+"],
    "03_glm_sweep.ipynb": [r"lrate=1 l2=0 +0\.\d+",
                           r"best: lrate=\S+ l2=\S+, test accuracy 0\.\d+"],
    "04_kmeans.ipynb": [r"adjusted Rand index against the planted clusters: [01]\.\d+",
                        r"\n +7 +\d+ +\d+\.\d+\n"],
    "08_topic_steering.ipynb": [r"mean NPMI coherence: before the edits -?\d\.\d+ \(8 topics\), "
                                r"after -?\d\.\d+ \(9 topics\)", r"merge, k 8 -> 7"],
    "05_factor_models.ipynb": [r"held-out RMSE: 0\.\d+",
                               r"held-out ranking: p@10 0\.\d+", r"most similar to "],
}
RESULT["07_distributed.ipynb"] = [r"the new lrate took effect at steps \[(\d+), \1\]",
                                  r"merged: \d+ samples on 2 ranks; held-out accuracy 0\.\d+",
                                  r"Learners panel: lda-\d+x2 stopped, glm-\d+x2 done",
                                  r"engines stopped"]
#: Seconds a notebook may take headless (07 starts MPI engines and imports bidlab on each).
SECONDS = {"07_distributed.ipynb": 150}
RESULT["06_graphs_bayesnets.ipynb"] = [r"\d+ iterations, converged: True",
                                       r"evidence \{'\w+': '\w+'\}; \d+ sweeps kept",
                                       r"max R-hat \d\.\d+"]


def generator():
    """notebooks/make_notebooks.py, imported."""
    spec = importlib.util.spec_from_file_location("make_notebooks",
                                                  NOTEBOOKS / "make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_notebook(name: str, **params: object) -> tuple[nbformat.NotebookNode, float]:
    """Execute notebooks/<name> (its saved outputs cleared) with ``params`` appended to its
    parameters cell."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "".join(f"\n{k} = {v!r}" for k, v in params.items())
    t0 = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=SECONDS.get(name, 60), kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb, time.perf_counter() - t0


def stdout(nb: nbformat.NotebookNode, last: int | None = None) -> str:
    """The printed text of the code cells (of the ``last`` ones only, when given)."""
    cells = [c for c in nb.cells if c.cell_type == "code"][-last if last else 0:]
    return "".join(o.get("text", "") for c in cells
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")


def check_trained(name: str, nb: nbformat.NotebookNode) -> None:
    """The notebook's last cells show a finished learner and the trained model."""
    tail = stdout(nb, last=3)
    for pattern in RESULT[name]:
        assert re.search(pattern, tail), f"{name}: no {pattern!r} in the last outputs:\n{tail}"
    if name not in LIVE:
        return
    found = FINAL.findall(tail)
    assert found, f"{name}: the learner's final state is not printed:\n{tail}"
    state, done, planned = found[-1]
    assert state == "done" and int(done) == int(planned) > 0, found[-1]
    assert "progress: 100%" in tail


def widget_outputs(nb: nbformat.NotebookNode) -> int:
    return sum(WIDGET_MIME in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


def test_committed_notebooks_are_the_generators():
    make = generator()
    assert sorted(make.NOTEBOOKS) == NAMES == sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    for name in NAMES:
        saved = nbformat.read(NOTEBOOKS / name, as_version=4)
        fresh = make.build(name)
        assert [(c.cell_type, c.source) for c in saved.cells] == [
            (c.cell_type, c.source) for c in fresh.cells], (
            f"{name} differs from make_notebooks.py: run notebooks/make_notebooks.py --execute")


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_show_a_trained_model(name):
    path = NOTEBOOKS / name
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), f"{name} is saved unexecuted"
    assert not any(o.get("output_type") == "error" for c in code for o in c.outputs)
    check_trained(name, nb)
    outputs = json.dumps([c.outputs for c in code])
    assert "state: created" not in outputs and "state=created" not in outputs
    # small: no inlined BokehJS, no widget state (a picture per live view); nothing of this
    # machine's folders
    assert path.stat().st_size < 400_000, f"{name}: {path.stat().st_size} bytes"
    assert "widgets" not in nb.metadata
    assert "bokehjs" not in outputs and "application/javascript" not in outputs
    for folder in (NOTEBOOKS.parent, NOTEBOOKS.parent.parent, Path.home(), SHARED_DATA):
        if len(str(folder)) > 1:
            assert str(folder) not in outputs, f"{name} shows the path {folder}"
    if name in LIVE:  # each live view is saved as a short note, not a dead widget
        notes = [o for c in code for o in c.outputs if o.get("data", {}).get("text/plain")
                 == generator().WIDGET_NOTE]
        assert len(notes) >= 2 and WIDGET_MIME not in outputs
        # each note has a picture of the view's final state beside it (read without a kernel)
        assert all(o["data"].get("image/png") for o in notes), f"{name}: a view has no picture"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name):
    if name == "07_distributed.ipynb":
        pytest.importorskip("mpi4py", reason="07 needs the mpi extra")
        pytest.importorskip("ipyparallel", reason="07 needs the mpi extra")
    nb, seconds = run_notebook(name, DATA=str(SHARED_DATA))
    assert seconds < SECONDS.get(name, 60)
    out = stdout(nb)
    check_trained(name, nb)
    if name == "01_quickstart.ipynb":
        assert "'allocations'" in out and "'hits'" in out
        return
    assert widget_outputs(nb) >= 2, "the live views were not displayed"
    if name == "02_lda_live.ipynb":
        assert "heated: topic 0" in out
        if (SHARED_DATA / "uci-kos").is_dir():
            assert "kos (" in out
    if name == "03_glm_sweep.ipynb":
        assert "frozen: [" in out
    if name == "07_distributed.ipynb":  # pause, set and stop reach both ranks at one step
        paused = re.search(r"paused at steps \[(\d+), (\d+)\]", out)
        stopped = re.search(r"stopped: stopped .* steps per rank: \[(\d+), (\d+)\]", out)
        assert paused and paused[1] == paused[2], out
        assert stopped and stopped[1] == stopped[2], out
        changed = int(re.search(r"took effect at steps \[(\d+)", out)[1])
        assert int(paused[1]) < changed <= int(paused[1]) + 2, (changed, paused[0])
        assert "lrate on each rank: [0.05, 0.05]" in out


def test_missing_data_falls_back_to_synthetic(tmp_path):
    nb, _ = run_notebook("02_lda_live.ipynb", DATA=str(tmp_path / "absent"), MAX_DOCS=500)
    out = stdout(nb)
    assert "not found in" in out and "using synthetic data" in out
    assert "synthetic-lda" in out
    check_trained("02_lda_live.ipynb", nb)


def test_run_all_with_a_long_run_leaves_the_learner_training():
    """Run All in JupyterLab with many passes must not tie up the kernel: the wait gives up
    after the first passes and the live learner keeps training (the views stay live)."""
    nb, seconds = run_notebook("02_lda_live.ipynb", DATA=str(SHARED_DATA), MAX_DOCS=500,
                               NPASSES=100_000)
    tail = stdout(nb, last=3)
    assert "state: running" in tail and "not waiting" in tail, tail
    assert re.search(r"topic 9: \w+", tail)
    assert seconds < 30

